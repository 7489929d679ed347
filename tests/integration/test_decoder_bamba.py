"""Bamba (granitehybrid in llama.cpp's files): the snapshot's blocks and logits equal
transformers'; its llama.cpp conversion runs as llama.cpp runs it (test_decoder_llama_cpp.py,
where llama-cpp-python is installed), which pairs the rotated half of each head differently
from the model, and says so."""

from __future__ import annotations

import numpy as np
import pytest

import nneditor
from nneditor.decoder import decoder_config, run_forward
from nneditor.decoder.mamba2 import BAMBA_NOTE

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

IDS = np.array([[1, 5, 17, 300, 42, 42, 8, 61, 999, 3, 12345, 77]], dtype=np.int64)


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


def _ours(path):  # noqa: ANN001, ANN202
    values: dict[str, np.ndarray] = {}
    with nneditor.open(path) as doc:
        cfg = decoder_config(doc)
        run_forward(doc, cfg, IDS, values.__setitem__)
    return values, cfg


@pytest.mark.realdata
def test_bamba_snapshot_equals_transformers_and_its_gguf_says_how_it_differs(zoo_artifact) -> None:  # noqa: ANN001
    snap = zoo_artifact("decoder-bamba")
    model = tf.AutoModelForCausalLM.from_pretrained(str(snap), dtype=torch.float32).eval()
    outs: list[np.ndarray] = []
    hooks = [
        layer.register_forward_hook(lambda _m, _i, o: outs.append(o[0].detach().numpy()))
        for layer in model.model.layers
    ]
    with torch.no_grad():
        logits = model(torch.from_numpy(IDS)).logits.numpy()
    for h in hooks:
        h.remove()
    ours, cfg = _ours(snap)
    assert (cfg.rope, cfg.rope_dim, cfg.head_dim) == ("neox", 8, 16)  # half of each head
    assert cfg.layer_kinds == ("mamba2", "attention", "mamba2", "attention")
    for i, want in enumerate(outs):
        assert _rel(ours[f"blk.{i}.output"], want) < 1e-4, i
    assert _rel(ours["result_output"], logits) < 1e-4
    assert BAMBA_NOTE not in cfg.notes
    converted, gguf_cfg = _ours(zoo_artifact("decoder-bamba.gguf"))
    assert BAMBA_NOTE in gguf_cfg.notes
    assert _rel(converted["blk.0.output"], outs[0]) < 1e-4  # Mamba-2 layers agree
    assert _rel(converted["result_output"], logits) > 0.1  # the attention layers do not


def test_a_bamba_stating_no_attention_layers_is_all_mamba(tmp_path) -> None:  # noqa: ANN001
    """attn_layer_indices null (transformers' default): every layer is Mamba-2, as BambaConfig
    reads it; it was refused with 'layer_types lists 0 layers' (found by a sweep)."""
    config = tf.BambaConfig(
        vocab_size=128,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        mamba_n_heads=4,
        mamba_d_head=16,
        mamba_d_state=16,
        attn_layer_indices=None,
        pad_token_id=0,
    )
    torch.manual_seed(0)
    model = tf.BambaForCausalLM(config).eval()
    model.save_pretrained(str(tmp_path))
    ids = IDS[:, :6] % 128
    with torch.no_grad():  # (transformers' own cache refuses a model without attention)
        logits = model(torch.from_numpy(ids), use_cache=False).logits.numpy()
    values: dict[str, np.ndarray] = {}
    with nneditor.open(tmp_path) as doc:
        cfg = decoder_config(doc)
        run_forward(doc, cfg, ids, values.__setitem__)
    assert cfg.layer_kinds == ("mamba2", "mamba2")
    assert _rel(values["result_output"], logits) < 1e-4
