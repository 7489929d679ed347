"""Per-user folders (platformdirs), overridable with NNEDITOR_HOME for tests and portable use."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP = "nneditor"


def _base(kind: str) -> Path:
    home = os.environ.get("NNEDITOR_HOME")
    if home:
        p = Path(home) / kind
    elif kind == "data":
        p = Path(platformdirs.user_data_dir(APP, appauthor=False))
    elif kind == "config":
        p = Path(platformdirs.user_config_dir(APP, appauthor=False))
    else:
        p = Path(platformdirs.user_cache_dir(APP, appauthor=False))
    p.mkdir(parents=True, exist_ok=True)
    return p


def data_dir() -> Path:
    return _base("data")


def config_dir() -> Path:
    return _base("config")


def cache_dir() -> Path:
    return _base("cache")
