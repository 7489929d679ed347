#!/usr/bin/env bash
# Install the test dependencies and run the whole test suite (the README's test command).
# Works on a fresh Debian/Ubuntu machine with Python 3.11+; Qt runs offscreen.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
export QT_QPA_PLATFORM=offscreen PIP_DISABLE_PIP_VERSION_CHECK=1
"$PY" -m pip install -q -e ".[test]"
# torch is a reference for the PyTorch-reader tests only (never a core dependency). Pin the CPU
# build that this machine kind provides; without it those tests skip and say why.
"$PY" -m pip install -q "torch==2.13.0" 2>/dev/null || echo "note: torch 2.13.0 unavailable; torch reference tests will skip"
"$PY" tools/testdata.py || echo "note: some real test files could not be fetched (tests needing them skip locally, fail in CI)"
"$PY" -m ruff check nneditor tests tools benchmarks examples
"$PY" -m ruff format --check nneditor tests tools benchmarks examples
"$PY" -m mypy
exec "$PY" -m pytest -q "$@"
