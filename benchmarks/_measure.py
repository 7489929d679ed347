"""Run a snippet in a fresh interpreter and report its wall time and peak RSS."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_TEMPLATE = """
import json, resource, sys, time
sys.path.insert(0, {root!r})
{setup}
t0 = time.perf_counter()
{body}
dt = time.perf_counter() - t0
{teardown}
# VmHWM is this process's own high-water mark (ru_maxrss can inherit the parent's at fork)
status = {{l.split(":")[0]: int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith(("VmHWM", "RssAnon", "RssFile"))}}
print("@@" + json.dumps({{"seconds": dt, "peak_rss": status["VmHWM"], "anon_rss": status["RssAnon"],
                          "file_rss": status["RssFile"], "extra": globals().get("extra")}}))
"""


def _code(body: str, setup: str, teardown: str) -> str:
    return _TEMPLATE.format(
        root=str(ROOT),
        setup=textwrap.dedent(setup),
        body=textwrap.dedent(body),
        teardown=textwrap.dedent(teardown),
    )


def _run_once(code: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("@@"))
    return json.loads(line[2:])  # type: ignore[no-any-return]


def measure(body: str, setup: str = "", repeat: int = 3, teardown: str = "") -> dict[str, float]:
    """Best-of-``repeat`` wall time and the max peak RSS (bytes) of ``body`` (``setup`` and
    ``teardown`` run in the same interpreter, untimed)."""
    code = _code(body, setup, teardown)
    best: dict[str, float] | None = None
    for _ in range(repeat):
        r = _run_once(code)
        if best is None or r["seconds"] < best["seconds"]:
            best = r
    assert best is not None
    return best


def measure_rounds(
    snippets: dict[str, tuple[str, str]], repeat: int = 3
) -> dict[str, list[dict[str, float]]]:
    """Every sample of each ``label: (body, setup)``, run in rounds (each snippet once per
    round, in turn), so a noisy stretch of the machine slows all sides of a round alike and
    per-round ratios can be compared."""
    codes = {label: _code(body, setup, "") for label, (body, setup) in snippets.items()}
    samples: dict[str, list[dict[str, float]]] = {label: [] for label in codes}
    for _ in range(repeat):
        for label, code in codes.items():
            samples[label].append(_run_once(code))
    return samples


def mib(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB"
