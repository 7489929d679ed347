"""The text_config defaults NNEditor fills into multimodal releases' sparse configs
(checkpoint_names._TEXT_DEFAULTS) equal the defaults of transformers' composite config classes,
which transformers 4 left out when it saved them."""

from __future__ import annotations

import pytest

from nneditor.semantic.checkpoint_names import _TEXT_DEFAULTS, text_part

tf = pytest.importorskip("transformers")


@pytest.mark.parametrize("model_type", sorted(_TEXT_DEFAULTS))
def test_defaults_equal_transformers(model_type: str) -> None:
    theirs = tf.CONFIG_MAPPING[model_type]().text_config.to_dict()
    rope = theirs.get("rope_parameters") or {}
    if "full_attention" in rope:  # Gemma 3: a RoPE base per kind of layer
        theirs["rope_theta"] = rope["full_attention"]["rope_theta"]
        theirs["rope_local_base_freq"] = rope["sliding_attention"]["rope_theta"]
    elif rope:
        theirs["rope_theta"] = rope["rope_theta"]
    if "_sliding_window_pattern" in theirs:
        theirs["sliding_window_pattern"] = theirs["_sliding_window_pattern"]
    ours = _TEXT_DEFAULTS[model_type]
    assert {k: theirs.get(k) for k in ours} == ours


def test_stated_keys_win_and_the_text_model_is_renamed() -> None:
    config = {
        "model_type": "llava_next",
        "text_config": {"model_type": "mistral", "hidden_size": 64, "vocab_size": 100},
    }
    names = [
        "language_model.model.layers.0.self_attn.q_proj.weight",
        "language_model.lm_head.weight",
        "vision_tower.encoder.layers.0.mlp.fc1.weight",
    ]
    part, mapping = text_part(config, names)
    assert part["model_type"] == "mistral" and part["hidden_size"] == 64
    assert part["num_hidden_layers"] == 32 and part["rms_norm_eps"] == 1e-6  # LlamaConfig's
    assert mapping == {
        "model.layers.0.self_attn.q_proj.weight": names[0],
        "lm_head.weight": names[1],
    }
