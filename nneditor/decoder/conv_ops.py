"""Convolutional networks' operations in NumPy, for one image [channels, height, width]
(float32): convolution (im2col and one matrix product; depthwise as a sum of shifted
images), BatchNorm with running statistics, max pooling, LayerNorm over the channels."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from nneditor.decoder import ops

F32 = np.float32


def conv2d(
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray | None = None,
    stride: int = 1,
    pad: int = 0,
    groups: int = 1,
) -> np.ndarray:
    """``x`` [C, H, W] convolved with ``weight`` [O, C / groups, kh, kw] as torch's Conv2d
    (zero padding ``pad`` on every side, no dilation): [O, H', W']."""
    channels = x.shape[0]
    out, per_group, kh, kw = weight.shape
    if per_group * groups != channels:
        raise ValueError(f"a {list(weight.shape)} kernel in {groups} groups reads {channels}")
    if pad:
        x = np.pad(x, ((0, 0), (pad, pad), (pad, pad)))
    if groups == channels == out and per_group == 1 and stride == 1:
        return _depthwise(x, weight[:, 0], bias)
    win = sliding_window_view(x, (kh, kw), axis=(1, 2))[:, ::stride, ::stride]
    rows, cols = win.shape[1:3]
    # [groups, positions, C / groups * kh * kw] @ [groups, C / groups * kh * kw, O / groups]
    patches = win.reshape(groups, per_group, rows, cols, kh, kw).transpose(0, 2, 3, 1, 4, 5)
    patches = np.ascontiguousarray(patches.reshape(groups, rows * cols, -1), dtype=F32)
    kernel = weight.reshape(groups, out // groups, -1).transpose(0, 2, 1)
    y = (patches @ kernel).transpose(0, 2, 1).reshape(out, rows, cols)
    return (y + bias[:, None, None] if bias is not None else y).astype(F32, copy=False)


def _depthwise(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """One ``weight`` [C, kh, kw] filter per channel of the padded ``x``, stride 1."""
    kh, kw = weight.shape[1:]
    rows, cols = x.shape[1] - kh + 1, x.shape[2] - kw + 1
    y = np.zeros((x.shape[0], rows, cols), F32)
    for i in range(kh):
        for j in range(kw):
            y += x[:, i : i + rows, j : j + cols] * weight[:, i, j, None, None]
    return y + bias[:, None, None] if bias is not None else y


def batch_norm(
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    mean: np.ndarray,
    var: np.ndarray,
    eps: float,
) -> np.ndarray:
    """BatchNorm2d in eval mode: each channel of ``x`` [C, H, W] normalised by its running
    ``mean`` and ``var``, then scaled and shifted."""
    scale = (weight / np.sqrt(var + F32(eps))).astype(F32)
    shift = (bias - mean * scale).astype(F32)
    return (x * scale[:, None, None] + shift[:, None, None]).astype(F32)


def max_pool(x: np.ndarray, kernel: int, stride: int, pad: int) -> np.ndarray:
    """MaxPool2d of ``x`` [C, H, W]; the padding never wins."""
    if pad:
        x = np.pad(x, ((0, 0), (pad, pad), (pad, pad)), constant_values=-np.inf)
    win = sliding_window_view(x, (kernel, kernel), axis=(1, 2))[:, ::stride, ::stride]
    return win.max(axis=(3, 4)).astype(F32)


def channel_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """LayerNorm over the channels of ``x`` [C, H, W] at each pixel (ConvNeXt's
    channels_first LayerNorm)."""
    y = ops.layer_norm(x.transpose(1, 2, 0), weight, bias, eps)
    return np.ascontiguousarray(y.transpose(2, 0, 1))


def conv1d(
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray | None = None,
    stride: int = 1,
    pad: int = 0,
    groups: int = 1,
) -> np.ndarray:
    """``x`` [C, T] convolved with ``weight`` [O, C / groups, k] as torch's Conv1d (zero
    padding ``pad`` at both ends, no dilation): [O, T']."""
    channels = x.shape[0]
    out, per_group, k = weight.shape
    if per_group * groups != channels:
        raise ValueError(f"a {list(weight.shape)} kernel in {groups} groups reads {channels}")
    if pad:
        x = np.pad(x, ((0, 0), (pad, pad)))
    win = sliding_window_view(x, k, axis=1)[:, ::stride]  # [C, T', k]
    steps = win.shape[1]
    # [groups, T', C / groups * k] @ [groups, C / groups * k, O / groups]
    patches = win.reshape(groups, per_group, steps, k).transpose(0, 2, 1, 3)
    patches = np.ascontiguousarray(patches.reshape(groups, steps, -1), dtype=F32)
    kernel = weight.reshape(groups, out // groups, -1).transpose(0, 2, 1)
    y = (patches @ kernel).transpose(0, 2, 1).reshape(out, steps)
    return (y + bias[:, None] if bias is not None else y).astype(F32, copy=False)


def group_norm_per_channel(
    x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float
) -> np.ndarray:
    """GroupNorm of ``x`` [C, T] with one group per channel: each channel normalised over
    time (its biased variance), then scaled and shifted."""
    mean = x.mean(axis=1, keepdims=True, dtype=np.float64)
    var = np.square(x - mean).mean(axis=1, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps)
    return (y * weight[:, None] + bias[:, None]).astype(F32)


def same_pad(x: np.ndarray, kernel: int, stride: int) -> np.ndarray:
    """``x`` [C, H, W] zero-padded as TensorFlow's "SAME" convolutions pad it: ``kernel`` -
    ``stride`` rows and columns in all (``kernel`` - the remainder where ``stride`` does not
    divide the side), the odd one after (below, right), so that the output has ceil(side /
    stride) pixels."""

    def split(n: int) -> tuple[int, int]:
        total = max(kernel - (stride if n % stride == 0 else n % stride), 0)
        return total // 2, total - total // 2

    rows, cols = split(x.shape[1]), split(x.shape[2])
    if rows == cols == (0, 0):
        return x
    return np.pad(x, ((0, 0), rows, cols))
