#!/usr/bin/env bash
# Development build: compiles dyngrad._C with CMake + ninja into BUILD_DIR (default build/dev) and installs the .so
# atomically into python/dyngrad/, so that `PYTHONPATH=python python ...` uses it. Releases use `pip install .`.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build/dev}
shift || true
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSKBUILD_PROJECT_NAME=dyngrad \
  -Dpybind11_DIR="$(python -m pybind11 --cmakedir)" -DPython_EXECUTABLE="$(command -v python)" "$@" >/dev/null
cmake --build "$build_dir"
so=$(ls "$build_dir"/_C*.so)
tmp=python/dyngrad/.$(basename "$so").tmp.$$
cp "$so" "$tmp" && mv -f "$tmp" "python/dyngrad/$(basename "$so")"
echo "installed python/dyngrad/$(basename "$so")"
