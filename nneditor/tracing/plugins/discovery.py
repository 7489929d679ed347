"""Find tracer plugins without importing them.

Sources, in order: bundled (``plugins/`` of the checkout, or its copy installed inside the
package, see nneditor/platform/resources.py), the per-user tracer folder
(:func:`user_folder`), and ``NNEDITOR_TRACE_PLUGIN_PATH`` (``os.pathsep``-separated; each
entry is one plugin folder or a folder of plugin folders). A folder whose manifest or files
are unusable is listed as disabled with the reason; every plugin sharing an id with another is
disabled, naming the other folder.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from nneditor.tracing.plugins.manifest import (
    MANIFEST,
    Manifest,
    PluginError,
    fingerprint,
    plugin_files,
    read_manifest,
)

PATH_ENV = "NNEDITOR_TRACE_PLUGIN_PATH"


@dataclass(frozen=True)
class PluginRecord:
    folder: Path
    source: str  # bundled | user | path
    manifest: Manifest | None
    fingerprint: str = ""
    reason: str = ""  # why it is disabled ("" when enabled)

    @property
    def enabled(self) -> bool:
        return not self.reason

    @property
    def id(self) -> str:
        return self.manifest.id if self.manifest else ""

    @property
    def state(self) -> str:
        return "enabled" if self.enabled else "disabled"

    def as_dict(self) -> dict[str, object]:
        m = self.manifest
        return {
            "id": self.id,
            "name": m.name if m else "",
            "version": m.version if m else "",
            "folder": str(self.folder),
            "source": self.source,
            "state": self.state,
            "reason": self.reason,
            "fingerprint": self.fingerprint,
            "artifact_kinds": list(m.artifact_kinds) if m else [],
            "architectures": list(m.architectures) if m else [],
            "devices": list(m.devices) if m else [],
        }


def bundled_folder() -> Path:
    from nneditor.platform.resources import plugins_folder

    return plugins_folder()


def user_folder() -> Path:
    """Where ``--install-tracer`` copies plugins (``$NNEDITOR_HOME/data/tracers`` in tests)."""
    from nneditor.platform.dirs import data_dir

    return data_dir() / "tracers"


def _candidates(root: Path) -> list[Path]:
    """``root`` itself when it is a plugin, else its sub-folders that hold a manifest."""
    if (root / MANIFEST).exists():
        return [root]
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and (p / MANIFEST).exists())


def load_record(folder: Path, source: str) -> PluginRecord:
    """One folder's record: manifest and fingerprint, or the reason it is unusable."""
    try:
        files = plugin_files(folder)
        manifest = read_manifest(folder)
        return PluginRecord(folder, source, manifest, fingerprint(folder, files))
    except PluginError as exc:
        return PluginRecord(folder, source, None, reason=str(exc))
    except OSError as exc:
        return PluginRecord(folder, source, None, reason=f"{folder} cannot be read ({exc})")


def search_path() -> list[Path]:
    raw = os.environ.get(PATH_ENV, "")
    return [Path(p).expanduser() for p in raw.split(os.pathsep) if p.strip()]


def discover() -> list[PluginRecord]:
    """Every plugin of every source, duplicates and malformed folders disabled with reasons."""
    roots: list[tuple[Path, str]] = [(bundled_folder(), "bundled"), (user_folder(), "user")]
    roots += [(p, "path") for p in search_path()]
    records: list[PluginRecord] = []
    seen: set[Path] = set()
    for root, source in roots:
        for folder in _candidates(root):
            key = folder.resolve()
            if key in seen:
                continue
            seen.add(key)
            records.append(load_record(folder, source))
    counts = Counter(r.id for r in records if r.enabled)
    out = []
    for r in records:
        if r.enabled and counts[r.id] > 1:
            others = [str(o.folder) for o in records if o.id == r.id and o is not r]
            reason = f"id {r.id!r} is also used by {', '.join(others)}; rename one of them"
            r = PluginRecord(r.folder, r.source, r.manifest, r.fingerprint, reason)
        out.append(r)
    return out


def find(plugin_id: str) -> PluginRecord:
    """The enabled plugin ``plugin_id``, or a sentence listing what exists."""
    records = discover()
    for r in records:
        if r.id == plugin_id:
            if not r.enabled:
                raise PluginError(f"tracer {plugin_id!r} is disabled: {r.reason}")
            return r
    known = ", ".join(sorted(r.id for r in records if r.enabled)) or "none"
    raise PluginError(
        f"no tracer plugin {plugin_id!r} (installed and enabled: {known}; see "
        "nneditor --list-tracers)"
    )
