"""Weights-only export to safetensors, for formats whose topology NNEditor cannot write.

The output holds decoded tensor values only — no graph, no code — and says so in its
``__metadata__`` ("nneditor.weights_only": "true"). Block-quantized GGUF tensors are written
dequantized (float32); sub-byte integers widen to int8/uint8; string tensors are skipped with a
note. Written streaming (one tensor decoded at a time) to a staging file, re-read with the
safetensors library, then renamed into place.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from nneditor._version import __version__
from nneditor.analysis.chunks import iter_chunks
from nneditor.errors import NNEditorError
from nneditor.io.crash_points import crash_point
from nneditor.io.scratch import (
    LEGACY_WEIGHTS,
    WEIGHTS_PREFIX,
    DestinationBusyError,
    check_free_space,
    destination_lock,
    staging_file,
    sweep,
    write_failure,
)
from nneditor.jobs import JobHandle
from nneditor.model.document import Document
from nneditor.tensors.dtypes import numpy_dtype
from nneditor.tensors.loaders import UnavailableLoader

CHUNK_ELEMS = 1 << 22

_CODES = {
    "float64": "F64",
    "float32": "F32",
    "float16": "F16",
    "bfloat16": "BF16",
    "int64": "I64",
    "int32": "I32",
    "int16": "I16",
    "int8": "I8",
    "uint64": "U64",
    "uint32": "U32",
    "uint16": "U16",
    "uint8": "U8",
    "bool": "BOOL",
    "float8_e4m3fn": "F8_E4M3",
    "float8_e5m2": "F8_E5M2",
    "complex64": "C64",
}
_WIDEN = {"int4": "int8", "uint4": "uint8", "int2": "int8", "uint2": "uint8"}


class WeightsExportError(NNEditorError):
    pass


def export_weights(doc: Document, dest: Path, handle: JobHandle | None = None) -> dict[str, Any]:
    handle = handle or JobHandle()
    dest = Path(dest).resolve()
    if dest.suffix != ".safetensors":
        raise WeightsExportError(
            f"weights-only exports are safetensors files; name the output *.safetensors, not {dest.name!r}"
        )
    if dest == Path(doc.path).resolve():
        raise WeightsExportError("the destination is the source file; choose a new file")
    if not dest.parent.is_dir():
        raise WeightsExportError(f"the destination folder {dest.parent} does not exist")
    plan = []
    notes = []
    offset = 0
    for ref in doc.tensors.values():
        if isinstance(ref.loader, UnavailableLoader):
            notes.append(f"skipped {ref.name!r}: {ref.loader.reason}")
            continue
        dtype = _WIDEN.get(ref.dtype, ref.dtype)
        if dtype not in _CODES:
            if ref.dtype == "string":
                notes.append(f"skipped {ref.name!r}: string tensors have no safetensors dtype")
                continue
            dtype = "float32"
        nbytes = ref.size * numpy_dtype(dtype).itemsize
        plan.append((ref, dtype, offset, nbytes))
        offset += nbytes
    header: dict[str, object] = {
        "__metadata__": {
            "nneditor.weights_only": "true",
            "nneditor.note": "weights only: this file holds no graph or code",
            "nneditor.source": Path(doc.path).name,
            "nneditor.source_format": doc.format,
            "nneditor.version": __version__,
        }
    }
    for ref, dtype, off, nbytes in plan:
        header[ref.name] = {
            "dtype": _CODES[dtype],
            "shape": list(ref.shape),
            "data_offsets": [off, off + nbytes],
        }
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * ((-len(raw)) % 8)
    sweep(dest.parent, (WEIGHTS_PREFIX,), legacy=LEGACY_WEIGHTS)
    short = check_free_space(dest, offset + len(raw) + 8)
    if short:
        raise WeightsExportError(short)
    try:
        with destination_lock(dest):
            return _write_weights(doc, plan, raw, offset, notes, dest, handle)
    except DestinationBusyError as exc:
        raise WeightsExportError(str(exc)) from None
    except OSError as exc:
        raise WeightsExportError(write_failure(exc, dest)) from exc


def _write_weights(
    doc: Document,
    plan: list[Any],
    raw: bytes,
    offset: int,
    notes: list[str],
    dest: Path,
    handle: JobHandle,
) -> dict[str, Any]:
    fd, tmp = staging_file(dest.parent, WEIGHTS_PREFIX, ".safetensors")
    t0 = time.perf_counter()
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(len(raw).to_bytes(8, "little"))
            fh.write(raw)
            done = 0
            for ref, dtype, _off, nbytes in plan:
                written = 0
                # chunks in C order keep memory bounded (a dequantized GGUF table can be GBs)
                for key, _n in iter_chunks(tuple(ref.shape), CHUNK_ELEMS):
                    handle.check_cancelled()
                    part = ref.loader.read(tuple(ref.shape), key) if key else ref.read()
                    arr = np.ascontiguousarray(part.astype(numpy_dtype(dtype), copy=False))
                    fh.write(arr.tobytes())
                    written += arr.nbytes
                    done += arr.nbytes
                    handle.progress(done, offset, "writing weights")
                    crash_point("weights:writing")
                if written != nbytes:
                    raise WeightsExportError(
                        f"{ref.name!r} decoded to {written} bytes, expected {nbytes}"
                    )
            fh.flush()
            os.fsync(fh.fileno())
        _verify(tmp, len(plan))
        crash_point("weights:verified")
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return {
        "path": str(dest),
        "tensors": len(plan),
        "bytes": offset,
        "seconds": round(time.perf_counter() - t0, 3),
        "weights_only": True,
        "notes": notes,
    }


def _verify(path: Path, count: int) -> None:
    try:
        from safetensors import safe_open
    except ImportError:
        return
    with safe_open(str(path), "np") as fh:
        if len(list(fh.keys())) != count:
            raise WeightsExportError("the written safetensors file does not list every tensor")
