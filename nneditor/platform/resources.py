"""Where the shipped data lives: ``resources/`` (icons, desktop data) and ``plugins/``
(bundled tracers) — inside the package in a wheel or app bundle (``nneditor/_resources``,
``nneditor/_plugins``, see setup.py), beside the package in a source checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent


def _shipped(installed: str, checkout: str) -> Path:
    inside = _PACKAGE / installed
    return inside if inside.is_dir() else _PACKAGE.parent / checkout


def resources_folder() -> Path:
    return _shipped("_resources", "resources")


def plugins_folder() -> Path:
    return _shipped("_plugins", "plugins")


def icon_path() -> Path:
    return resources_folder() / "icons" / "nneditor.svg"
