"""NumPy decoder backend (worker side): traces GGUF files and Hugging Face snapshots.

Invariants:

- The checkpoint is opened read-only as ``nneditor.open`` opens it (memory-mapped); weights are
  read one block at a time (:mod:`nneditor.decoder`) and the mapped pages released after
  each read, so the worker's resident memory is one block's float32 weights, the activations
  and one vocabulary chunk — not the file.
- Values are named as the synthesized graph names them (docs/semantic.md) and handed to the
  capture store the moment they exist, so captures stream to disk as layers complete.
- A checkpoint the decoder would not compute exactly is refused before any block runs, with
  the decoder's sentence (kind "model").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from nneditor.tracing.backend_errors import BackendError
from nneditor.tracing.capture import ValueEntry

if TYPE_CHECKING:
    from nneditor.model.document import Document

PROVIDER = "numpy"
PROVIDER_NAME = "NumPy decoder (CPU)"


def open_checkpoint(model_path: Path) -> Document:
    """The checkpoint with its synthesized graph, memory-mapped once for the whole run (a
    second map of a 7 GB file would not fit the worker's address-space ceiling). Opened as
    ``nneditor.open`` opens it, without the public API's capability survey (tracing sits
    below the API)."""
    from nneditor.semantic.open_graph import open_with_graph

    return open_with_graph(model_path)


def checkpoint_entries(doc: Document, model_path: Path) -> list[ValueEntry]:
    """Graph inputs and node outputs of the checkpoint's synthesized graph."""
    graph = doc.graph
    if graph is None:
        raise BackendError(
            f"{model_path.name} has no synthesized graph: {doc.graph_unavailable_reason}",
            "model",
        )
    out = [ValueEntry(vi.name, "", "", "") for vi in graph.inputs]
    for node in graph.nodes:
        out.extend(ValueEntry(o, "", node.name, node.op_type) for o in node.outputs if o)
    return out


def run_decoder(
    doc: Document,
    feeds: dict[str, np.ndarray],
    wanted: list[str],
    store: Any,
    emit: Callable[..., None],
) -> dict[str, Any]:
    """Run the decoder on ``doc`` (closed when done)."""
    from nneditor.decoder import DecoderUnsupported, decoder_config, run_forward

    t0 = time.perf_counter()
    emit("stage", stage="reading the checkpoint's configuration")
    try:
        try:
            cfg = decoder_config(doc)
        except DecoderUnsupported as exc:
            raise BackendError(str(exc), "model") from None
        feeds = dict(feeds)
        types = feeds.pop("token_types", None)  # BERT's segments, where the graph takes them
        prompts = feeds.pop("input_ids", None) if cfg.pair is not None else None  # (CLIPModel)
        if len(feeds) != 1:
            raise BackendError(
                f"the decoder takes one input of token ids (and BERT's token_types), given "
                f"{sorted(feeds)}",
                "inputs",
            )
        (tokens,) = feeds.values()
        emit("provider", provider=PROVIDER, name=PROVIDER_NAME)
        emit("stage", stage="running the decoder")
        capture = set(wanted)
        t1 = time.perf_counter()

        def on_value(name: str, value: np.ndarray) -> None:
            if name in capture:
                store.write(name, value)

        try:
            run_forward(doc, cfg, tokens, on_value, token_types=types, prompts=prompts)
        except DecoderUnsupported as exc:
            raise BackendError(str(exc), "inputs") from None
        t2 = time.perf_counter()
        store.flush()
        t3 = time.perf_counter()
    finally:
        doc.close()
    return {
        "provider": PROVIDER,
        "provider_name": PROVIDER_NAME,
        "session_s": round(t1 - t0, 6),
        "inference_s": round(t2 - t1, 6),
        "capture_s": round(t3 - t2, 6),
        "decoder": {"arch": cfg.arch, "source": cfg.source, "layers": cfg.n_layers},
        "notes": [
            f"{cfg.describe()}; weights read one block at a time from the memory map and "
            "widened to float32",
            *cfg.notes,
        ],
    }
