"""The graph drawn from tensor names for a snapshot of a family NNEditor has no builder for:
its head is drawn only where the model has one."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

import nneditor


def _snapshot(folder: Path, config: dict, names: list[str]) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    rng = np.random.default_rng(0)
    save_file(
        {n: rng.standard_normal((4, 4)).astype("<f4") for n in names}, folder / "model.safetensors"
    )
    return folder


# OPT's names under a model_type NNEditor has no builder for (OPT itself has one: opt.py)
OPT = {"model_type": "xopt", "hidden_size": 4, "num_attention_heads": 1, "num_hidden_layers": 1}
LAYER = [
    "decoder.layers.0.self_attn_layer_norm.weight",
    "decoder.layers.0.self_attn.q_proj.weight",
    "decoder.layers.0.final_layer_norm.weight",
    "decoder.layers.0.fc1.weight",
]
BASE = ["decoder.embed_tokens.weight", "decoder.embed_positions.weight", *LAYER]


@pytest.mark.parametrize(
    ("classes", "extra", "names", "head"),
    [
        # a causal LM saved without its head: transformers ties it to the token embedding
        (["OPTForCausalLM"], {}, BASE, "decoder.embed_tokens.weight"),
        # ... unless the config unties it: then no head is stored, none is drawn
        (["OPTForCausalLM"], {"tie_word_embeddings": False}, BASE, None),
        # a base model has no head at all
        (["OPTModel"], {}, BASE, None),
        ([], {}, BASE, None),
        # a stored head is drawn whatever the class says
        (["OPTModel"], {}, [*BASE, "lm_head.weight"], "lm_head.weight"),
    ],
)
def test_head_only_where_the_model_has_one(tmp_path, classes, extra, names, head):
    config = {**OPT, "architectures": classes, **extra}
    with nneditor.open(_snapshot(tmp_path / "m", config, names)) as doc:
        g = doc.graph
        assert g is not None and "tensor names" in g.name
        heads = [n for n in g.nodes if n.op_type == "LMHead"]
        if head is None:
            assert heads == []
            assert g.outputs[0].name == "blk.0.output"  # no final norm stored either
        else:
            assert [n.inputs[1:] for n in heads] == [(head,)]
            assert g.outputs[0].name == "result_output"


def test_position_embeddings_are_never_the_tied_head(tmp_path):
    """DistilBERT-style names: the token embedding is word_embeddings, even when the
    position table comes first."""
    names = [
        "embeddings.position_embeddings.weight",
        "embeddings.word_embeddings.weight",
        "transformer.layer.0.sa_layer_norm.weight",
        "transformer.layer.0.attention.q_lin.weight",
        "transformer.layer.0.output_layer_norm.weight",
        "transformer.layer.0.ffn.lin1.weight",
    ]
    config = {"model_type": "distilbert", "architectures": ["DistilBertForMaskedLM"]}
    with nneditor.open(_snapshot(tmp_path / "m", config, names)) as doc:
        (head,) = [n for n in doc.graph.nodes if n.op_type == "LMHead"]
        assert head.inputs[1:] == ("embeddings.word_embeddings.weight",)
        by_op = {n.op_type: n for n in doc.graph.nodes if n.name.startswith("/blk.0/")}
        # the block's norms and feed-forward are read as such, not as attention parts
        assert "transformer.layer.0.ffn.lin1.weight" in by_op["FeedForward"].inputs
        assert "transformer.layer.0.ffn.lin1.weight" not in by_op["Attention"].inputs
