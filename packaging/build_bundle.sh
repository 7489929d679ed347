#!/usr/bin/env bash
# Build the one-folder app bundle (dist/bundle/nneditor/) and smoke-test it headless:
#   bash packaging/build_bundle.sh [PYTHON]
# Linux: also writes dist/nneditor-<version>-linux-<arch>.tar.gz. Needs PyInstaller
# (pip install pyinstaller) in the environment that has NNEditor's dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${1:-${PYTHON:-python3}}"
export QT_QPA_PLATFORM=offscreen
"$PY" -m PyInstaller --noconfirm --log-level WARN --distpath dist/bundle \
    --workpath build/pyinstaller packaging/pyinstaller/nneditor.spec
APP=dist/bundle/nneditor/nneditor
"$APP" --version
"$APP" inspect examples/tiny_transformer.onnx --json > /dev/null
"$APP" examples/tiny_transformer.onnx --screenshot dist/bundle-smoke.png
"$APP" --list-tracers | head -5
VERSION="$("$APP" --version | awk '{print $2}')"
if [ "$(uname)" = "Linux" ]; then
    tar -C dist/bundle -czf "dist/nneditor-${VERSION}-linux-$(uname -m).tar.gz" nneditor
fi
du -sh dist/bundle/nneditor
