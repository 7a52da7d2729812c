#!/usr/bin/env bash
# Replays a harness's regression inputs, then fuzzes it for a fixed number of
# inputs (not a fixed time: a slow machine checks as much as a fast one).
#   run_fuzzer.sh FUZZER SRC_DIR NAME WORK_CORPUS [runs]
# runs defaults to $SWACACHE_FUZZ_RUNS, else 20000.
# Prints libFuzzer's final stats (execs, coverage) on the last lines.
set -euo pipefail
fuzzer=$1; src=$2; name=$3; work=$4
runs=${5:-${SWACACHE_FUZZ_RUNS:-20000}}
mkdir -p "$work"
if [ -d "$src/regressions/$name" ] && [ -n "$(ls -A "$src/regressions/$name")" ]; then
  "$fuzzer" "$src"/regressions/"$name"/*
fi
# -seed fixed per run count would replay the same inputs every CI run; the
# default (time-based) seed explores new ones each run, and a crash leaves its
# input in the artifact folder.
exec "$fuzzer" -runs="$runs" -timeout=25 -rss_limit_mb=2560 -print_final_stats=1 \
  -artifact_prefix="$work/../${name}-" "$work" "$src/corpus/$name"
