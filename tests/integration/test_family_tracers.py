"""Bundled tracer plugins against the native forward of the same library: every capture of
the Mamba / Mamba2 SSM tracer equals transformers' own module outputs (forward hooks on a
model loaded by from_pretrained) within 1e-5 relative; the ssm template copies it and runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import nneditor
from nneditor.tracing import Limits, TraceRunner, approve, make_plan
from nneditor.tracing.capture_file import read_value
from nneditor.tracing.plugins.discovery import PATH_ENV

torch = pytest.importorskip("torch", reason="the SSM tracer's runtime (nneditor[tracer-ssm])")
tf = pytest.importorskip("transformers", reason="the SSM tracer's runtime (nneditor[tracer-ssm])")
ROOT = Path(__file__).resolve().parents[2]
IDS = np.array([[1, 5, 17, 300, 42, 42, 8, 61, 999, 3, 12345, 77]], np.int64)


def _native(snapshot: Path) -> dict[str, np.ndarray]:
    model = tf.AutoModelForCausalLM.from_pretrained(str(snapshot), dtype=torch.float32).eval()
    out: dict[str, np.ndarray] = {}

    def hook(name: str):  # noqa: ANN202
        def fn(_m, _i, o) -> None:  # noqa: ANN001
            out[name] = (o[0] if isinstance(o, tuple) else o).detach().numpy().copy()

        return fn

    b = model.backbone
    mods = {"inp_embd": b.embeddings, "result_norm": b.norm_f}
    for i, layer in enumerate(b.layers):
        mods |= {f"blk.{i}.attn_norm": layer.norm, f"blk.{i}.attn_output": layer.mixer}
        mods[f"blk.{i}.output"] = layer
    handles = [m.register_forward_hook(hook(n)) for n, m in mods.items()]
    with torch.no_grad():
        out["result_output"] = model(torch.from_numpy(IDS), use_cache=False).logits.numpy()
    for h in handles:
        h.remove()
    return out


def _traced(path: Path, out: Path, tracer: str) -> dict[str, np.ndarray]:
    with nneditor.open(path) as doc:
        plan = make_plan(doc, {"tokens": IDS}, tracer=tracer, limits=Limits(timeout_s=300))
    result = TraceRunner().run(plan, approve(plan), out)
    assert result.published, result.message + result.log_tail
    values = {}
    for v in result.manifest["values"]:
        assert v["status"] == "captured", v
        values[v["name"]] = read_value(out, v)
    return values


@pytest.mark.realdata
@pytest.mark.parametrize("family", ["mamba", "mamba2"])
def test_ssm_tracer_equals_the_native_forward(family: str, zoo_artifact, tmp_path: Path) -> None:  # noqa: ANN001
    snap = zoo_artifact(f"decoder-{family}")
    ours = _traced(snap, tmp_path / "t", "nneditor.mamba-ssm")
    theirs = _native(snap)
    assert set(theirs) <= set(ours) and len(theirs) == 3 + 3 * 2
    for name, want in theirs.items():
        got = ours[name]
        assert got.shape == want.shape, name
        rel = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
        assert rel < 1e-5, (name, rel)


@pytest.mark.realdata
def test_ssm_template_copies_the_bundled_tracer(zoo_artifact, tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("NNEDITOR_HOME", str(tmp_path / "home"))
    made = subprocess.run(
        [sys.executable, "-m", "nneditor", "--create-tracer", str(tmp_path / "my-ssm")]
        + ["--tracer-template", "ssm"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert made.returncode == 0, made.stderr
    manifest = json.loads((tmp_path / "my-ssm" / "nneditor-tracer.json").read_text())
    assert manifest["id"] == "example.mamba-ssm"
    monkeypatch.setenv(PATH_ENV, str(tmp_path / "my-ssm"))
    snap = zoo_artifact("decoder-mamba")
    ours = _traced(snap, tmp_path / "t", "example.mamba-ssm")
    np.testing.assert_allclose(ours["result_output"], _native(snap)["result_output"], rtol=1e-5)


@pytest.mark.realdata
def test_the_decoder_runs_mamba_and_the_plugin_refuses_bad_weights(
    zoo_artifact,  # noqa: ANN001
    tmp_path: Path,
) -> None:
    snap = zoo_artifact("decoder-mamba")
    with nneditor.open(snap) as doc:  # the built-in decoder runs it; the plugin on request
        assert make_plan(doc, {"tokens": IDS}).backend == "numpy"
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in snap.iterdir():
        if f.is_file():
            (broken / f.name).write_bytes(f.read_bytes())
    from safetensors.numpy import load_file, save_file

    weights = load_file(str(broken / "model.safetensors"))
    weights.pop(next(n for n in weights if n.endswith("layers.1.mixer.out_proj.weight")))
    save_file(weights, str(broken / "model.safetensors"), metadata={"format": "pt"})
    with nneditor.open(broken) as doc:
        plan = make_plan(doc, {"tokens": IDS}, tracer="nneditor.mamba-ssm")
    result = TraceRunner().run(plan, approve(plan), tmp_path / "t")
    assert not result.published
    assert "lacks backbone.layers.1.mixer.out_proj.weight" in result.message, result.message
    assert os.listdir(tmp_path) == ["broken"]


diffusers = pytest.importorskip("diffusers", reason="the UNet tracer's runtime")


def _unet_native(folder: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """diffusers' own from_pretrained and forward, hooked like a user would."""
    model = diffusers.UNet2DConditionModel.from_pretrained(str(folder)).eval()
    out: dict[str, np.ndarray] = {}

    def keep(name: str):  # noqa: ANN202
        def fn(_m, _i, o) -> None:  # noqa: ANN001
            out[name] = o.detach().numpy().copy()

        return fn

    def skips(i: int):  # noqa: ANN202
        def fn(_m, _i, o) -> None:  # noqa: ANN001
            for j, r in enumerate(o[1]):
                out[f"down_blocks.{i}.res.{j}"] = r.detach().numpy().copy()

        return fn

    hs = [model.time_embedding.register_forward_hook(keep("time_embedding"))]
    hs.append(model.conv_in.register_forward_hook(keep("conv_in")))
    hs.append(model.mid_block.register_forward_hook(keep("mid_block")))
    if getattr(model, "add_embedding", None) is not None:
        hs.append(model.add_embedding.register_forward_hook(keep("add_embedding")))
    hs += [b.register_forward_hook(skips(i)) for i, b in enumerate(model.down_blocks)]
    hs += [b.register_forward_hook(keep(f"up_blocks.{i}")) for i, b in enumerate(model.up_blocks)]
    t = {k: torch.from_numpy(v) for k, v in feeds.items()}
    added = {k: t[k] for k in ("text_embeds", "time_ids") if k in t} or None
    with torch.no_grad():
        out["conv_out"] = model(
            t["sample"], t["timestep"], t["encoder_hidden_states"], added_cond_kwargs=added
        ).sample.numpy()
    for h in hs:
        h.remove()
    return out


@pytest.mark.realdata
@pytest.mark.parametrize("name", ["unet-sd", "unet-sdxl"])
def test_unet_tracer_equals_the_native_forward(name: str, zoo_artifact, tmp_path: Path) -> None:  # noqa: ANN001
    from nneditor.inputs import automatic, detect_inputs

    folder = zoo_artifact(name)
    with nneditor.open(folder) as doc:
        feeds = {s.name: automatic(s) for s in detect_inputs(doc).inputs}
        plan = make_plan(doc, feeds, tracer="nneditor.diffusion-unet")
        shapes = {k: tuple(v.shape) for k, v in doc.graph.value_info.items()}
    assert 0 <= int(feeds["timestep"][0]) < 1000
    result = TraceRunner().run(plan, approve(plan), tmp_path / "t")
    assert result.published, result.message + result.log_tail
    ours = {
        v["name"]: read_value(tmp_path / "t", v)
        for v in result.manifest["values"]
        if v["status"] == "captured"
    }
    assert len(ours) == len(result.manifest["values"])  # every graph value captured
    theirs = _unet_native(folder, feeds)
    assert set(theirs) == {n for n in ours if n not in feeds}
    for n, want in theirs.items():
        assert ours[n].shape == want.shape == shapes[n], n  # the synthesized shapes are right
        rel = float(np.abs(ours[n] - want).max() / max(np.abs(want).max(), 1e-30))
        assert rel < 1e-5, (n, rel)


def _modality_native(folder: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """transformers' own from_pretrained and forward, hooked like a user would."""
    model = tf.AutoModel.from_pretrained(str(folder)) if "pixel_values" in feeds else None
    out: dict[str, np.ndarray] = {}

    def keep(name: str):  # noqa: ANN202
        def fn(_m, _i, o) -> None:  # noqa: ANN001
            out[name] = (o[0] if isinstance(o, tuple) else o).detach().numpy().copy()

        return fn

    if model is None:
        model = tf.WhisperForConditionalGeneration.from_pretrained(str(folder)).eval()
        e, d = model.model.encoder, model.model.decoder
        mods = {
            "encoder.conv1": e.conv1,
            "encoder.conv2": e.conv2,
            "encoder.embed_positions": e.embed_positions,
            "encoder.layer_norm": e.layer_norm,
            "decoder.embed_tokens": d.embed_tokens,
            "decoder.embed_positions": d.embed_positions,
            "decoder.layer_norm": d.layer_norm,
        }
        mods |= {f"encoder.layers.{i}": m for i, m in enumerate(e.layers)}
        mods |= {f"decoder.layers.{i}": m for i, m in enumerate(d.layers)}
        hs = [m.register_forward_hook(keep(n)) for n, m in mods.items()]
        with torch.no_grad():
            out["logits"] = model(
                input_features=torch.from_numpy(feeds["input_features"]),
                decoder_input_ids=torch.from_numpy(feeds["decoder_input_ids"]),
                use_cache=False,
            ).logits.numpy()
    else:
        model = tf.CLIPVisionModelWithProjection.from_pretrained(str(folder)).eval()
        vm = model.vision_model  # (the snapshot's checkpoint graph names, the decoder's)
        mods = {"inp_embd_pos": vm.embeddings, "inp_norm": vm.pre_layrnorm}
        mods |= {f"blk.{i}.output": m for i, m in enumerate(vm.encoder.layers)}
        mods["pooler_output"] = vm.post_layernorm
        hs = [m.register_forward_hook(keep(n)) for n, m in mods.items()]
        with torch.no_grad():
            o = model(pixel_values=torch.from_numpy(feeds["pixel_values"]))
        out["image_embeds"] = o.image_embeds.numpy()[:, None]  # (one row: [1, 1, width])
        out["pooler_output"] = out["pooler_output"][:, None]
    for h in hs:
        h.remove()
    return out


@pytest.mark.realdata
@pytest.mark.parametrize("name", ["whisper-tiny", "clip-vision"])
def test_modalities_tracer_equals_the_native_forward(
    name: str, zoo_artifact, tmp_path: Path
) -> None:  # noqa: ANN001
    from nneditor.inputs import automatic, detect_inputs

    folder = zoo_artifact(name)
    with nneditor.open(folder) as doc:
        feeds = {s.name: automatic(s) for s in detect_inputs(doc, {"seq": 4}).inputs}
        plan = make_plan(doc, feeds, tracer="nneditor.modalities")
        declared = {k: v.shape for k, v in doc.graph.value_info.items()}
    if name == "whisper-tiny":
        assert feeds["decoder_input_ids"][0, 0] == 3  # the decoder start token
        assert feeds["decoder_input_ids"].max() < 500
    result = TraceRunner().run(plan, approve(plan), tmp_path / "t")
    assert result.published, result.message + result.log_tail
    ours = {v["name"]: read_value(tmp_path / "t", v) for v in result.manifest["values"]}
    assert all(v["status"] == "captured" for v in result.manifest["values"])
    theirs = _modality_native(folder, feeds)
    published = {n for n in ours if n not in feeds}  # (CLIP: more of the decoder graph)
    assert set(theirs) == published if name == "whisper-tiny" else set(theirs) < published
    for n, want in theirs.items():
        assert ours[n].shape == want.shape, n
        seq = 4 if name == "whisper-tiny" else want.shape[1]  # (a vision graph's: its tokens)
        shape = tuple(seq if d == "seq" else d for d in declared[n])
        assert want.shape == shape, (n, want.shape, shape)  # the synthesized shapes are right
        rel = float(np.abs(ours[n] - want).max() / max(np.abs(want).max(), 1e-30))
        assert rel < 1e-5, (n, rel)


def _llava_native(folder: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """transformers' own from_pretrained and forward of LLaVA, hooked like a user would."""
    model = tf.LlavaForConditionalGeneration.from_pretrained(str(folder)).eval()
    inner = model.model
    vm = getattr(inner.vision_tower, "vision_model", inner.vision_tower)
    lm = inner.language_model
    out: dict[str, np.ndarray] = {}

    def keep(name: str):  # noqa: ANN202
        def fn(_m, _i, o) -> None:  # noqa: ANN001
            out[name] = (o[0] if isinstance(o, tuple) else o).detach().numpy().copy()

        return fn

    mods = {"vision.embeddings": vm.embeddings, "vision.pre_layrnorm": vm.pre_layrnorm}
    mods |= {f"vision.layers.{i}": m for i, m in enumerate(vm.encoder.layers)}
    mods |= {"image_embeds": inner.multi_modal_projector, "text_embeds": lm.embed_tokens}
    mods |= {f"language_model.layers.{i}": m for i, m in enumerate(lm.layers)}
    mods["language_model.norm"] = lm.norm
    hs = [m.register_forward_hook(keep(n)) for n, m in mods.items()]
    hs.append(
        inner.multi_modal_projector.register_forward_pre_hook(
            lambda _m, a: out.__setitem__("image_features", a[0].detach().numpy().copy())
        )
    )
    hs.append(
        lm.register_forward_pre_hook(
            lambda _m, _a, kw: out.__setitem__("inputs_embeds", kw["inputs_embeds"].numpy().copy()),
            with_kwargs=True,
        )
    )
    with torch.no_grad():
        out["logits"] = model(
            input_ids=torch.from_numpy(feeds["input_ids"]),
            pixel_values=torch.from_numpy(feeds["pixel_values"]),
            use_cache=False,
        ).logits.numpy()
    for h in hs:
        h.remove()
    return out


@pytest.mark.realdata
def test_llava_tracer_equals_the_native_forward(zoo_artifact, tmp_path: Path) -> None:  # noqa: ANN001
    from nneditor.inputs import automatic, detect_inputs

    folder = zoo_artifact("llava-tiny")
    with nneditor.open(folder) as doc:
        specs = detect_inputs(doc).inputs
        feeds = {s.name: automatic(s) for s in specs}
        plan = make_plan(doc, feeds, tracer="nneditor.modalities")
        declared = {k: v.shape for k, v in doc.graph.value_info.items()}
    ids = feeds["input_ids"]
    assert ids.shape == (1, 20) and (ids[0, :16] == 299).all() and (ids[0, 16:] != 299).all()
    result = TraceRunner().run(plan, approve(plan), tmp_path / "t")
    assert result.published, result.message + result.log_tail
    assert all(v["status"] == "captured" for v in result.manifest["values"])
    ours = {v["name"]: read_value(tmp_path / "t", v) for v in result.manifest["values"]}
    theirs = _llava_native(folder, feeds)
    assert set(theirs) == {n for n in ours if n not in feeds} and len(theirs) == 13
    for n, want in theirs.items():
        shape = tuple(20 if d == "seq" else d for d in declared[n])
        assert ours[n].shape == want.shape == shape, (n, want.shape, shape)
        rel = float(np.abs(ours[n] - want).max() / max(np.abs(want).max(), 1e-30))
        assert rel < 1e-5, (n, rel)
    # the merge: the image rows of inputs_embeds are the projected image features
    np.testing.assert_allclose(ours["inputs_embeds"][0, :16], ours["image_embeds"][0], rtol=1e-6)


@pytest.mark.realdata
def test_a_clip_vision_snapshot_saved_by_transformers_4_traces(tmp_path: Path) -> None:
    """transformers 4 saved CLIPVisionModel weights as vision_model.*; version 5's class has
    no such prefix. from_pretrained maps them, and so must the tracer (this failed with
    "has no place in CLIPVisionModel" while only the newer naming was handled)."""
    from safetensors.numpy import load_file, save_file

    from nneditor.inputs import automatic, detect_inputs

    torch.manual_seed(0)
    config = tf.CLIPVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        image_size=32,
        patch_size=8,
    )
    folder = tmp_path / "clip-v4"
    tf.CLIPVisionModel(config).save_pretrained(str(folder))
    weights = folder / "model.safetensors"
    stored = load_file(str(weights))
    if not next(iter(stored)).startswith("vision_model."):
        stored = {f"vision_model.{k}": v for k, v in stored.items()}
        save_file(stored, str(weights), metadata={"format": "pt"})
    with nneditor.open(folder) as doc:
        feeds = {s.name: automatic(s) for s in detect_inputs(doc, {}).inputs}
        plan = make_plan(doc, feeds, tracer="nneditor.modalities")
    result = TraceRunner().run(plan, approve(plan), tmp_path / "t")
    assert result.published, result.message + result.log_tail
    ours = {v["name"]: read_value(tmp_path / "t", v) for v in result.manifest["values"]}
    model = tf.CLIPVisionModel.from_pretrained(str(folder)).eval()  # the reference
    with torch.no_grad():
        want = model(pixel_values=torch.from_numpy(feeds["pixel_values"]))
    np.testing.assert_allclose(ours["pooler_output"][0], want.pooler_output.numpy(), rtol=1e-5)
    last = ours["blk.1.output"]
    np.testing.assert_allclose(last, want.last_hidden_state.numpy(), rtol=1e-5, atol=1e-6)


def _qwen_vl_native(folder: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """transformers' own from_pretrained and forward of Qwen2-VL / Qwen2.5-VL, hooked."""
    model = tf.AutoModelForImageTextToText.from_pretrained(str(folder)).eval()
    inner = model.model
    vis, lm = inner.visual, inner.language_model
    out: dict[str, np.ndarray] = {}

    def keep(name: str):  # noqa: ANN202
        def fn(_m, _i, o) -> None:  # noqa: ANN001
            out[name] = (o[0] if isinstance(o, tuple) else o).detach().numpy().copy()

        return fn

    mods = {"visual.patch_embed": vis.patch_embed, "image_embeds": vis.merger}
    mods |= {f"visual.blocks.{i}": m for i, m in enumerate(vis.blocks)}
    mods |= {"text_embeds": lm.embed_tokens, "language_model.norm": lm.norm}
    mods |= {f"language_model.layers.{i}": m for i, m in enumerate(lm.layers)}
    hs = [m.register_forward_hook(keep(n)) for n, m in mods.items()]
    hs.append(
        lm.register_forward_pre_hook(
            lambda _m, _a, kw: out.__setitem__("inputs_embeds", kw["inputs_embeds"].numpy().copy()),
            with_kwargs=True,
        )
    )
    stack = list(getattr(vis, "deepstack_merger_list", None) or [])
    hs += [m.register_forward_hook(keep(f"deepstack.{k}")) for k, m in enumerate(stack)]
    for k, m in enumerate([*lm.layers[1:], lm.norm][: len(stack)]):  # after each addition
        hs.append(
            m.register_forward_pre_hook(
                lambda _m, a, k=k: out.__setitem__(
                    f"language_model.layers.{k}.deepstack", a[0].numpy().copy()
                )
            )
        )
    ids = torch.from_numpy(feeds["input_ids"])
    with torch.no_grad():
        out["logits"] = model(
            input_ids=ids,
            pixel_values=torch.from_numpy(feeds["pixel_values"]),
            image_grid_thw=torch.from_numpy(feeds["image_grid_thw"]),
            mm_token_type_ids=(ids == model.config.image_token_id).long(),
            use_cache=False,
        ).logits.numpy()
    for h in hs:
        h.remove()
    return out


@pytest.mark.realdata
@pytest.mark.parametrize(
    ("name", "row", "values"),
    [
        ("qwen2-vl-tiny", 1176, 10),
        ("qwen2.5-vl-tiny", 1176, 10),
        ("qwen3-vl-tiny", 1536, 15),
        ("decoder-qwen3-vl-moe", 1536, 15),  # Qwen3-VL-30B-A3B's kind: experts in the text model
    ],
)
def test_qwen_vl_tracer_equals_the_native_forward(
    name: str,
    row: int,
    values: int,
    zoo_artifact,  # noqa: ANN001
    tmp_path: Path,
) -> None:
    from nneditor.inputs import automatic, detect_inputs

    folder = zoo_artifact(name)
    with nneditor.open(folder) as doc:
        specs = detect_inputs(doc).inputs
        feeds = {s.name: automatic(s) for s in specs}
        plan = make_plan(doc, feeds, tracer="nneditor.modalities")
        declared = {k: v.shape for k, v in doc.graph.value_info.items()}
    # the automatic inputs agree with each other: 16 patches on a 1 x 4 x 4 grid, 4 tokens
    assert feeds["pixel_values"].shape == (16, row)
    assert feeds["image_grid_thw"].tolist() == [[1, 4, 4]]
    ids = feeds["input_ids"]
    assert (ids[0, :4] == 299).all() and (ids[0, 4:] != 299).all()
    result = TraceRunner().run(plan, approve(plan), tmp_path / "t")
    assert result.published, result.message + result.log_tail
    assert all(v["status"] == "captured" for v in result.manifest["values"])
    ours = {v["name"]: read_value(tmp_path / "t", v) for v in result.manifest["values"]}
    theirs = _qwen_vl_native(folder, feeds)
    assert set(theirs) == {n for n in ours if n not in feeds} and len(theirs) == values
    seq = ids.shape[1]
    for n, want in theirs.items():
        shape = tuple(seq if d == "seq" else d for d in declared[n])
        assert ours[n].shape == want.shape == shape, (n, want.shape, shape)
        rel = float(np.abs(ours[n] - want).max() / max(np.abs(want).max(), 1e-30))
        assert rel < 1e-5, (n, rel)
    # the merge: the image rows of inputs_embeds are the merged image features
    np.testing.assert_allclose(ours["inputs_embeds"][0, :4], ours["image_embeds"], rtol=1e-6)
