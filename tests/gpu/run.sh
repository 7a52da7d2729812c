#!/usr/bin/env bash
# Builds libswacache with CUDA, runs the GPU tests (then compute-sanitizer
# memcheck on them when available) and the GPU benchmarks, and writes a log
# and a results table to $OUT (the device tool's folder) or build/gpu-results/.
# Budget: well under 10 minutes on an H200 with 16 cores (the build dominates).
#
# Usage: tests/gpu/run.sh [--quick]   (--quick: fewer benchmark iterations)
set -u -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
RESULTS="${OUT:-$ROOT/build/gpu-results}"
BUILD="${SWA_GPU_BUILD_DIR:-$ROOT/build-gpu}"
QUICK="${1:-}"
mkdir -p "$RESULTS"
LOG="$RESULTS/gpu_run.log"
TABLE="$RESULTS/gpu_results.md"
: > "$LOG"
export PATH="/usr/local/cuda/bin:$PATH"
JOBS="$(nproc 2>/dev/null || echo 4)"
START=$(date +%s)

log() { echo "[$(( $(date +%s) - START ))s] $*" | tee -a "$LOG"; }
# run_step NAME TIMEOUT CMD...: runs with a timeout, records PASS/FAIL/TIMEOUT.
declare -a SUMMARY
run_step() {
  local name="$1" limit="$2"; shift 2
  log "== $name: $*"
  local t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" >> "$LOG" 2>&1
  local rc=$?
  local status=PASS
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then status=TIMEOUT; elif [ $rc -ne 0 ]; then status="FAIL(rc=$rc)"; fi
  SUMMARY+=("| $name | $status | $(( $(date +%s) - t0 ))s |")
  log "== $name: $status"
  return $rc
}

{
  echo "# libswacache GPU run"
  echo
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown) (working tree may differ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/device: /'
  nvcc --version 2>/dev/null | tail -1 | sed 's/^/nvcc: /'
  echo
} > "$TABLE"
nvidia-smi >> "$LOG" 2>&1 || log "nvidia-smi not available"

# 1. Build (only what this script runs).
GPU_TESTS="gpu_cuda_step_test gpu_cuda_graph_test gpu_cuda_project_test"
run_step configure 180 cmake -S "$ROOT" -B "$BUILD" -G Ninja -DSWACACHE_CUDA=ON \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real || true
run_step build 360 cmake --build "$BUILD" -j "$JOBS" --target $GPU_TESTS attention_cuda_bench \
  cuda_kernel_math_test project_gemm_test || true

# 2. Tests: CPU checks of the device helpers, then the GPU tests.
for t in cuda_kernel_math_test project_gemm_test; do
  [ -x "$BUILD/tests/$t" ] && run_step "$t" 120 "$BUILD/tests/$t" || true
done
for t in $GPU_TESTS; do
  if [ -x "$BUILD/tests/gpu/$t" ]; then
    run_step "$t" 180 "$BUILD/tests/gpu/$t" --gtest_output="xml:$RESULTS/$t.xml" || true
  else
    SUMMARY+=("| $t | NOT BUILT | - |")
  fi
done
if grep -q "Skipped" "$LOG"; then log "WARNING: some GPU tests skipped (see log)"; fi

# 3. compute-sanitizer memcheck on the fast GPU tests (the DeepSeek-shape case is slow under it).
if command -v compute-sanitizer > /dev/null; then
  for t in gpu_cuda_graph_test gpu_cuda_step_test; do
    [ -x "$BUILD/tests/gpu/$t" ] || continue
    run_step "memcheck $t" 150 compute-sanitizer --tool memcheck --error-exitcode 3 \
      "$BUILD/tests/gpu/$t" --gtest_filter='-*DeepSeek*' || true
  done
else
  log "compute-sanitizer not found: memcheck skipped"
  SUMMARY+=("| memcheck | SKIPPED (no compute-sanitizer) | - |")
fi

# 4. Benchmarks: ours, then PyTorch on the same shapes when torch is importable.
BENCH_OUT="$RESULTS/bench_cuda.md"
if [ -x "$BUILD/bench/attention_cuda_bench" ]; then
  log "== attention_cuda_bench"
  timeout 150 "$BUILD/bench/attention_cuda_bench" $QUICK > "$BENCH_OUT" 2>> "$LOG"
  rc=$?; SUMMARY+=("| attention_cuda_bench | $([ $rc -eq 0 ] && echo PASS || echo "FAIL(rc=$rc)") | - |")
  cat "$BENCH_OUT" >> "$LOG"
fi
TORCH_OUT="$RESULTS/bench_torch.md"
if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>> "$LOG"; then
  timeout 150 python3 "$ROOT/bench/torch_swa_baseline.py" $QUICK > "$TORCH_OUT" 2>> "$LOG"
  rc=$?; SUMMARY+=("| torch_swa_baseline | $([ $rc -eq 0 ] && echo PASS || echo "FAIL(rc=$rc)") | - |")
  cat "$TORCH_OUT" >> "$LOG"
else
  log "torch with CUDA not importable: PyTorch baselines skipped"
  SUMMARY+=("| torch_swa_baseline | SKIPPED (no torch) | - |")
fi

{
  echo "## Steps"
  echo
  echo "| step | result | time |"
  echo "|---|---|---|"
  printf '%s\n' "${SUMMARY[@]}"
  echo
  for t in $GPU_TESTS; do
    [ -f "$RESULTS/$t.xml" ] || continue
    echo "- $t: $(grep -o 'tests="[0-9]*" failures="[0-9]*" disabled="[0-9]*" errors="[0-9]*"' "$RESULTS/$t.xml" | head -1), skipped: $(grep -c '<skipped' "$RESULTS/$t.xml")"
  done
  echo
  if [ -f "$BENCH_OUT" ]; then echo "## libswacache CUDA"; echo; cat "$BENCH_OUT"; echo; fi
  if [ -f "$TORCH_OUT" ]; then echo "## PyTorch baselines (same shapes)"; echo; cat "$TORCH_OUT"; echo; fi
  echo "total wall time: $(( $(date +%s) - START ))s"
} >> "$TABLE"
log "results: $TABLE"
cat "$TABLE"
# Exit non-zero when any step failed, so the caller sees it at once.
! printf '%s\n' "${SUMMARY[@]}" | grep -qE "FAIL|TIMEOUT|NOT BUILT"
