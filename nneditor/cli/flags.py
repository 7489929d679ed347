"""Top-level flags as the product documents them: tracer plugins and file types.


- ``nneditor --list-tracers [--json]``: every discovered plugin (id, version, folder, source,
  state, reason) and the per-user folder ``--install-tracer`` copies into;
- ``nneditor --install-tracer DIR``: validate and copy (never imports, never overwrites);
- ``nneditor --create-tracer DIR [--tracer-template llm|ssm|diffusion]``: a new plugin;
- ``nneditor --register-file-types`` / ``--unregister-file-types``: per-user file types
  (nneditor/platform/file_types.py).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

FLAGS = (
    "--list-tracers",
    "--install-tracer",
    "--create-tracer",
    "--register-file-types",
    "--unregister-file-types",
)


def main(argv: Sequence[str]) -> int:
    from nneditor.tracing.plugins import discovery, install
    from nneditor.tracing.plugins.manifest import PluginError

    p = argparse.ArgumentParser(prog="nneditor", description="Tracer plugin management.")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--list-tracers", action="store_true", help="list discovered tracers")
    group.add_argument("--install-tracer", metavar="DIR", help="install a tracer folder")
    group.add_argument("--create-tracer", metavar="DIR", help="write a new tracer folder")
    group.add_argument(
        "--register-file-types",
        action="store_true",
        help="open model files with NNEditor (this user only)",
    )
    group.add_argument(
        "--unregister-file-types", action="store_true", help="undo --register-file-types"
    )
    p.add_argument("--tracer-template", default="llm", choices=install.TEMPLATES)
    p.add_argument("--json", action="store_true", help="--list-tracers as JSON")
    args = p.parse_args(list(argv))
    if args.register_file_types or args.unregister_file_types:
        from nneditor.platform import file_types
        from nneditor.platform.resources import icon_path

        if args.register_file_types:
            done = file_types.register(icon_path())
        else:
            done = file_types.unregister()
        for line in done:
            print(line)
        return 0
    if args.install_tracer:
        try:
            manifest, dest = install.install(Path(args.install_tracer))
        except PluginError as exc:
            from nneditor.cli.common import CLIError

            raise CLIError(str(exc)) from None
        print(f"installed tracer {manifest.id} {manifest.version} into {dest}")
        print("its code was not run; choose it in Trace (Reload tracer extensions if open)")
        return 0
    if args.create_tracer:
        try:
            dest = install.create(Path(args.create_tracer), args.tracer_template)
        except PluginError as exc:
            from nneditor.cli.common import CLIError

            raise CLIError(str(exc)) from None
        data = json.loads((dest / "nneditor-tracer.json").read_text("utf-8"))
        print(f"created tracer {data['id']} ({args.tracer_template} template) in {dest}")
        print(f"try it: NNEDITOR_TRACE_PLUGIN_PATH={dest} nneditor --list-tracers")
        return 0
    records = discovery.discover()
    user = discovery.user_folder()
    if args.json:
        out = {"user_folder": str(user), "tracers": [r.as_dict() for r in records]}
        print(json.dumps(out, indent=2))
        return 0
    print(f"per-user tracer folder: {user}")
    if not records:
        print("no tracer plugins found (bundled, per-user or NNEDITOR_TRACE_PLUGIN_PATH)")
    for r in records:
        m = r.manifest
        head = f"{r.id or '(unreadable)'} {m.version if m else ''}".strip()
        print(f"{head}  [{r.state}, {r.source}]  {r.folder}")
        if r.reason:
            print(f"    reason: {r.reason}")
    return 0
