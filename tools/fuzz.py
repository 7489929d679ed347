#!/usr/bin/env python3
"""Seeded mutation fuzzer for NNEditor's readers.

    python3 tools/fuzz.py --seconds 600                  # every format, time split evenly
    python3 tools/fuzz.py --format gguf --seconds 60 --seed 7 --out fuzz-failures
    python3 tools/fuzz.py --format onnx --replay 7:123   # rebuild and check one mutant

Seeds are small valid files of every format NNEditor opens, built here with the real libraries
(onnx, safetensors, gguf, torch when installed) or the test suite's own factories (TFLite,
Core ML, Hugging Face snapshots, StableHLO text). Each mutant applies one to four mutations to
one seed file (bit flips, boundary values such as 0xFF, little-endian 2**63-1 or a 10-byte
protobuf varint, truncation, duplicated/inserted/deleted chunks; number and nesting swaps for
text; mutations inside zip members and inside safetensors JSON headers, with the container
kept valid), then a worker process opens it with ``nneditor.open`` and does what
``inspect --json``, ``tensors`` and the window do: the report (with the hierarchy) as JSON,
the tensor list, each tensor's values or a small slice, every node's attributes.

A mutant passes when it opens (reads may refuse with ArtifactError) or is refused with an
ArtifactError, within ``--timeout`` seconds, under an address-space limit (RLIMIT_AS) and a
resident-memory ceiling, leaving the source byte-for-byte unchanged. Anything else is a
failure; ``--out`` keeps the failing mutant and a ``.txt`` with the traceback. Mutants are
deterministic: mutant ``i`` of ``--seed S`` is rebuilt by ``--replay S:i`` (with the same
version of this file and of the seed libraries).

The unit suite (tests/unit/test_fuzz_readers.py) runs the same campaign briefly.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import random
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: Seconds one mutant may take (open + every operation).
TIMEOUT_S = 5.0
#: Address space of the worker (RLIMIT_AS) and the resident size that counts as a failure.
ADDRESS_SPACE_MB = 4096
RSS_LIMIT_MB = 1536

# -- seeds ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seed:
    """A valid artifact: ``root`` (a file or a folder) and the path opened inside it."""

    name: str
    root: Path
    opened: str = ""  # relative path opened inside a folder root ("" = the root itself)

    def files(self) -> list[Path]:
        if self.root.is_file():
            return [self.root]
        return sorted(p for p in self.root.rglob("*") if p.is_file())

    def open_path(self, root: Path) -> Path:
        return root / self.opened if self.opened else root


def _test_module(name: str) -> Any:
    """A module of the unit suite (its fixture factories), importable from here."""
    unit = str(ROOT / "tests" / "unit")
    if unit not in sys.path:
        sys.path.insert(0, unit)
    return __import__(name)


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


def seed_onnx(folder: Path) -> list[Seed]:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4), "w")
    ints = helper.make_tensor("ints", TensorProto.INT64, [3], [5, -1, 7])
    floats = helper.make_tensor("floats", TensorProto.FLOAT, [2], [0.5, 2.0])
    half = numpy_helper.from_array(np.ones((2, 2), np.float16), "half")
    text = helper.make_tensor("labels", TensorProto.STRING, [2], [b"cat", b"dog"])  # type: ignore[list-item]
    int4 = helper.make_tensor("nibbles", TensorProto.INT4, [3], [1, -2, 7])
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([1.5, 2.5], np.float32), "sp"),
        numpy_helper.from_array(np.array([1, 4], np.int64), "sp_idx"),
        [6],
    )
    branch = helper.make_graph(
        [helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.ones(3, "f")))],
        "branch",
        [],
        [helper.make_tensor_value_info("k", TensorProto.FLOAT, [3])],
        [numpy_helper.from_array(np.arange(4, dtype=np.int64), "branch_w")],
    )
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
        helper.make_node("Relu", ["m"], ["r"], name="relu"),
        helper.make_node("Constant", [], ["axes"], value_ints=[0, 1], name="axes"),
        helper.make_node(
            "Constant", [], ["c"], value=numpy_helper.from_array(np.array(2.0, np.float32))
        ),
        helper.make_node("Mul", ["r", "c"], ["y"], name="mul"),
        helper.make_node("If", ["cond"], ["o"], then_branch=branch, else_branch=branch),
        helper.make_node("Gemm", ["x", "w", "floats"], ["g"], alpha=0.5, transB=1, name="gemm"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3]),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
        ],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4]),
            helper.make_tensor_value_info("o", TensorProto.FLOAT, None),
        ],
        [w, ints, floats, half, text, int4],
        sparse_initializer=[sparse],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.producer_name = "fuzz"
    helper.set_model_props(model, {"author": "fuzz", "note": "é"})
    path = folder / "model.onnx"
    onnx.save_model(model, str(path))

    ext = folder / "external"
    ext.mkdir()
    ext_model = helper.make_model(
        helper.make_graph(
            [helper.make_node("Relu", ["big"], ["y"])],
            "g",
            [],
            [],
            [numpy_helper.from_array(np.arange(64, dtype=np.float32).reshape(8, 8), "big")],
        )
    )
    onnx.save_model(
        ext_model,
        str(ext / "model.onnx"),
        save_as_external_data=True,
        location="weights.bin",
        size_threshold=0,
    )
    return [Seed("model.onnx", path), Seed("external", ext, "model.onnx")]


def seed_safetensors(folder: Path) -> list[Seed]:
    import ml_dtypes
    import numpy as np
    from safetensors.numpy import save_file

    tensors = {
        "model.layers.0.weight": np.arange(24, dtype="<f4").reshape(4, 6),
        "model.layers.0.bias": np.arange(4, dtype="<i8"),
        "model.norm": np.ones(3, dtype="<f2"),
        "model.bf16": np.ones((2, 2), dtype=ml_dtypes.bfloat16),
        "flags": np.array([True, False]),
        "empty": np.zeros((0, 3), dtype="<f4"),
    }
    path = folder / "model.safetensors"
    save_file(tensors, path, metadata={"format": "pt", "note": "fuzz"})
    shards = folder / "sharded"
    shards.mkdir()
    save_file({"a": np.ones(4, "<f4")}, shards / "model-00001-of-00002.safetensors")
    save_file({"b": np.zeros((2, 2), "<f4")}, shards / "model-00002-of-00002.safetensors")
    index = {
        "metadata": {"total_size": 32},
        "weight_map": {
            "a": "model-00001-of-00002.safetensors",
            "b": "model-00002-of-00002.safetensors",
        },
    }
    (shards / "model.safetensors.index.json").write_text(json.dumps(index))
    return [Seed("model.safetensors", path), Seed("index", shards, "model.safetensors.index.json")]


def seed_gguf(folder: Path) -> list[Seed]:
    import gguf
    import numpy as np

    path = folder / "model.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_uint32("general.alignment", 32)
    w.add_string("general.name", "fuzz")
    w.add_uint32("llama.block_count", 2)
    w.add_float32("llama.rope.freq_base", 10000.0)
    w.add_array("tokenizer.ggml.tokens", ["a", "bb", "ccc"])
    w.add_array("tokenizer.ggml.scores", [0.5, 1.5, -1.0])
    w.add_bool("x.flag", True)
    w.add_tensor("token_embd.weight", np.arange(64, dtype=np.float32).reshape(2, 32))
    q8 = gguf.quants.quantize(np.ones((2, 32), np.float32), gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("blk.0.attn_q.weight", q8, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("blk.0.ffn_norm.weight", np.ones(32, dtype=np.float16))
    w.add_tensor("output.weight", np.ones((2, 32), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return [Seed("model.gguf", path)]


def _hand_torch_zip(path: Path) -> None:
    """A torch.save-style zip checkpoint written opcode by opcode (no torch needed)."""
    hostile = _test_module("test_pickle_hostile")
    payload = (
        hostile.P()
        + hostile.EMPTY_DICT
        + hostile.MARK
        + hostile.U("w")
        + hostile.rebuild(hostile.storage_pid("0", 6), (2, 3), (3, 1))
        + hostile.U("t")
        + hostile.rebuild(hostile.storage_pid("0", 6), (3, 2), (1, 3))
        + hostile.U("epoch")
        + hostile.I4(3)
        + b"u"
        + hostile.STOP
    )
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data.pkl", payload)
        zf.writestr("archive/byteorder", "little")
        zf.writestr("archive/data/0", bytes(range(24)))
        zf.writestr("archive/version", "3\n")


def seed_pytorch(folder: Path) -> list[Seed]:
    torch = _torch()
    path = folder / "model.pt"
    if torch is None:
        _hand_torch_zip(path)
        return [Seed("model.pt", path)]
    base = torch.arange(12.0).reshape(3, 4)
    state = {
        "w": base,
        "t": base.t(),  # a strided view
        "e": torch.ones(1, 4).expand(3, 4),  # a stride-0 view
        "h": torch.ones(2, 2, dtype=torch.float16),
        "i": torch.arange(5),
        "p": torch.nn.Parameter(torch.zeros(2)),
        "meta": {"epoch": 3, "name": "fuzz", "lr": 0.1, "tags": ["a", "b"]},
    }
    torch.save(state, path)
    legacy = folder / "legacy.pt"
    torch.save(state, legacy, _use_new_zipfile_serialization=False)
    return [Seed("model.pt", path), Seed("legacy.pt", legacy)]


def _small_module(torch: Any) -> Any:
    class Small(torch.nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(4, 3)
            self.register_buffer("table", torch.arange(6.0).reshape(2, 3).t())

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.fc(x)) + self.table.sum()

    torch.manual_seed(0)
    return Small().eval()


def seed_torchscript(folder: Path) -> list[Seed]:
    torch = _torch()
    if torch is None:
        return []
    path = folder / "model.jit"
    torch.jit.script(_small_module(torch)).save(str(path))
    return [Seed("model.jit", path)]


def seed_pt2(folder: Path) -> list[Seed]:
    torch = _torch()
    if torch is None:
        return []
    import warnings

    path = folder / "model.pt2"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.export.export(_small_module(torch), (torch.randn(2, 4),))
        torch.export.save(program, str(path))
    return [Seed("model.pt2", path)]


def seed_huggingface(folder: Path) -> list[Seed]:
    snapshot = folder / "snapshot"
    _test_module("test_hf_snapshot").make_snapshot(snapshot)
    return [Seed("snapshot", snapshot)]


def seed_stablehlo(folder: Path) -> list[Seed]:
    path = folder / "model.mlir"
    path.write_text(_test_module("test_stablehlo_reader").MLP)
    return [Seed("model.mlir", path)]


def seed_tflite(folder: Path) -> list[Seed]:
    try:
        import flatbuffers  # noqa: F401 - the test factory builds with it
    except ImportError:
        return []
    tests = _test_module("test_tflite_reader")
    path = folder / "model.tflite"
    path.write_bytes(tests.build_model(tests.mlp_model()))
    return [Seed("model.tflite", path)]


def seed_coreml(folder: Path) -> list[Seed]:
    tests = _test_module("test_coreml_reader")
    path = folder / "model.mlmodel"
    path.write_bytes(tests.nn_model())
    return [Seed("model.mlmodel", path)]


def seed_mlpackage(folder: Path) -> list[Seed]:
    tests = _test_module("test_coreml_reader")
    return [Seed("tiny.mlpackage", tests.make_package(folder))]


#: Format name -> seed builder (writes into a fresh folder; [] when a library is missing).
SEEDS: dict[str, Callable[[Path], list[Seed]]] = {
    "onnx": seed_onnx,
    "safetensors": seed_safetensors,
    "gguf": seed_gguf,
    "pytorch": seed_pytorch,
    "torchscript": seed_torchscript,
    "pt2": seed_pt2,
    "huggingface": seed_huggingface,
    "stablehlo": seed_stablehlo,
    "tflite": seed_tflite,
    "coreml": seed_coreml,
    "mlpackage": seed_mlpackage,
}


# -- mutations --------------------------------------------------------------------------------

_BYTES = (0x00, 0xFF, 0x7F, 0x80, 0x01, 0xFE)
_INTS = (
    (2**31 - 1, 4),
    (2**31, 4),
    (2**32 - 1, 4),
    (2**63 - 1, 8),
    (2**63, 8),
    (2**64 - 1, 8),
    (0, 4),
    (0, 8),
    (1, 8),
    (2**40, 8),
)
_NUMBERS = (
    "0",
    "-1",
    "1",
    "4294967295",
    "9223372036854775807",
    "18446744073709551615",
    "-9223372036854775808",
    "1e999",
    "-0",
    "9" * 5000,
    "NaN",
    "0x10",
    "1.5",
)
_TEXT_INSERTS = ("[" * 2000, "{" * 50, '"', "\\", "\\ud800", "\x00", ",", "]", "}", ">", "<")
_DIGITS = re.compile(rb"-?[0-9]+(?:\.[0-9]+)?")


def _position(n: int, rng: random.Random) -> int:
    """A byte position, biased to the head and tail where headers and directories live."""
    if n <= 0:
        return 0
    roll = rng.random()
    if roll < 0.4:
        return rng.randrange(min(n, 1024))
    if roll < 0.6:
        return max(0, n - 1 - rng.randrange(min(n, 1024)))
    return rng.randrange(n)


def _bit_flip(buf: bytearray, rng: random.Random) -> bytearray:
    if buf:
        buf[_position(len(buf), rng)] ^= 1 << rng.randrange(8)
    return buf


def _boundary_byte(buf: bytearray, rng: random.Random) -> bytearray:
    if buf:
        buf[_position(len(buf), rng)] = rng.choice(_BYTES)
    return buf


def _boundary_int(buf: bytearray, rng: random.Random) -> bytearray:
    value, width = rng.choice(_INTS)
    raw = value.to_bytes(width, "little" if rng.random() < 0.85 else "big")
    at = _position(len(buf), rng)
    buf[at : at + width] = raw
    return buf


def _varint(buf: bytearray, rng: random.Random) -> bytearray:
    """A protobuf varint of a boundary value (lengths, dims and enums are varints)."""
    value = rng.choice((0, 1, 127, 128, 2**31 - 1, 2**32, 2**63 - 1, 2**64 - 1, 2**40))
    raw = bytearray()
    while True:
        raw.append((value & 0x7F) | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            break
    at = _position(len(buf), rng)
    end = at
    while end < len(buf) and buf[end] & 0x80:  # replace the varint found there, if any
        end += 1
    buf[at : end + 1] = raw
    return buf


def _truncate(buf: bytearray, rng: random.Random) -> bytearray:
    return buf[: _position(len(buf), rng)]


def _duplicate(buf: bytearray, rng: random.Random) -> bytearray:
    if not buf:
        return buf
    start = _position(len(buf), rng)
    chunk = buf[start : start + rng.choice((1, 2, 4, 8, 16, 64, 512))]
    at = _position(len(buf), rng)
    if rng.random() < 0.5:
        buf[at:at] = chunk * rng.choice((1, 1, 2, 16))
    else:
        buf[at : at + len(chunk)] = chunk
    return buf


def _insert(buf: bytearray, rng: random.Random) -> bytearray:
    at = _position(len(buf), rng)
    kind = rng.random()
    if kind < 0.4:
        chunk = bytes([rng.choice(_BYTES)]) * rng.choice((1, 4, 8, 100))
    elif kind < 0.7:
        value, width = rng.choice(_INTS)
        chunk = value.to_bytes(width, "little")
    else:
        chunk = rng.randbytes(rng.choice((1, 3, 16, 64)))
    buf[at:at] = chunk
    return buf


def _delete(buf: bytearray, rng: random.Random) -> bytearray:
    at = _position(len(buf), rng)
    del buf[at : at + rng.choice((1, 2, 4, 8, 64))]
    return buf


def _number(buf: bytearray, rng: random.Random) -> bytearray:
    """Replace one number of a text file by a boundary value."""
    matches = list(_DIGITS.finditer(buf))
    if not matches:
        return _insert(buf, rng)
    m = rng.choice(matches)
    buf[m.start() : m.end()] = rng.choice(_NUMBERS).encode()
    return buf


def _text_insert(buf: bytearray, rng: random.Random) -> bytearray:
    at = _position(len(buf), rng)
    buf[at:at] = rng.choice(_TEXT_INSERTS).encode()
    return buf


def _line(buf: bytearray, rng: random.Random) -> bytearray:
    """Duplicate (many times) or delete one line of a text file."""
    lines = bytes(buf).split(b"\n")
    i = rng.randrange(len(lines))
    if rng.random() < 0.5:
        lines[i:i] = [lines[i]] * rng.choice((1, 2, 100))
    else:
        del lines[i]
    return bytearray(b"\n".join(lines))


Mutation = Callable[[bytearray, random.Random], bytearray]
BINARY_MUTATIONS: tuple[Mutation, ...] = (
    _bit_flip,
    _boundary_byte,
    _boundary_int,
    _varint,
    _truncate,
    _duplicate,
    _insert,
    _delete,
)
TEXT_MUTATIONS: tuple[Mutation, ...] = (_number, _text_insert, _line, _duplicate, _delete)


def _is_text(name: str, data: bytes) -> bool:
    if name.endswith((".json", ".mlir", ".txt", ".py", "version", "byteorder", "format")):
        return True
    head = data[:512]
    return bool(head) and head.isascii() and b"\0" not in head


def mutate_bytes(data: bytes, name: str, rng: random.Random) -> bytes:
    """One to four mutations of ``data``. Zip archives are often mutated member by member and
    safetensors files in their JSON header (its length prefix then fixed), so that mutations
    reach the parsers behind the container checks."""
    if data[:4] == b"PK\x03\x04" and rng.random() < 0.6:
        with contextlib.suppress(zipfile.BadZipFile, ValueError, NotImplementedError):
            return _mutate_member(data, rng)
    header = _safetensors_header(data)
    if header is not None and rng.random() < 0.6:
        text = _mutations(bytearray(data[8:header]), True, rng)
        return len(text).to_bytes(8, "little") + bytes(text) + data[header:]
    return bytes(_mutations(bytearray(data), _is_text(name, data), rng))


def _mutations(buf: bytearray, text: bool, rng: random.Random) -> bytearray:
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 4))):
        pool = TEXT_MUTATIONS if text and rng.random() < 0.7 else BINARY_MUTATIONS
        buf = rng.choice(pool)(buf, rng)
    return buf


def _safetensors_header(data: bytes) -> int | None:
    """End offset of a safetensors JSON header, or None when ``data`` is not one."""
    if len(data) < 10 or data[8:9] != b"{":
        return None
    end = 8 + int.from_bytes(data[:8], "little")
    return end if end <= len(data) else None


def _mutate_member(data: bytes, rng: random.Random) -> bytes:
    """Rewrite the archive with one member mutated (its structure stays valid)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as zin:
        infos = zin.infolist()
        target = rng.choice(infos).filename
        with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zout:
            for info in infos:
                member = zin.read(info.filename)
                if info.filename == target:
                    member = mutate_bytes(member, info.filename, rng)
                zout.writestr(info.filename, member)
    return out.getvalue()


def make_mutant(seed: Seed, rng: random.Random, workdir: Path) -> tuple[Path, Path]:
    """Copy ``seed`` into ``workdir`` with one of its files mutated: (copy, path to open)."""
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    root = workdir / seed.root.name
    if seed.root.is_file():
        root.write_bytes(mutate_bytes(seed.root.read_bytes(), seed.root.name, rng))
        return root, root
    shutil.copytree(seed.root, root)
    files = sorted(p for p in root.rglob("*") if p.is_file())
    victim = rng.choice(files)
    victim.write_bytes(mutate_bytes(victim.read_bytes(), victim.name, rng))
    return root, seed.open_path(root)


def fingerprint(path: Path) -> str:
    """SHA-256 and mtime of a file, or of every file in a folder."""
    h = hashlib.sha256()
    paths = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for p in paths:
        h.update(str(p.relative_to(path.parent)).encode())
        h.update(p.read_bytes())
        h.update(str(p.stat().st_mtime_ns).encode())
    return h.hexdigest()


# -- the worker: opens mutants and does what the CLI and the window do --------------------------


def exercise(path: Path) -> str:
    """Open ``path`` and use it; returns "opened". ArtifactError from the open propagates."""
    import nneditor
    from nneditor.cli.report import inspect_report, inspect_text, json_text, tensors_report
    from nneditor.errors import ArtifactError
    from nneditor.model.document import summarise

    with nneditor.open(path) as doc:
        json_text(inspect_report(doc))  # the `inspect --json` contract, with the hierarchy
        inspect_text(doc)
        json_text(tensors_report(doc))
        json_text(summarise(doc.tree))
        for i, ref in enumerate(doc.tensors.values()):
            if i >= 64:
                break
            with contextlib.suppress(ArtifactError):
                if ref.size <= 1 << 20:
                    ref.read()
                else:  # a corner: at most 2**20 elements
                    ref.read(
                        ",".join("0:2" if axis < 20 else "0:1" for axis in range(len(ref.shape)))
                    )
        graph = doc.graph
        if graph is not None:
            for count, (node, _g) in enumerate(graph.walk()):
                if count >= 10_000:
                    break
                with contextlib.suppress(ArtifactError):
                    json_text(summarise(node.attributes))
            for function in graph.functions:
                for node, _g in function.walk():
                    with contextlib.suppress(ArtifactError):
                        _ = node.attributes
    return "opened"


def worker_main(address_space_mb: int) -> None:
    """Answer one JSON line per path read on stdin (the results stream is the real stdout)."""
    import resource
    import traceback

    limit = address_space_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    results = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything a library prints goes to stderr, not into the results
    sys.stdout = sys.stderr
    import importlib

    import nneditor.api
    import nneditor.cli.report
    import nneditor.semantic.hierarchy  # noqa: F401 - imported before the first timing
    from nneditor.artifacts.registry import READERS
    from nneditor.errors import ArtifactError

    for module, _ in READERS.values():
        if module:
            importlib.import_module(module)
    results.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        start = time.perf_counter()
        try:
            outcome, detail = exercise(Path(request["path"])), ""
        except ArtifactError as exc:
            outcome, detail = "refused", str(exc)
        except BaseException as exc:  # noqa: BLE001 - every other escape is the finding
            outcome = "failure"
            frames = "".join(traceback.format_tb(exc.__traceback__)[-12:])
            detail = f"{type(exc).__name__}: {_clip(str(exc), 300)}\n{frames}"
        rss = _peak_rss_mb()
        reply = {
            "outcome": outcome,
            "detail": detail,
            "seconds": time.perf_counter() - start,
            "rss_mb": rss,
        }
        results.write(json.dumps(reply) + "\n")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


@dataclass
class Result:
    outcome: str  # "opened" | "refused" | "failure"
    detail: str = ""
    seconds: float = 0.0


def _peak_rss_mb() -> int:
    """This process's own resident high-water mark. ru_maxrss is not it: Linux carries the
    parent's over fork and exec, so a worker started by a big test process (1.5 GB after the
    GUI tests) looked over its limit on every mutant and was restarted each time."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


class Worker:
    """A worker process, restarted after a hang, a crash or a memory-limit failure."""

    def __init__(
        self,
        timeout: float = TIMEOUT_S,
        address_space_mb: int = ADDRESS_SPACE_MB,
        rss_limit_mb: int = RSS_LIMIT_MB,
        log: Path | None = None,
    ) -> None:
        self.timeout = timeout
        self.address_space_mb = address_space_mb
        self.rss_limit_mb = rss_limit_mb
        self.log = log
        self._proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> subprocess.Popen[str]:
        paths = [str(ROOT), os.environ.get("PYTHONPATH", "")]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p))
        with contextlib.ExitStack() as stack:
            log = stack.enter_context(open(self.log, "a")) if self.log else None
            proc = subprocess.Popen(
                [sys.executable, __file__, "--worker", str(self.address_space_mb)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log if log is not None else subprocess.DEVNULL,
                text=True,
                start_new_session=True,
                env=env,
            )
        ready = self._reply(proc, 120.0)
        if not ready or not ready.get("ready"):
            self._kill(proc)
            raise RuntimeError("the fuzz worker did not start; see --log")
        return proc

    def _reply(self, proc: subprocess.Popen[str], timeout: float) -> dict[str, Any] | None:
        assert proc.stdout is not None
        readable, _, _ = select.select([proc.stdout], [], [], timeout)
        if not readable:
            return None
        line = proc.stdout.readline()
        return json.loads(line) if line else None

    @staticmethod
    def _kill(proc: subprocess.Popen[str]) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def close(self) -> None:
        if self._proc is not None:
            self._kill(self._proc)
            self._proc = None

    def check(self, path: Path, root: Path | None = None) -> Result:
        """Run one mutant; ``root`` (the file or folder holding it) must be unchanged after."""
        if self._proc is None:
            self._proc = self._start()
        proc = self._proc
        assert proc.stdin is not None
        watched = root or path
        before = fingerprint(watched)
        start = time.perf_counter()
        proc.stdin.write(json.dumps({"path": str(path)}) + "\n")
        proc.stdin.flush()
        reply = self._reply(proc, self.timeout)
        seconds = time.perf_counter() - start
        if reply is None:
            hung = proc.poll() is None
            self.close()
            if hung:
                return Result("failure", f"hang: no answer within {self.timeout} s", seconds)
            return Result("failure", f"the worker died (exit status {proc.returncode})", seconds)
        result = Result(reply["outcome"], reply["detail"], seconds)
        if reply["rss_mb"] > self.rss_limit_mb:
            self.close()  # the high-water mark stays; start afresh for the next mutant
            result = Result(
                "failure", f"resident memory reached {reply['rss_mb']} MB\n{result.detail}", seconds
            )
        if fingerprint(watched) != before:
            result = Result("failure", f"the source was modified\n{result.detail}", seconds)
        return result


# -- campaigns --------------------------------------------------------------------------------


@dataclass
class Counts:
    tried: int = 0
    opened: int = 0
    refused: int = 0
    failures: list[str] = field(default_factory=list)

    def line(self, fmt: str) -> str:
        return (
            f"{fmt:<12} tried {self.tried:>6}  opened {self.opened:>6}  "
            f"ArtifactError {self.refused:>6}  failures {len(self.failures):>3}"
        )


def build_seeds(formats: list[str], folder: Path) -> dict[str, list[Seed]]:
    seeds: dict[str, list[Seed]] = {}
    for fmt in formats:
        where = folder / fmt
        where.mkdir(parents=True, exist_ok=True)
        seeds[fmt] = SEEDS[fmt](where)
    return seeds


def mutant_rng(seed: int, fmt: str, index: int) -> random.Random:
    return random.Random(f"{seed}:{fmt}:{index}")


def campaign(
    fmt: str,
    seeds: list[Seed],
    worker: Worker,
    workdir: Path,
    *,
    seed: int = 0,
    count: int | None = None,
    seconds: float | None = None,
    first: int = 0,
    keep: Path | None = None,
    on_failure: Callable[[int, str], None] | None = None,
) -> Counts:
    """Mutants ``first, first + 1, ...`` of ``fmt`` until ``count`` are done or time is up."""
    counts = Counts()
    deadline = time.monotonic() + seconds if seconds is not None else None
    index = first
    while (count is None or counts.tried < count) and (
        deadline is None or time.monotonic() < deadline
    ):
        rng = mutant_rng(seed, fmt, index)
        chosen = rng.choice(seeds)
        # A fresh folder per mutant: caches keyed by path must not mix two mutants' bytes.
        folder = workdir / f"mutant-{index}"
        root, path = make_mutant(chosen, rng, folder)
        result = worker.check(path, root)
        counts.tried += 1
        if result.outcome == "opened":
            counts.opened += 1
        elif result.outcome == "refused":
            counts.refused += 1
        else:
            label = f"{fmt} {seed}:{index} ({chosen.name}): {result.detail}"
            counts.failures.append(label)
            if keep is not None:
                _keep(keep, f"{fmt}-{seed}-{index}", root, label)
            if on_failure is not None:
                on_failure(index, label)
        shutil.rmtree(folder, ignore_errors=True)
        index += 1
    return counts


def _keep(keep: Path, stem: str, root: Path, why: str) -> None:
    keep.mkdir(parents=True, exist_ok=True)
    target = keep / f"{stem}-{root.name}"
    if root.is_dir():
        shutil.copytree(root, target, dirs_exist_ok=True)
    else:
        shutil.copy2(root, target)
    (keep / f"{stem}.txt").write_text(why + "\n")


@contextlib.contextmanager
def _workspace(base: str | None) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="nneditor-fuzz-", dir=base) as tmp:
        yield Path(tmp)


def main(argv: list[str] | None = None) -> int:
    args_list = sys.argv[1:] if argv is None else argv
    if args_list[:1] == ["--worker"]:
        worker_main(int(args_list[1]))
        return 0
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seconds", type=float, default=60.0, help="total time, split over formats")
    p.add_argument("--format", action="append", choices=list(SEEDS), help="repeatable; default all")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("fuzz-failures"), help="failing mutants")
    p.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per mutant")
    p.add_argument(
        "--memory-mb", type=int, default=ADDRESS_SPACE_MB, help="RLIMIT_AS of the worker"
    )
    p.add_argument("--replay", metavar="SEED:INDEX", help="check one mutant (needs one --format)")
    p.add_argument("--tmp", help="folder for the seeds and mutants (default: the system's)")
    args = p.parse_args(args_list)
    formats = args.format or list(SEEDS)
    with _workspace(args.tmp) as tmp:
        seeds = build_seeds(formats, tmp / "seeds")
        log = tmp / "worker.log"
        with Worker(args.timeout, args.memory_mb, log=log) as worker:
            if args.replay:
                return _replay(args.replay, formats, seeds, worker, tmp, args.out)
            per_format = args.seconds / len(formats)
            total = Counts()
            for fmt in formats:
                if not seeds[fmt]:
                    print(f"{fmt:<12} skipped: its seed library is not installed", flush=True)
                    continue
                counts = campaign(
                    fmt,
                    seeds[fmt],
                    worker,
                    tmp,
                    seed=args.seed,
                    seconds=per_format,
                    keep=args.out,
                    on_failure=lambda i, why: print(f"  FAIL {why.splitlines()[0][:300]}"),
                )
                print(counts.line(fmt), flush=True)
                total.tried += counts.tried
                total.opened += counts.opened
                total.refused += counts.refused
                total.failures += counts.failures
            print(total.line("all"))
            if total.failures:
                print(f"failing mutants and tracebacks are in {args.out}/")
            return 1 if total.failures else 0


def _replay(
    spec: str,
    formats: list[str],
    seeds: dict[str, list[Seed]],
    worker: Worker,
    tmp: Path,
    out: Path,
) -> int:
    if len(formats) != 1:
        raise SystemExit("--replay needs exactly one --format")
    seed_text, _, index_text = spec.partition(":")
    fmt = formats[0]
    counts = campaign(
        fmt, seeds[fmt], worker, tmp, seed=int(seed_text), count=1, first=int(index_text), keep=out
    )
    print(counts.line(fmt))
    for failure in counts.failures:
        print(failure)
    return 1 if counts.failures else 0


if __name__ == "__main__":
    sys.exit(main())
