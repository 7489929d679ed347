"""``nneditor inputs``: detect a model's inputs, build values from sources, write the set.

    nneditor inputs PATH [--auto] [--out DIR] [--dim NAME=N] [--shape INPUT=1x3x8x8]
                    [--tensor [INPUT=]FILE] [--image INPUT=FILE [--normalize imagenet]
                    [--layout NCHW]] [--audio INPUT=FILE.wav] [--text INPUT=TEXT ...]
                    [--csv INPUT=FILE] [--pattern INPUT=KIND]
                    [--series INPUT=KIND] [--seed N] [--json]

Without ``--out`` the detected presets are printed. With ``--out`` every input must get values
(from a source, or from ``--auto``); the set is written as DIR/inputs.npz, one .npy per input
and DIR/plan.json, and validated after writing.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

import numpy as np

from nneditor.inputs.assign import build_inputs, write_input_set
from nneditor.inputs.audio import audio_for_input, model_processing
from nneditor.inputs.csv_source import csv_for_input
from nneditor.inputs.generate import PATTERNS, SERIES, pattern, time_series
from nneditor.inputs.image import LAYOUTS, NORMALIZATIONS, image_for_input, model_sizing
from nneditor.inputs.picker import assign_file
from nneditor.inputs.spec import (
    InputPlan,
    InputSpecError,
    detect_inputs,
    parse_assignments,
    parse_shape,
)

if TYPE_CHECKING:
    from nneditor.model.document import Document


def add_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("path")
    s.add_argument("--auto", action="store_true", help="generate every input not given a source")
    s.add_argument("--out", help="folder for inputs.npz, one .npy per input and plan.json")
    add_shape_arguments(s)
    s.add_argument("--tensor", action="append", metavar="[INPUT=]FILE", help=".npy/.npz to assign")
    s.add_argument("--image", action="append", metavar="INPUT=FILE", help="PNG/JPEG for an input")
    s.add_argument(
        "--normalize",
        choices=sorted(NORMALIZATIONS),
        help="pixel scaling of --image inputs (default: the model's preprocessor_config.json, "
        "else imagenet)",
    )
    s.add_argument("--layout", choices=LAYOUTS, help="image layout (default: from the shape)")
    s.add_argument(
        "--audio",
        action="append",
        metavar="INPUT=FILE",
        help="PCM WAV for a waveform input, at the model's sampling rate, normalised as its "
        "preprocessor_config.json says",
    )
    s.add_argument(
        "--text",
        action="append",
        metavar="INPUT=TEXT",
        help="a prompt for a token-id input, tokenized by the model's own tokenizer; repeat it "
        "for several prompts (CLIPModel, SiglipModel: one row each, padded as their "
        "processors pad them)",
    )
    s.add_argument("--csv", action="append", metavar="INPUT=FILE", help="numeric CSV for an input")
    s.add_argument(
        "--pattern", action="append", metavar="INPUT=KIND", help=f"one of {', '.join(PATTERNS)}"
    )
    s.add_argument(
        "--series", action="append", metavar="INPUT=KIND", help=f"one of {', '.join(SERIES)}"
    )
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--json", action="store_true", help="print JSON")


def add_shape_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("--dim", action="append", metavar="NAME=N", help="set a symbolic dimension")
    s.add_argument("--shape", action="append", metavar="INPUT=SHAPE", help="set an input's shape")


def plan_from_args(doc: Document, args: argparse.Namespace) -> InputPlan:
    dims = {}
    for k, v in parse_assignments(args.dim, "--dim").items():
        try:
            dims[k] = int(v)
        except ValueError:
            raise InputSpecError(f"--dim {k}={v}: {v!r} is not an integer") from None
    shapes = {k: parse_shape(v) for k, v in parse_assignments(args.shape, "--shape").items()}
    return detect_inputs(doc, dims, shapes)


def provided_from_args(plan: InputPlan, args: argparse.Namespace) -> dict[str, np.ndarray]:
    """Arrays from every source option, validated against the plan."""
    out: dict[str, np.ndarray] = {}
    for item in args.tensor or []:
        target, sep, path = item.rpartition("=")
        out.update(assign_file(plan, path, target if sep and target else None))
    images = parse_assignments(args.image, "--image")
    sizing = model_sizing(args.path) if images else None  # the model's image processor's
    for name, path in images.items():
        out[name] = image_for_input(plan[name], path, args.normalize, args.layout, sizing)
    sounds = parse_assignments(getattr(args, "audio", None), "--audio")
    processing = model_processing(args.path) if sounds else None  # its feature extractor's
    for name, path in sounds.items():
        out[name] = audio_for_input(plan[name], path, processing)
    for name, path in parse_assignments(args.csv, "--csv").items():
        out[name] = csv_for_input(plan[name], path)
    for name, kind in parse_assignments(args.pattern, "--pattern").items():
        spec = plan[name]
        out[name] = pattern(kind, _shape(spec.shape, name), spec.numpy_dtype, seed=args.seed)
    for name, kind in parse_assignments(args.series, "--series").items():
        spec = plan[name]
        out[name] = time_series(kind, _shape(spec.shape, name), spec.numpy_dtype, seed=args.seed)
    return out


def _shape(shape: tuple[int, ...] | None, name: str) -> tuple[int, ...]:
    if shape is None:
        raise InputSpecError(f"input {name!r} has no known shape; set one with --shape")
    return shape


def texts_from_args(
    plan: InputPlan, args: argparse.Namespace
) -> tuple[dict[str, np.ndarray], dict[str, Any] | None]:
    """Token ids of ``--text INPUT=TEXT`` (one row per prompt) and the tokenizer's note."""
    from pathlib import Path

    from nneditor.tokenize import TokenizerError, load_tokenizer
    from nneditor.tokenize.zero_shot import pair_kind, prompt_ids

    texts: dict[str, list[str]] = {}
    for item in getattr(args, "text", None) or []:
        name, sep, text = item.partition("=")
        if not sep or not name or not text:
            raise InputSpecError(f"--text {item!r} is not INPUT=TEXT")
        texts.setdefault(name, []).append(text)
    if len(texts) > 1:
        raise InputSpecError(f"--text names several inputs ({sorted(texts)}); give one")
    if not texts:
        return {}, None
    ((name, prompts),) = texts.items()
    if plan[name].role != "tokens":
        raise InputSpecError(f"--text {name}=...: input {name!r} does not take token ids")
    path = Path(args.path)
    folder = path if path.is_dir() else path.parent
    if pair_kind(folder) == "siglip" and not (folder / "tokenizer.json").is_file():
        raise InputSpecError(
            f"{folder.name} (SiglipModel) has no tokenizer.json, and NNEditor does not read "
            "SiglipTokenizer's spiece.model with its text canonicalisation; give input_ids made "
            'by its processor (padding="max_length") with --tensor input_ids=FILE.npy'
        )
    try:
        ids, note = prompt_ids(folder, load_tokenizer(path), prompts, name)
    except TokenizerError as exc:
        raise InputSpecError(str(exc)) from None
    return {name: ids}, note


def run(doc: Document, args: argparse.Namespace) -> int:
    plan = plan_from_args(doc, args)
    provided = provided_from_args(plan, args)
    made, text_note = texts_from_args(plan, args)
    provided.update(made)
    if not args.out:
        _print_plan(plan, args.json)
        return 0
    missing = [n for n in plan.names() if n not in provided]
    if missing and not args.auto:
        raise InputSpecError(
            f"inputs {missing} have no source; add --auto to generate them from their presets"
        )
    arrays = build_inputs(plan, provided, args.seed)
    sources = {n: ("provided" if n in provided else "automatic") for n in arrays}
    written = write_input_set(plan, args.out, arrays, sources, args.seed, text_note)
    if args.json:
        _dump(written)
    else:
        for entry in written["inputs"]:
            print(
                f"{entry['name']}\t{entry['dtype']}\t{entry['shape']}\t{entry['source']}\t{entry['file']}"
            )
        for note in written["assumptions"]:
            print(f"assumption: {note}", file=sys.stderr)
        print(f"wrote {args.out}/inputs.npz and plan.json (validated)", file=sys.stderr)
    return 0


def _print_plan(plan: InputPlan, as_json: bool) -> None:
    if as_json:
        _dump(plan.as_dict())
        return
    for spec in plan.inputs:
        shape = "unknown" if spec.shape is None else str(list(spec.shape))
        print(f"{spec.name}\t{spec.declared_text()}\tpreset {shape}\t{spec.role}")
    for note in plan.assumptions:
        print(f"assumption: {note}")
    for problem in plan.problems:
        print(f"problem: {problem}")


def _dump(obj: Any) -> None:
    from nneditor.cli.report import json_text

    sys.stdout.write(json_text(obj) + "\n")


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("inputs", help="detect model inputs and generate/validate a test input set")
    add_arguments(s)
    s.set_defaults(func=cmd_inputs)


def cmd_inputs(args: argparse.Namespace) -> int:
    from nneditor.cli.common import open_document
    from nneditor.inputs.image import model_normalization, stated_scaling

    if not getattr(args, "normalize", None):  # the model's own, where it states one
        stated = stated_scaling(args.path)  # (EfficientNet's processor: its own steps)
        args.normalize = stated or model_normalization(args.path) or "imagenet"
    with open_document(args.path) as doc:
        return run(doc, args)
