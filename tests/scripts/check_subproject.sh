#!/usr/bin/env bash
# Configure (only) a parent project that add_subdirectory()s libswacache and
# check that the library brings no tests and no benchmarks into it (so the
# parent needs no GoogleTest or Google Benchmark) and names its documentation
# target swacache_docs.
set -euo pipefail
src=$1; work=$2; cmake=${3:-cmake}; ctest=${4:-ctest}
parent=$(cd "$(dirname "$0")/../subproject" && pwd)
rm -rf "$work"; mkdir -p "$work"
"$cmake" -S "$parent" -B "$work" -DSWACACHE_SOURCE_DIR="$src" -DSWACACHE_CUDA=OFF >/dev/null
tests=$("$ctest" --test-dir "$work" -N | sed -n 's/^Total Tests: //p')
[ "$tests" = 0 ] || { echo "FAIL: the subproject added $tests tests"; exit 1; }
for v in SWACACHE_TESTS SWACACHE_BENCH; do
  grep -q "^$v:BOOL=OFF" "$work/CMakeCache.txt" || { echo "FAIL: $v is not OFF"; exit 1; }
done
if grep -q "^GTest_DIR\|^benchmark_DIR" "$work/CMakeCache.txt"; then
  echo "FAIL: GoogleTest or Google Benchmark was looked for"; exit 1
fi
if command -v doxygen >/dev/null; then
  grep -q "swacache_docs" "$work/build.ninja" "$work/Makefile" 2>/dev/null ||
    { echo "FAIL: no swacache_docs target"; exit 1; }
fi
echo "OK: add_subdirectory brings no tests, benchmarks or test packages"
