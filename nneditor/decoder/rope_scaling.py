"""RoPE scaling as checkpoints state it: linear, Llama 3's frequency bands, YaRN and LongRoPE
(Phi-3.5, Phi-4-mini), read from GGUF metadata (as llama.cpp's context sets them up) or
config.json (as transformers' rope utilities do); anything else is refused with a sentence."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from nneditor.decoder.unsupported import DecoderUnsupported


@dataclass(frozen=True)
class RopeScaling:
    kind: str = "none"  # none | linear | llama3 | yarn | longrope | dynamic
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_context: int = 8192
    #: YaRN: the rotations bounding the blend of interpolated and original frequencies, the
    #: blend's strength (llama.cpp's ext_factor), and the factor cos and sin are scaled by
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    ext_factor: float = 1.0
    attention: float = 1.0
    #: YaRN: the blend's bounds are rounded out to whole pairs (llama.cpp always; transformers
    #: unless the config says truncate: false, as gpt-oss does)
    truncate: bool = True
    #: LongRoPE's per-pair frequency divisors within and beyond the original context (a GGUF
    #: stores them as the tensors rope_factors_short/long.weight instead: empty here)
    short_factor: tuple[float, ...] = ()
    long_factor: tuple[float, ...] = ()

    def longrope_key(self, seq_len: int) -> str:
        """The GGUF tensor of LongRoPE factors a prompt of ``seq_len`` positions uses
        (transformers' choice: the long ones only past the original context; llama.cpp
        chooses by its context size instead, so one run with a context longer than the
        original uses the long factors even for a short prompt)."""
        long = seq_len > self.original_context
        return "rope_factors_long.weight" if long else "rope_factors_short.weight"


def dynamic_theta(scaling: RopeScaling, theta: float, dim: int, seq_len: int) -> float:
    """The RoPE base of dynamic NTK scaling (transformers' "dynamic", InternLM2's own code): the
    base itself within the original context, beyond it stretched for the prompt's length
    (llama.cpp does not implement it: a GGUF rotates with the base)."""
    if scaling.kind != "dynamic" or seq_len <= scaling.original_context or dim <= 2:
        return theta
    stretch = scaling.factor * seq_len / scaling.original_context - (scaling.factor - 1)
    return float(theta * stretch ** (dim / (dim - 2)))


def yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    """YaRN's magnitude correction for a context ``factor`` times the original."""
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def gguf_scaling(
    metadata: Mapping[str, Any], arch: str, names: Collection[str] = ()
) -> RopeScaling:
    factor_sets = {"rope_factors_short.weight", "rope_factors_long.weight"} & set(names)
    if factor_sets:  # LongRoPE (llama.cpp's Phi-3 and MiniCPM4 conversions; the latter state no
        key = f"{arch}.rope.scaling."  # original context: llama.cpp takes the trained one)
        original = int(
            metadata.get(key + "original_context_length")
            or metadata.get(f"{arch}.context_length")
            or 0
        )
        if not original or len(factor_sets) < 2:
            raise DecoderUnsupported(
                "this checkpoint extends its context with LongRoPE but lacks its short or long "
                "frequency factors or its original context length"
            )
        return RopeScaling(
            "longrope",
            original_context=original,
            attention=float(metadata.get(key + "attn_factor") or 1.0),
        )
    kind = str(metadata.get(f"{arch}.rope.scaling.type") or "none")
    factor = float(metadata.get(f"{arch}.rope.scaling.factor") or 1.0)
    if kind in ("none", "") or factor == 1.0:
        return RopeScaling()
    if kind == "linear":
        return RopeScaling("linear", factor)
    if kind == "yarn":  # as llama.cpp's context sets it up (llama-context.cpp)
        key = f"{arch}.rope.scaling."
        original = int(
            metadata.get(key + "original_context_length")
            or metadata.get(f"{arch}.context_length")
            or 0
        )
        if not original:
            raise DecoderUnsupported("YaRN scaling without the original context length")
        log_mul = float(metadata.get(key + "yarn_log_multiplier") or 0.0)
        attention = yarn_mscale(factor) / (yarn_mscale(factor, log_mul) if log_mul else 1.0)
        return RopeScaling(
            "yarn",
            factor,
            original_context=original,
            beta_fast=float(metadata.get(key + "yarn_beta_fast") or 32.0),
            beta_slow=float(metadata.get(key + "yarn_beta_slow") or 1.0),
            ext_factor=float(metadata.get(key + "yarn_ext_factor", 1.0)),
            attention=attention * float(metadata.get(key + "attn_factor") or 1.0),
        )
    raise DecoderUnsupported(
        f"RoPE scaling {kind!r} is not implemented in the NumPy decoder (linear, YaRN and Llama 3 "
        "frequency factors are)"
    )


def hf_rope(config: Mapping[str, Any]) -> dict[str, tuple[float, RopeScaling]]:
    """{"full": (theta, scaling), "local": (theta, scaling)} from rope_parameters (transformers
    5) or rope_theta/rope_scaling (earlier releases)."""
    params = config.get("rope_parameters")
    out: dict[str, tuple[float, RopeScaling]] = {}
    if isinstance(params, Mapping) and "full_attention" in params:
        for key, layer in (("full", "full_attention"), ("local", "sliding_attention")):
            p = params.get(layer) or {}
            out[key] = (float(p.get("rope_theta") or 10000.0), _hf_scaling(p, config))
        return out
    if isinstance(params, Mapping) and _ntk_alpha(params):
        out["full"] = (_ntk_alpha_theta(params, config), RopeScaling())
    elif isinstance(params, Mapping):
        theta = float(params.get("rope_theta") or config.get("rope_theta") or 10000.0)
        out["full"] = (theta, _hf_scaling(params, config))
    elif _ntk_alpha(config.get("rope_scaling") or {}):  # HunYuan's own configs
        out["full"] = (_ntk_alpha_theta(config["rope_scaling"], config), RopeScaling())
    else:
        theta = float(config.get("rope_theta") or 10000.0)
        out["full"] = (theta, _hf_scaling(config.get("rope_scaling") or {}, config))
    local = float(config.get("rope_local_base_freq") or 10000.0)
    out["local"] = (local, RopeScaling())
    return out


def _ntk_alpha(p: Mapping[str, Any]) -> bool:
    """HunYuan's "dynamic" RoPE with a fixed alpha: only the base is stretched."""
    return str(p.get("rope_type") or p.get("type") or "") == "dynamic" and bool(p.get("alpha"))


def _ntk_alpha_theta(p: Mapping[str, Any], config: Mapping[str, Any]) -> float:
    """``theta * alpha ** (d / (d - 2))`` over the head size ``d`` (transformers' ntk_alpha
    and llama.cpp's converter, which writes the result as freq_base)."""
    heads = int(config.get("num_attention_heads") or 1)
    dim = int(config.get("head_dim") or int(config.get("hidden_size") or 0) // heads)
    if dim <= 2:
        raise DecoderUnsupported("NTK-alpha RoPE needs the head size (head_dim), not stated")
    theta = float(p.get("rope_theta") or config.get("rope_theta") or 10000.0)
    return theta * float(p["alpha"]) ** (dim / (dim - 2))


def _hf_scaling(p: Mapping[str, Any], config: Mapping[str, Any]) -> RopeScaling:
    kind = str(p.get("rope_type") or p.get("type") or "default")
    if kind == "default":
        return RopeScaling()
    factor = float(p.get("factor") or 1.0)
    if kind == "linear":
        return RopeScaling("linear", factor)
    if kind == "yarn":  # transformers' _compute_yarn_parameters
        context = config.get("max_position_embeddings")
        original = int(p.get("original_max_position_embeddings") or context or 0)
        if not original:
            raise DecoderUnsupported("YaRN scaling without original_max_position_embeddings")
        if not p.get("factor"):
            factor = float(context or original) / original
        attention = p.get("attention_factor")
        if attention is None:
            mscale, all_dims = p.get("mscale"), p.get("mscale_all_dim")
            attention = (
                yarn_mscale(factor, mscale) / yarn_mscale(factor, all_dims)
                if mscale and all_dims
                else yarn_mscale(factor)
            )
        return RopeScaling(
            "yarn",
            factor,
            original_context=original,
            beta_fast=float(p.get("beta_fast") or 32.0),
            beta_slow=float(p.get("beta_slow") or 1.0),
            attention=float(attention),
            truncate=p.get("truncate") is not False,
        )
    if kind in ("longrope", "su"):  # transformers' longrope ("su": its former name)
        return _longrope(p, config)
    if kind == "dynamic":  # dynamic NTK (InternLM2's releases): see dynamic_theta
        context = p.get("original_max_position_embeddings") or config.get("max_position_embeddings")
        if not context:
            raise DecoderUnsupported("dynamic NTK scaling without max_position_embeddings")
        return RopeScaling("dynamic", factor, original_context=int(context))
    if kind == "llama3":
        return RopeScaling(
            "llama3",
            factor,
            float(p.get("low_freq_factor") or 1.0),
            float(p.get("high_freq_factor") or 4.0),
            int(p.get("original_max_position_embeddings") or 8192),
        )
    raise DecoderUnsupported(
        f"RoPE scaling {kind!r} is not implemented in the NumPy decoder (linear, llama3, yarn, "
        "longrope and dynamic are)"
    )


def _longrope(p: Mapping[str, Any], config: Mapping[str, Any]) -> RopeScaling:
    original = int(
        p.get("original_max_position_embeddings")
        or config.get("original_max_position_embeddings")
        or 0
    )
    short, long = p.get("short_factor"), p.get("long_factor")
    if not original or not short or not long:
        raise DecoderUnsupported(
            "LongRoPE needs short_factor, long_factor and original_max_position_embeddings"
        )
    factor = p.get("factor")
    if factor is None:  # Phi-3: the ratio of the context lengths
        factor = float(config.get("max_position_embeddings") or original) / original
    attention = p.get("attention_factor")
    if attention is None:
        attention = math.sqrt(1 + math.log(factor) / math.log(original)) if factor > 1.0 else 1.0
    return RopeScaling(
        "longrope",
        float(factor),
        original_context=original,
        attention=float(attention),
        short_factor=tuple(float(f) for f in short),
        long_factor=tuple(float(f) for f in long),
    )
