"""Shared by the zoo's writers: tiny random models with no weight left at a value that would
hide it."""

from __future__ import annotations

import re
from typing import Any

#: norms (LayerNorm, layer_norm, GPT's ln_1/ln_f) and biases start at ones and zeros: a weight
#: the code under test left out would change nothing
_NEUTRAL = re.compile(r"norm|(^|\.)ln_|bias$", re.IGNORECASE)


def perturbed(model: Any) -> Any:  # noqa: ANN401
    """``model`` with every norm weight and bias moved off its neutral value (seeded by the
    caller's torch.manual_seed)."""
    import torch

    with torch.no_grad():
        for name, p in model.named_parameters():
            if _NEUTRAL.search(name):
                p.add_(torch.randn_like(p) * 0.1)
    return model
