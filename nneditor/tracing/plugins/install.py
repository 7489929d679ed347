"""``--install-tracer`` and ``--create-tracer``: copy a validated folder into the per-user
tracer folder (never importing it, never overwriting), and write a new plugin from a
template."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from nneditor.tracing.plugins.discovery import bundled_folder, user_folder
from nneditor.tracing.plugins.manifest import (
    MANIFEST,
    Manifest,
    PluginError,
    fingerprint,
    plugin_files,
    read_manifest,
)

TEMPLATES = ("llm", "ssm", "diffusion")
#: bundled plugin folders the ssm and diffusion templates copy
_TEMPLATE_SOURCES = {"ssm": "mamba", "diffusion": "diffusion-unet"}

_LLM_TRACER = '''"""A tracer plugin that delegates to NNEditor's NumPy decoder.

Replace the body of trace() with your runtime's forward pass: validate the checkpoint, call
context.capture_inputs(), then context.capture(value_name, array) for every graph value as soon
as it exists, and return TraceOutcome(provider=..., notes=(...)).
"""

from nneditor.tracing.sdk import TraceContext, TraceOutcome


def trace(context: TraceContext) -> TraceOutcome:
    return context.trace_numpy_decoder()
'''


def install(source: Path) -> tuple[Manifest, Path]:
    """Validate ``source`` and copy it to the per-user folder as ``<id>``; returns the
    manifest and the new folder."""
    source = Path(source)
    if not source.is_dir():
        raise PluginError(f"{source} is not a folder; a tracer plugin is a folder")
    files = plugin_files(source)
    manifest = read_manifest(source)
    dest = user_folder() / manifest.id
    if dest.exists():
        raise PluginError(
            f"tracer {manifest.id!r} is already installed at {dest}; back it up or remove it, "
            "then install the new copy"
        )
    staging = dest.with_name(f".{manifest.id}.installing")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        for rel in files:
            target = staging / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / rel, target)
        if fingerprint(staging) != fingerprint(source, files):
            raise PluginError(f"{source} changed while it was being copied; install it again")
        staging.rename(dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest, dest


def create(dest: Path, template: str = "llm") -> Path:
    """Write a new plugin folder at ``dest`` from ``template``."""
    dest = Path(dest)
    if template not in TEMPLATES:
        raise PluginError(f"unknown tracer template {template!r}; choose {', '.join(TEMPLATES)}")
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise PluginError(f"{dest} already exists and is not empty; choose a new folder")
    if template == "llm":
        dest.mkdir(parents=True, exist_ok=True)
        manifest = {
            "api_version": 1,
            "id": f"example.{_slug(dest.name) or 'numpy-decoder'}",
            "name": f"{dest.name} (NumPy decoder)",
            "version": "0.1.0",
            "entry_point": "tracer.py:trace",
            "artifact_kinds": ["gguf_model", "huggingface_model"],
            "architectures": ["llama", "gpt2", "qwen2", "qwen3", "gemma3", "qwen35"],
            "devices": ["cpu"],
            "streaming_weights": True,
        }
        (dest / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", "utf-8")
        (dest / "tracer.py").write_text(_LLM_TRACER, "utf-8")
        return dest
    bundled = bundled_folder() / _TEMPLATE_SOURCES[template]
    if not (bundled / MANIFEST).exists():
        raise PluginError(
            f"the {template} template copies the bundled {_TEMPLATE_SOURCES[template]} tracer, "
            "which this installation of NNEditor does not include; use --tracer-template llm"
        )
    shutil.copytree(bundled, dest, ignore=shutil.ignore_patterns("__pycache__"))
    data = json.loads((dest / MANIFEST).read_text("utf-8"))
    data["id"] = "example." + str(data["id"]).split(".")[-1]  # never collide with the bundled
    (dest / MANIFEST).write_text(json.dumps(data, indent=2) + "\n", "utf-8")
    return dest


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name.lower()).strip("-_")
