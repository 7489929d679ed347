"""Near-copies of families the NumPy decoder runs that it does not run yet: each refused with
what differs and what runs instead, not the generic sentence."""

from __future__ import annotations

import pytest

from nneditor.decoder.config_hf import hf_common
from nneditor.decoder.unsupported import DecoderUnsupported


@pytest.mark.parametrize(
    ("model_type", "says"),
    [
        ("bitnet", "attn_sub_norm, ffn_sub_norm"),
        ("led", "sliding window (attention_window) plus global tokens"),
        ("fsmt", "separate source and target vocabularies"),
    ],
)
def test_near_copies_are_refused_by_name(model_type: str, says: str) -> None:
    with pytest.raises(DecoderUnsupported, match=r"\bruns?$") as err:
        hf_common({"model_type": model_type, "hidden_size": 32}, [])
    assert says in str(err.value) and "text model families" not in str(err.value)
