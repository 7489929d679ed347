"""Generate & assign all detected inputs: one folder with inputs.npz, one .npy per input and
plan.json, validated after writing.

Invariants:

- Nothing is written unless every input can be produced (all-or-nothing); files are written
  under temporary names and renamed into place, so an interrupted run leaves no half set.
- The written set is read back with the picker (allow_pickle=False) and checked against the
  model's declarations before the function returns.
- File names are derived from input names with unsafe characters replaced; plan.json maps
  every input name to its file.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from nneditor.inputs.generate import automatic
from nneditor.inputs.picker import TOKEN_NOTE, check_set, load_npy, load_npz
from nneditor.inputs.spec import InputPlan, InputSpec, InputSpecError

INPUTS_NPZ = "inputs.npz"
PLAN_JSON = "plan.json"


def safe_file_stem(name: str, taken: set[str]) -> str:
    """A file-system-safe, unique stem for a tensor name."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "input"
    base, i = stem[:120], 1
    stem = base
    while stem.lower() in taken:
        i += 1
        stem = f"{base}_{i}"
    taken.add(stem.lower())
    return stem


def build_inputs(
    plan: InputPlan, provided: Mapping[str, np.ndarray] | None = None, seed: int = 0
) -> dict[str, np.ndarray]:
    """Provided arrays plus automatic values for every other input, validated as a set.

    Automatic values follow the extents the provided arrays give named dims: a 13-token
    ``input_ids`` [batch, seq] makes the generated ``attention_mask`` [batch, seq] 13 long.
    """
    provided = dict(provided or {})
    blocked = [s.problem for s in plan.inputs if s.name not in provided and s.problem]
    if blocked:
        raise InputSpecError("cannot generate every input: " + "; ".join(p for p in blocked if p))
    bound = bound_dims(plan, provided)
    arrays = {
        spec.name: (
            provided[spec.name]
            if spec.name in provided
            else automatic(with_bound_dims(spec, bound), seed)
        )
        for spec in plan.inputs
    }
    check_set(plan, arrays)
    return arrays


def bound_dims(plan: InputPlan, provided: Mapping[str, np.ndarray]) -> dict[str, int]:
    """Named dims -> the extent the provided arrays give them (first one wins; check_set
    reports disagreements)."""
    bound: dict[str, int] = {}
    for spec in plan.inputs:
        arr = provided.get(spec.name)
        declared = spec.declared_shape
        if arr is None or declared is None or arr.ndim != len(declared):
            continue
        for want, got in zip(declared, arr.shape, strict=True):
            if isinstance(want, str) and want:
                bound.setdefault(want, int(got))
    return bound


def with_bound_dims(spec: InputSpec, bound: Mapping[str, int]) -> InputSpec:
    """``spec`` with its preset shape taking the extents of ``bound`` named dims."""
    declared = spec.declared_shape
    if not bound or declared is None or spec.shape is None or len(declared) != len(spec.shape):
        return spec
    shape = tuple(
        bound.get(d, s) if isinstance(d, str) and d else s
        for d, s in zip(declared, spec.shape, strict=True)
    )
    return spec if shape == spec.shape else replace(spec, shape=shape)


def write_input_set(
    plan: InputPlan,
    out_dir: str | os.PathLike[str],
    arrays: Mapping[str, np.ndarray],
    sources: Mapping[str, str] | None = None,
    seed: int = 0,
    text_note: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write and validate a complete input set; returns the plan.json contents.
    ``text_note``: the tokenizer note of the ids made from text (``nneditor inputs --text``),
    kept in inputs.npz as a token .npz keeps it and in plan.json."""
    check_set(plan, arrays)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    taken = {INPUTS_NPZ[:-4], PLAN_JSON[:-5]}
    files = {name: safe_file_stem(name, taken) + ".npy" for name in plan.names()}
    written: list[Path] = []
    try:
        for name, fname in files.items():
            written.append(_atomic_npy(out / fname, arrays[name]))
        noted = dict(arrays)
        if text_note:
            noted[TOKEN_NOTE] = np.array(json.dumps(dict(text_note)))
        written.append(_atomic_npz(out / INPUTS_NPZ, noted))
        _verify(plan, out, files)
        doc = _plan_document(plan, arrays, files, sources or {}, seed)
        if text_note:
            doc["text"] = dict(text_note)
        tmp = out / (PLAN_JSON + ".part")
        tmp.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, out / PLAN_JSON)
    except BaseException:
        for p in written:
            p.unlink(missing_ok=True)
        raise
    return doc


def generate_and_assign_all(
    plan: InputPlan,
    out_dir: str | os.PathLike[str],
    provided: Mapping[str, np.ndarray] | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Generate every input that was not provided, write the set and validate it."""
    provided = dict(provided or {})
    arrays = build_inputs(plan, provided, seed)
    sources = {n: ("provided" if n in provided else "automatic") for n in arrays}
    return write_input_set(plan, out_dir, arrays, sources, seed)


def _atomic_npy(path: Path, arr: np.ndarray) -> Path:
    tmp = path.with_name(path.name + ".part")
    with open(tmp, "wb") as fh:
        np.save(fh, arr, allow_pickle=False)
    os.replace(tmp, path)
    return path


def _atomic_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> Path:
    tmp = path.with_name(path.name + ".part")
    with open(tmp, "wb") as fh:
        np.savez(fh, **dict(arrays))  # type: ignore[arg-type]
    os.replace(tmp, path)
    return path


def _verify(plan: InputPlan, out: Path, files: Mapping[str, str]) -> None:
    from_npz = {k: v for k, v in load_npz(out / INPUTS_NPZ).items() if k != TOKEN_NOTE}
    check_set(plan, from_npz)
    for name, fname in files.items():
        arr = load_npy(out / fname)
        if not np.array_equal(arr, from_npz[name]) or arr.dtype != from_npz[name].dtype:
            raise InputSpecError(f"{out / fname} does not read back as written")


def _plan_document(
    plan: InputPlan,
    arrays: Mapping[str, np.ndarray],
    files: Mapping[str, str],
    sources: Mapping[str, str],
    seed: int,
) -> dict[str, Any]:
    entries = []
    assumptions: list[str] = []
    for spec in plan.inputs:
        arr = arrays[spec.name]
        source = sources.get(spec.name, "provided")
        # the preset's guesses apply only to values generated from it
        notes = list(spec.assumptions) if source == "automatic" else []
        assumptions.extend(notes)
        entries.append(
            {
                **spec.as_dict(),
                "shape": list(arr.shape),
                "assumptions": notes,
                "file": files[spec.name],
                "source": source,
            }
        )
    return {
        "model": plan.model,
        "seed": seed,
        "archive": INPUTS_NPZ,
        "inputs": entries,
        "assumptions": assumptions,
        "validated": True,
    }
