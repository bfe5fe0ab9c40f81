#!/usr/bin/env bash
# Development build: compiles dyngrad._C with CMake + ninja into BUILD_DIR (default build/dev) and installs the .so
# atomically into python/dyngrad/, so that `PYTHONPATH=python python ...` uses it. Releases use `pip install .`.
#
#   bash scripts/dev_build.sh                           # build/dev, the default
#   bash scripts/dev_build.sh build/debug -DCMAKE_BUILD_TYPE=Debug   # another dir; later arguments go to cmake
#   CMAKE_CXX_COMPILER_LAUNCHER=ccache bash scripts/dev_build.sh     # cached rebuilds
set -euo pipefail
case "${1:-}" in
  -h|--help)   # the header above is the usage; print it and change nothing
    echo "usage: bash scripts/dev_build.sh [-h] [BUILD_DIR [cmake arguments ...]]"; echo
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    echo "Options: -h, --help  print this and exit."
    exit 0 ;;
esac
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
