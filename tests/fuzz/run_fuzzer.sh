#!/usr/bin/env bash
# Replays a harness's regression inputs, then fuzzes it for a bounded time.
#   run_fuzzer.sh FUZZER SRC_DIR NAME WORK_CORPUS [seconds]
# Prints libFuzzer's final stats (execs, coverage) on the last lines.
set -euo pipefail
fuzzer=$1; src=$2; name=$3; work=$4
secs=${5:-${SWACACHE_FUZZ_SECONDS:-60}}
mkdir -p "$work"
if [ -d "$src/regressions/$name" ] && [ -n "$(ls -A "$src/regressions/$name")" ]; then
  "$fuzzer" "$src"/regressions/"$name"/*
fi
exec "$fuzzer" -max_total_time="$secs" -timeout=25 -rss_limit_mb=2560 -print_final_stats=1 \
  -artifact_prefix="$work/../${name}-" "$work" "$src/corpus/$name"
