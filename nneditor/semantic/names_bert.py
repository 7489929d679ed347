"""BERT-family checkpoints' names (BERT, RoBERTa, DistilBERT, MPNet, ELECTRA, ALBERT, CamemBERT,
DeBERTa-v2/v3) as llama.cpp's, with what llama.cpp's table does not map: the encoder prefix of
checkpoints saved with a head, TensorFlow's LayerNorm names, the masked-LM heads, MPNet's
attention and relative positions, DeBERTa's projections and relative-position table, ALBERT's
shared layer and the embedding projections (checkpoint_names dispatches here)."""

from __future__ import annotations

import re
from typing import Any

#: where BERT-family checkpoints saved with a head (BertForMaskedLM, BertForPreTraining,
#: RobertaForMaskedLM, DistilBertForMaskedLM: bert-base-uncased, roberta-base and
#: distilbert-base-uncased as released) keep the encoder
BERT_PREFIXES = (
    *("bert.", "roberta.", "distilbert.", "mpnet.", "electra.", "albert.", "deberta."),
    *("data2vec_text.", "roberta_prelayernorm.", "ernie.", "ibert."),
)
#: what an I-BERT snapshot keeps beside its float weights for integer-only inference
#: (quant_mode): read only when quantized, so left out of a float (quant_mode false) trace
IBERT_QUANT_BUFFERS = (
    *(".weight_integer", ".bias_integer", ".weight_scaling_factor", ".fc_scaling_factor"),
    *(".act_scaling_factor", ".x_min", ".x_max", "LayerNorm.shift"),
)
#: ALBERT's one shared layer (albert_layer_groups.0.albert_layers.0) and the projection of its
#: embeddings; ELECTRA's projection
_ALBERT_LAYER = re.compile(
    r"^encoder\.albert_layer_groups\.0\.albert_layers\.0\.(.+)\.(weight|bias)$"
)
_ALBERT_PARTS = {
    "attention.query": "attn_q",
    "attention.key": "attn_k",
    "attention.value": "attn_v",
    "attention.dense": "attn_output",
    "attention.LayerNorm": "attn_output_norm",
    "ffn": "ffn_up",
    "ffn_output": "ffn_down",
    "full_layer_layer_norm": "layer_output_norm",
}
_EMBED_PROJECTIONS = ("encoder.embedding_hidden_mapping_in", "embeddings_project")
#: MPNet's own names (llama.cpp has no MPNet table): its attention and the relative-position
#: table that its encoder computes once for every layer, stored as T5 stores the shared one
_MPNET_PARTS = {
    "attention.attn.q": "attn_q",
    "attention.attn.k": "attn_k",
    "attention.attn.v": "attn_v",
    "attention.attn.o": "attn_output",
    "attention.LayerNorm": "attn_output_norm",
}
#: the pre-LayerNorm variants' norms, per layer (before attention, before the feed-forward)
#: and after the last layer: RoBERTa-PreLayerNorm, XLM-RoBERTa-XL, Megatron-BERT
_PRE_NORM_PARTS = {
    "attention.LayerNorm": "attn_norm",
    "intermediate.LayerNorm": "ffn_norm",
    "attention.self_attn_layer_norm": "attn_norm",
    "LayerNorm": "ffn_norm",
    "attention.ln": "attn_norm",
    "ln": "ffn_norm",
}
_PRE_NORM_FINAL = ("LayerNorm", "encoder.LayerNorm", "encoder.ln")
#: ERNIE's task-type embeddings (use_task_id): row 0 added to every position
_TASK_TYPES = "embeddings.task_type_embeddings.weight"
_ENCODER_LAYER = re.compile(r"^encoder\.layer\.(\d+)\.(.+)\.(weight|bias)$")
#: DeBERTa-v2/v3's attention projections (the rest of its layer is named as BERT's), and the
#: relative-position table every layer reads, with the LayerNorm the encoder applies to it
_DEBERTA_PARTS = {
    "attention.self.query_proj": "attn_q",
    "attention.self.key_proj": "attn_k",
    "attention.self.value_proj": "attn_v",
}
_DEBERTA_TABLE = {
    "encoder.rel_embeddings.weight": "rel_embd.weight",
    "encoder.LayerNorm.weight": "rel_embd_norm.weight",
    "encoder.LayerNorm.bias": "rel_embd_norm.bias",
}
#: their masked-language-model heads (a dense layer and GELU, a LayerNorm, then the vocabulary
#: projection tied to the token embedding, with a bias), under the names the decoder reads.
#: BERT's and RoBERTa's decoder bias is one parameter stored under two names (either or both)
MLM_HEAD = {
    "predictions.dense": "mlm_dense",  # ALBERT's
    "predictions.LayerNorm": "mlm_norm",
    "predictions.decoder": "output",
    "generator_predictions.dense": "mlm_dense",  # ELECTRA's generator
    "generator_predictions.LayerNorm": "mlm_norm",
    "generator_lm_head": "output",
    "cls.predictions.transform.dense": "mlm_dense",
    "lm_predictions.lm_head.dense": "mlm_dense",  # DeBERTa-v3's (transformers' legacy=False)
    "lm_predictions.lm_head.LayerNorm": "mlm_norm",
    "lm_head.dense": "mlm_dense",
    "vocab_transform": "mlm_dense",
    "cls.predictions.transform.LayerNorm": "mlm_norm",
    "lm_head.layer_norm": "mlm_norm",
    "vocab_layer_norm": "mlm_norm",
    "cls.predictions.decoder": "output",
    "lm_head.decoder": "output",
    "vocab_projector": "output",
}
_MLM_BIAS = (
    "cls.predictions.bias",
    "lm_head.bias",
    "predictions.bias",
    "lm_predictions.lm_head.bias",
)
#: heads beside the encoder that the hidden states and the masked-LM logits do not pass through
#: (BERT's next-sentence, ALBERT's sentence-order, ELECTRA's and DeBERTa-v3's replaced-token
#: heads)
BERT_SIDE_HEADS = (
    "pooler.",
    "cls.seq_relationship.",
    "sop_classifier.",
    "discriminator_predictions.",
    "mask_predictions.",
)


_TF_NORM_NAMES = {"gamma": "weight", "beta": "bias"}
#: classification heads (ForSequenceClassification, ForTokenClassification): the layer that
#: pools the first position (where stored; RoBERTa's, ELECTRA's and MPNet's classifier.dense,
#: DistilBERT's pre_classifier, else BERT's and DeBERTa's pooler.dense, ALBERT's pooler), then
#: the projection to the labels
_CLS_POOLERS = (("classifier.dense", "pre_classifier"), ("pooler.dense", "pooler"))
_CLS_OUT = ("classifier", "classifier.out_proj", "qa_outputs")  # (QA: start and end logits)


def _classifier_pool(inners: set[str]) -> str:
    """The module that pools a classifier's input ("" without a classifier or a pooler): a
    head's own dense layer over an encoder's pooler, which such checkpoints may still carry."""
    if not any(f"{m}.weight" in inners for m in _CLS_OUT):
        return ""
    for group in _CLS_POOLERS:
        for module in group:
            if f"{module}.weight" in inners:
                return module
    return ""


def bert_inner(name: str) -> str:
    """A BERT-family tensor's name as the bare encoder (BertModel) names it."""
    for prefix in BERT_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def bert_names(
    names: list[str], table: Any, n_layers: int, buffers: tuple[str, ...]
) -> tuple[dict[str, str], list[str]]:
    mapped: dict[str, str] = {}
    unplaced: list[str] = []
    inners = {bert_inner(n) for n in names}
    pool = _classifier_pool(inners)
    deberta = "encoder.rel_embeddings.weight" in inners  # (its encoder.LayerNorm: the table's)
    # (MPNet's attention.LayerNorm follows its residual; RoBERTa-PreLayerNorm's precedes)
    prelayernorm = any(n.endswith(".intermediate.LayerNorm.weight") for n in inners)
    pre_parts = {
        k: v for k, v in _PRE_NORM_PARTS.items() if prelayernorm or k != "attention.LayerNorm"
    }
    for name in names:
        albert = _ALBERT_LAYER.match(bert_inner(name))
        if albert and albert[1] in _ALBERT_PARTS:  # every layer reads the one shared layer
            for i in range(n_layers):
                mapped[f"blk.{i}.{_ALBERT_PARTS[albert[1]]}.{albert[2]}"] = name
            continue
        inner = bert_inner(name)
        module, _, kind = inner.rpartition(".")
        if module.endswith("LayerNorm") and kind in _TF_NORM_NAMES:  # bert-base-uncased's own
            kind = _TF_NORM_NAMES[kind]  # checkpoint: TensorFlow's gamma and beta
            inner = f"{module}.{kind}"
        layer = _ENCODER_LAYER.match(inner)
        if inner in _MLM_BIAS:
            key: str | None = "output.bias"
        elif module in _CLS_OUT and kind in ("weight", "bias"):
            key = f"cls_out.{kind}"
        elif pool and module == pool and kind in ("weight", "bias"):
            key = f"cls_pool.{kind}"
        elif layer and layer[2] in pre_parts:
            key = f"blk.{layer[1]}.{pre_parts[layer[2]]}.{layer[3]}"
        elif layer and layer[2] in _MPNET_PARTS:
            key = f"blk.{layer[1]}.{_MPNET_PARTS[layer[2]]}.{layer[3]}"
        elif layer and layer[2] in _DEBERTA_PARTS:
            key = f"blk.{layer[1]}.{_DEBERTA_PARTS[layer[2]]}.{layer[3]}"
        elif inner in _DEBERTA_TABLE and deberta:
            key = _DEBERTA_TABLE[inner]
        elif module in _PRE_NORM_FINAL and kind in ("weight", "bias"):
            key = f"output_norm.{kind}"
        elif inner == _TASK_TYPES:
            key = "task_types.weight"
        elif inner == "encoder.relative_attention_bias.weight":
            key = "blk.0.attn_rel_b.weight"
        elif module in _EMBED_PROJECTIONS and kind in ("weight", "bias"):
            key = f"token_embd_proj.{kind}"
        elif module in MLM_HEAD and kind in ("weight", "bias"):
            key = f"{MLM_HEAD[module]}.{kind}"
        elif inner.endswith(buffers):
            continue
        else:
            key = table.get_name(inner, try_suffixes=(".weight", ".bias")) if table else None
        if key is None:
            unplaced.append(name)
        else:
            mapped.setdefault(key, name)  # (the bias's second name: the same values)
    return mapped, unplaced


#: ESM's layers (BERT's names with a norm before each half) and its embeddings' and stack's
#: norms (esm. stripped)
_ESM_PARTS = {
    "attention.self.query": "attn_q",
    "attention.self.key": "attn_k",
    "attention.self.value": "attn_v",
    "attention.output.dense": "attn_output",
    "attention.LayerNorm": "attn_norm",
    "intermediate.dense": "ffn_up",
    "output.dense": "ffn_down",
    "LayerNorm": "ffn_norm",
}
_ESM_TOP = {
    "embeddings.word_embeddings.weight": "token_embd.weight",
    "embeddings.position_embeddings.weight": "position_embd.weight",  # ESM-1b's
    "embeddings.layer_norm.weight": "token_embd_norm.weight",
    "embeddings.layer_norm.bias": "token_embd_norm.bias",
    "encoder.emb_layer_norm_after.weight": "output_norm.weight",
    "encoder.emb_layer_norm_after.bias": "output_norm.bias",
}
#: what ESM checkpoints keep beside the weights the forward pass reads
_ESM_BUFFERS = ("rotary_embeddings.inv_freq", "position_ids")
#: ESM's contact-prediction head (over the attention maps): beside the traced path
ESM_SIDE = ("contact_head.",)


def esm_names(names: list[str]) -> tuple[dict[str, str], list[str]]:
    """ESM-2's names as the decoder reads them; its contact-prediction head stays unplaced
    (listed beside the encoder)."""
    mapped: dict[str, str] = {}
    unplaced: list[str] = []
    pool = _classifier_pool({n.removeprefix("esm.") for n in names})
    for name in names:
        inner = name.removeprefix("esm.")
        module, _, kind = inner.rpartition(".")
        if module.endswith(("LayerNorm", "layer_norm")) and kind in _TF_NORM_NAMES:
            kind = _TF_NORM_NAMES[kind]  # (ESM checkpoints keep gamma and beta)
            inner = f"{module}.{kind}"
        layer = _ENCODER_LAYER.match(inner)
        if inner.endswith(_ESM_BUFFERS):
            continue
        if layer and layer[2] in _ESM_PARTS:
            mapped[f"blk.{layer[1]}.{_ESM_PARTS[layer[2]]}.{layer[3]}"] = name
        elif inner in _ESM_TOP:
            mapped[_ESM_TOP[inner]] = name
        elif inner in _MLM_BIAS:
            mapped["output.bias"] = name
        elif module in MLM_HEAD and kind in ("weight", "bias"):
            mapped[f"{MLM_HEAD[module]}.{kind}"] = name
        elif module in _CLS_OUT and kind in ("weight", "bias"):
            mapped[f"cls_out.{kind}"] = name
        elif pool and module == pool and kind in ("weight", "bias"):
            mapped[f"cls_pool.{kind}"] = name
        else:
            unplaced.append(name)
    return mapped, unplaced


#: ViT's layers under transformers 4's names (the releases) and 5's (vit.layers.N...);
#: DINOv2's layer scales (lambda1)
_VIT_LAYER = re.compile(r"^(?:encoder\.layer|layers)\.(\d+)\.(.+)\.(weight|bias|lambda1)$")
_VIT_PARTS = {
    "layernorm_before": "attn_norm",
    "attention.attention.query": "attn_q",
    "attention.attention.key": "attn_k",
    "attention.attention.value": "attn_v",
    "attention.output.dense": "attn_output",
    "attention.q_proj": "attn_q",
    "attention.k_proj": "attn_k",
    "attention.v_proj": "attn_v",
    "attention.o_proj": "attn_output",
    "layernorm_after": "ffn_norm",
    "intermediate.dense": "ffn_up",
    "output.dense": "ffn_down",
    "mlp.fc1": "ffn_up",
    "mlp.fc2": "ffn_down",
    # DINOv2: its norms, layer scales and the giant's SwiGLU ([gate; up] in weights_in)
    "norm1": "attn_norm",
    "norm2": "ffn_norm",
    "layer_scale1": "ls1",
    "layer_scale2": "ls2",
    "mlp.weights_in": "ffn_up",
    "mlp.weights_out": "ffn_down",
}
_VIT_TOP = {
    "embeddings.cls_token": "cls_token.weight",
    "embeddings.position_embeddings": "patch_pos.weight",
    "embeddings.patch_embeddings.projection.weight": "patch_embd.weight",
    "embeddings.patch_embeddings.projection.bias": "patch_embd.bias",
    "layernorm.weight": "output_norm.weight",
    "layernorm.bias": "output_norm.bias",
    "classifier.weight": "cls_out.weight",
    "classifier.bias": "cls_out.bias",
    # DeiT: its distillation token, and the with-teacher class's two heads
    "embeddings.distillation_token": "dist_token.weight",
    "cls_classifier.weight": "cls_out.weight",
    "cls_classifier.bias": "cls_out.bias",
    "distillation_classifier.weight": "dist_out.weight",
    "distillation_classifier.bias": "dist_out.bias",
}
#: ViTModel's pooler (the class token through tanh: pooler_output), beside the traced path;
#: DINOv2's mask token (pre-training only)
VIT_SIDE = ("pooler.", "embeddings.mask_token")


def vit_names(names: list[str]) -> tuple[dict[str, str], list[str]]:
    """A ViT, DeiT or DINOv2 snapshot's names as the decoder reads them (vit. / deit. /
    dinov2. stripped)."""
    mapped: dict[str, str] = {}
    unplaced: list[str] = []
    for name in names:
        inner = name.removeprefix("vit.").removeprefix("deit.").removeprefix("dinov2.")
        layer = _VIT_LAYER.match(inner)
        if layer and layer[2] in _VIT_PARTS:
            kind = "weight" if layer[3] == "lambda1" else layer[3]
            mapped[f"blk.{layer[1]}.{_VIT_PARTS[layer[2]]}.{kind}"] = name
        elif inner in _VIT_TOP:
            mapped[_VIT_TOP[inner]] = name
        elif not inner.startswith(VIT_SIDE):
            unplaced.append(name)
    return mapped, unplaced
