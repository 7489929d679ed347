"""Text to token ids and back, with the model's own tokenizer where the artifact has one.

Sources, each stating its fidelity (stored with the generated ids):

- a GGUF file's embedded vocabulary (:mod:`.gguf_vocab`), ids equal to llama.cpp's;
- a Hugging Face ``tokenizer.json`` (or ``vocab.json`` + ``merges.txt``) through the
  ``tokenizers`` library (:mod:`.hf_files`);
- smoke-test codebooks (:mod:`.codebooks`): bytes, code points, hashed words — labelled as
  not the model's tokenizer.

:func:`load_tokenizer` picks the source; :func:`token_inputs` writes the ids as the named
``.npz`` a trace takes; :mod:`.predictions` reads next-token predictions from captured logits.
"""

from __future__ import annotations

from pathlib import Path

from nneditor.tokenize.base import SMOKE_TEST, TextTokenizer, TokenizerError
from nneditor.tokenize.codebooks import CODEBOOKS, codebook

__all__ = [
    "CODEBOOKS",
    "SMOKE_TEST",
    "TextTokenizer",
    "TokenizerError",
    "load_tokenizer",
    "model_vocab",
    "token_input_name",
]


def load_tokenizer(
    path: str | Path,
    tokenizer: str = "embedded",
    codebook_name: str | None = None,
    vocab_size: int | None = None,
) -> TextTokenizer:
    """The tokenizer for the artifact at ``path`` (a GGUF file, a Hugging Face snapshot folder,
    an ONNX model, or a tokenizer.json itself).

    ``tokenizer`` is "embedded" (the artifact's own vocabulary) or a tokenizer.json path;
    ``codebook_name`` picks a smoke-test codebook instead (sized by ``vocab_size`` or the
    model's embedding rows). Raises :class:`TokenizerError` with what is missing.
    """
    p = Path(path)
    if codebook_name is not None:
        return codebook(codebook_name, vocab_size or model_vocab(p) or 256)
    from nneditor.tokenize.hf_files import hf_tokenizer, is_tokenizer_file

    if tokenizer != "embedded":
        return hf_tokenizer(Path(tokenizer))
    if is_tokenizer_file(p):
        return hf_tokenizer(p)
    if p.is_dir():
        return hf_tokenizer(p)
    from nneditor.semantic.open_graph import open_with_graph

    with open_with_graph(p) as doc:
        if doc.format == "gguf":
            from nneditor.tokenize.gguf_vocab import gguf_tokenizer

            return gguf_tokenizer(doc.metadata, str(p))
        beside = [q for q in (p.parent / "tokenizer.json",) if q.is_file()]
        if beside:
            return hf_tokenizer(beside[0])
        raise TokenizerError(
            f"{p.name} ({doc.format}) embeds no tokenizer and there is no tokenizer.json beside "
            "it; give one with --tokenizer FILE, or choose a smoke-test --codebook "
            f"({', '.join(CODEBOOKS)})"
        )


def model_vocab(path: Path) -> int | None:
    """Rows of the embedding table the model's token input indexes, when it is known."""
    try:
        from nneditor.semantic.open_graph import open_with_graph

        with open_with_graph(path) as doc:
            if doc.graph is None:
                return None
            from nneditor.inputs.spec import infer_vocab_size

            name = token_input_name(doc)
            return infer_vocab_size(doc, name) if name else None
    except Exception:  # a codebook needs no model: a smoke test of a tokenizer.json is fine
        return None


def token_input_name(doc: object, role: str = "tokens") -> str | None:
    """The model input that takes token ids (None when the model has none); ``role``
    "segments": the one that takes BERT's token types (a text pair's segments)."""
    graph = getattr(doc, "graph", None)
    if graph is None:
        return None
    from nneditor.inputs.spec import detect_inputs

    try:
        plan = detect_inputs(doc)  # type: ignore[arg-type]
    except Exception:
        return None
    if role != "tokens":
        return next((s.name for s in plan.inputs if s.role == role), None)
    tokens = [s.name for s in plan.inputs if s.role == "tokens"]
    if tokens:
        return tokens[0]
    ints = [s.name for s in plan.inputs if (s.dtype or "").startswith("int")]
    return ints[0] if len(ints) == 1 else None
