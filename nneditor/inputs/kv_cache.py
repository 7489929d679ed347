"""Consistent extents for a decoder exported with a key/value cache (optimum, transformers.js,
onnxruntime-genai: ``past_key_values.N.key`` [batch, heads, past_sequence_length, head_dim]).

Such a model's attention mask covers the cached positions and the new ones, so its length must
be the past length plus the tokens' length. Filling every open extent with 1 gives a cache of
one random position and a mask one position short: ONNX Runtime fails on the shape, or a
broadcast hides it. The automatic set is the first step of generation instead: an empty cache
(past length 0) and a mask as long as the tokens. A merged decoder's ``use_cache_branch``
flag is then false. Extents the user sets by name are kept, and the mask follows them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nneditor.model.graph import ValueInfo

#: a self-attention cache input (cross-attention caches hold the encoder's length, not a past)
_PAST = re.compile(r"(^|[._/])past(_key_values?)?([._]\d+)?([._](decoder|self))?[._](key|value)$")
_CROSS = re.compile(r"encoder|cross", re.IGNORECASE)
_MASK = re.compile(r"(^|[_./:])attention_mask$", re.IGNORECASE)
_TOKENS = re.compile(r"(^|[_./:])(input_ids|inputs_embeds)$", re.IGNORECASE)
CACHE_FLAG = "use_cache_branch"

Implied = dict[str, dict[int, tuple[int, str]]]  # input -> axis -> (extent, what it is)


def cache_extents(
    inputs: Sequence[ValueInfo],
    dims: Mapping[str, int],
    shapes: Mapping[str, tuple[int, ...]] | None = None,
) -> Implied:
    """Extents implied by a key/value cache: each past input's open sequence axis, and the
    attention mask's open length; empty when the model has no such cache."""
    out: Implied = {}
    past_len = None
    for vi in inputs:
        shape = vi.shape or ()
        if not _PAST.search(vi.name) or _CROSS.search(vi.name) or len(shape) < 3:
            continue
        axis = len(shape) - 2  # [batch, heads, past, head_dim] (and GPT-2's [2, ...] pairs)
        sym = shape[axis]
        if not isinstance(sym, str) or not sym:
            continue
        if sym in dims:
            past_len = int(dims[sym])
            continue
        past_len = 0 if past_len is None else past_len
        out.setdefault(vi.name, {})[axis] = (
            0,
            "length of an empty key/value cache (the first step of generation)",
        )
    if past_len is None:
        return {}
    seq = _token_length(inputs, dims, shapes or {})
    token_syms = _token_symbols(inputs)
    for vi in inputs:
        shape = vi.shape or ()
        if not _MASK.search(vi.name) or not shape:
            continue
        sym = shape[-1]
        if isinstance(sym, str) and sym and sym not in dims and sym not in token_syms:
            out.setdefault(vi.name, {})[len(shape) - 1] = (
                seq + past_len,
                f"tokens' length ({seq}) plus the cached length ({past_len})",
            )
    return out


def _token_symbols(inputs: Sequence[ValueInfo]) -> set[str]:
    return {
        d
        for vi in inputs
        if _TOKENS.search(vi.name)
        for d in (vi.shape or ())[1:2]
        if isinstance(d, str)
    }


def _token_length(
    inputs: Sequence[ValueInfo], dims: Mapping[str, int], shapes: Mapping[str, tuple[int, ...]]
) -> int:
    """The tokens' length as the automatic set will make it (declared, set, or 1)."""
    for vi in inputs:
        shape = vi.shape or ()
        if _TOKENS.search(vi.name) and len(shapes.get(vi.name, ())) >= 2:
            return int(shapes[vi.name][1])
        if _TOKENS.search(vi.name) and len(shape) >= 2:
            d = shape[1]
            if isinstance(d, int) and d >= 0:
                return d
            if isinstance(d, str) and d in dims:
                return int(dims[d])
            return 1
    return 1
