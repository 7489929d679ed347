"""Text commands for language models: ``tokenize``, ``detokenize``, ``predict``.

    nneditor tokenize PATH --text TEXT [--tokenizer embedded|FILE] [--codebook KIND] [--special]
                      [--out F.npz] [--dtype int64|int32] [--json]
    nneditor detokenize PATH --ids 1,2,3 [--skip-special] [--json]
    nneditor predict TRACE_DIR [--value NAME] [--batch 0] [--position -1] [--top 20] [--json]
    (a speech recognizer's trace: its transcription by greedy CTC decoding; a CLIPModel's or
    SiglipModel's: each text prompt's probability for the image)

PATH is a GGUF file, a Hugging Face snapshot folder, a tokenizer.json, or a model with a
tokenizer.json beside it. ``--out`` writes the ids as the .npz a trace takes (one array named
for the model's token input, plus a note of the tokenizer and its fidelity).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from nneditor.cli.common import CLIError, check_destination, print_json
from nneditor.tracing.capture_file import CaptureReadError, read_value


def register(sub: argparse._SubParsersAction) -> None:
    from nneditor.tokenize.codebooks import CODEBOOKS

    s = sub.add_parser("tokenize", help="text -> the model's token ids (optionally as .npz)")
    s.add_argument("path")
    s.add_argument("--text", required=True)
    s.add_argument("--tokenizer", default="embedded", metavar="embedded|FILE")
    s.add_argument("--codebook", choices=CODEBOOKS, help="a smoke-test codebook instead")
    s.add_argument("--special", action="store_true", help="special-token text -> the token")
    s.add_argument(
        "--pair",
        metavar="TEXT",
        help="a second text (a cross-encoder's passage, an NLI hypothesis): framed with --text "
        "as the tokenizer frames pairs, its tokens in segment 1",
    )
    s.add_argument("--out", metavar="F.npz", help="write the ids for a trace")
    s.add_argument("--dtype", choices=("int64", "int32"), default="int64")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_tokenize)

    s = sub.add_parser("detokenize", help="token ids -> text")
    s.add_argument("path")
    s.add_argument("--ids", required=True, metavar="1,2,3")
    s.add_argument("--tokenizer", default="embedded", metavar="embedded|FILE")
    s.add_argument("--skip-special", action="store_true", help="leave special tokens out")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_detokenize)

    s = sub.add_parser("predict", help="next-token predictions from a trace's logits")
    s.add_argument("trace_dir")
    s.add_argument("--value", help="the logits value (found by itself when omitted)")
    s.add_argument("--batch", type=int, default=0)
    s.add_argument(
        "--position",
        type=int,
        default=None,
        help="the position to read (default: the prompt's first mask token, else the last)",
    )
    s.add_argument("--top", type=int, default=20)
    s.add_argument("--tokenizer", default="embedded", metavar="embedded|FILE")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_predict)


def _input_names(path: Path) -> tuple[str, str | None]:
    """The model's token-id input and its segment input (None when it takes none)."""
    from nneditor.tokenize.hf_files import is_tokenizer_file

    if is_tokenizer_file(path):
        return "input_ids", "token_type_ids"
    import nneditor
    from nneditor.tokenize import token_input_name

    with nneditor.open(path) as doc:
        name = token_input_name(doc)
        segments = token_input_name(doc, "segments")
    if name is None:
        raise CLIError(f"{path} has no input that takes token ids")
    return name, segments


def cmd_tokenize(args: argparse.Namespace) -> int:
    from nneditor.tokenize import load_tokenizer
    from nneditor.tokenize.token_inputs import write_token_npz

    path = Path(args.path)
    tok = load_tokenizer(path, args.tokenizer, args.codebook)
    types: list[int] | None = None
    if args.pair is None:
        ids = tok.encode(args.text, special=args.special)
    else:
        ids, types = tok.encode_pair(args.text, args.pair, special=args.special)
    named = args.out or not path.name.endswith("tokenizer.json")
    name, segment_input = _input_names(path) if named else ("input_ids", "token_type_ids")
    # (a model without a segment table, as DeBERTa-v3's or RoBERTa's, reads the pair's ids
    # alone: their types change nothing there)
    note = _range_note(path, ids, tok.name)
    if args.out:
        if not args.out.endswith(".npz"):
            raise CLIError(f"--out must name a .npz file, got {args.out!r}")
        check_destination(args.out)
        if note:
            raise CLIError(note + "; nothing written")
        segments = (segment_input, types, args.pair) if types and segment_input else None
        write_token_npz(args.out, name, ids, tok, args.text, args.dtype, args.special, segments)
    if args.json:
        out = {"ids": ids, "input": name, **tok.describe(), "special": args.special}
        if types is not None:
            out = {**out, "token_types": types, "segment_input": segment_input}
        print_json({**out, "note": note} if note else out)
    else:
        print(" ".join(str(i) for i in ids))
        print(f"{len(ids)} tokens for input {name!r}; {tok.fidelity}", file=sys.stderr)
        if note:
            print(f"note: {note}", file=sys.stderr)
        if args.out:
            print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _range_note(path: Path, ids: list[int], source: str) -> str:
    """Why ``ids`` cannot feed the model at ``path`` ("" when they can or it is unknown)."""
    from nneditor.tokenize import model_vocab
    from nneditor.tokenize.hf_files import is_tokenizer_file

    rows = None if is_tokenizer_file(path) or path.is_dir() else model_vocab(path)
    if not rows or not ids or max(ids) < rows:
        return ""
    return (
        f"ids reach {max(ids):,} but {path.name}'s embedding table has {rows:,} rows: "
        f"{source} is not this model's tokenizer"
    )


def cmd_detokenize(args: argparse.Namespace) -> int:
    from nneditor.tokenize import load_tokenizer

    try:
        ids = [int(t) for t in args.ids.replace(" ", ",").split(",") if t]
    except ValueError:
        raise CLIError(f"--ids must be integers separated by commas, got {args.ids!r}") from None
    tok = load_tokenizer(Path(args.path), args.tokenizer)
    text = tok.decode(ids, keep_special=not args.skip_special)
    if args.json:
        print_json({"text": text, "ids": ids, "codebook": tok.name, "fidelity": tok.fidelity})
    else:
        print(text)
    return 0


def _outputs(model: str | None) -> list[str]:
    """The traced model's graph output names ([] when it cannot be opened any more)."""
    if not model:
        return []
    import nneditor
    from nneditor.errors import NNEditorError

    try:
        with nneditor.open(model) as doc:
            return [vi.name for vi in doc.graph.outputs] if doc.graph is not None else []
    except (NNEditorError, OSError):
        return []


def _answers(
    folder: Path,
    values: list[dict[str, Any]],
    entry: dict[str, Any],
    logits: np.ndarray,
    tok: Any,  # noqa: ANN401
    args: argparse.Namespace,
) -> int:
    """A question-answering model's best answer spans (``--position`` reads one token's
    start and end logits instead)."""
    from nneditor.tokenize.predictions import answer_spans

    ids = _prompt(folder, values)
    if ids is None:
        raise CLIError("the trace holds no captured prompt (tokens) to read answers from")
    out = answer_spans(logits, entry["name"], ids, tok, args.top).as_dict()
    if args.json:
        print_json(out)
        return 0
    print(f"{out['value']}: answer spans")
    for k, t in enumerate(out["top"], 1):
        text = json.dumps(t["text"], ensure_ascii=False) if t["text"] is not None else "?"
        print(f"{k:>3}. tokens {t['start']}-{t['end']} {t['prob']:8.4f}  {text}")
    print(f"note: {out['note']}", file=sys.stderr)
    return 0


def _prompt(folder: Path, values: list[dict[str, Any]]) -> np.ndarray | None:
    """The captured prompt (the ``tokens`` input), or None."""
    entry = next((v for v in values if v.get("name") == "tokens" and v.get("file")), None)
    if entry is None:
        return None
    try:
        return np.asarray(read_value(folder, entry, mmap=False))
    except CaptureReadError:
        return None


def _mask_position(folder: Path, values: list[dict[str, Any]], tok: Any) -> int | None:  # noqa: ANN401
    """Where a masked-language model's prompt (the captured ``tokens``) holds its mask token."""
    from nneditor.tokenize.predictions import mask_position

    ids = _prompt(folder, values) if tok is not None and tok.mask_id is not None else None
    return mask_position(ids, tok) if ids is not None else None


def _transcription(
    folder: Path, values: list[dict[str, Any]], model: str | None, as_json: bool
) -> int:
    """A CTC speech recognizer's trace: the text greedy CTC decoding reads from its logits
    (the best character per frame, repeats merged, blanks dropped) with its vocabulary."""
    from nneditor.tokenize import TokenizerError
    from nneditor.tokenize.ctc import greedy_ids, load_ctc_vocab

    entry = next((v for v in values if v.get("name") == "result_output" and v.get("file")), None)
    if entry is None:
        raise CLIError(
            "this speech model's trace holds no CTC logits (result_output): a base model "
            "(Wav2Vec2Model, HubertModel) ends at its last hidden state, which holds no "
            "characters; trace a ...ForCTC snapshot, or read a value with --value NAME"
        )
    try:
        vocab = load_ctc_vocab(Path(model)) if model else None
    except TokenizerError as exc:
        raise CLIError(str(exc)) from None
    if vocab is None:
        raise CLIError(
            f"{model or 'the traced model'} has no CTC vocabulary (vocab.json with a "
            "Wav2Vec2CTCTokenizer tokenizer_config.json) to read its logits as characters; "
            "--value result_output reads them as plain logits"
        )
    try:
        logits = np.asarray(read_value(folder, entry, mmap=False))
    except CaptureReadError as exc:
        raise CLIError(str(exc)) from None
    ids = greedy_ids(logits)
    text = vocab.decode(ids)
    out: dict[str, Any] = {
        "value": entry["name"],
        "text": text,
        "frames": int(ids.size),
        "ids": [int(i) for i in ids],
        "blank_id": vocab.blank_id,
        "decoding": "greedy CTC: the best id per frame, repeats merged, blanks dropped",
        "note": "the value is partial" if entry.get("status") == "partial" else "",
    }
    if as_json:
        print_json(out)
        return 0
    print(f"{entry['name']}: greedy CTC over {ids.size} frames:")
    print(json.dumps(text, ensure_ascii=False))
    if out["note"]:
        print(f"note: {out['note']}", file=sys.stderr)
    return 0


def _zero_shot(
    folder: Path,
    values: list[dict[str, Any]],
    run: dict[str, Any],
    model: str | None,
    as_json: bool,
) -> int:
    """A CLIPModel's or SiglipModel's trace: each prompt's probability for the image, from
    logits_per_image (CLIP: their softmax; SigLIP: each one's sigmoid), its prompts named by
    the text they were made from (``nneditor inputs --text``)."""
    from nneditor.tokenize.zero_shot import SCORING, pair_kind, prompt_probabilities

    entry = next(v for v in values if v.get("name") == "logits_per_image")
    if not entry.get("file"):
        raise CLIError("the trace did not capture logits_per_image; trace again capturing it")
    kind = pair_kind(Path(model)) if model and Path(model).is_dir() else ""
    if not kind:
        raise CLIError(
            f"the traced model {model or '(unrecorded)'} is no longer a readable CLIPModel or "
            "SiglipModel snapshot, whose config.json says how its logits become probabilities; "
            "--value logits_per_image reads them as plain logits"
        )
    try:
        logits = np.asarray(read_value(folder, entry, mmap=False), np.float64).reshape(-1)
    except CaptureReadError as exc:
        raise CLIError(str(exc)) from None
    note = (run.get("input_notes") or {}).get("input_ids") or {}
    texts = [str(t) for t in note.get("texts") or []]
    if len(texts) != logits.size:
        texts = [f"prompt {i}" for i in range(logits.size)]
    probs = prompt_probabilities(logits, kind)
    how = (
        "the softmax over the prompts, which compete: the probabilities sum to 1"
        if SCORING[kind] == "softmax"
        else "the sigmoid of each prompt's logit, each judged alone"
    )
    out: dict[str, Any] = {
        "value": "logits_per_image",
        "scoring": how,
        "prompts": [
            {"text": t, "logit": float(g), "prob": float(p)}
            for t, g, p in zip(texts, logits, probs, strict=True)
        ],
        "note": "the value is partial" if entry.get("status") == "partial" else "",
    }
    if as_json:
        print_json(out)
        return 0
    print(f"logits_per_image: each prompt's probability by {how}:")
    for k in np.argsort(-probs, kind="stable"):
        t = out["prompts"][int(k)]
        print(f"{t['prob']:8.4f} {t['logit']:10.4f}  {json.dumps(t['text'], ensure_ascii=False)}")
    if out["note"]:
        print(f"note: {out['note']}", file=sys.stderr)
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    from nneditor.tokenize import TokenizerError, load_tokenizer
    from nneditor.tokenize.predictions import class_labels, find_logits, predict

    folder = Path(args.trace_dir)
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise CLIError(
            f"{folder} is not a trace folder (no readable manifest.json); give the folder "
            "`nneditor trace --out` wrote"
        ) from None
    run = manifest.get("run") or {}
    # an edited revision's run traced a private copy: the vocabulary is the source's
    model = run.get("edits_of") or run.get("model")
    tok = None
    why = ""
    if args.tokenizer != "embedded" or model:
        try:
            tok = load_tokenizer(Path(model or args.tokenizer), args.tokenizer)
        except TokenizerError as exc:
            why = str(exc)
    values = manifest.get("values") or []
    if not args.value and any(v.get("name") == "input_values" for v in values):
        return _transcription(folder, values, model, args.json)  # a speech recognizer's
    if not args.value and any(v.get("name") == "logits_per_image" for v in values):
        return _zero_shot(folder, values, run, model, args.json)  # CLIPModel, SiglipModel
    if args.value:
        entry = next((v for v in values if v.get("name") == args.value), None)
        if entry is None or not entry.get("file"):
            raise CLIError(f"the trace has no captured value named {args.value!r}")
    else:
        traced = str(run.get("model") or "")
        graph_of = traced if traced and Path(traced).is_file() else model  # the copy if kept
        entry = find_logits(values, tok.vocab_size if tok else None, _outputs(graph_of))
    try:
        logits = np.asarray(read_value(folder, entry, mmap=False))
    except CaptureReadError as exc:
        raise CLIError(str(exc)) from None
    labels = class_labels(Path(model)) if model else None
    images = any(v.get("name") == "pixel_values" for v in values)
    if images and labels is None and tok is None and not args.value:
        raise CLIError(
            f"this image model has no classes to predict: it states no classification head "
            f"(no id2label), and its output {entry['name']} is an embedding or a hidden state, "
            "not class logits (CLIP's and SigLIP's vision towers, ViTModel, Dinov2Model embed "
            "images); its values are in the trace folder, and --value NAME reads one as logits"
        )
    if labels is not None and labels.scoring == "spans" and args.position is None:
        return _answers(folder, values, entry, logits, tok, args)
    position, masked = args.position, None
    if position is None and labels is None:  # (a classifier: its own rows, no mask reading)
        masked = _mask_position(folder, values, tok)
    if position is None:
        position = -1 if masked is None else masked
    result = predict(logits, entry["name"], tok, args.batch, position, args.top, labels)
    out = result.as_dict()
    if masked is not None:
        word = tok.encoder.piece(tok.mask_id) if tok is not None and tok.mask_id is not None else ""
        said = f"position {masked} holds the prompt's first mask token {word}; --position reads another"
        out["note"] = (out["note"] + "; " if out["note"] else "") + said
    if entry.get("status") == "partial":
        out["note"] = (out["note"] + "; " if out["note"] else "") + "the value is partial"
    if why and labels is None:  # (a classifier's labels need no vocabulary)
        out["note"] = (out["note"] + "; " if out["note"] else "") + why
    if args.json:
        print_json(out)
        return 0
    print(f"{out['value']} at position {out['position']} (batch {out['batch']}):")
    for k, t in enumerate(out["top"], 1):
        text = json.dumps(t["text"], ensure_ascii=False) if t["text"] is not None else "?"
        prob = f"{t['prob']:8.4f}" if t["prob"] is not None else f"{'-':>8}"
        print(f"{k:>3}. {t['id']:>7} {prob} {t['logit']:10.4f}  {text}")
    if out["note"]:
        print(f"note: {out['note']}", file=sys.stderr)
    return 0
