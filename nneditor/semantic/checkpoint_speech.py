"""Graphs of CTC speech recognizers in Hugging Face snapshots (wav2vec2, HuBERT), synthesized
from config.json and the tensor names (names_speech.py), as transformers' modules run them; the
NumPy decoder (decoder/speech.py) publishes every value drawn here:

    input_values [1, samples] → conv.{i} (the feature encoder's 1-D convolutions, [1, C, T])
      → feat_norm (the projection's LayerNorm: extract_features) → feat_proj
      → pos_conv (the grouped, weight-normed positional convolution) → inp_embd_pos (added)
      → inp_norm (post-norm layout) → blk.{i}.* (encoder layers) → enc_output (stable layout)
      → result_output (lm_head: CTC logits [1, frames, vocab])

Lengths are symbolic: ``samples`` of audio make ``frames_{i}`` after convolution i and
``frames`` after the last (the encoder's sequence). WavLM is refused by name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from nneditor.model.document import Document
from nneditor.model.graph import Graph, ValueInfo
from nneditor.semantic.checkpoint_builder import CheckpointBuilder
from nneditor.semantic.names_speech import (
    OTHER_SPEECH_FAMILIES,
    SPEECH_FAMILIES,
    layout_problem,
    speech_names,
)

_FROM = "(from config.json and tensor names)"


def is_speech(config: Mapping[str, Any]) -> bool:
    kind = str(config.get("model_type") or "")
    return kind in SPEECH_FAMILIES or kind in OTHER_SPEECH_FAMILIES


def refusal(kind: str) -> str:
    """The sentence for a speech family that is refused by name (WavLM)."""
    name, why = OTHER_SPEECH_FAMILIES[kind]
    return (
        f"NNEditor does not draw or trace {name} ({kind}) snapshots: {why}; it draws and traces "
        "wav2vec2 and HuBERT CTC speech recognizers (Wav2Vec2ForCTC, HubertForCTC); the "
        "weights are listed by name and can be read"
    )


def speech_graph(doc: Document, config: Mapping[str, Any]) -> tuple[Graph | None, str]:
    """The graph of a wav2vec2 or HuBERT snapshot, or (None, the reason)."""
    kind = str(config.get("model_type") or "")
    if kind in OTHER_SPEECH_FAMILIES:
        return None, refusal(kind)
    stable = bool(config.get("do_stable_layer_norm"))
    found = speech_names(kind, doc.tensors.keys(), stable)
    problem = layout_problem(config, found)
    family = SPEECH_FAMILIES[kind]
    if problem:
        return None, (
            f"NNEditor does not draw this {family} snapshot: {problem}; its weights are "
            "listed by name"
        )
    classes = ", ".join(str(c) for c in config.get("architectures") or []) or family

    def rows(name: str) -> int | None:
        ref = doc.tensors.get(name)
        return int(ref.shape[0]) if ref is not None and ref.shape else None

    b = _SpeechBuilder(
        f"{family} speech recognizer ({classes}), synthesized from config.json and tensor names",
        rows,
    )
    b.t = found.names
    hidden = int(config.get("hidden_size") or 768)
    x = b.feature_encoder(config)
    x = b.projection(x, hidden)
    x = b.positions(config, x, hidden, stable)
    heads = int(config.get("num_attention_heads") or 12)
    for i in range(found.layers):
        t = {k.split(".", 2)[2]: n for k, n in found.names.items() if k.startswith(f"blk.{i}.")}
        x = b.decoder_block(i, t, x, kind, heads, heads)
    if stable:
        x = b.layer_norm(
            "enc_norm",
            x,
            "enc_output",
            found.names,
            "The encoder's LayerNorm after its last layer (the stable layout's final norm): "
            "the last hidden state.",
        )
    if "ctc_out.weight" in found.names:
        vocab = b.rows(found.names["ctc_out.weight"]) or int(config.get("vocab_size") or 0)
        b.node(
            "lm_head",
            "Linear",
            [x],
            "result_output",
            [found.names["ctc_out.weight"], found.names.get("ctc_out.bias", "")],
            "head",
            f"The CTC head (lm_head): a linear layer from each frame to {vocab} character "
            f"logits; greedy decoding reads the best one per frame {_FROM}.",
        )
        b.shapes["result_output"] = ("frames", vocab)
    g = b.finish()
    g.opsets = {}
    for node in g.nodes:
        for out in node.outputs:
            shape = b.shapes.get(out, ("frames", hidden))
            g.value_info[out] = ValueInfo(out, "float32", (1, *shape))
    g.outputs[0] = g.value_info[g.outputs[0].name]
    g.initializers.extend(n for n in doc.tensors if n not in set(g.initializers))
    return g, ""


class _SpeechBuilder(CheckpointBuilder):
    """CheckpointBuilder's nodes, with the front's shapes (``shapes``: value -> its shape
    after the batch)."""

    def __init__(self, title: str, rows: Callable[[str], int | None]) -> None:
        super().__init__(title, rows)
        self.t: dict[str, str] = {}
        self.shapes: dict[str, tuple[int | str, ...]] = {}

    def _rows_of(self, key: str) -> int:
        return self.rows(self.t.get(key, "")) or 0

    def feature_encoder(self, config: Mapping[str, Any]) -> str:
        self.graph.inputs.append(ValueInfo("input_values", "float32", (1, "samples")))
        dims = [int(d) for d in config["conv_dim"]]
        kernels = [int(k) for k in config["conv_kernel"]]
        strides = [int(s) for s in config["conv_stride"]]
        act = str(config.get("feat_extract_activation") or "gelu").upper()
        norm = config.get("feat_extract_norm", "group")
        x = "input_values"
        for i, (ch, k, s) in enumerate(zip(dims, kernels, strides, strict=True)):
            last = i == len(dims) - 1
            if norm == "layer":
                how = "LayerNorm over the channels at each step (eps 1e-5)"
            elif i == 0:
                how = "GroupNorm with one group per channel (each channel normalised over time)"
            else:
                how = "no norm"
            keys = [f"conv.{i}.weight", f"conv.{i}.bias", f"conv.{i}.norm.weight"]
            keys.append(f"conv.{i}.norm.bias")
            x = self.node(
                f"feature_encoder/conv.{i}",
                "Conv1dNormGELU" if how != "no norm" else "Conv1dGELU",
                [x],
                f"conv.{i}",
                [self.t.get(key, "") for key in keys],
                "conv",
                f"Feature encoder layer {i}: a 1-D convolution, kernel {k}, stride {s}, "
                f"to {ch} channels"
                + (", with a bias" if f"conv.{i}.bias" in self.t else ", no bias")
                + f"; {how}; {act} {_FROM}."
                + (" Its output, transposed, is the encoder's features." if last else ""),
            )
            self.shapes[x] = (ch, "frames" if last else f"frames_{i}")
        return x

    def projection(self, x: str, hidden: int) -> str:
        width = self._rows_of("proj_norm.weight")
        if "proj_norm.weight" in self.t:
            x = self.layer_norm(
                "feature_projection/proj_norm",
                x,
                "feat_norm",
                self.t,
                "The feature projection's LayerNorm over each frame's channels (the "
                "extract_features output) (from tensor names).",
            )
            self.shapes[x] = ("frames", width)
        return self.node(
            "feature_projection/proj",
            "Linear",
            [x],
            "feat_proj",
            [self.t["proj.weight"], self.t.get("proj.bias", "")],
            "embedding",
            f"The feature projection: a linear layer from each frame's features to the hidden "
            f"size {hidden} {_FROM}.",
        )

    def positions(self, config: Mapping[str, Any], x: str, hidden: int, stable: bool) -> str:
        k = int(config.get("num_conv_pos_embeddings") or 128)
        groups = int(config.get("num_conv_pos_embedding_groups") or 16)
        normed = "pos_conv.weight_g" in self.t
        keys = ["pos_conv.weight_g", "pos_conv.weight_v", "pos_conv.weight", "pos_conv.bias"]
        pos = self.node(
            "encoder/pos_conv",
            "GroupedConv1dGELU",
            [x],
            "pos_conv",
            [self.t.get(key, "") for key in keys],
            "embedding",
            f"Positional convolution: a 1-D convolution over the frames, kernel {k} in "
            f"{groups} groups, padding {k // 2}"
            + (", its last frame dropped (an even kernel)" if k % 2 == 0 else "")
            + (
                "; its weight is weight-normed (weight_g times weight_v over weight_v's norm "
                "per kernel position)"
                if normed
                else ""
            )
            + f"; GELU {_FROM}.",
        )
        x = self.node(
            "encoder/pos_add",
            "Add",
            [x, pos],
            "inp_embd_pos",
            [],
            "embedding",
            "The positional convolution's output added to the projected features.",
        )
        if stable:
            return x
        return self.layer_norm(
            "enc_norm",
            x,
            "inp_norm",
            self.t,
            "The encoder's LayerNorm before its layers (post-norm layout): hidden_states[0].",
        )
