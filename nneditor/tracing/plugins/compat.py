"""Whether a tracer plugin can run a document, decided from its manifest before anything
runs; the reason is a sentence the Trace view and the CLI show."""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from nneditor.tracing.plugins.manifest import ARTIFACT_KINDS, Manifest

if TYPE_CHECKING:
    from nneditor.model.document import Document


def artifact_kind(doc: Document) -> str:
    return ARTIFACT_KINDS.get(doc.format, f"{doc.format}_model")


def architecture(doc: Document) -> str:
    """The model's architecture as plugins name it (llama.cpp's names for checkpoints)."""
    if doc.format == "gguf":
        return str(doc.metadata.get("general.architecture") or "").lower()
    if doc.format == "huggingface":
        from nneditor.semantic.checkpoint_names import llama_cpp_arch

        config = doc.metadata.get("config") or {}
        model_type = str(config.get("model_type") or "")
        if not model_type:  # diffusers components name their class instead
            return str(config.get("_class_name") or "").lower()
        if model_type == "clip":  # transformers' text-and-vision CLIPModel; llama.cpp's
            return "clip_model"  # "clip" names vision-encoder GGUFs, another model
        if model_type == "clip_vision_model":  # (the NumPy decoder reads it as a ViT)
            return model_type
        return (llama_cpp_arch(model_type, config) or model_type).lower()
    return ""


def incompatibility(manifest: Manifest, doc: Document, device: str = "auto") -> str:
    """ "" when the plugin declares it runs ``doc`` on ``device``, else why not."""
    kind = artifact_kind(doc)
    if kind not in manifest.artifact_kinds:
        return (
            f"runs {', '.join(manifest.artifact_kinds)}; this artifact is a {kind} (artifact kind)"
        )
    arch = architecture(doc)
    if manifest.architectures and arch not in manifest.architectures:
        return (
            f"runs the architectures {', '.join(manifest.architectures)}; this model's is "
            f"{arch or 'not stated'} (architecture)"
        )
    if device != "auto" and device not in manifest.devices:
        return f"runs on {', '.join(d.upper() for d in manifest.devices)}, not {device.upper()}"
    missing = [m for m in manifest.requires if not _installed(m)]
    if missing:
        return (
            f"needs the Python package {missing[0]}, which is not installed in NNEditor's "
            "environment (missing dependency)"
        )
    return ""


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a dotted name whose parent package is missing
        return False


def compatible_plugins(doc: Document, device: str = "auto") -> list[str]:
    """Ids of the enabled tracer plugins that declare they run ``doc`` (nothing imported)."""
    from nneditor.tracing.plugins.discovery import discover

    return [
        r.id
        for r in discover()
        if r.enabled and r.manifest and not incompatibility(r.manifest, doc, device)
    ]


def plugin_hint(doc: Document, device: str = "auto") -> str:
    """ "; tracer plugin X can run it (...)" or ""."""
    ids = compatible_plugins(doc, device)
    if not ids:
        return ""
    names = ", ".join(ids)
    return (
        f"; tracer plugin {names} can run it (choose it under Tracer in Trace, or "
        f"nneditor trace --tracer {ids[0]})"
    )
