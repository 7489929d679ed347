"""A checkpoint larger than the worker's address-space ceiling still traces: the NumPy decoder
maps it once, read-only, and the ceiling grows by the mapped size (resident memory stays
bounded by the RSS watchdog). Before: a 27B GGUF (7.2 GB) failed with "Cannot allocate
memory" under the default 4 GB RAM ceiling, because the worker mapped the file twice against
a 5.5 GB address-space limit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from sparse_qwen35 import F32, make_sparse  # tools/

ROOT = Path(__file__).resolve().parents[2]
MAX_RAM_MB = 700  # address-space ceiling: 700 + 1536 MB, less than two maps of the file


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS and sparse files: Linux")
def test_a_27b_shaped_checkpoint_slice_traces_under_a_small_ceiling(tmp_path: Path) -> None:
    # 4 blocks of the 27B layout with an F32 embedding: 5.8 GB of zeros, mostly never read
    path = make_sparse(tmp_path / "bonsai-4-blocks.gguf", 4, embd_type=F32)
    assert path.stat().st_size > 5.5e9  # over the ceiling: one map needs the file's size added
    run = subprocess.run(
        [sys.executable, "-m", "nneditor", "trace", str(path), "--out", str(tmp_path / "t")]
        + ["--yes", "--json", "--dim", "seq=3", "--max-ram", str(MAX_RAM_MB)]
        + ["--capture", "result_output"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["worker_peak_rss_mb"] < MAX_RAM_MB
    manifest = json.loads((tmp_path / "t" / "manifest.json").read_text())
    logits = next(v for v in manifest["values"] if v["name"] == "result_output")
    assert logits["status"] == "captured" and logits["shape"] == [1, 3, 248_320]
