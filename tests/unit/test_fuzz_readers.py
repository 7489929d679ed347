"""Seeded mutation fuzzing of every reader: a short, deterministic run of tools/fuzz.py.

For each format, small valid seeds (built with the real libraries or the suite's factories)
are mutated byte by byte, number by number, member by member; a worker process opens each
mutant and does what ``inspect --json``, ``tensors`` and the window do. Every mutant must open
or be refused with an ArtifactError, within the per-mutant time limit, under the worker's
memory limit, without modifying its file. ``python3 tools/fuzz.py --seconds 600`` runs the
same campaign for longer; a failure here names ``--replay SEED:INDEX`` to rebuild it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import fuzz  # tools/ is on sys.path (tests/conftest.py)
import pytest

#: Fixed seed and mutant counts: about 25 s in all here, under a minute on a 2-core CI runner.
SEED = 2024
MUTANTS = {
    "onnx": 1200,
    "safetensors": 1200,
    "gguf": 1200,
    "pytorch": 1000,
    "torchscript": 800,
    "pt2": 800,
    "huggingface": 600,
    "stablehlo": 800,
    "tflite": 1200,
    "coreml": 1200,
    "mlpackage": 600,
}


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[fuzz.Worker]:
    log = tmp_path_factory.mktemp("fuzz-log") / "worker.log"
    with fuzz.Worker(log=log) as w:
        yield w


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], list[fuzz.Seed]]:
    folder = tmp_path_factory.mktemp("fuzz-seeds")
    built: dict[str, list[fuzz.Seed]] = {}

    def get(fmt: str) -> list[fuzz.Seed]:
        if fmt not in built:
            built.update(fuzz.build_seeds([fmt], folder))
        return built[fmt]

    return get


def test_every_reader_is_fuzzed() -> None:
    from nneditor.artifacts.registry import READERS

    readable = {fmt for fmt, (module, _) in READERS.items() if module}
    assert set(MUTANTS) == set(fuzz.SEEDS)
    assert {"coreml" if f == "mlpackage" else f for f in MUTANTS} == readable  # folder + file


@pytest.mark.parametrize("fmt", list(MUTANTS))
def test_mutants_open_or_are_refused(
    fmt: str, seeds: Callable[[str], list[fuzz.Seed]], worker: fuzz.Worker, tmp_path: Path
) -> None:
    found = seeds(fmt)
    if not found:
        pytest.skip(f"the library that writes {fmt} seeds is not installed")
    counts = fuzz.campaign(fmt, found, worker, tmp_path, seed=SEED, count=MUTANTS[fmt])
    replay = f"python3 tools/fuzz.py --format {fmt} --replay {SEED}:INDEX"
    assert not counts.failures, f"{len(counts.failures)} escapes ({replay}):\n\n" + "\n\n".join(
        counts.failures[:3]
    )
    assert counts.tried == MUTANTS[fmt]
    assert counts.opened and counts.refused  # valid seeds; mutations that bite
