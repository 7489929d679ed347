"""Editing commands: ``edit`` (one validated transaction, exported) and ``export``
(validated ONNX re-export, or weights-only safetensors for other formats)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nneditor.cli.common import CLIError, open_document, print_json


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "export",
        help="re-export an ONNX model through the validated path, or any other format as "
        "weights-only safetensors",
    )
    s.add_argument("path")
    s.add_argument("--out", required=True)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_export)

    s = sub.add_parser(
        "edit", help="apply one validated edit transaction to an ONNX model and export it"
    )
    s.add_argument("path")
    s.add_argument("--out", required=True)
    s.add_argument("--rename-node", action="append", metavar="OLD=NEW")
    s.add_argument("--set-attr", action="append", metavar="NODE:ATTR=VALUE")
    s.add_argument("--replace-op", action="append", metavar="NODE=OPTYPE")
    s.add_argument("--insert-unary", action="append", metavar="VALUE=OPTYPE")
    s.add_argument("--remove-unary", action="append", metavar="NODE")
    s.add_argument("--reconnect", action="append", metavar="NODE:INDEX=VALUE")
    s.add_argument("--patch-tensor", action="append", metavar="NAME:OFFSET=HEX")
    s.add_argument("--message", "-m", help="revision description")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_edit)


def cmd_export(args: argparse.Namespace) -> int:
    with open_document(args.path) as doc:
        if doc.format == "onnx":
            from nneditor.editing.session import EditSession

            session = EditSession.open(doc, use_journal=False)
            try:
                report = session.export(Path(args.out)).as_dict()
            finally:
                session.close()
        else:
            from nneditor.export.weights import export_weights

            report = export_weights(doc, Path(args.out))
    print_json(report) if args.json else print(f"wrote {report['path']}", file=sys.stderr)
    return 0


def _edit_changes(args: argparse.Namespace) -> list[dict[str, object]]:
    changes: list[dict[str, object]] = []

    def split(text: str, sep: str, what: str) -> tuple[str, str]:
        if sep not in text:
            raise CLIError(f"{what} expects {sep!r} in {text!r}")
        a, b = text.rsplit(sep, 1) if sep == "=" and what == "--rename-node" else text.split(sep, 1)
        return a, b

    for text in args.rename_node or []:
        old, new = split(text, "=", "--rename-node")
        changes.append({"op": "rename_node", "node": old, "new": new})
    for text in args.replace_op or []:
        node, op = text.rsplit("=", 1) if "=" in text else (text, "")
        if not op:
            raise CLIError(f"--replace-op expects NODE=OPTYPE, got {text!r}")
        changes.append({"op": "replace_op", "node": node, "op_type": op})
    for text in args.set_attr or []:
        target, value = text.split("=", 1) if "=" in text else (text, "")
        if ":" not in target or not value:
            raise CLIError(f"--set-attr expects NODE:ATTR=VALUE, got {text!r}")
        node, attr = target.rsplit(":", 1)
        changes.append({"op": "set_attr", "node": node, "attr": attr, "value": value})
    for text in args.insert_unary or []:
        value, op = text.rsplit("=", 1) if "=" in text else (text, "")
        if not op:
            raise CLIError(f"--insert-unary expects VALUE=OPTYPE, got {text!r}")
        changes.append({"op": "insert_unary", "value": value, "op_type": op})
    for node in args.remove_unary or []:
        changes.append({"op": "remove_unary", "node": node})
    for text in args.reconnect or []:
        target, value = text.rsplit("=", 1) if "=" in text else (text, "")
        if ":" not in target or not value:
            raise CLIError(f"--reconnect expects NODE:INDEX=VALUE, got {text!r}")
        node, index = target.rsplit(":", 1)
        if not index.isdigit():
            raise CLIError(f"--reconnect: input index must be a number, got {index!r}")
        changes.append({"op": "reconnect", "node": node, "index": int(index), "value": value})
    for text in args.patch_tensor or []:
        target, hexdata = text.rsplit("=", 1) if "=" in text else (text, "")
        if ":" not in target or not hexdata:
            raise CLIError(f"--patch-tensor expects NAME:OFFSET=HEX, got {text!r}")
        name, offset = target.rsplit(":", 1)
        if not offset.isdigit():
            raise CLIError(f"--patch-tensor: byte offset must be a number, got {offset!r}")
        changes.append(
            {"op": "patch_tensor", "tensor": name, "offset": int(offset), "hex": hexdata}
        )
    if not changes:
        raise CLIError("nothing to do: give at least one edit option (see nneditor edit --help)")
    return changes


def cmd_edit(args: argparse.Namespace) -> int:
    from nneditor.editing.session import EditSession

    changes = _edit_changes(args)
    with open_document(args.path) as doc:
        session = EditSession.open(doc, use_journal=False)
        try:
            preview = session.prepare(changes)
            if not preview.ok:
                raise CLIError(f"edit refused, nothing written: {preview.error}")
            session.commit(preview, args.message or "")
            report = session.export(Path(args.out)).as_dict()
        finally:
            session.close()
    report["diff"] = preview.diff
    if args.json:
        print_json(report)
    else:
        for line in preview.diff:
            print(line)
        print(f"wrote {report['path']}", file=sys.stderr)
    return 0
