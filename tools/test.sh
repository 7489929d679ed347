#!/usr/bin/env bash
# Install the test dependencies and run the whole test suite (the README's test command).
# Works on a fresh Debian/Ubuntu machine with Python 3.11+; Qt runs offscreen.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
export QT_QPA_PLATFORM=offscreen PIP_DISABLE_PIP_VERSION_CHECK=1
# A distribution's own Python refuses pip installs (PEP 668 "externally-managed-environment"):
# then everything goes into the project's virtual environment instead.
if "$PY" -c 'import os, sys, sysconfig; sys.exit(not (sys.prefix == sys.base_prefix and os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))))'; then
    [ -x .venv/bin/python ] || "$PY" -m venv .venv
    PY=.venv/bin/python
fi
"$PY" -m pip install -q -e ".[test]"
# torch is a reference for the PyTorch-reader tests only (never a core dependency). Pin the CPU
# build that this machine kind provides; without it those tests skip and say why.
"$PY" -m pip install -q "torch==2.13.0" 2>/dev/null || echo "note: torch 2.13.0 unavailable; torch reference tests will skip"
"$PY" tools/zoo.py > /dev/null || echo "note: some zoo artifacts could not be fetched or generated (tests needing them skip locally, fail in CI)"
"$PY" -m ruff check nneditor tests tools benchmarks examples plugins
"$PY" -m ruff format --check nneditor tests tools benchmarks examples plugins
"$PY" -m mypy
exec "$PY" -m pytest -q "$@"
