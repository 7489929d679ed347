"""CLIP vision towers stored as GGUF (llama.cpp's ``clip`` architecture) traced by the bundled
modalities plugin, against transformers' own forward of the model the files were written from
(the ``clip-vision`` snapshot, loaded with from_pretrained): every capture of the F32 file
within 1e-5 relative; the F16 and Q8_0 files within 1e-5 of transformers running the same
rounded weights (rounded here by numpy and gguf-py's own quantizer, not by NNEditor), since
decoding F16 and Q8_0 to float32 is exact and only the summation order may differ. Files
NNEditor does not lay out open, list their tensors and are refused with a sentence; missing
and stray tensors are refused by their GGUF names."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zoo_clip_gguf
from nneditor_cli import nneditor_cli

import nneditor
from nneditor.tracing import PlanError, TraceRunner, approve, make_plan
from nneditor.tracing.capture_file import read_value

torch = pytest.importorskip("torch", reason="the modalities tracer's runtime")
tf = pytest.importorskip("transformers", reason="the modalities tracer's runtime")
gguf = pytest.importorskip("gguf")
ROOT = Path(__file__).resolve().parents[2]
TRACER = "nneditor.modalities"


def _reference(snapshot: Path, kind: str | None, pixels: np.ndarray) -> dict[str, np.ndarray]:
    """transformers' from_pretrained and forward, hooked like a user would; ``kind`` rounds
    the weights the GGUF stores reduced (zoo_clip_gguf.reduced: the writer's rule)."""
    model = tf.CLIPVisionModelWithProjection.from_pretrained(str(snapshot)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            to = zoo_clip_gguf.reduced(name, tuple(p.shape), kind)
            if to == "F16":
                p.copy_(p.half().float())
            elif to == "Q8_0":
                q8 = gguf.GGMLQuantizationType.Q8_0
                w = gguf.quants.dequantize(gguf.quants.quantize(p.numpy(), q8), q8)
                p.copy_(torch.from_numpy(w))
    vm = model.vision_model
    out: dict[str, np.ndarray] = {}
    mods = {"embeddings": vm.embeddings, "pre_layrnorm": vm.pre_layrnorm}
    mods |= {f"encoder.layers.{i}": m for i, m in enumerate(vm.encoder.layers)}
    mods["pooled_output"] = vm.post_layernorm

    def keep(name: str) -> Callable[..., None]:
        def fn(_m: Any, _i: Any, o: Any) -> None:
            out[name] = (o[0] if isinstance(o, tuple) else o).detach().numpy().copy()

        return fn

    hs = [m.register_forward_hook(keep(n)) for n, m in mods.items()]
    with torch.no_grad():
        o = model(pixel_values=torch.from_numpy(pixels))
    for h in hs:
        h.remove()
    out["image_embeds"] = o.image_embeds.numpy()
    out["last_hidden_state"] = o.last_hidden_state.numpy()
    return out


def _trace(path: Path, out: Path) -> tuple[dict[str, np.ndarray], dict[str, Any], np.ndarray]:
    """(captures, the graph's declared shapes, the automatic pixel values)."""
    from nneditor.inputs import automatic, detect_inputs

    with nneditor.open(path) as doc:
        feeds = {s.name: automatic(s) for s in detect_inputs(doc).inputs}
        plan = make_plan(doc, feeds, tracer=TRACER)
        declared = {k: tuple(v.shape) for k, v in doc.graph.value_info.items()}
    result = TraceRunner().run(plan, approve(plan), out)
    assert result.published, result.message + result.log_tail
    assert all(v["status"] == "captured" for v in result.manifest["values"])
    ours = {v["name"]: np.asarray(read_value(out, v)) for v in result.manifest["values"]}
    return ours, declared, feeds["pixel_values"]


def _rel(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


def _assert_equal_to_reference(
    path: Path, snapshot: Path, kind: str | None, out: Path
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    ours, declared, pixels = _trace(path, out)
    theirs = _reference(snapshot, kind, pixels)
    assert set(theirs) == set(ours) - {"pixel_values"} and len(theirs) == 7
    for n, want in theirs.items():
        assert ours[n].shape == want.shape == declared[n], (n, ours[n].shape, declared[n])
        assert _rel(ours[n], want) < 1e-5, (n, _rel(ours[n], want))
    # the sequence output is the last block's output, published as a value of its own
    np.testing.assert_array_equal(ours["last_hidden_state"], ours["encoder.layers.1"])
    return ours, pixels


@pytest.mark.realdata
@pytest.mark.parametrize("name", list(zoo_clip_gguf.FILES))
def test_gguf_clip_trace_equals_transformers(name: str, zoo_artifact, tmp_path: Path) -> None:  # noqa: ANN001
    kind = zoo_clip_gguf.FILES[name]
    path, snapshot = zoo_artifact(name), zoo_artifact("clip-vision")
    ours, pixels = _assert_equal_to_reference(path, snapshot, kind, tmp_path / "t")
    if kind is not None:  # the file really stores reduced weights: the unrounded model differs
        drift = _rel(ours["image_embeds"], _reference(snapshot, None, pixels)["image_embeds"])
        assert 1e-6 < drift < 2e-2, drift


# ---------------------------------------------------------------------------- refusals


def _rewrite(
    src: Path,
    dst: Path,
    keys: dict[str, Any] | None = None,
    tensors: dict[str, np.ndarray] | None = None,
    drop: tuple[str, ...] = (),
    rename: dict[str, str] | None = None,
) -> Path:
    """A copy of the F32 CLIP GGUF with metadata added or replaced, tensors added, dropped or
    renamed, written by gguf-py (its reader and writer, nothing of NNEditor's)."""
    reader = gguf.GGUFReader(str(src))
    writer = gguf.GGUFWriter(str(dst), str(reader.fields["general.architecture"].contents()))
    keys = dict(keys or {})
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture" or name in keys:
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, field.contents(), vtype, sub_type=sub)
    for name, value in keys.items():
        if isinstance(value, bool):
            writer.add_bool(name, value)
        else:
            writer.add_string(name, value)
    for t in reader.tensors:
        if t.name in drop:
            continue
        shape = tuple(int(d) for d in reversed(t.shape))
        data = np.array(t.data, dtype=np.float32).reshape(shape)
        writer.add_tensor((rename or {}).get(t.name, t.name), data)
    for name, data in (tensors or {}).items():
        writer.add_tensor(name, np.ascontiguousarray(data, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return dst


def _cli(*args: object) -> subprocess.CompletedProcess[str]:
    return nneditor_cli(*args, timeout=300)


@pytest.mark.realdata
@pytest.mark.parametrize(
    ("what", "keys", "tensors", "phrase"),
    [
        (
            "projector",
            {"clip.projector_type": "mlp", "clip.has_llava_projector": True},
            {"mm.0.weight": np.ones((48, 32)), "mm.0.bias": np.ones(48)},
            "its multimodal projector (clip.projector_type 'mlp') is not laid out",
        ),
        (
            "text",
            {"clip.has_text_encoder": True},
            {"t.token_embd.weight": np.ones((10, 32))},
            "this CLIP GGUF also holds a text encoder (clip.has_text_encoder)",
        ),
    ],
)
def test_unsupported_clip_files_open_and_are_refused(
    what: str,
    keys: dict[str, Any],
    tensors: dict[str, np.ndarray],
    phrase: str,
    zoo_artifact,  # noqa: ANN001
    tmp_path: Path,
) -> None:
    path = _rewrite(zoo_artifact("clip-vision.gguf"), tmp_path / f"{what}.gguf", keys, tensors)
    with nneditor.open(path) as doc:  # inspectable: metadata, every tensor readable
        assert doc.graph is None and phrase in doc.graph_unavailable_reason
        first = next(iter(tensors))
        np.testing.assert_array_equal(doc.tensors[first].read(), tensors[first])
        assert doc.tensors["v.blk.1.attn_q.weight"].read().shape == (32, 32)
        pixels = {"pixel_values": np.zeros((1, 3, 32, 32), np.float32)}
        with pytest.raises(PlanError, match="cannot be traced: ") as refused:
            make_plan(doc, pixels, tracer=TRACER)
    assert phrase in str(refused.value)
    todo = "open the Hugging Face snapshot and trace it with nneditor.modalities"
    assert todo in str(refused.value)
    out = _cli("trace", path, "--tracer", TRACER, "--out", tmp_path / "t", "--yes")
    last = out.stderr.strip().splitlines()[-1]
    assert out.returncode == 2 and phrase in last and todo in last, last
    assert not (tmp_path / "t").exists()
    shown = _cli("inspect", path)  # the catalog and the reason, exit 0
    assert shown.returncode == 0 and phrase in shown.stdout, shown.stderr


@pytest.mark.realdata
@pytest.mark.parametrize(
    ("drop", "tensors", "phrase"),
    [
        (
            ("v.blk.1.attn_q.weight",),
            {},
            "the GGUF lacks v.blk.1.attn_q.weight that CLIPVisionModelWithProjection "
            "(from the GGUF metadata) needs",
        ),
        (
            (),
            {"v.blk.0.attn_qkv.weight": np.ones((96, 32))},
            "the GGUF's tensor 'v.blk.0.attn_qkv.weight' has no place in "
            "CLIPVisionModelWithProjection",
        ),
    ],
)
def test_missing_and_stray_tensors_are_refused_by_name(
    drop: tuple[str, ...],
    tensors: dict[str, np.ndarray],
    phrase: str,
    zoo_artifact,  # noqa: ANN001
    tmp_path: Path,
) -> None:
    path = _rewrite(zoo_artifact("clip-vision.gguf"), tmp_path / "b.gguf", None, tensors, drop)
    with nneditor.open(path) as doc:
        pixels = {"pixel_values": np.zeros((1, 3, 32, 32), np.float32)}
        plan = make_plan(doc, pixels, tracer=TRACER)
    result = TraceRunner().run(plan, approve(plan), tmp_path / "t")
    assert not result.published and phrase in result.message, result.message
    assert not (tmp_path / "t").exists()


@pytest.mark.realdata
def test_legacy_swapped_ffn_names_trace_the_same(zoo_artifact, tmp_path: Path) -> None:  # noqa: ANN001
    """Older conversions stored fc1 as ffn_down and fc2 as ffn_up; the shapes tell them apart
    (llama.cpp's loader does the same), so the trace still equals transformers."""
    swap = {}
    for i in range(2):
        for k in ("weight", "bias"):
            up, down = f"v.blk.{i}.ffn_up.{k}", f"v.blk.{i}.ffn_down.{k}"
            swap |= {up: down, down: up}
    path = _rewrite(zoo_artifact("clip-vision.gguf"), tmp_path / "l.gguf", rename=swap)
    with nneditor.open(path) as doc:
        assert doc.tensors["v.blk.0.ffn_down.weight"].shape == (64, 32)  # fc1 under legacy name
    _assert_equal_to_reference(path, zoo_artifact("clip-vision"), None, tmp_path / "t")


@pytest.mark.realdata
def test_without_a_projection_the_pooled_output_is_the_output(zoo_artifact, tmp_path: Path) -> None:  # noqa: ANN001
    drop = (zoo_clip_gguf.PROJECTION,)
    path = _rewrite(zoo_artifact("clip-vision.gguf"), tmp_path / "p.gguf", drop=drop)
    with nneditor.open(path) as doc:
        assert [o.name for o in doc.graph.outputs] == ["pooled_output", "last_hidden_state"]
    ours, declared, pixels = _trace(path, tmp_path / "t")
    theirs = _reference(zoo_artifact("clip-vision"), None, pixels)
    del theirs["image_embeds"]
    assert set(theirs) == set(ours) - {"pixel_values"}
    for n, want in theirs.items():
        assert ours[n].shape == want.shape == declared[n], n
        assert _rel(ours[n], want) < 1e-5, (n, _rel(ours[n], want))


def test_only_the_gguf_clip_is_declared_for_the_plugin() -> None:
    """llama.cpp's "clip" (a vision-encoder GGUF) and transformers' "clip" (the text-and-vision
    CLIPModel) share a name; the plugin declares the first only."""
    from types import SimpleNamespace

    from nneditor.tracing.plugins.compat import incompatibility
    from nneditor.tracing.plugins.discovery import find

    manifest = find(TRACER).manifest
    gguf_doc = SimpleNamespace(format="gguf", metadata={"general.architecture": "clip"})
    assert incompatibility(manifest, gguf_doc, "cpu") == ""  # type: ignore[arg-type]
    snapshot = SimpleNamespace(format="huggingface", metadata={"config": {"model_type": "clip"}})
    assert "this model's is clip_model" in incompatibility(manifest, snapshot)  # type: ignore[arg-type]
