"""Hugging Face tokenizer files through the ``tokenizers`` library (exact: the same library
``transformers`` uses for its fast tokenizers).

``tokenizer.json`` is read as is; a folder with ``vocab.json`` + ``merges.txt`` (GPT-2 style),
or either file of that pair, becomes a byte-level BPE; a folder with only a SentencePiece
``tokenizer.model`` (or that file) is read by :mod:`.spm_model`. The file's post-processor adds what the
model expects (BOS/EOS); special-token text in the input is plain text unless ``special`` is
asked for.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nneditor.tokenize.base import EXACT_HF, TextTokenizer, TokenizerError
from nneditor.tokenize.encoder import TokenizersEncoder
from nneditor.tokenize.spm_model import SPM_FILE, spm_tokenizer

#: the two files of a GPT-2 style tokenizer; picking either one means the pair in its folder
BPE_PAIR = ("vocab.json", "merges.txt")


def is_tokenizer_file(path: Path) -> bool:
    """A tokenizer.json (any prefix) or a SentencePiece tokenizer.model."""
    if not path.is_file():
        return False
    return path.name == SPM_FILE or (
        path.suffix == ".json" and path.name.endswith("tokenizer.json")
    )


def hf_tokenizer(path: Path) -> TextTokenizer:
    """From a tokenizer.json, a folder holding one (or vocab.json + merges.txt), or a picked
    vocab.json or merges.txt (the pair in its folder)."""
    from tokenizers import Tokenizer

    folder = path if path.is_dir() else path.parent
    if (
        path.is_dir()
        and not (folder / "tokenizer.json").is_file()
        and (folder / "vocab.txt").is_file()
        and _config(folder).get("tokenizer_class") == "EsmTokenizer"
    ):  # ESM's protein vocabulary (no tokenizer.json in its releases)
        from nneditor.tokenize.esm_vocab import esm_tokenizer

        return esm_tokenizer(folder)
    spm = path if path.is_file() and path.suffix == ".model" else folder / SPM_FILE
    if (path.is_file() and path.suffix == ".model") or (
        path.is_dir() and not (folder / "tokenizer.json").is_file() and spm.is_file()
    ):  # a SentencePiece model (older Llama-family releases ship no tokenizer.json)
        return spm_tokenizer(spm)
    # a picked half of the pair is only usable with its other half beside it
    pair = not path.is_dir() and path.name in BPE_PAIR
    if pair:
        missing = [n for n in BPE_PAIR if not (folder / n).is_file()]
        if missing:
            raise TokenizerError(
                f"{folder} has no {missing[0]}; a GPT-2 style tokenizer needs vocab.json and "
                "merges.txt side by side in one folder"
            )
    file = path if path.is_file() and not pair else folder / "tokenizer.json"
    try:
        if not pair and file.is_file():
            tok = Tokenizer.from_file(str(file))
            source = file
        elif pair or all((folder / n).is_file() for n in BPE_PAIR):
            file = source = folder / "vocab.json"
            tok = _bpe_pair(folder)
        else:
            raise TokenizerError(
                f"{folder} has no tokenizer.json (nor vocab.json + merges.txt, nor "
                "tokenizer.model); give a tokenizer file with --tokenizer, or choose a smoke-test "
                "--codebook"
            )
    except TokenizerError:
        raise
    except Exception as exc:  # the library's own parse error, as a sentence
        raise TokenizerError(
            f"{file} is not a tokenizer the tokenizers library can read: {exc}"
        ) from None
    # a file may pad and cut every text to a fixed length (minilm: 128); as in transformers,
    # the natural length is kept and a length is chosen where the ids are made
    tok.no_padding()
    tok.no_truncation()
    config = _config(folder)
    vocab = tok.get_vocab_size(with_added_tokens=True)
    added = tok.get_added_tokens_decoder()
    specials = frozenset(i for i, t in added.items() if t.special)
    bos = _token_id(tok, config.get("bos_token"))
    eos = _token_id(tok, config.get("eos_token"))
    # what the file's post-processor puts around every text ([CLS] ... [SEP], <s> ...)
    frame = list(tok.encode("", add_special_tokens=True).ids)
    if bos is None and frame:
        bos = _token_id(tok, config.get("cls_token"))
    if eos is None and frame:
        eos = _token_id(tok, config.get("sep_token"))
    if bos is None and frame and frame[0] in specials:  # (CLIP's pair: no names stated)
        bos = frame[0]
    if eos is None and frame and frame[-1] in specials:
        eos = frame[-1]
    return TextTokenizer(
        "tokenizer.json",
        EXACT_HF,
        vocab,
        TokenizersEncoder(tok),
        bos_id=bos,
        eos_id=eos,
        add_bos=bos is not None and frame[:1] == [bos],
        add_eos=eos is not None and frame[-1:] == [eos],
        special_ids=specials,
        source=str(source),
        pad_id=_token_id(tok, config.get("pad_token")),
        framed=True,
        mask_id=_token_id(tok, config.get("mask_token")),
    )


#: tokenizer classes whose vocab.json + merges.txt are GPT-2's byte-level BPE as read here
#: (no framing tokens, GPT-2's word split); others split, mark or frame words their own way
_GPT2_PAIR_CLASSES = ("GPT2Tokenizer", "GPT2TokenizerFast", "CodeGenTokenizer")


def _bpe_pair(folder: Path) -> Any:
    """GPT-2's byte-level BPE from the vocab.json + merges.txt in ``folder`` (CLIP's where
    tokenizer_config.json names CLIPTokenizer: :func:`_clip_pair`); refused where it names
    another tokenizer (Qwen2's split digits apart, RoBERTa's frame texts: the ids would
    differ)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    named = _config(folder).get("tokenizer_class")
    if isinstance(named, str) and named.startswith("CLIPTokenizer"):
        return _clip_pair(folder)
    if isinstance(named, str) and named and named not in _GPT2_PAIR_CLASSES:
        raise TokenizerError(
            f"{folder}'s vocab.json + merges.txt belong to a {named}, which splits or frames "
            "text differently from GPT-2's byte-level BPE that NNEditor builds from the pair; "
            "give the model's tokenizer.json with --tokenizer (transformers writes one with "
            "save_pretrained of its fast tokenizer)"
        )

    bpe = models.BPE.from_file(str(folder / "vocab.json"), str(folder / "merges.txt"))
    tok = Tokenizer(bpe)
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(_declared_specials(folder, tok))
    config = _config(folder)
    bos = _content(config.get("bos_token")) or "<|endoftext|>"
    bos_id = tok.token_to_id(bos)
    if config.get("add_bos_token") is True and bos_id is not None:
        # GPT2Tokenizer's add_bos_token (OPT's files: "</s>" before every text)
        from tokenizers import processors

        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, bos_id)]
        )
    return tok


def _clip_pair(folder: Path) -> Any:
    """CLIP's tokenizer from its vocab.json + merges.txt (a diffusers pipeline's tokenizer
    folder), built as transformers builds it on the tokenizers library: NFC, whitespace runs
    as one space, lowercase; CLIP's word split; byte-level BPE whose word-final pieces end in
    ``</w>``; texts framed by the start and end tokens."""
    from tokenizers import (
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
    )

    config = _config(folder)
    start = _content(config.get("bos_token")) or "<|startoftext|>"
    end = _content(config.get("eos_token")) or "<|endoftext|>"
    unk = _content(config.get("unk_token")) or end
    vocab, merges = models.BPE.read_file(str(folder / "vocab.json"), str(folder / "merges.txt"))
    missing = [t for t in (start, end, unk) if t not in vocab]
    if missing:
        raise TokenizerError(f"{folder}'s CLIP vocabulary lacks its special token {missing[0]!r}")
    tok = Tokenizer(
        models.BPE(
            vocab,
            merges,
            continuing_subword_prefix="",
            end_of_word_suffix="</w>",
            fuse_unk=False,
            unk_token=unk,
        )
    )
    tok.normalizer = normalizers.Sequence(
        [normalizers.NFC(), normalizers.Replace(Regex(r"\s+"), " "), normalizers.Lowercase()]
    )
    words = (
        r"<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|"
        r"[^\s\p{L}\p{N}]+"
    )
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(words), behavior="removed", invert=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False),
        ]
    )
    tok.decoder = decoders.Sequence(
        [decoders.ByteLevel(), decoders.Replace("</w>", " "), decoders.Strip(" ", 0, 1)]
    )
    tok.add_special_tokens([start, end])
    tok.post_processor = processors.RobertaProcessing(
        (end, vocab[end]), (start, vocab[start]), trim_offsets=False, add_prefix_space=False
    )
    return tok


def _config(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _declared_specials(folder: Path, tok: Any) -> list[str]:
    """Special tokens of a vocab.json + merges.txt folder: those special_tokens_map.json and
    tokenizer_config.json name, and GPT-2's ``<|endoftext|>`` (its tokenizer's default)."""
    names: list[str] = ["<|endoftext|>"]
    for file in ("special_tokens_map.json", "tokenizer_config.json"):
        try:
            data = json.loads((folder / file).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict):
            continue
        for key, value in data.items():
            items = value if isinstance(value, list) else [value]
            if key.endswith("_token") or key == "additional_special_tokens":
                names.extend(_content(v) for v in items)
        decoder = data.get("added_tokens_decoder")
        if isinstance(decoder, dict):
            names.extend(_content(v) for v in decoder.values() if isinstance(v, dict))
    return [n for n in dict.fromkeys(names) if n and tok.token_to_id(n) is not None]


def _content(value: Any) -> str:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else ""


def _token_id(tok: Any, token: Any) -> int | None:
    token = _content(token)
    if not token:
        return None
    found = tok.token_to_id(token)
    return int(found) if found is not None else None
