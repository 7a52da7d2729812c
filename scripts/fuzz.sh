#!/usr/bin/env bash
# Longer fuzzing than CI's bounded run (scripts/sanitize.sh asan gives each
# harness SWACACHE_FUZZ_RUNS inputs, default 20000). Builds the harnesses in the
# ASan + UBSan + libFuzzer tree (build-asan/) and runs each for SECONDS with
# JOBS parallel workers, keeping what it finds in build-asan/fuzz-corpus/<name>
# (seeded from tests/fuzz/corpus/<name>). Crashes land in build-asan/fuzz-artifacts/;
# each one becomes a file in tests/fuzz/regressions/<name>/ (replayed by CI) and,
# for a library bug, a fix.
#
#   scripts/fuzz.sh [SECONDS=600] [JOBS=1] [harness ...]   (default: all five)
#   e.g. overnight: scripts/fuzz.sh 28800 4
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}; jobs=${2:-1}; shift $(( $# > 2 ? 2 : $# ))
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(blob capi planner codec sizes)
source scripts/build_env.sh
[ -f build-asan/CMakeCache.txt ] || cmake -S . -B build-asan "${SWA_ASAN_ARGS[@]}" >/dev/null
cmake --build build-asan -j "$(nproc)" --target "${names[@]/#/fuzz_}"
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
src=$(pwd)
cd build-asan  # libFuzzer writes its fuzz-<job>.log files here with -jobs
mkdir -p fuzz-artifacts
parallel=()
[ "$jobs" -gt 1 ] && parallel=(-jobs="$jobs" -workers="$jobs")
for n in "${names[@]}"; do
  mkdir -p "fuzz-corpus/$n"
  echo "fuzz.sh: $n for $secs s, $jobs job(s)"
  tests/fuzz/fuzz_"$n" -max_total_time="$secs" -timeout=25 -rss_limit_mb=2560 \
    -print_final_stats=1 "${parallel[@]}" -artifact_prefix="fuzz-artifacts/$n-" \
    "fuzz-corpus/$n" "$src/tests/fuzz/corpus/$n" 2>&1 |
    grep -E "^stat::|DONE|ERROR|SUMMARY|fuzz check|runtime error" || true
done
