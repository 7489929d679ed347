"""YaRN's frequencies against transformers' own rope initialisation: with rounded blend bounds
(the default, and llama.cpp's rule) and with gpt-oss's ``truncate: false``, which keeps them
exact. At a dozen positions the two differ by ~1e-5 in the logits, below the forward tests'
tolerance, so the frequencies themselves are compared here."""

from __future__ import annotations

import numpy as np
import pytest

from nneditor.decoder import ops
from nneditor.decoder.rope_scaling import hf_rope

tf = pytest.importorskip("transformers")
pytest.importorskip("torch")


def _theirs(config: object) -> tuple[np.ndarray, float]:
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    inv_freq, attention = ROPE_INIT_FUNCTIONS["yarn"](config, "cpu")
    return inv_freq.numpy(), float(attention)


@pytest.mark.parametrize("truncate", [False, True])
def test_yarn_frequencies_equal_transformers(truncate: bool) -> None:
    config = tf.GptOssConfig(head_dim=64, num_attention_heads=8, hidden_size=512)
    config.rope_parameters = {**config.rope_parameters, "truncate": truncate}
    want, attention = _theirs(config)
    theta, scaling = hf_rope(config.to_dict())["full"]
    assert scaling.kind == "yarn" and scaling.truncate is truncate
    ours = ops.inv_freq(64, theta, scaling)
    np.testing.assert_allclose(ours, want, rtol=1e-6)
    assert scaling.attention == pytest.approx(attention)
    other = ops.inv_freq(64, theta, type(scaling)(**{**scaling.__dict__, "truncate": not truncate}))
    assert np.abs(other - want).max() / want.max() > 1e-4  # the rounding matters
