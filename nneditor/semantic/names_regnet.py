"""RegNet image classifiers of Hugging Face snapshots (RegNetForImageClassification,
RegNetModel, as facebook/regnet-x-* and regnet-y-* ship them): their tensor names as the
synthesized graph (checkpoint_regnet.py) and the NumPy decoder (decoder/regnet.py) read them.

Blocks are numbered across the stages (``blk.{i}``), ``stages`` saying which stage each is in.
Keys: ``stem.conv`` / ``stem.bn`` (the 3x3 embedder); each block's ``conv1`` (1x1), ``conv2``
(the grouped 3x3), ``conv3`` (1x1), each with its BatchNorm ``bn{k}`` (``weight``, ``bias``,
``mean``, ``var``), the Y layer's squeeze-and-excitation ``se_reduce`` / ``se_expand`` (with
biases) and the projection shortcut ``short`` / ``short_bn`` where there is one; ``cls_out``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from nneditor.semantic.names_convnets import ConvNames

_BN = {"weight": "weight", "bias": "bias", "running_mean": "mean", "running_var": "var"}
_TOP = {
    "embedder.embedder.convolution.weight": "stem.conv.weight",
    **{f"embedder.embedder.normalization.{k}": f"stem.bn.{v}" for k, v in _BN.items()},
    "classifier.1.weight": "cls_out.weight",
    "classifier.1.bias": "cls_out.bias",
}
_BLOCK = re.compile(r"^encoder\.stages\.(\d+)\.layers\.(\d+)\.(.+)$")
_CONV = re.compile(r"^(?:layer\.(\d)|(shortcut))\.(?:convolution\.weight|normalization\.(\w+))$")
_SE = re.compile(r"^layer\.2\.attention\.([02])\.(weight|bias)$")


def regnet_names(names: Iterable[str]) -> ConvNames:
    """A RegNet's tensor names mapped to the keys above; an X layer's last convolution is
    its ``layer.2``, a Y layer's its ``layer.3`` (``layer.2`` being the SE)."""
    names = [n for n in names if not n.endswith("num_batches_tracked")]
    inner = [n.removeprefix("regnet.") for n in names]
    y_layers = any(_SE.match(m[3]) for n in inner if (m := _BLOCK.match(n)))
    mapped: dict[str, str] = {}
    unplaced: list[str] = []
    blocks: dict[tuple[int, int], dict[str, str]] = {}
    for name, rest in zip(names, inner, strict=True):
        if rest in _TOP:
            mapped[_TOP[rest]] = name
            continue
        m = _BLOCK.match(rest)
        key = _key(m[3], y_layers) if m else None
        if m is None or key is None:
            unplaced.append(name)
            continue
        blocks.setdefault((int(m[1]), int(m[2])), {})[key] = name
    order = sorted(blocks)
    for i, at in enumerate(order):
        mapped.update({f"blk.{i}.{key}": name for key, name in blocks[at].items()})
    return ConvNames(mapped, tuple(s for s, _ in order), tuple(unplaced))


def _key(rest: str, y_layers: bool) -> str | None:
    se = _SE.match(rest)
    if se:
        return f"se_{'reduce' if se[1] == '0' else 'expand'}.{se[2]}"
    m = _CONV.match(rest)
    if m is None:
        return None
    stat = _BN.get(m[3]) if m[3] else "weight"
    if stat is None:
        return None
    if m[2]:
        return f"short.{stat}" if m[3] is None else f"short_bn.{stat}"
    convs = {"0": 1, "1": 2, "3": 3} if y_layers else {"0": 1, "1": 2, "2": 3}
    k = convs.get(m[1])
    if k is None:
        return None
    return f"conv{k}.{stat}" if m[3] is None else f"bn{k}.{stat}"
