"""Graphs synthesized for checkpoints (GGUF files, Hugging Face snapshots) of known families.

A checkpoint stores weights, not topology; for decoder/encoder families the topology follows
from the architecture metadata and the tensor names. The graph built here is the one the UI
shows and that tracing publishes captures to. Value names follow llama.cpp's naming for every
family, so one scheme serves GGUF and Hugging Face alike (see docs/semantic.md):

    tokens → inp_embd → blk.{i}.attn_norm → blk.{i}.attn_output → blk.{i}.attn_residual
           → blk.{i}.ffn_norm → blk.{i}.ffn_output → blk.{i}.output → … → result_norm
           → result_output (logits)

The nodes are made by checkpoint_builder.py (and its family mixins); this module turns a
checkpoint's metadata and tensor names into the stack they build, from GGUF files and from
Hugging Face snapshots.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from nneditor.model.capabilities import Capability
from nneditor.model.document import Document
from nneditor.model.graph import Graph, ValueInfo
from nneditor.semantic.checkpoint_builder import CheckpointBuilder
from nneditor.semantic.checkpoint_gemma4 import full_layers, producers
from nneditor.semantic.checkpoint_names import (
    RERANK_NAMES,
    encoder_key,
    llama4_gguf_nope,
    with_aliases,
    with_weight_suffix,
)
from nneditor.semantic.checkpoint_vision import one_row, tower_head
from nneditor.semantic.names_vision import VISION_TOWERS, is_pair
from nneditor.semantic.sentence_pooling import SentencePooling, read_pooling

_BLK = re.compile(r"^blk\.(\d+)\.(.+)$")


def attach_graph(doc: Document) -> bool:
    """Give a checkpoint its synthesized graph (or the reason it has none); True when it got
    one. ``nneditor.open`` and the trace worker both open checkpoints this way."""
    graph, reason = synthesize_graph(doc)
    if graph is None:
        if reason:  # the specific reason replaces the format's general one everywhere
            doc.graph_unavailable_reason = reason
            doc.capabilities = doc.capabilities.replaced(view_graph=Capability(False, reason))
        return False
    doc.graph = graph
    doc.graph_unavailable_reason = ""
    doc.capabilities = doc.capabilities.replaced(
        view_graph=Capability(
            True,
            "synthesized from the checkpoint's architecture metadata and tensor names; "
            "the file itself stores no topology",
        )
    )
    return True


def synthesize_graph(doc: Document) -> tuple[Graph | None, str]:
    """(graph, "") for a recognised checkpoint family, else (None, reason)."""
    if doc.format == "gguf":
        return _from_gguf(doc)
    if doc.format == "huggingface":
        return _from_hf(doc)
    return None, ""


# ------------------------------------------------------------------------------------ GGUF


def _meta_int(meta: Mapping[str, Any], key: str) -> int | None:
    v = meta.get(key)
    try:
        return int(v) if v is not None and not isinstance(v, (list, tuple)) else None
    except (TypeError, ValueError):
        return None


def _from_gguf(doc: Document) -> tuple[Graph | None, str]:
    from nneditor.semantic.family_graphs import gguf_family_graph

    family = gguf_family_graph(doc)  # e.g. a CLIP vision tower (no blk.N stack)
    if family is not None:
        return family
    meta = doc.metadata
    arch = str(meta.get("general.architecture", "") or "")
    names = list(doc.tensors.keys())
    blocks: dict[int, dict[str, str]] = {}
    top: dict[str, str] = {}
    for name in names:
        key = encoder_key(name) if arch in ("t5encoder", "t5") else name
        m = _BLK.match(key)
        if m:
            blocks.setdefault(int(m.group(1)), {})[m.group(2)] = name
        else:
            top[key] = name
    if not blocks:
        return None, (
            f"this GGUF ({arch or 'unknown architecture'}) has no blk.N.* tensors, so NNEditor "
            "cannot lay out a layer stack; its tensors are listed in the catalog"
        )
    nextn = _meta_int(meta, f"{arch}.nextn_predict_layers") or 0
    count = _meta_int(meta, f"{arch}.block_count") or 0
    if 0 < nextn < count:  # Qwen3.5, GLM-4.5, DeepSeek: multi-token-prediction layers at the end
        trunk = count - nextn
        drafted = [i for i in blocks if i >= trunk]
        for i in drafted:
            del blocks[i]
        if drafted:
            what = (
                f"layer {trunk} predicts" if nextn == 1 else f"layers {trunk}-{count - 1} predict"
            )
            doc.notes.append(
                f"{what} later tokens (multi-token prediction), off the next-token path: not "
                "drawn in the stack; the tensors are listed with the weights"
            )
    if arch == "bert" and "cls.output.weight" in top:  # a reranker or classifier
        top = {RERANK_NAMES.get(k, k): v for k, v in top.items()}
    heads = _meta_int(meta, f"{arch}.attention.head_count")
    kv = _meta_int(meta, f"{arch}.attention.head_count_kv")
    hidden = _meta_int(meta, f"{arch}.embedding_length")
    title = f"{arch or 'gguf'} (from GGUF metadata)"
    vocab = _head_rows(doc, top)
    if arch == "t5":  # llama.cpp's encoder-decoder T5: its encoder stack, then the decoder
        from nneditor.semantic.checkpoint_t5 import seq2seq_graph

        g = seq2seq_graph(title, blocks, top, heads, _rows_of(doc), hidden, vocab)
        g.initializers.extend(n for n in names if n not in set(g.initializers))
        return g, ""
    parallel = bool(meta.get(f"{arch}.use_parallel_residual", arch == "gptneox"))
    unrotated: frozenset[int] = frozenset()
    if arch == "llama4":  # its NoPE layers read no frequency factors
        nope = llama4_gguf_nope(meta, max(blocks) + 1)
        unrotated = frozenset(i for i, n in enumerate(nope) if n)
    g = _decoder_graph(
        title, arch, blocks, top, heads, kv, _rows_of(doc), hidden, vocab, parallel, unrotated
    )
    if "cls_out.weight" in top:  # (rank pooling: the first token's row)
        _one_row(g)
    used = set(g.initializers)
    unplaced = [n for n in names if n not in used]
    if nextn:  # (said above)
        unplaced = [n for n in unplaced if not _drafting(n, count - nextn)]
        g.initializers.extend(n for n in names if n not in used and _drafting(n, count - nextn))
    if unplaced:  # listed with the graph's weights, and said: never silently dropped
        g.initializers.extend(unplaced)
        more = f" and {len(unplaced) - 3} more" if len(unplaced) > 3 else ""
        doc.notes.append(
            f"the synthesized {arch or 'GGUF'} graph has no place for {len(unplaced)} tensors "
            f"({', '.join(unplaced[:3])}{more}); they are listed with the weights but no "
            "operator of the drawn graph reads them"
        )
    return g, ""


def _drafting(name: str, trunk: int) -> bool:
    """Whether ``name`` is a tensor of a multi-token-prediction layer (blk.N, N >= trunk)."""
    m = _BLK.match(name)
    return m is not None and int(m.group(1)) >= trunk


def _decoder_graph(
    title: str,
    arch: str,
    blocks: dict[int, dict[str, str]],
    top: dict[str, str],
    heads: int | None,
    kv: int | None,
    rows: Callable[[str], int | None] | None = None,
    hidden: int | None = None,
    vocab: int | None = None,
    parallel: bool = False,
    unrotated: frozenset[int] = frozenset(),
    headless: bool = False,
    token_dropout: bool = False,
    pooling: SentencePooling | None = None,
    image: tuple[int, int, int, int] | None = None,
    tower: str = "",
) -> Graph:
    """The graph of a decoder stack; ``blocks``/``top`` map llama.cpp's names (``attn_q.weight``,
    ``token_embd.weight``) to the checkpoint's own tensor names; ``unrotated``: layers that
    attend without RoPE; ``headless``: a base model (OPTModel), ending at its final norm;
    ``tower``: CLIP's or SigLIP's vision tower, whose ends are checkpoint_vision.py's."""
    b = CheckpointBuilder(title, rows)
    b.parallel = parallel
    if arch != "gemma4":  # (Gemma 4's full-attention layers read them: gemma4_block)
        b.rope_factors = top.get("rope_freqs.weight", "")
    b.unrotated = unrotated
    b.token_dropout = token_dropout
    if arch == "falcon-h1":  # llama.cpp names its feed-forward norm without ".weight"
        blocks = {i: {with_weight_suffix(k): v for k, v in t.items()} for i, t in blocks.items()}
    if arch == "olmo":  # OLMo's LayerNorms have no weights: drawn where they apply all the same
        blocks = {
            i: {"attn_norm.weight": "", "ffn_norm.weight": "", **t} for i, t in blocks.items()
        }
        top = {"output_norm.weight": "", **top}
    if arch in ("lfm2", "lfm2moe") and "token_embd_norm.weight" in top:  # LFM2's last norm
        top = {**top, "output_norm.weight": top["token_embd_norm.weight"]}
        del top["token_embd_norm.weight"]
    x = b.vision_embedding(top, *image) if image else b.embedding(top, arch)
    if arch == "gemma3n":
        ple_in = b.gemma4_inputs(top, x) or ""
        coefs = b.rows(blocks[min(blocks)].get("altup_predict_coef.weight", "")) or 16
        streams = math.isqrt(coefs) * hidden if hidden else None  # [n * n, n] coefficients
        x = b.altup_inputs(top, x, streams)
        shared = producers(blocks, b.rows)
        for i in sorted(blocks):
            x = b.gemma3n_block(i, blocks[i], x, heads, shared.get(i), ple_in, streams)
        x = b.altup_merge(top, x)
    elif arch == "gemma4":
        ple = b.gemma4_inputs(top, x)
        shared, full = producers(blocks, b.rows), full_layers(blocks, b.rows)
        factors = top.get("rope_freqs.weight", "")
        for i in sorted(blocks):
            rope = factors if i in full else ""
            x = b.gemma4_block(i, blocks[i], x, heads, shared.get(i), ple, rope)
    else:
        for i in sorted(blocks):
            x = b.decoder_block(i, blocks[i], x, arch, heads, kv)
    if tower:
        tower_head(b, top, x, tower)
    else:
        b.head(top, x, arch, headless)
    if pooling is not None and b.graph.nodes[-1].outputs[0] != "result_output":
        b.sentence_pooling(pooling)  # an encoder's sentence embedding (modules.json)
    g = b.finish()
    g.opsets = {}
    _value_types(g, hidden, vocab, b.widths)
    if tower:
        one_row(g)
    return g


def _image_of(config: Mapping[str, Any], doc: Document) -> tuple[int, int, int, int]:
    """(channels, size, patch, grid) of a vision transformer's image. DINOv2 (grid: its stored
    position grid) reads any size: the graph takes the one its image processor crops to."""
    channels = int(config.get("num_channels") or 3)
    size, patch = int(config.get("image_size") or 224), int(config.get("patch_size") or 16)
    if config.get("model_type") != "dinov2":
        return channels, size, patch, 0
    folder = Path(doc.path)
    crop = _json_of((folder if folder.is_dir() else folder.parent) / "preprocessor_config.json")
    cropped = crop.get("crop_size") if crop.get("do_center_crop", True) else None
    side = cropped.get("height") if isinstance(cropped, Mapping) else cropped
    return channels, int(side) if isinstance(side, int) else size, patch, size // patch


def _json_of(path: Path) -> dict[str, Any]:
    """A small JSON file's object ({} when absent or not an object)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _pooling_of(doc: Document) -> SentencePooling | None:
    """The sentence-transformers pooling stated beside a snapshot (modules.json)."""
    folder = Path(doc.path)
    return read_pooling(folder if folder.is_dir() else folder.parent)


def _one_row(g: Graph) -> None:
    """A sequence classifier's head reads one position: its values have one row."""
    for name in ("cls_pooled", "result_output"):
        info = g.value_info.get(name)
        if info is not None and info.shape:
            g.value_info[name] = ValueInfo(name, info.dtype, (1, 1, info.shape[-1]))
    if g.outputs:
        g.outputs[0] = g.value_info.get(g.outputs[0].name, g.outputs[0])


def _rows_of(doc: Document) -> Callable[[str], int | None]:
    def rows(name: str) -> int | None:
        ref = doc.tensors.get(name)
        return int(ref.shape[0]) if ref is not None and ref.shape else None

    return rows


def _head_rows(doc: Document, top: dict[str, str]) -> int | None:
    """The logits' width: the labels of a classification head, else the vocabulary."""
    name = top.get("cls_out.weight") or top.get("output.weight") or top.get("token_embd.weight")
    ref = doc.tensors.get(name) if name else None
    return int(ref.shape[0]) if ref is not None and ref.shape else None


def _value_types(
    g: Graph, hidden: int | None, vocab: int | None, widths: Mapping[str, int] | None = None
) -> None:
    """float32 [1, seq, hidden] for every activation, [1, seq, vocab] for the logits, the
    node's own width where it differs (a recurrent mixer's inner values)."""
    for node in g.nodes:
        own = widths.get(node.outputs[0]) if node.outputs and widths else None
        for out in node.outputs:
            width = vocab if out == "result_output" else (own or hidden)
            g.value_info[out] = ValueInfo(out, "float32", (1, "seq", width))
    if g.outputs:
        g.outputs[0] = g.value_info.get(g.outputs[0].name, g.outputs[0])


# ------------------------------------------------------------------------------------ HF

_HF_STACK = re.compile(
    r"^(?P<prefix>(?:[\w]+\.)*?(?:layers|layer|h|blocks|block))\.(?P<i>\d+)\.(?P<rest>.+)$"
)
_HF_MAP = [
    # (regex on the in-block rest, gguf-style key)
    (
        r"(input_layernorm|ln_1|layernorm_before|self_attn_layer_norm|sa_layer_norm|norm)"
        r"\.(weight|bias)$",
        "attn_norm.{1}",
    ),
    (
        r"(post_attention_layernorm|ln_2|layernorm_after|final_layer_norm|output_layer_norm)"
        r"\.(weight|bias)$",
        "ffn_norm.{1}",
    ),
    (r"(self_attn|attn|attention|mixer|linear_attn|encoder_attn)\.(.+)$", "attn_{1}"),
    (r"(mlp|feed_forward|ffn|intermediate|output|fc1|fc2)\.(.+)$", "ffn_{0}_{1}"),
    (r"(fc1|fc2)\.(weight|bias)$", "ffn_{0}_{1}"),
]


_LISTED = re.compile(r"^(?:[\w]+\.)*?(?P<list>[A-Za-z_]\w*)\.(?P<i>\d+)\.")


def _parallel_lists(names: Iterable[str]) -> list[str]:
    """Names of two or more lists numbered alike (XLM's and FlauBERT's ``attentions.N``,
    ``ffns.N``, ``layer_norm1.N``), in the order first seen; [] when there are none."""
    numbers: dict[str, set[int]] = {}
    for name in names:
        m = _LISTED.match(name)
        if m:
            numbers.setdefault(m.group("list"), set()).add(int(m.group("i")))
    alike = [k for k, v in numbers.items() if len(v) > 1]
    common = Counter(frozenset(numbers[k]) for k in alike).most_common(1)
    if not common or common[0][1] < 2:
        return []
    return [k for k in alike if frozenset(numbers[k]) == common[0][0]]


#: config keys of a model that reads or makes audio: wav2vec2's and HuBERT's feature encoder,
#: Whisper's and SpeechT5's mel bins, EnCodec's and VITS's waveforms
_AUDIO_KEYS = ("conv_dim", "feat_extract_norm", "num_mel_bins", "audio_channels", "sampling_rate")
#: sub-configs of a model's sides, and what each side works on
_SIDE_CONFIGS = {
    "text_config": "text",
    "vision_config": "images",
    "backbone_config": "images",
    "audio_config": "audio",
    "prompt_encoder_config": "point and box prompts",
}


def _reads_other_than_text(config: Mapping[str, Any], model_type: str) -> str:
    """Why the generic graph (token embeddings, then every numbered stack in a row) would
    misstate this snapshot's topology: it works on images or audio, or has sides (towers, a
    backbone) that run beside each other; "" for a model of text tokens alone."""
    sides = {what for key, what in _SIDE_CONFIGS.items() if isinstance(config.get(key), dict)}
    if "num_channels" in config:
        sides.add("images")
    if any(key in config for key in _AUDIO_KEYS):
        sides.add("audio")
    if not sides - {"text"}:
        return ""
    order = ["images", "audio", "point and box prompts", "text"]
    what = " and ".join(w for w in order if w in sides)
    classes = ", ".join(str(c) for c in config.get("architectures") or []) or "no architectures"
    return (
        f"NNEditor does not draw {model_type or 'this kind of'} checkpoints ({classes}): the "
        f"model works on {what}, and its graphs from tensor names cover text models and the "
        "image models it knows (ViT, DeiT, BEiT, DINOv2, CLIP's and SigLIP's vision towers "
        "and their CLIPModel and SiglipModel pairs, Swin, ResNet, ConvNeXt, MobileNet, "
        "EfficientNet, RegNet) and the wav2vec2 and HuBERT speech recognizers, so none is "
        "drawn rather than a wrong one; the weights are listed by name and can be read"
    )


def _from_hf(doc: Document) -> tuple[Graph | None, str]:
    if not len(doc.tensors):  # no weights: the snapshot's own reason says what to open
        return None, doc.graph_unavailable_reason
    config = with_aliases(doc.metadata.get("config") or {})
    if is_pair(config):  # CLIPModel, SiglipModel: both towers side by side
        from nneditor.semantic.checkpoint_pair import pair_graph

        return pair_graph(doc, config, hf_tower_graph)
    from nneditor.semantic.family_graphs import family_graph

    family = family_graph(doc, config)
    if family is not None:
        return family
    model_type = str(config.get("model_type", "") or "")
    canonical = _hf_decoder(doc, config, model_type)
    if canonical is not None:
        return canonical, ""
    other = _reads_other_than_text(doc.metadata.get("config") or {}, model_type)
    if other:
        return None, other
    stacks: dict[str, dict[int, dict[str, str]]] = {}
    top: dict[str, str] = {}
    for name in doc.tensors:
        m = _HF_STACK.match(name)
        if not m:
            top[name] = name
            continue
        rest = m.group("rest")
        key = None
        for rx, fmt in _HF_MAP:
            mm = re.match(rx, rest)
            if mm:
                key = fmt.format(*mm.groups())
                break
        stacks.setdefault(m.group("prefix"), {}).setdefault(int(m.group("i")), {})[
            key or f"attn_other_{rest}"
        ] = name
    if not stacks:
        lists = _parallel_lists(doc.tensors)
        if lists:
            shown = ", ".join(f"{name}.N" for name in lists[:4])
            return None, (
                f"this {model_type or 'Hugging Face'} checkpoint stores its layers as parallel "
                f"numbered lists ({shown}{', …' if len(lists) > 4 else ''}), not one numbered "
                "block per layer; NNEditor draws no graph for that layout (its weights are "
                "listed by name)"
            )
        return None, (
            f"no numbered layer stack found in this {model_type or 'Hugging Face'} checkpoint's "
            "tensor names; without it NNEditor cannot synthesize a topology"
        )
    heads = config.get("num_attention_heads") or config.get("n_head")
    kv = config.get("num_key_value_heads") or heads
    b = CheckpointBuilder(f"{model_type or 'model'} (from config.json and tensor names)")
    emb = _token_embedding(top)
    b.graph.inputs.append(ValueInfo("tokens", "int64", (1, "seq")))
    x = b.node(
        "embeddings",
        "Embedding",
        ["tokens"],
        "inp_embd",
        [n for n in top if "embed" in n or n.endswith(("wte.weight", "wpe.weight"))] or [emb],
        "embedding",
        "Embedding layer(s) (from tensor names).",
    )
    for s_idx, (_prefix, blocks) in enumerate(
        sorted(stacks.items(), key=lambda kv_: _order(kv_[0]))
    ):
        for i in sorted(blocks):
            label = str(i) if len(stacks) == 1 else f"{s_idx}_{i}"
            x = b.decoder_block(label, blocks[i], x, model_type, heads, kv)
    rest = [n for n in top if n not in b.weights]
    head_w = next(
        (n for n in rest if re.search(r"(lm_head|proj_out|classifier|output)\.weight$", n)), ""
    )
    norm_w = [n for n in rest if re.search(r"(norm|ln_f|layernorm|layer_norm)\.(weight|bias)$", n)]
    if norm_w:
        x = b.node(
            "output_norm",
            "RMSNorm" if not any(n.endswith("bias") for n in norm_w) else "LayerNorm",
            [x],
            "result_norm",
            norm_w,
            "norm",
            "Final normalization (from tensor names).",
        )
    tied = not head_w and emb and _ties_head(config)
    if head_w or tied:
        b.node(
            "output",
            "LMHead",
            [x],
            "result_output",
            [head_w or emb],
            "head",
            "Output head (from tensor names)" + ("; tied to the embedding" if tied else "") + ".",
        )
    g = b.finish()
    unused = [n for n in doc.tensors if n not in set(g.initializers)]
    if unused:
        g.initializers.extend(unused)
    return g, ""


def hf_tower_graph(part: Any, config: Mapping[str, Any]) -> Graph | None:  # noqa: ANN401
    """The graph of one tower of a pair (checkpoint_pair.py): ``part`` holds its tensors
    alone (``tensors``, ``path``, ``notes``), ``config`` its config as saved alone."""
    return _hf_decoder(part, config, str(config["model_type"]))


def _hf_decoder(doc: Document, config: Mapping[str, Any], model_type: str) -> Graph | None:
    """A decoder snapshot whose tensors all have llama.cpp names: the same graph as the GGUF
    llama.cpp's converter makes of it (None when the names do not map)."""
    from nneditor.semantic.checkpoint_names import (
        MTP_PREFIXES,
        canonical_names,
        layer_count,
        llama_cpp_arch,
        text_part,
    )
    from nneditor.semantic.names_bert import BERT_SIDE_HEADS, ESM_SIDE, bert_inner
    from nneditor.semantic.names_unconverted import bart_has_head, opt_norm_keys

    part = text_part(config, doc.tensors.keys())  # Gemma 4: its text decoder, towers aside
    stored = {n: n for n in doc.tensors}
    release = model_type
    if part is not None:
        config, stored = part
        model_type = str(config["model_type"])
    arch = llama_cpp_arch(model_type, config)
    if arch == "t5encoder" and any(n.startswith("decoder.") for n in stored):
        arch = "t5"  # T5ForConditionalGeneration: the encoder, then the decoder
    layers = layer_count(config)
    if arch is None or not layers or isinstance(config.get("text_config"), dict):
        return None
    try:
        mapped, unplaced = canonical_names(arch, stored.keys(), layers)
    except Exception:  # gguf-py missing or its table for the arch broken: the generic path
        return None
    mapped = {encoder_key(key): stored[name] for key, name in mapped.items()}
    if arch == "opt":  # OPT-350m's norms follow the residuals
        mapped = opt_norm_keys(mapped, config)
    blocks: dict[int, dict[str, str]] = {}
    top: dict[str, str] = {}
    for key, name in mapped.items():
        m = _BLK.match(key)
        if m:
            blocks.setdefault(int(m.group(1)), {})[m.group(2)] = name
        else:
            top[key] = name
    if not blocks or ("token_embd.weight" not in top and "patch_embd.weight" not in top):
        return None
    if "rel_embd.weight" in top:  # DeBERTa: every layer's attention reads the shared table
        table = {k: v for k, v in top.items() if k.startswith("rel_embd")}
        for t in blocks.values():
            t.update({f"attn_{k}": v for k, v in table.items()})
    if "rel_pos_b.weight" in top:  # BEiT: every layer's attention adds the shared bias
        for t in blocks.values():
            t["attn_rel_pos_b.weight"] = top["rel_pos_b.weight"]
    heads = config.get("num_attention_heads") or config.get("n_head") or config.get("n_heads")
    kv = config.get("num_key_value_heads") or heads
    title = f"{model_type} (from config.json and tensor names)"
    hidden = config.get("hidden_size") or config.get("n_embd") or config.get("d_model")  # (MPT)
    width = hidden if isinstance(hidden, int) else None
    vocab = _head_rows(doc, top)
    parallel = bool(config.get("use_parallel_residual", arch == "gptneox"))
    if arch in ("t5", "bart", "mbart"):  # an encoder, then the decoder's first step
        from nneditor.semantic.checkpoint_bart import bart_graph
        from nneditor.semantic.checkpoint_t5 import seq2seq_graph

        if arch == "t5":
            g = seq2seq_graph(title, blocks, top, heads, _rows_of(doc), width, vocab)
        else:
            scaled = bool(config.get("scale_embedding"))  # (Marian's, mBART's, M2M100's)
            head = bart_has_head(config, top)
            g = bart_graph(
                title,
                blocks,
                top,
                heads,
                _rows_of(doc),
                width,
                vocab,
                scaled,
                arch == "mbart",
                head,
                model_type == "blenderbot-small",
            )
        g.initializers.extend(n for n in doc.tensors if n not in set(g.initializers))
        return g
    headless = arch in ("opt", "xglm") and "output.weight" not in top and not _ties_head(config)
    g = _decoder_graph(
        title,
        arch,
        blocks,
        top,
        heads,
        kv,
        _rows_of(doc),
        width,
        vocab,
        parallel,
        headless=headless,
        token_dropout=arch == "esm" and bool(config.get("token_dropout")),
        pooling=_pooling_of(doc),
        image=_image_of(config, doc) if arch == "vit" else None,
        tower=VISION_TOWERS.get(model_type, ""),
    )
    if "sentence_pooled" in g.value_info:  # (one row: the sentence's)
        for name in ("sentence_pooled", "sentence_embedding"):
            if name in g.value_info:
                g.value_info[name] = ValueInfo(name, "float32", (1, 1, width))
    classes = " ".join(str(c) for c in config.get("architectures") or [])
    sequence = any(
        k in classes for k in ("ForSequenceClassification", "ForImageClassification")
    ) or ("ForTokenClassification" not in classes and "cls_pool.weight" in top)
    if "cls_out.weight" in top and sequence:  # one row: the pooled position's
        _one_row(g)
    used = set(g.initializers)
    g.initializers.extend(n for n in doc.tensors if n not in used)  # unplaced stay listed
    towers = len(doc.tensors) - len(stored)
    if part is not None and towers:
        doc.notes.append(
            f"the graph is this {release} release's text decoder; the tensors of its image "
            f"(or audio) side ({towers}) are listed with the weights but not drawn"
        )
    side = [n for n in unplaced if arch == "bert" and bert_inner(n).startswith(BERT_SIDE_HEADS)]
    contact = [n for n in unplaced if arch == "esm" and n.removeprefix("esm.").startswith(ESM_SIDE)]
    if contact:
        doc.notes.append(
            f"its contact-prediction head ({len(contact)} tensors), which reads the attention "
            "maps, is not drawn: the drawn path to the logits does not pass through it; its "
            "tensors are listed with the weights"
        )
    if side:
        doc.notes.append(
            f"its pooler and pre-training heads beside the encoder ({len(side)} tensors: "
            "pooler, next-sentence, sentence-order or replaced-token heads) are not drawn: the "
            "drawn path to the last hidden state (and the masked-LM logits, where stored) does "
            "not pass through them; their tensors are listed with the weights"
        )
    mtp = sum(1 for n in stored if n.startswith(MTP_PREFIXES))
    if mtp:
        doc.notes.append(
            f"its multi-token-prediction module ({mtp} tensors under mtp.) drafts later tokens "
            "and is not drawn: the next-token logits do not pass through it; its tensors are "
            "listed with the weights"
        )
    return g


#: a token embedding's name (position, token-type and patch embeddings are not one)
_TOKEN_EMBEDDING = re.compile(
    r"(embed_tokens|word_embeddings|wte|tok_embeddings|token_embedding|embed_in|shared)\.weight$"
)
_OTHER_EMBEDDING = re.compile(r"(position|pos_|token_type|patch|segment|wpe)")
#: model classes with a language-model head, which transformers ties to the token embedding
#: unless the config says otherwise
_LM_HEAD_CLASSES = ("ForCausalLM", "LMHeadModel", "ForMaskedLM", "ForConditionalGeneration")


def _token_embedding(top: Mapping[str, str]) -> str:
    """The token embedding among the top-level tensors ("" when none is recognisable)."""
    named = next((n for n in top if _TOKEN_EMBEDDING.search(n)), "")
    if named:
        return named
    return next(
        (
            n
            for n in top
            if re.search(r"embeddings?\.weight$", n) and not _OTHER_EMBEDDING.search(n)
        ),
        "",
    )


def _ties_head(config: Mapping[str, Any]) -> bool:
    """Whether a snapshot without a head tensor has a head tied to its token embedding: its
    class has a language-model head (a base model such as ``BertModel``, ``OPTModel`` or
    ``ViTModel`` has none) and the config does not untie it."""
    classes = config.get("architectures") or []
    if not isinstance(classes, list) or not any(str(c).endswith(_LM_HEAD_CLASSES) for c in classes):
        return False
    return config.get("tie_word_embeddings", True) is not False


def _order(prefix: str) -> tuple[int, str]:
    return (1 if "decoder" in prefix else 0, prefix)
