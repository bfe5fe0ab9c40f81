#!/usr/bin/env bash
# Builds dyngrad._C with AddressSanitizer + UndefinedBehaviorSanitizer (-DDYNGRAD_SANITIZE=ON) into its own build
# dir, stages a copy of python/dyngrad holding that .so (the dev .so in python/dyngrad is left alone), and runs
# tests under it with the ASan runtime preloaded (python itself is not instrumented). Every report is written to
# $build_dir/reports/; the script prints how many there were and fails if any.
#
#   bash scripts/sanitize.sh                      # the default subset below
#   bash scripts/sanitize.sh tests/test_ops.py    # any pytest arguments instead
#   SANITIZE_BUILD_DIR=/tmp/asan PYTHON=python3.11 bash scripts/sanitize.sh   # elsewhere, another interpreter
set -euo pipefail
case "${1:-}" in
  -h|--help)   # the header above is the usage; print it and change nothing
    echo "usage: bash scripts/sanitize.sh [-h] [pytest arguments ...]"; echo
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    echo "Options: -h, --help  print this and exit (any other arguments go to pytest)."
    exit 0 ;;
esac
cd "$(dirname "$0")/.."
python=${PYTHON:-python}
build_dir=${SANITIZE_BUILD_DIR:-build/sanitize}
mkdir -p "$build_dir" && build_dir=$(cd "$build_dir" && pwd)

echo "sanitize.sh: building the sanitized _C in $build_dir (a full C++ build: minutes on 2 cores)"
# (the option adds -O1 -g1 -fno-omit-frame-pointer); -march=native off so the reports do not depend on the machine.
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSKBUILD_PROJECT_NAME=dyngrad \
  -DDYNGRAD_SANITIZE=ON -DDYNGRAD_NATIVE=OFF \
  -Dpybind11_DIR="$("$python" -m pybind11 --cmakedir)" -DPython_EXECUTABLE="$(command -v "$python")" >/dev/null
cmake --build "$build_dir"

stage="$build_dir/python"
rm -rf "$stage" && mkdir -p "$stage"
cp -r python/dyngrad "$stage/"
rm -f "$stage"/dyngrad/_C*.so
cp "$build_dir"/_C*.so "$stage/dyngrad/"

reports="$build_dir/reports"
rm -rf "$reports" && mkdir -p "$reports"
compiler=$(command -v "${CXX:-c++}")
asan_runtime=$("$compiler" -print-file-name=libasan.so)
# libstdc++ preloaded too: python does not link it, and ASan's __cxa_throw interceptor must find the real one
# when it starts (else the first C++ exception dies in "CHECK failed: real___cxa_throw").
libstdcxx=$("$compiler" -print-file-name=libstdc++.so)
# detect_leaks=0: CPython's own allocations at exit are not ours. allocator_may_return_null + a 2 GB cap: an
# allocation too large must become MemoryError (tests/test_hostile.py checks it) instead of an ASan abort.
export ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1:max_allocation_size_mb=2048:log_path=$reports/asan"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=0:log_path=$reports/ubsan"
export LD_PRELOAD="$asan_runtime $libstdcxx"
export DYNGRAD_SANITIZED=1   # tests that need a real address-space limit (RLIMIT_AS) skip themselves under ASan

if [ "$#" -eq 0 ]; then
  set -- tests/test_ops.py tests/test_engine.py tests/test_properties.py tests/test_hostile.py \
    tests/test_leaks.py tests/test_threads.py tests/test_numerics.py -k "not reference" -q
fi
status=0
echo "sanitize.sh: running pytest $* under ASan + UBSan (reports in $reports)"
PYTHONPATH="$stage" "$python" -m pytest -p no:cacheprovider "$@" || status=$?
unset LD_PRELOAD

pattern="SUMMARY: (Address|UndefinedBehavior)Sanitizer|runtime error:|AddressSanitizer: CHECK failed"
count=$(cat "$reports"/* 2>/dev/null | grep -cE "$pattern" || true)
echo "sanitizer reports: $count (in $reports); pytest exit status $status"
if [ "$count" -ne 0 ]; then
  cat "$reports"/* | grep -E "$pattern|ERROR: AddressSanitizer" | sort | uniq -c | head -40
  exit 1
fi
exit "$status"
