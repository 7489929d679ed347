"""A snapshot's SentencePiece ``tokenizer.model`` (older Llama-family releases ship it without a
tokenizer.json), read as llama.cpp's converter reads it and tokenized as llama.cpp tokenizes the
result: BPE models with its SentencePiece tokenizer, unigram ones with its unigram tokenizer
(:mod:`.gguf_vocab`, :mod:`.ugm`). Two things follow the model file where llama.cpp's converter
does not: its dummy-prefix setting (the converter leaves llama.cpp's default, a prefix) and,
when nothing beside it names them, the trainer's special ids. As in llama.cpp, a BPE model's
normalization rules (its character map, whitespace collapsing) are not applied; Llama-family
models state none.

The file is a protobuf ``ModelProto``; only its pieces, the trainer's model type and special
ids, and the normalizer's dummy prefix, whitespace rule and character map are read, with the
bounds-checked wire walker (the ``sentencepiece`` package is not a dependency, and reading
needs nothing else of it).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from nneditor.artifacts.wire.protobuf import I32, LEN, VARINT, WireError, iter_fields
from nneditor.tokenize.base import TextTokenizer, TokenizerError

SPM_FILE = "tokenizer.model"
EXACT_SPM = (
    "the model's own tokenizer (tokenizer.model, SentencePiece), as llama.cpp's converter reads it"
)
#: SentencePiece's piece types (sentencepiece_model.proto), the numbers llama.cpp uses too
_NORMAL, _CONTROL, _USER, _UNUSED = 1, 3, 4, 5
_UNIGRAM, _BPE = 1, 2
#: families whose SentencePiece models transformers' tokenizers frame or offset their own way
#: (DeBERTa-v3's spm.model, ALBERT's spiece.model, XLM-R's and the fairseq translation models'
#: sentencepiece.bpe.model): only their tokenizer.json gives their ids
OWN_FRAMING = frozenset(
    {"deberta-v2", "albert", "xlm-roberta", "camembert", "mbart", "m2m_100", "marian", "xglm"}
)
#: files larger than this are no tokenizer model (the largest real ones are a few MB)
_MAX_BYTES = 64 << 20


def spm_tokenizer(file: Path) -> TextTokenizer:
    """The tokenizer of a SentencePiece model file (a snapshot's tokenizer.model), with the
    tokenizer_config.json and config.json beside it."""
    from nneditor.tokenize.gguf_vocab import gguf_tokenizer

    folder = file.parent
    family = _json(folder / "config.json").get("model_type")
    if family in OWN_FRAMING:
        raise TokenizerError(
            f"{file} is a {family} SentencePiece model, which transformers frames and extends "
            "its own way (CLS/SEP framing, id offsets, mask tokens after the pieces); read as a "
            "Llama or T5 vocabulary its ids would be wrong. Give its tokenizer.json (transformers "
            "writes one: AutoTokenizer.from_pretrained(folder).save_pretrained(folder)), or ids"
        )
    try:
        size = file.stat().st_size
        if size > _MAX_BYTES:
            raise TokenizerError(f"{file} is {size:,} bytes, too large for a SentencePiece model")
        data = file.read_bytes()
        meta = _metadata(data)
    except OSError as exc:
        raise TokenizerError(f"{file} could not be read: {exc}") from None
    except WireError as exc:
        raise TokenizerError(f"{file} is not a SentencePiece model: {exc}") from None
    _apply_config(meta, folder)
    tok = gguf_tokenizer(meta, str(file))
    tok.name = f"tokenizer.model:{'bpe' if meta['tokenizer.ggml.model'] == 'llama' else 'unigram'}"
    tok.fidelity = EXACT_SPM
    return tok


def _metadata(data: bytes) -> dict[str, Any]:
    """The GGUF tokenizer keys llama.cpp's converter writes for this model."""
    tokens: list[str] = []
    scores: list[float] = []
    types: list[int] = []
    trainer: dict[int, int] = {}
    normalizer: dict[int, Any] = {}
    for fno, wt, value, length in iter_fields(data, 0, len(data)):
        if fno == 1 and wt == LEN:
            piece, score, kind = _piece(data, value, value + length)
            tokens.append(piece)
            scores.append(score)
            types.append(kind)
        elif fno == 2 and wt == LEN:
            trainer = _varints(data, value, value + length)
        elif fno == 3 and wt == LEN:
            normalizer = _normalizer(data, value, value + length)
    if not tokens:
        raise WireError("it holds no pieces")
    model_type = trainer.get(3, _UNIGRAM)
    if model_type not in (_UNIGRAM, _BPE):
        named = {3: "word", 4: "char"}.get(model_type, str(model_type))
        raise TokenizerError(
            f"this SentencePiece model is of the {named} kind; NNEditor reads its BPE and "
            "unigram models"
        )
    meta: dict[str, Any] = {
        "tokenizer.ggml.model": "llama" if model_type == _BPE else "t5",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.scores": scores,
        "tokenizer.ggml.token_type": types,
        "tokenizer.ggml.add_space_prefix": bool(normalizer.get(3, True)),
        "tokenizer.ggml.remove_extra_whitespaces": bool(normalizer.get(4, True)),
        # a decoder's text starts with BOS (llama.cpp's unigram default, T5's EOS, unless a
        # tokenizer_config.json says so)
        "tokenizer.ggml.add_bos_token": True,
        "tokenizer.ggml.add_eos_token": False,
    }
    if normalizer.get(2):
        meta["tokenizer.ggml.precompiled_charsmap"] = normalizer[2]
    # the trainer's ids (int32: -1, "none", arrives as a 64-bit two's complement)
    for key, fno, default in (
        ("unknown", 40, 0),
        ("bos", 41, 1),
        ("eos", 42, 2),
        ("padding", 43, -1),
    ):
        ident = trainer.get(fno, default)
        ident = ident - (1 << 64) if ident >= 1 << 63 else ident
        if 0 <= ident < len(tokens):
            meta[f"tokenizer.ggml.{key}_token_id"] = ident
    return meta


def _piece(data: bytes, start: int, end: int) -> tuple[str, float, int]:
    text, score, kind = "", 0.0, _NORMAL
    for fno, wt, value, length in iter_fields(data, start, end):
        if fno == 1 and wt == LEN:
            text = data[value : value + length].decode("utf-8", "replace")
        elif fno == 2 and wt == I32:
            score = struct.unpack_from("<f", data, value)[0]
        elif fno == 3 and wt == VARINT:
            kind = int(value)
    return text, score, kind


def _varints(data: bytes, start: int, end: int) -> dict[int, int]:
    return {fno: int(v) for fno, wt, v, _n in iter_fields(data, start, end) if wt == VARINT}


def _normalizer(data: bytes, start: int, end: int) -> dict[int, Any]:
    out: dict[int, Any] = {}
    for fno, wt, value, length in iter_fields(data, start, end):
        if wt == VARINT:
            out[fno] = int(value)
        elif fno == 2 and wt == LEN:  # the precompiled character map
            out[2] = bytes(data[value : value + length])
    return out


def _json(file: Path) -> dict[str, Any]:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _looks_special(text: str) -> bool:
    """Added tokens llama.cpp's converter makes control tokens although not marked special."""
    return (
        text in ("<pad>", "<mask>", "<2mass>", "[@BOS@]")
        or (text.startswith("<|") and text.endswith("|>"))
        or (text.startswith("<\uff5c") and text.endswith("\uff5c>"))
        or (text.startswith("<unused") and text.endswith(">"))
    )


def _apply_config(meta: dict[str, Any], folder: Path) -> None:
    """What llama.cpp's converter takes from beside the model: the pieces padded to the
    model's vocab_size ([PADn], unused), added_tokens.json's and tokenizer_config.json's added
    tokens set at their ids (control tokens when special or special-looking, else user-defined
    with their "\u2581" as spaces), the special ids (tokenizer_config.json's or
    special_tokens_map.json's tokens, else config.json's ids, else the trainer's) and whether
    BOS/EOS are added."""
    tokens: list[str] = meta["tokenizer.ggml.tokens"]
    scores: list[float] = meta["tokenizer.ggml.scores"]
    types: list[int] = meta["tokenizer.ggml.token_type"]
    config = _json(folder / "tokenizer_config.json")
    model_config = _json(folder / "config.json")
    size = model_config.get("vocab_size")
    if isinstance(size, int) and len(tokens) < size <= len(tokens) + (1 << 20):
        for i in range(len(tokens), size):
            tokens.append(f"[PAD{i}]")
            scores.append(-1000.0)
            types.append(_UNUSED)

    def put(ident: int, text: str, kind: int) -> None:
        if 0 <= ident < len(tokens):
            tokens[ident] = text.replace("\u2581", " ") if kind == _USER else text
            scores[ident], types[ident] = -1000.0, kind

    for word, ident in _json(folder / "added_tokens.json").items():
        if isinstance(ident, int):
            put(ident, word, _USER)
    added = config.get("added_tokens_decoder")
    for key, entry in added.items() if isinstance(added, dict) else ():
        content = entry.get("content") if isinstance(entry, dict) else None
        if str(key).isdigit() and isinstance(content, str):
            special = bool(entry.get("special")) or _looks_special(content)
            put(int(key), content, _CONTROL if special else _USER)
    index = {t: i for i, t in enumerate(tokens)}
    special_map = {**_json(folder / "special_tokens_map.json"), **config}
    for key, name in (("bos", "bos_token"), ("eos", "eos_token"), ("padding", "pad_token")):
        stated = model_config.get(f"{name}_id")  # over the trainer's ids, under the files'
        if isinstance(stated, int) and 0 <= stated < len(tokens):
            meta[f"tokenizer.ggml.{key}_token_id"] = stated
        value = special_map.get(name)
        named = value.get("content") if isinstance(value, dict) else value
        if isinstance(named, str) and named in index:
            meta[f"tokenizer.ggml.{key}_token_id"] = index[named]
    for key in ("add_bos_token", "add_eos_token"):
        if isinstance(config.get(key), bool):
            meta[f"tokenizer.ggml.{key}"] = config[key]
