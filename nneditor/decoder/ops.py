"""The NumPy operations of a decoder-only transformer, in float32 like the references
(transformers' fp32 forward, llama.cpp's CPU graph). Activations are [seq, features]."""

from __future__ import annotations

import math

import numpy as np

from nneditor.decoder.rope_scaling import RopeScaling

F32 = np.float32


def rms_norm(x: np.ndarray, w: np.ndarray, eps: float, offset: float = 0.0) -> np.ndarray:
    var = np.mean(np.square(x, dtype=F32), axis=-1, keepdims=True)
    y = x * (1.0 / np.sqrt(var + F32(eps))).astype(F32)
    return (y * (w + F32(offset)) if offset else y * w).astype(F32, copy=False)


def layer_norm(
    x: np.ndarray, w: np.ndarray | None, b: np.ndarray | None, eps: float, offset: float = 0.0
) -> np.ndarray:
    """LayerNorm scaled by ``offset + w`` (Nemotron's LayerNorm1P: 1 + w); unscaled without
    ``w`` (OLMo's non-parametric LayerNorm)."""
    mean = np.mean(x, axis=-1, keepdims=True)
    centred = x - mean
    var = np.mean(np.square(centred), axis=-1, keepdims=True)
    y = centred / np.sqrt(var + F32(eps))
    if w is not None:
        y = y * (w + F32(offset) if offset else w)
    return (y + b if b is not None else y).astype(F32, copy=False)


def linear(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """``x @ w.T + b`` with ``w`` [out, in] as stored by llama.cpp and torch.nn.Linear."""
    y = x @ w.T
    return y + b if b is not None else y


def silu(x: np.ndarray) -> np.ndarray:
    return x / (F32(1.0) + np.exp(-x))


def sigmoid(x: np.ndarray) -> np.ndarray:
    return (F32(1.0) / (F32(1.0) + np.exp(-x))).astype(F32, copy=False)


def softplus(x: np.ndarray) -> np.ndarray:
    """log(1 + e^x) like torch's (linear above 20)."""
    return np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20)))).astype(F32)


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    c = F32(math.sqrt(2.0 / math.pi))
    return F32(0.5) * x * (F32(1.0) + np.tanh(c * (x + F32(0.044715) * x * x * x)))


def erf(x: np.ndarray) -> np.ndarray:
    """The error function in float64 (numpy has none; scipy is not a core dependency): the
    Abramowitz-Stegun 7.1.26 form, |error| < 1.5e-7, below float32 resolution at erf's scale."""
    z = np.abs(x.astype(np.float64))
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return np.sign(x) * (1.0 - poly * np.exp(-z * z))


def gelu(x: np.ndarray) -> np.ndarray:
    """GELU with the error function (torch's default, GPT-NeoX / Pythia)."""
    return (0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))).astype(F32)


def relu2(x: np.ndarray) -> np.ndarray:
    """ReLU squared (Arcee's feed-forward; transformers' ReLUSquaredActivation)."""
    r = np.maximum(x, F32(0))
    return (r * r).astype(F32)


def xielu(x: np.ndarray, alpha_p: float, alpha_n: float, beta: float, eps: float) -> np.ndarray:
    """Apertus' xIELU (transformers' XIELUActivation) from its stored parameters: the
    softplus of alpha_p scales x² for x > 0; below, beta + softplus(alpha_n) scales
    expm1(min(x, eps)) - x; beta x is added to both."""
    ap = F32(np.logaddexp(0.0, np.float32(alpha_p)))  # softplus
    an = F32(beta) + F32(np.logaddexp(0.0, np.float32(alpha_n)))
    b = F32(beta)
    neg = (np.expm1(np.minimum(x, F32(eps))) - x) * an + b * x
    return np.where(x > 0, ap * x * x + b * x, neg).astype(F32)


def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, F32(0)).astype(F32)


def quick_gelu(x: np.ndarray) -> np.ndarray:
    """CLIP's QuickGELU: x * sigmoid(1.702 x)."""
    return (x * sigmoid(x * F32(1.702))).astype(F32)


ACTIVATIONS = {
    "silu": silu,
    "gelu_tanh": gelu_tanh,
    "gelu": gelu,
    "relu2": relu2,
    "relu": relu,
    "quick_gelu": quick_gelu,
}


def inv_freq(
    dim: int, theta: float, scaling: RopeScaling, factors: np.ndarray | None = None
) -> np.ndarray:
    """Per-pair rotation frequencies, float32 like transformers' rotary embedding."""
    base = 1.0 / (theta ** (np.arange(0, dim, 2, dtype=np.int64).astype(F32) / F32(dim)))
    freq = base.astype(F32)
    if factors is not None:  # llama.cpp's rope_freqs.weight (Llama 3.1+): divide per pair
        freq = (freq / factors.astype(F32)[: freq.size]).astype(F32)
    if scaling.kind == "linear":
        freq = (freq / F32(scaling.factor)).astype(F32)
    elif scaling.kind == "llama3" and factors is None:
        low = scaling.original_context / scaling.low_freq_factor
        high = scaling.original_context / scaling.high_freq_factor
        wavelen = 2 * math.pi / freq
        scaled = np.where(wavelen > low, freq / scaling.factor, freq)
        smooth = (scaling.original_context / wavelen - scaling.low_freq_factor) / (
            scaling.high_freq_factor - scaling.low_freq_factor
        )
        smoothed = (1 - smooth) * scaled / scaling.factor + smooth * scaled
        medium = ~(wavelen < high) & ~(wavelen > low)
        freq = np.where(medium, smoothed, scaled).astype(F32)
    elif scaling.kind == "yarn":  # blend original and interpolated frequencies per pair
        pairs = freq.size

        def bound(rotations: float) -> float:
            turns = scaling.original_context / (rotations * 2 * math.pi)
            return dim * math.log(turns) / (2 * math.log(theta))

        low, high = bound(scaling.beta_fast), bound(scaling.beta_slow)
        if scaling.truncate:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        ramp = np.clip((np.arange(pairs, dtype=F32) - low) / max(high - low, 0.001), 0, 1)
        keep = (1 - ramp) * F32(scaling.ext_factor)  # the original frequency's share
        freq = ((freq / F32(scaling.factor)) * (1 - keep) + freq * keep).astype(F32)
    return freq


def rope(
    x: np.ndarray, positions: np.ndarray, freq: np.ndarray, mode: str, scale: float = 1.0
) -> np.ndarray:
    """Rotate the first ``2 * len(freq)`` features of every head of ``x`` [seq, heads, dim].

    "neox" rotates the two halves (transformers' rotate_half); "normal" rotates adjacent
    pairs (ggml's default RoPE, which llama.cpp pairs with permuted Llama weights). ``scale``
    multiplies cos and sin (YaRN's attention factor)."""
    angles = positions.astype(F32)[:, None] * freq[None, :]  # [seq, dim/2]
    cos = np.cos(angles)[:, None, :]
    sin = np.sin(angles)[:, None, :]
    if scale != 1.0:
        cos, sin = cos * F32(scale), sin * F32(scale)
    n = freq.size * 2
    rot, rest = x[..., :n], x[..., n:]
    if mode == "neox":
        a, b = rot[..., : n // 2], rot[..., n // 2 :]
        out = np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
    else:
        a, b = rot[..., 0::2], rot[..., 1::2]
        out = np.empty_like(rot)
        out[..., 0::2] = a * cos - b * sin
        out[..., 1::2] = a * sin + b * cos
    return np.concatenate([out, rest], axis=-1) if rest.shape[-1] else out


def alibi_slopes(heads: int, max_bias: float) -> np.ndarray:
    """ALiBi's per-head slopes (Press et al.; as BLOOM and llama.cpp compute them): for the
    largest power of two n <= heads, 2^(-max_bias/n)^(h+1) for h < n, then the odd powers of
    2^(-max_bias/2n) for the remaining heads."""
    n = 1 << (heads.bit_length() - 1)
    m0, m1 = 2.0 ** (-max_bias / n), 2.0 ** (-max_bias / 2 / n)
    return np.array(
        [m0 ** (h + 1) if h < n else m1 ** (2 * (h - n) + 1) for h in range(heads)], F32
    )


def attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    scale: float,
    window: int = 0,
    softcap: float = 0.0,
    sinks: np.ndarray | None = None,
    causal: bool = True,
    alibi: np.ndarray | None = None,
    chunk: int = 0,
    bias: np.ndarray | None = None,
) -> np.ndarray:
    """Causal (optionally sliding-window; bidirectional for an encoder) grouped-query attention; ``softcap`` bounds the
    scores by ``tanh(s / cap) * cap`` (Gemma 2); ``sinks`` [heads] are logits that join each
    head's softmax without a value (gpt-oss), so the weights may sum to less than 1; ``alibi``
    [heads] are ALiBi slopes (BLOOM); with ``chunk`` a position sees only its own aligned
    chunk of that many positions (Llama 4's chunked attention); ``bias`` [heads, seq, seq] is
    added to the scores (T5's relative-position bias).

    ``q`` [seq, heads, d], ``k``/``v`` [seq, kv_heads, d] -> [seq, heads * d]."""
    seq, heads, d = q.shape
    kv = k.shape[1]
    group = heads // kv
    qh = q.transpose(1, 0, 2).reshape(kv, group * seq, d)  # heads of one kv group together
    scores = (qh @ k.transpose(1, 2, 0)).reshape(kv, group, seq, seq) * F32(scale)
    if softcap:
        scores = (np.tanh(scores / F32(softcap)) * F32(softcap)).astype(F32)
    if bias is not None:
        scores += bias.reshape(kv, group, seq, seq).astype(F32)
    if alibi is not None:  # [heads] slopes times the key's position (the softmax ignores the
        # query's own shift, so this equals the slope times the distance)
        scores += alibi.reshape(kv, group, 1, 1) * np.arange(seq, dtype=F32)
    i = np.arange(seq)[:, None]
    j = np.arange(seq)[None, :]
    masked = j > i if causal else np.zeros((seq, seq), bool)
    if window and causal:
        masked |= (i - j) >= window
    elif window:  # an encoder's window reaches half its width each way (EmbeddingGemma)
        masked |= np.abs(i - j) > window // 2
    if chunk:
        masked |= (i // chunk) != (j // chunk)
    scores = np.where(masked, F32(-np.inf), scores)
    if sinks is None:
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
    else:
        sink = sinks.astype(F32).reshape(kv, group, 1, 1)
        top = np.maximum(scores.max(axis=-1, keepdims=True), sink)
        scores -= top
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True) + np.exp(sink - top)
    out = scores.reshape(kv, group * seq, seq) @ v.transpose(1, 0, 2)  # [kv, group*seq, dv]
    dv = v.shape[-1]  # MLA's values are narrower than its queries and keys
    return out.reshape(heads, seq, dv).transpose(1, 0, 2).reshape(seq, heads * dv).astype(F32)


def sinusoids(positions: np.ndarray, dim: int) -> np.ndarray:
    """Marian's fixed position embeddings at ``positions``: [len, dim], the sines of every
    even-indexed frequency in the first half, the cosines of the odd ones in the second
    (transformers' MarianSinusoidalPositionalEmbedding, computed in float64 as it is)."""
    j = np.arange(dim)
    angle = np.asarray(positions, np.float64)[:, None] / np.power(10000.0, 2 * (j // 2) / dim)
    half = (dim + 1) // 2
    out = np.empty((angle.shape[0], dim), np.float64)
    out[:, :half] = np.sin(angle[:, 0::2])
    out[:, half:] = np.cos(angle[:, 1::2])
    return out.astype(F32)


def fairseq_sinusoids(positions: np.ndarray, dim: int, padding: int) -> np.ndarray:
    """M2M100's and NLLB's fixed position embeddings (fairseq's) at ``positions``: [len, dim],
    the sines of half the frequencies then their cosines, computed in float32 as
    transformers does; the padding position's row is zero."""
    half = dim // 2
    step = F32(math.log(10000) / (half - 1))
    freq = np.exp(np.arange(half, dtype=F32) * -step).astype(F32)
    angle = np.asarray(positions).astype(F32)[:, None] * freq[None, :]
    out = np.zeros((angle.shape[0], dim), F32)
    out[:, :half] = np.sin(angle)
    out[:, half : 2 * half] = np.cos(angle)
    out[np.asarray(positions) == padding] = 0.0
    return out
