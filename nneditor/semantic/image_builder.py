"""What the image-model graph builders share (convolutional families in checkpoint_convnets.py,
Swin in checkpoint_swin.py): the tensor names of a staged network, and a CheckpointBuilder
whose every value carries its shape."""

from __future__ import annotations

from dataclasses import dataclass

from nneditor.model.document import Document
from nneditor.model.graph import Graph, ValueInfo
from nneditor.semantic.checkpoint_builder import CheckpointBuilder

Shape = tuple[int, ...]
#: how every node of these graphs was found
FROM = "(from config.json and tensor names)"


@dataclass(frozen=True)
class StagedNames:
    """``names``: key -> the snapshot's tensor name; ``stages``: each block's stage, in block
    order; ``unplaced``: tensors with no place (a head or layout not laid out here)."""

    names: dict[str, str]
    stages: tuple[int, ...]
    unplaced: tuple[str, ...]

    def depths(self) -> list[int]:
        """Blocks per stage, as the names number them."""
        count = max(self.stages, default=-1) + 1
        return [self.stages.count(s) for s in range(count)]


class ShapedBuilder(CheckpointBuilder):
    """CheckpointBuilder's nodes with each value's shape (NCHW, channels-last or tokens)."""

    def __init__(self, title: str, found: StagedNames, doc: Document) -> None:
        super().__init__(title)
        self.t = found.names
        self.stages = found.stages
        self.shapes: dict[str, ValueInfo] = {}
        self._doc = doc

    def input(self, shape: Shape) -> None:
        vi = ValueInfo("pixel_values", "float32", shape)
        self.graph.inputs.append(vi)
        self.shapes["pixel_values"] = vi

    def width(self, key: str) -> int:
        """The first dimension of the tensor stored under ``key`` (0 when there is none)."""
        ref = self._doc.tensors.get(self.t.get(key, ""))
        return int(ref.shape[0]) if ref is not None and ref.shape else 0

    def add(
        self, scope: str, op: str, x: list[str], out: str, keys: list[str], shape: Shape, *text: str
    ) -> str:
        """A node whose weights are ``keys`` (those stored), its output ``out`` of ``shape``;
        ``text``: the pattern and the explanation."""
        pattern, explanation = text if len(text) == 2 else ("", text[0])
        weights = [self.t[k] for k in keys if k in self.t]
        self.node(scope, op, x, out, weights, pattern or "", explanation)
        node = self.graph.nodes[-1]
        if not pattern:  # (no declared role: the explanation is still shown)
            node.info = {"pattern": "", "explanation": explanation}
        self.shapes[out] = ValueInfo(out, "float32", shape)
        return out

    def classifier(self, x: str) -> str:
        """The linear head to the class logits where stored (``x`` itself otherwise)."""
        if "cls_out.weight" not in self.t:
            return x
        labels = self.width("cls_out.weight")
        return self.add(
            "classifier",
            "Linear",
            [x],
            "result_output",
            ["cls_out.weight", "cls_out.bias"],
            (1, 1, labels),
            "head",
            f"The classifier: a linear layer to {labels} class logits {FROM}.",
        )

    def shaped_graph(self, x: str) -> Graph:
        """The finished graph ending at ``x``: every value with its shape, every stored
        tensor listed (the unplaced ones too)."""
        g = self.finish()
        g.opsets = {}
        g.value_info.update(self.shapes)
        g.outputs[0] = self.shapes[x]
        g.initializers.extend(n for n in self._doc.tensors if n not in set(g.initializers))
        return g
