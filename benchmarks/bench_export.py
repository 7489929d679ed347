#!/usr/bin/env python3
"""Export of an edited ~1 GiB ONNX revision vs onnx.load + rename + onnx.save of the same model.

Contract: export time <= 1.5x onnx.save's; memory bounded by streaming initializers rather than
materialising them.

Ours: ``nneditor.open`` -> ``EditSession.open(doc, use_journal=False)`` (hashes the source) ->
rename one node -> ``session.export(dest, runtime_check=False)``. The export is split by timing
the internal ``_validate`` step (onnx.checker full check + re-open with our reader) and, inside
it, ``onnx.checker.check_model``; peak RSS is also read when validation starts, so the writing
part (plan, streaming write, fsync) is reported on its own. Variants: validation stubbed out
(writing and atomic publish only) and ``runtime_check=True`` (adds an onnxruntime session).

Anchor (same run, same model): ``onnx.load`` + rename + ``onnx.save``; also with an fsync of
the output, since our export fsyncs before publishing.

Each measurement runs in a fresh interpreter; "extra" is peak RSS minus the peak RSS of an
interpreter that has only imported the same libraries. The parent polls the child's /proc
status for the peaks of anonymous and file-backed RSS separately (mapped source pages count in
RSS but are page cache), via ``bench_stats.measure_rss``.

The model is generated once under ~/.cache/nneditor/bench (NNEDITOR_BENCH_DIR); outputs go to
a scratch folder there and are deleted after each run.

    python benchmarks/bench_export.py [--blocks 16] [--dim 1024] [--repeat 2] [--skip-runtime]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import mib  # noqa: E402
from bench_stats import Result, measure_rss  # noqa: E402
from synthetic_models import make_transformer  # noqa: E402

CACHE = Path(os.environ.get("NNEDITOR_BENCH_DIR", Path.home() / ".cache" / "nneditor" / "bench"))
NODE = "/lm_head/MatMul"  # the node both sides rename
NEW = "/lm_head/MatMul_renamed"

# Timers for internal steps; at a step's start, the exact peak RSS so far and the current
# anonymous / file-backed RSS.
SETUP = """
import os, resource, time as _t
import onnx
import nneditor
from nneditor.editing.session import EditSession
from nneditor.export import onnx_writer
from nneditor.jobs import JobHandle
_marks = {}
def _maxrss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
def _rss_now():
    out = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(("RssAnon:", "RssFile:")):
                out[line[3:7].lower()] = int(line.split()[1]) * 1024
    return out
def _timed(name, fn, snapshot=False):
    def wrapper(*a, **kw):
        if snapshot:
            _marks[name + ".rss_before"] = _maxrss()
            _marks[name + ".rss_now"] = _rss_now()
        t = _t.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            _marks[name] = _marks.get(name, 0.0) + _t.perf_counter() - t
    return wrapper
"""


def ours_body(src: Path, dest: Path, mode: str) -> str:
    """mode: "validated" (runtime_check=False), "runtime" (=True) or "write-only"."""
    patch = ""
    if mode == "write-only":
        patch = "onnx_writer._validate = lambda *a, **k: []\n"
    else:
        patch = (
            "onnx_writer._validate = _timed('validate', onnx_writer._validate, snapshot=True)\n"
            "onnx.checker.check_model = _timed('checker', onnx.checker.check_model)\n"
        )
    return f"""
{patch}
t = _t.perf_counter()
doc = nneditor.open({str(src)!r})
_marks["open"] = _t.perf_counter() - t
t = _t.perf_counter()
session = EditSession.open(doc, use_journal=False)
_marks["session"] = _t.perf_counter() - t
t = _t.perf_counter()
session.apply([{{"op": "rename_node", "node": {NODE!r}, "new": {NEW!r}}}])
_marks["edit"] = _t.perf_counter() - t
t = _t.perf_counter()
report = session.export(__import__("pathlib").Path({str(dest)!r}),
                        runtime_check={mode == "runtime"})
_marks["export"] = _t.perf_counter() - t
_marks["rss_end"] = _maxrss()
extra = dict(marks=_marks, written=report.bytes_written, checks=report.checks)
"""


def anchor_body(src: Path, dest: Path, fsync: bool) -> str:
    sync = ""
    if fsync:
        sync = (
            f"fd = os.open({str(dest)!r}, os.O_RDONLY)\nos.fsync(fd)\nos.close(fd)\n"
            '_marks["fsync"] = _t.perf_counter() - t\n'
        )
    return f"""
t = _t.perf_counter()
m = onnx.load({str(src)!r})
_marks["open"] = _t.perf_counter() - t
t = _t.perf_counter()
node = next(n for n in m.graph.node if n.name == {NODE!r})
node.name = {NEW!r}
_marks["edit"] = _t.perf_counter() - t
t = _t.perf_counter()
onnx.save(m, {str(dest)!r})
_marks["export"] = _t.perf_counter() - t
{sync}
extra = dict(marks=_marks)
"""


def ensure_model(blocks: int, dim: int, nodes_per_block: int) -> Path:
    path = CACHE / f"export_b{blocks}_d{dim}_n{nodes_per_block}.onnx"
    if not path.exists():
        print(f"generating {path} …", flush=True)
        partial = path.with_name(path.stem + ".partial.onnx")
        make_transformer(
            partial,
            blocks=blocks,
            dim=dim,
            ffn=4 * dim,
            heads=16,
            nodes_per_block=nodes_per_block,
        )
        partial.replace(path)
    return path


def warm(path: Path) -> None:
    with open(path, "rb", buffering=0) as fh:
        buf = bytearray(64 * 2**20)
        while fh.readinto(buf):
            pass


def run(body: str, scratch: Path, repeat: int) -> Result:
    try:
        return measure_rss(body, setup=SETUP, repeat=repeat)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True, exist_ok=True)


def _mem(r: Result, base: Result) -> str:
    return (
        f"peak RSS {mib(r['peak_rss']):>9s}, extra {mib(r['peak_rss'] - base['peak_rss']):>9s} "
        f"(anon {mib(r['anon'] - base['anon'])}, file-backed {mib(r['file'] - base['file'])})"
    )


def _phases(marks: Result) -> str:
    keys = ("open", "session", "edit", "export", "validate", "checker", "fsync")
    return ", ".join(f"{k} {marks[k]:.2f} s" for k in keys if k in marks)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=16)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--nodes-per-block", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--skip-runtime", action="store_true", help="skip runtime_check=True")
    args = ap.parse_args()
    src = ensure_model(args.blocks, args.dim, args.nodes_per_block)
    size = src.stat().st_size
    scratch = CACHE / "export_scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    dest = scratch / "out.onnx"
    print(f"model: {src.name}, {size / 2**30:.2f} GiB")
    warm(src)

    base = measure_rss("extra = None", setup=SETUP, repeat=args.repeat)
    print(
        f"baseline after imports (onnx, nneditor): peak RSS {mib(base['peak_rss'])} "
        f"(anon {mib(base['anon'])}, file-backed {mib(base['file'])})"
    )
    validated = run(ours_body(src, dest, "validated"), scratch, args.repeat)
    write_only = run(ours_body(src, dest, "write-only"), scratch, args.repeat)
    rows = [
        ("nneditor export (validated)", validated),
        ("nneditor export (write only)", write_only),
    ]
    if not args.skip_runtime:
        rows.append(
            ("nneditor export (+ onnxruntime)", run(ours_body(src, dest, "runtime"), scratch, 1))
        )
    ref = run(anchor_body(src, dest, fsync=False), scratch, 1)
    ref_sync = run(anchor_body(src, dest, fsync=True), scratch, 1)
    rows += [("onnx.load + rename + onnx.save", ref), ("  same + fsync", ref_sync)]

    print("\n  time of the export step (open/session/edit phases listed separately):")
    for label, r in rows:
        m = r["extra"]["marks"]
        t = m["export"] + m.get("fsync", 0.0)
        print(f"  {label:34s} {t:7.2f} s  {_mem(r, base)}")
        print(f"      phases: {_phases(m)}")
    m = validated["extra"]["marks"]
    now = m["validate.rss_now"]
    print(
        f"\n  validated export = writing {m['export'] - m['validate']:.2f} s + validation "
        f"{m['validate']:.2f} s (onnx.checker {m['checker']:.2f} s). Peak RSS when validation "
        f"starts {mib(m['validate.rss_before'])} (RSS then: anon {mib(now['anon'])}, "
        f"file-backed {mib(now['file'])}); after validation {mib(validated['peak_rss'])}"
    )
    anchor = ref["extra"]["marks"]["export"]
    ours_t = m["export"]
    write_t = write_only["extra"]["marks"]["export"]
    sync_t = ref_sync["extra"]["marks"]["export"] + ref_sync["extra"]["marks"]["fsync"]
    verdict = "MET" if ours_t <= 1.5 * anchor else "MISSED"
    print(
        f"  time ratio export / onnx.save: validated {ours_t / anchor:.2f}x, write only "
        f"{write_t / anchor:.2f}x (target <= 1.5x: {verdict}); against onnx.save + fsync: "
        f"validated {ours_t / sync_t:.2f}x, write only {write_t / sync_t:.2f}x"
    )
    e2e = sum(m[k] for k in ("open", "session", "edit", "export"))
    rm = ref["extra"]["marks"]
    e2e_ref = sum(rm[k] for k in ("open", "edit", "export"))
    print(
        f"  end to end (open + session + edit + export) {e2e:.2f} s vs "
        f"(onnx.load + rename + onnx.save) {e2e_ref:.2f} s: {e2e / e2e_ref:.2f}x; peak RSS "
        f"{mib(validated['peak_rss'])} vs {mib(ref['peak_rss'])}"
    )
    print(f"  bytes written by the export: {validated['extra']['written']:,}")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
