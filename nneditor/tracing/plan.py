"""The trace plan: everything a run will use, shown to the user before anything runs.

Invariants:

- A plan is built from an opened document and a complete, validated input set; building it
  executes nothing (it may import onnxruntime to list providers).
- The plan names the backend, the device/providers, the inputs (names, dtypes, shapes and
  digest), the capture selection, the limits and the tracer identity; ``describe`` renders all
  of them and ``binding`` is exactly what an approval binds.
- Explicit requests that cannot be served (a missing runtime, a GPU without a provider) fail
  here with the extra to install, never silently downgrade.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from nneditor.errors import NNEditorError
from nneditor.inputs.picker import check_set
from nneditor.inputs.spec import detect_inputs
from nneditor.tracing import providers as prov
from nneditor.tracing.identity import (
    ModelIdentity,
    TracerIdentity,
    code_fingerprint,
    inputs_digest,
    model_identity,
)
from nneditor.tracing.limits import Limits

if TYPE_CHECKING:
    from nneditor.model.document import Document

BACKENDS = ("auto", "onnxruntime", "reference", "numpy")
#: formats without a stored graph: traced by NNEditor's NumPy decoder (nneditor.decoder)
CHECKPOINT_FORMATS = ("gguf", "huggingface")
REVISION_SOURCE = "source"


class PlanError(NNEditorError):
    """A trace cannot be planned as requested."""


@dataclass
class TraceInputs:
    """The feed of one run. ``digest`` is fixed at planning; a later change is detected."""

    arrays: dict[str, np.ndarray]
    digest: str = ""
    #: per input: the note of the tokenizer that made its ids (which codebook, how faithful,
    #: the text); recorded with the run so decoding can say what the ids can give back
    notes: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.arrays = {k: _native(v) for k, v in self.arrays.items()}
        if not self.digest:
            self.digest = inputs_digest(self.arrays)

    def current_digest(self) -> str:
        return inputs_digest(self.arrays)

    def describe(self) -> list[str]:
        return [f"{n} {a.dtype} {list(a.shape)}" for n, a in self.arrays.items()]

    def as_dict(self) -> dict[str, Any]:
        return {
            "digest": self.digest,
            "tensors": [
                {"name": n, "dtype": str(a.dtype), "shape": list(a.shape)}
                for n, a in self.arrays.items()
            ],
        }


def _native(arr: np.ndarray) -> np.ndarray:
    arr = np.asarray(arr)
    if arr.dtype.byteorder == ">" or (arr.dtype.byteorder == "<" and np.little_endian is False):
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return arr


@dataclass
class TracePlan:
    """What a run will do. Plain data: the UI shows it, an approval binds it."""

    model: ModelIdentity
    revision: str
    backend_request: str
    backend: str
    backend_note: str
    device: str
    providers: prov.ProviderChoice | None
    inputs: TraceInputs
    limits: Limits
    capture: tuple[str, ...] | None
    tracer: TracerIdentity
    value_count: int = 0
    notes: list[str] = field(default_factory=list)
    ort_optimization: str = "disabled"
    #: a tracer plugin: id, name, version, folder, fingerprint, entry_file, entry_function
    plugin: dict[str, str] | None = None
    #: for an edited revision: the file its edits apply to (``model`` is then a private copy
    #: of the revision written for this trace)
    edits_of: str = ""

    @property
    def model_path(self) -> str:
        return self.model.path

    def binding(self) -> dict[str, Any]:
        """The fields an approval is bound to (see :mod:`nneditor.tracing.approval`)."""
        return {
            "model": self.model.token(),
            "revision": self.revision,
            "inputs": self.inputs.digest,
            "limits": self.limits.as_dict(),
            "tracer": self.tracer.token(),
            "execution": {
                "backend": self.backend_request,
                "device": self.device,
                "providers": self.providers.names() if self.providers else [],
                "ort_optimization": self.ort_optimization
                if self.backend == "onnxruntime"
                else None,
            },
            "capture": list(self.capture) if self.capture is not None else None,
        }

    def describe(self) -> list[str]:
        """Human-readable lines: backend, device, inputs, capture, limits, tracer."""
        if self.edits_of:
            lines = [
                f"model: the edited revision {self.revision} of {self.edits_of} (your edits; the "
                "file on disk is not traced and not changed)",
                f"  traced from a private copy: {self.model.path} ({self.model.size:,} bytes)",
            ]
        else:
            lines = [
                f"model: {self.model.path} (revision {self.revision}, {self.model.size:,} bytes)"
            ]
        lines.append(f"backend: {_backend_text(self)}")
        lines.append(f"device: {_device_text(self)}")
        lines.append(f"inputs (digest {self.inputs.digest[:16]}…):")
        lines.extend(f"  {t}" for t in self.inputs.describe())
        if self.capture is None:
            lines.append(f"capture: graph inputs and all node outputs ({self.value_count} values)")
        else:
            lines.append(f"capture: {len(self.capture)} selected values")
        lines.append(f"limits: {self.limits.describe()}")
        lines.append(f"tracer: {self.tracer.token()}")
        lines.extend(f"note: {n}" for n in self.notes)
        return lines


def _backend_text(plan: TracePlan) -> str:
    if plan.plugin is not None:
        p = plan.plugin
        return (
            f"tracer plugin {p['name']} ({p['id']} {p['version']}, {p['folder']}); its code "
            f"(fingerprint {p['fingerprint'][:16]}…) is copied when the run starts and runs in "
            "the resource-limited worker"
        )
    if plan.backend == "numpy":
        text = (
            f"NNEditor's NumPy decoder on NumPy {plan.tracer.version} "
            f"(requested: {plan.backend_request})"
        )
        return f"{text}; {plan.backend_note}" if plan.backend_note else text
    if plan.backend == "onnxruntime":
        text = (
            f"ONNX Runtime {plan.tracer.version} (requested: {plan.backend_request}; graph "
            f"optimisations {plan.ort_optimization})"
        )
    else:
        text = (
            f"ONNX reference evaluator, {plan.tracer.version} (requested: {plan.backend_request})"
        )
    return f"{text}; {plan.backend_note}" if plan.backend_note else text


def _device_text(plan: TracePlan) -> str:
    if plan.plugin is not None:
        return (
            f"{plan.device} (the plugin chooses its device)"
            if plan.device != "auto"
            else ("chosen by the plugin")
        )
    if plan.backend == "numpy":
        return "CPU (NumPy)"
    if plan.backend == "reference":
        return "CPU (the reference evaluator runs on CPU)"
    assert plan.providers is not None
    names = ", ".join(plan.providers.names())
    if plan.device == "auto":
        return f"automatic: tries {names} in this order and reports the one that ran"
    return f"{plan.device.upper()} only ({names}); no CPU fallback"


def make_plan(
    doc: Document,
    arrays: Mapping[str, np.ndarray],
    backend: str = "auto",
    device: str = "auto",
    limits: Limits | None = None,
    capture: Sequence[str] | None = None,
    revision: str = REVISION_SOURCE,
    tracer: str = "",
) -> TracePlan:
    """Plan a trace of ``doc`` with the complete input set ``arrays`` (``tracer``: the id of
    a tracer plugin instead of a built-in backend)."""
    if tracer:
        return _plugin_plan(doc, arrays, tracer, device, limits, capture, revision)
    if backend not in BACKENDS:
        raise PlanError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if doc.format in CHECKPOINT_FORMATS:
        return _checkpoint_plan(doc, arrays, backend, device, limits, capture, revision)
    if doc.format != "onnx" or doc.graph is None:
        from nneditor.tracing.plugins.compat import plugin_hint

        raise PlanError(
            f"{doc.path} is a {doc.format} artifact; this build traces ONNX models, GGUF files "
            f"and Hugging Face snapshots{plugin_hint(doc, device)}"
        )
    if backend == "numpy":
        raise PlanError(
            "the NumPy decoder traces GGUF files and Hugging Face snapshots; an ONNX model "
            "runs on onnxruntime or the reference evaluator (backend auto)"
        )
    if device not in prov.DEVICES:
        raise PlanError(f"unknown device {device!r}; choose one of {', '.join(prov.DEVICES)}")
    check_set(detect_inputs(doc), arrays)
    _check_capture(doc, capture)
    resolved, note, choice = _resolve_backend(backend, device)
    version = prov.onnxruntime_version() if resolved == "onnxruntime" else _onnx_version()
    identity = TracerIdentity(resolved, version, code_fingerprint())
    external = [
        str(ref.location)
        for ref in doc.tensors.values()
        if ref.encoding == "external" and ref.location
    ]
    return TracePlan(
        model=model_identity(doc.path, external),
        revision=revision,
        backend_request=backend,
        backend=resolved,
        backend_note=note,
        device=device,
        providers=choice,
        inputs=TraceInputs(dict(arrays)),
        limits=limits or Limits(),
        capture=tuple(capture) if capture is not None else None,
        tracer=identity,
        value_count=_value_count(doc),
    )


def _checkpoint_plan(
    doc: Document,
    arrays: Mapping[str, np.ndarray],
    backend: str,
    device: str,
    limits: Limits | None,
    capture: Sequence[str] | None,
    revision: str,
) -> TracePlan:
    """A GGUF file or Hugging Face snapshot: the NumPy decoder on CPU, or a sentence."""
    from nneditor.decoder import DecoderUnsupported, decoder_config

    kind = "GGUF files" if doc.format == "gguf" else "Hugging Face snapshots"
    if backend not in ("auto", "numpy"):
        raise PlanError(
            f"{kind} trace with NNEditor's NumPy decoder (backend auto or numpy); "
            f"{backend} runs ONNX models"
        )
    if device not in ("auto", "cpu"):
        raise PlanError(
            f"the NumPy decoder runs on CPU only; {kind} cannot trace on a {device.upper()} here"
        )
    if revision != REVISION_SOURCE:
        raise PlanError(f"{kind} are traced as stored; an edited revision cannot be traced")
    if doc.graph is None:
        raise PlanError(f"{doc.path} cannot be traced: {doc.graph_unavailable_reason}")
    try:
        cfg = decoder_config(doc)
    except DecoderUnsupported as exc:
        from nneditor.tracing.plugins.compat import plugin_hint

        hint = plugin_hint(doc, device)
        raise PlanError(f"{Path(doc.path).name} cannot be traced: {exc}{hint}") from None
    check_set(detect_inputs(doc), arrays)
    _check_capture(doc, capture)
    tracer = TracerIdentity("numpy", np.__version__, code_fingerprint())
    return TracePlan(
        model=model_identity(doc.path),
        revision=revision,
        backend_request=backend,
        backend=tracer.backend,
        backend_note=f"{cfg.describe()}; weights streamed one block at a time",
        device=device,
        providers=None,
        inputs=TraceInputs(dict(arrays)),
        limits=limits or Limits(),
        capture=tuple(capture) if capture is not None else None,
        tracer=tracer,
        value_count=_value_count(doc),
    )


def _plugin_plan(
    doc: Document,
    arrays: Mapping[str, np.ndarray],
    tracer: str,
    device: str,
    limits: Limits | None,
    capture: Sequence[str] | None,
    revision: str,
) -> TracePlan:
    """A tracer plugin, found by id and checked against its manifest (nothing imported)."""
    from nneditor._version import __version__
    from nneditor.tracing.plugins.compat import incompatibility
    from nneditor.tracing.plugins.discovery import find
    from nneditor.tracing.plugins.manifest import PluginError

    try:
        record = find(tracer)
    except PluginError as exc:
        raise PlanError(str(exc)) from None
    m = record.manifest
    assert m is not None
    if revision != REVISION_SOURCE:
        raise PlanError(
            f"tracer plugins run the artifact as stored; an edited revision traces on the "
            f"built-in ONNX tracer ({m.id} cannot run it)"
        )
    if doc.graph is None:
        raise PlanError(f"{doc.path} cannot be traced: {doc.graph_unavailable_reason}")
    reason = incompatibility(m, doc, device)
    if reason:
        raise PlanError(f"tracer {m.id} cannot trace {Path(doc.path).name}: it {reason}")
    check_set(detect_inputs(doc), arrays)
    _check_capture(doc, capture)
    version = f"{m.version} on nneditor {__version__}"
    tracer_id = TracerIdentity(
        f"plugin:{m.id}", version, f"{record.fingerprint[:16]}+{code_fingerprint()}"
    )
    return TracePlan(
        model=model_identity(doc.path),
        revision=revision,
        backend_request=f"plugin:{m.id}",
        backend="plugin",
        backend_note="",
        device=device,
        providers=None,
        inputs=TraceInputs(dict(arrays)),
        limits=limits or Limits(),
        capture=tuple(capture) if capture is not None else None,
        tracer=tracer_id,
        value_count=_value_count(doc),
        plugin={
            "id": m.id,
            "name": m.name,
            "version": m.version,
            "folder": str(record.folder),
            "fingerprint": record.fingerprint,
            "entry_file": m.entry_file,
            "entry_function": m.entry_function,
        },
    )


def _check_capture(doc: Document, capture: Sequence[str] | None) -> None:
    if capture is not None:
        unknown = [n for n in capture if n not in _graph_values(doc)]
        if unknown:
            raise PlanError(
                f"the capture selection names values the graph does not have: {unknown[:5]}"
            )


def _resolve_backend(backend: str, device: str) -> tuple[str, str, prov.ProviderChoice | None]:
    available = prov.installed_providers()
    if backend == "reference":
        if device in ("gpu", "npu"):
            raise PlanError(
                f"the reference evaluator runs on CPU only; choose --backend onnxruntime for a "
                f"{device.upper()}"
            )
        return "reference", "", None
    if not available:
        if backend == "onnxruntime" or device in ("gpu", "npu"):
            want = "cpu" if device in ("auto", "cpu") else device
            raise PlanError(f"ONNX Runtime is not installed; {prov.EXTRAS[want]}")
        return "reference", "ONNX Runtime is not installed, so the reference evaluator runs", None
    try:
        choice = prov.choose_providers(device, available)
    except prov.DeviceError as exc:
        raise PlanError(str(exc)) from None
    note = (
        "falls back to the reference evaluator if ONNX Runtime refuses the model"
        if backend == "auto"
        else ""
    )
    return "onnxruntime", note, choice


def _onnx_version() -> str:
    import onnx

    return f"onnx {onnx.__version__}"


def _value_count(doc: Document) -> int:
    """Graph inputs plus node outputs (ONNX names each value once), counted without building
    a set: planning runs on the UI thread each time the settings change."""
    assert doc.graph is not None
    count = len(doc.graph.inputs)
    for node, _graph in doc.graph.walk():
        count += sum(1 for o in node.outputs if o)
    return count


def _graph_values(doc: Document) -> set[str]:
    assert doc.graph is not None
    names = {vi.name for vi in doc.graph.inputs}
    for node, _graph in doc.graph.walk():
        names.update(o for o in node.outputs if o)
    return names
