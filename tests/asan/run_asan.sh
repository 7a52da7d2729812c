#!/usr/bin/env bash
# Configure (once) and build a -DSWACACHE_ASAN=ON tree of the project, build
# only the given test targets, and run them under ASan + UBSan. Called by the
# asan_store_test ctest (tests/asan/CMakeLists.txt); usable by hand too:
#   tests/asan/run_asan.sh SRC BUILD "TARGET ..." [cmake] [ctest] [generator] [cc] [cxx]
set -euo pipefail
src=$1; build=$2; targets=$3
cmake=${4:-cmake}; ctest=${5:-ctest}; generator=${6:-Ninja}
cc=${7:-cc}; cxx=${8:-c++}
jobs=${SWACACHE_ASAN_JOBS:-$(nproc)}

if [ ! -f "$build/CMakeCache.txt" ]; then
  "$cmake" -S "$src" -B "$build" -G "$generator" -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
    -DSWACACHE_ASAN=ON -DSWACACHE_CUDA=OFF -DSWACACHE_TESTS=ON -DSWACACHE_BENCH=OFF >/dev/null
fi
# shellcheck disable=SC2086  # a space-separated list of targets
"$cmake" --build "$build" -j "$jobs" --target $targets

# Run exactly the built targets (one ctest test per target, same names).
regex="^($(echo $targets | tr ' ' '|'))\$"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:strict_string_checks=1:halt_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
"$ctest" --test-dir "$build" --output-on-failure -R "$regex"
