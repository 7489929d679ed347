"""The graph of a CLIPModel or SiglipModel snapshot: its two towers side by side, as the
NumPy decoder runs them (decoder/clip_pair.py), for zero-shot image classification.

Each tower is drawn as it is when saved alone (CLIPVisionModelWithProjection or
SiglipVisionModel; CLIPTextModel's blocks), its values under ``vision.`` and ``text.``; the
text tower reads ``input_ids`` [prompts, seq], one row per prompt. Then::

    text.result_norm, input_ids -> text.pooler_output (the pooled position) -> text.text_embeds
    vision.<its end> -> image_embeds, text.text_embeds -> text_embeds      (each normalised)
    image_embeds, text_embeds, logit_scale [, logit_bias] -> logits_per_image [1, prompts]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from nneditor.model.graph import Graph, Node, ValueInfo
from nneditor.semantic.graph_builder import Builder
from nneditor.semantic.names_vision import PAIRS, split_pair

if TYPE_CHECKING:
    from nneditor.model.document import Document


@dataclasses.dataclass
class _Part:
    """The snapshot seen as one tower: that tower's tensors alone."""

    tensors: dict[str, Any]
    path: Any
    notes: list[str] = dataclasses.field(default_factory=list)


def pair_graph(
    doc: Document,
    config: Mapping[str, Any],
    tower_graph: Callable[[Any, Mapping[str, Any]], Graph | None],
) -> tuple[Graph | None, str]:
    """``tower_graph``: checkpoint_graphs.py's graph of one tower saved alone."""
    kind = str(config["model_type"])
    vision, text, extra = split_pair(kind, list(doc.tensors))
    vconfig = {**config["vision_config"], "model_type": f"{kind}_vision_model"}
    tconfig = {**config["text_config"], "model_type": "clip_text_model"}
    parts = []
    for names, sub in ((vision, vconfig), (text, tconfig)):
        part = _Part({n: doc.tensors[n] for n in names}, doc.path)
        g = tower_graph(part, sub)
        if g is None:
            return None, (
                f"NNEditor does not draw this {kind} snapshot ({PAIRS[kind]}): its "
                f"{'vision' if sub is vconfig else 'text'} tower's tensor names do not map "
                "onto the tower saved alone; the weights are listed by name and can be read"
            )
        parts.append(g)
    lacking = [n for n in extra if n not in doc.tensors]
    if lacking:
        return None, f"this {PAIRS[kind]} snapshot lacks {lacking[0]}; no graph is drawn"
    return _merged(doc, kind, parts[0], parts[1]), ""


def _merged(doc: Document, kind: str, vg: Graph, tg: Graph) -> Graph:
    b = Builder(f"{kind} ({PAIRS[kind]}: both towers, from config.json and tensor names)")
    stored = set(doc.tensors)
    pixels = vg.inputs[0]
    b.graph.inputs.append(pixels)
    b.graph.value_info[pixels.name] = pixels
    b.input("input_ids", ("prompts", "seq"), "int64")
    _copy(b.graph, vg, "vision", {pixels.name: pixels.name}, stored, batch=None)
    _copy(b.graph, tg, "text", {tg.inputs[0].name: "input_ids"}, stored, batch="prompts")
    width = int((tg.value_info[tg.outputs[0].name].shape or (0,))[-1] or 0)
    proj, bias = ("text_model.head.weight", "text_model.head.bias")
    if kind == "clip":
        proj, bias = "text_projection.weight", ""
    dim = int(doc.tensors[proj].shape[0])
    pooled = "the last position" if kind == "siglip" else "the first end-of-text token"
    b.node(
        "text/pool",
        "Gather",
        [f"text.{tg.outputs[0].name}", "input_ids"],
        "text.pooler_output",
        ("prompts", width),
        "pooling",
        f"Each prompt's final-norm output at {pooled} (from config.json).",
    )
    b.node(
        "text/proj",
        "MatMul" if not bias else "Gemm",
        ["text.pooler_output", proj, *([bias] if bias else [])],
        "text.text_embeds",
        ("prompts", dim),
        "projection",
        "The text tower's projection into the shared embedding space.",
    )
    for value, out, rows in (
        (f"vision.{vg.outputs[0].name}", "image_embeds", 1),
        ("text.text_embeds", "text_embeds", "prompts"),
    ):
        b.node(
            out,
            "LpNormalization",
            [value],
            out,
            (rows, dim),
            "normalization",
            "Divided by its Euclidean norm.",
        )
    scale = ["logit_scale", *(["logit_bias"] if kind == "siglip" else [])]
    said = " + logit_bias" if kind == "siglip" else ""
    b.node(
        "logits_per_image",
        "MatMul",
        ["image_embeds", "text_embeds", *scale],
        "logits_per_image",
        (1, "prompts"),
        "head",
        f"exp(logit_scale) * image_embeds @ text_embeds.T{said}: one logit per prompt.",
    )
    g = b.finish(doc, "logits_per_image")
    return g


def _copy(
    g: Graph,
    part: Graph,
    prefix: str,
    inputs: Mapping[str, str],
    stored: set[str],
    batch: str | None,
) -> None:
    """``part``'s nodes into ``g``, their values under ``prefix.`` (the stored tensors and the
    inputs renamed by ``inputs`` kept), the first dimension ``batch`` where given."""

    def name(v: str) -> str:
        if v in inputs:
            return inputs[v]
        return v if not v or v in stored else f"{prefix}.{v}"

    for node in part.nodes:
        g.nodes.append(
            Node(
                len(g.nodes),
                f"/{prefix}{node.name}",
                node.op_type,
                node.domain,
                tuple(map(name, node.inputs)),
                tuple(map(name, node.outputs)),
                attrs=dict(node.attributes),
                info=node.info,
            )
        )
        for out in node.outputs:
            info = part.value_info.get(out)
            if info is None or not out:
                continue
            shape = info.shape
            if batch and shape:
                shape = (batch, *shape[1:])
            g.value_info[name(out)] = ValueInfo(name(out), info.dtype, shape)
