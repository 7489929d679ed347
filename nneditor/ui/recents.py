"""Recently opened files and folders, persisted as JSON in the per-user config folder.

Invariants: at most ``LIMIT`` entries, newest first, no duplicates (by resolved path); a
corrupt or unreadable file reads as an empty list and is rewritten on the next change. The
folder is ``$NNEDITOR_CONFIG_DIR`` when set (tests), else NNEditor's config folder
(``$NNEDITOR_HOME/config`` for a portable or scripted run, else platformdirs' user config
dir), so a window started with its own NNEDITOR_HOME does not list another's files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

LIMIT = 12


def config_dir() -> Path:
    override = os.environ.get("NNEDITOR_CONFIG_DIR")
    if override:
        return Path(override)
    from nneditor.platform.dirs import config_dir as user_config_dir

    return user_config_dir()  # $NNEDITOR_HOME/config where set, as every other setting


def _file() -> Path:
    return config_dir() / "recent.json"


def load() -> list[str]:
    try:
        data = json.loads(_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(data, list):
        return []
    return [str(p) for p in data if isinstance(p, str)][:LIMIT]


def add(path: str | os.PathLike[str]) -> list[str]:
    """Put ``path`` first and save; returns the new list (saving errors are ignored)."""
    p = str(Path(path).resolve())
    items = [p, *[q for q in load() if q != p]][:LIMIT]
    _save(items)
    return items


def remove(path: str) -> list[str]:
    items = [q for q in load() if q != path]
    _save(items)
    return items


def _save(items: list[str]) -> None:
    target = _file()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".part")
        tmp.write_text(json.dumps(items, indent=1), encoding="utf-8")
        os.replace(tmp, target)
    except OSError:
        pass
