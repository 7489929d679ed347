"""The public SDK of tracer plugins (tracing API version 1).

A plugin's entry point receives a :class:`TraceContext`, runs one forward pass with its own
runtime and publishes arrays against the values of ``context.document.main_graph``::

    from nneditor.tracing.sdk import TraceContext, TraceOutcome

    def trace(context: TraceContext) -> TraceOutcome:
        return context.trace_numpy_decoder()

Rules the host enforces: a capture name must be a value of the graph (NNEditor's graphs name
each value once, so the name is its id); each value is published at most once per pass; the
host applies the capture selection and the byte budget, and marks requested values the plugin
never published as dropped. Raise :class:`TracePluginError` for an actionable problem (a
missing weight, an unsupported configuration); its message reaches the user as is.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from nneditor.errors import NNEditorError

if TYPE_CHECKING:
    from nneditor.model.document import Document
    from nneditor.model.graph import Graph

API_VERSION = 1
__all__ = [
    "API_VERSION",
    "TraceContext",
    "TraceOutcome",
    "TracePluginError",
    "load_arrays_exactly",
    "load_pretrained_exactly",
    "load_weights_exactly",
]


class TracePluginError(NNEditorError):
    """A plugin's actionable configuration or runtime error (shown to the user as is)."""


@dataclass(frozen=True)
class TraceOutcome:
    """What ran: the runtime's name and notes for the trace manifest."""

    provider: str = ""
    notes: tuple[str, ...] = ()


class TraceContext:
    """One approved forward pass: the opened artifact, its graph, the prepared inputs, the
    limits, and :meth:`capture` to publish values."""

    def __init__(
        self,
        document: Document,
        inputs: Mapping[str, np.ndarray],
        limits: Mapping[str, Any],
        publish: Callable[[str, np.ndarray], None],
        cancelled: Callable[[], bool] = lambda: False,
    ) -> None:
        if document.graph is None:
            raise TracePluginError(
                f"{document.path} has no graph to publish captures to: "
                f"{document.graph_unavailable_reason}"
            )
        self.document = document
        self.inputs = dict(inputs)
        self.limits = dict(limits)
        self._publish = publish
        self._cancelled = cancelled
        self._inputs = {vi.name for vi in document.graph.inputs}
        self._values = self._inputs | {o for n in document.graph.nodes for o in n.outputs if o}
        self._seen: set[str] = set()

    @property
    def main_graph(self) -> Graph:
        assert self.document.graph is not None
        return self.document.graph

    def cancelled(self) -> bool:
        """True once the user cancelled: stop between layers (the host also stops the worker)."""
        return self._cancelled()

    def capture_inputs(self) -> None:
        """Publish the graph inputs (the host has already stored them as the prepared files;
        calling this is harmless and keeps plugins portable)."""
        self._seen |= self._inputs

    def capture(self, name_or_id: str, array: Any) -> None:
        """Publish ``array`` as the graph value ``name_or_id``, once per pass."""
        name = str(name_or_id)
        if name not in self._values:
            raise TracePluginError(
                f"the plugin published {name!r}, which is not a value of "
                f"{self.main_graph.name or 'the graph'}"
            )
        if name in self._inputs:
            self._seen.add(name)
            return
        if name in self._seen:
            raise TracePluginError(f"the plugin published {name!r} twice in one forward pass")
        self._seen.add(name)
        self._publish(name, np.asarray(array))

    def trace_numpy_decoder(self) -> TraceOutcome:
        """Run NNEditor's NumPy decoder (GGUF files and Hugging Face snapshots of the
        architectures it implements), publishing every value of the synthesized graph."""
        from nneditor.decoder import DecoderUnsupported, decoder_config, run_forward

        try:
            cfg = decoder_config(self.document)
            if len(self.inputs) != 1:
                raise TracePluginError(
                    f"the NumPy decoder takes one input of token ids, given {sorted(self.inputs)}"
                )
            (tokens,) = self.inputs.values()
            run_forward(self.document, cfg, tokens, self.capture, cancelled=self._cancelled)
        except DecoderUnsupported as exc:
            raise TracePluginError(str(exc)) from None
        return TraceOutcome("numpy", (cfg.describe(), *cfg.notes))


def load_weights_exactly(model: Any, folder: Path, what: str, tied: tuple[str, ...] = ()) -> None:
    """Copy a snapshot's safetensors weights into a torch module, refusing anything that is
    not exactly its parameters: a stored tensor the module has no place for, a shape the
    config does not imply, or a parameter the snapshot lacks (``tied``: parameters that share
    another's storage and are not stored). Pickle weights are never read (they can run
    code). For plugins whose runtime is PyTorch; torch and safetensors are imported here."""
    from safetensors import safe_open

    shards = sorted(Path(folder).glob("*.safetensors"))
    if not shards:
        raise TracePluginError(
            f"{Path(folder).name} keeps no safetensors weights; tracer plugins load safetensors "
            "only (pickle files could run code)"
        )

    def stored() -> Iterator[tuple[str, Callable[[], Any]]]:
        for shard in shards:  # each tensor is read while its shard is open
            with safe_open(str(shard), framework="pt") as f:
                for name in f.keys():  # noqa: SIM118 - safe_open has no __iter__
                    yield name, functools.partial(f.get_tensor, name)

    _copy_exactly(model, stored(), what, "the snapshot", {}, tied)


def load_arrays_exactly(
    model: Any,
    arrays: Mapping[str, Callable[[], Any]],
    what: str,
    source: str,
    stored_names: Mapping[str, str] | None = None,
    tied: tuple[str, ...] = (),
) -> None:
    """:func:`load_weights_exactly` for weights a plugin reads itself (a GGUF's tensors,
    decoded by NNEditor's readers): ``arrays`` maps each module parameter name to a function
    returning its array (numpy or torch; called one at a time, so one decoded tensor is held
    beside the model); a name the module lacks, a shape the config does not imply and a
    parameter without an array are refused. ``source`` says where the weights come from in
    the sentences ("the GGUF") and ``stored_names`` the name each parameter has there, so a
    refusal names the tensor the user can find in the file."""
    _copy_exactly(model, iter(arrays.items()), what, source, stored_names or {}, tied)


def _copy_exactly(
    model: Any,
    items: Iterator[tuple[str, Callable[[], Any]]],
    what: str,
    source: str,
    stored: Mapping[str, str],
    tied: tuple[str, ...],
) -> None:
    import torch

    want = dict(model.state_dict())
    seen: set[str] = set()
    for name, read in items:
        label = stored.get(name, name)
        if name not in want:
            raise TracePluginError(
                f"{source}'s tensor {label!r} has no place in {what}; refusing rather than "
                "running different weights"
            )
        value = read()
        tensor = value if isinstance(value, torch.Tensor) else torch.from_numpy(np.array(value))
        if tuple(tensor.shape) != tuple(want[name].shape):
            raise TracePluginError(
                f"tensor {label} has shape {list(tensor.shape)}, the config implies "
                f"{list(want[name].shape)}"
            )
        with torch.no_grad():
            want[name].copy_(tensor.float())
        seen.add(name)
    missing = sorted(set(want) - seen - set(tied))
    if missing:
        raise TracePluginError(
            f"{source} lacks {stored.get(missing[0], missing[0])}"
            + (f" and {len(missing) - 1} more weights" if len(missing) > 1 else "")
            + f" that {what} needs"
        )


def load_pretrained_exactly(model_class: Any, folder: Path) -> Any:
    """``model_class.from_pretrained`` for a snapshot whose checkpoint names need the
    library's own key mapping (e.g. LLaVA's legacy names): safetensors only, no remote code,
    float32, and refused when the library reports a missing, unexpected or mis-shaped
    weight. Returns the model in eval mode."""
    import torch

    if not sorted(Path(folder).glob("*.safetensors")):
        raise TracePluginError(
            f"{Path(folder).name} keeps no safetensors weights; tracer plugins load safetensors "
            "only (pickle files could run code)"
        )
    model, info = model_class.from_pretrained(
        str(folder),
        use_safetensors=True,
        trust_remote_code=False,
        dtype=torch.float32,
        output_loading_info=True,
    )
    for key, words in (
        ("missing_keys", "lacks"),
        ("unexpected_keys", "holds weights with no place in the model:"),
        ("mismatched_keys", "holds mis-shaped weights:"),
    ):
        bad = sorted(str(k) for k in info.get(key) or [])
        if bad:
            raise TracePluginError(
                f"the snapshot {words} {bad[0]}"
                + (f" and {len(bad) - 1} more" if len(bad) > 1 else "")
                + f" ({model_class.__name__})"
            )
    return model.eval()
