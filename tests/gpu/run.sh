#!/usr/bin/env bash
# Runs the GPU tests (then compute-sanitizer memcheck, racecheck and synccheck
# on them when available)
# and the GPU benchmarks on any machine with an NVIDIA GPU, and writes a log
# and a results table to an output folder.
#
# Usage: tests/gpu/run.sh [options]
#   --out DIR      results folder (env SWA_GPU_OUT, else $OUT when a job runner
#                  sets it; default build/gpu-results)
#   --build DIR    tree to configure and build when there is no bundle
#                  (env SWA_GPU_BUILD_DIR; default build-gpu)
#   --bundle DIR   prebuilt bundle from tests/gpu/make_bundle.sh
#                  (env SWA_GPU_BUNDLE; default build-gpu-bundle)
#   --budget SEC   wall-clock budget of the whole run; later, optional steps are
#                  skipped when time runs short (env SWA_GPU_BUDGET_S; default 540)
#   --arch LIST    CMAKE_CUDA_ARCHITECTURES of a build here
#                  (env SWA_GPU_ARCH; default 90a-real)
#   --cuda DIR     CUDA toolkit root: nvcc, compute-sanitizer, runtime libraries
#                  (env CUDA_HOME; default /usr/local/cuda)
#   --quick        fewer benchmark iterations
# Relative paths are taken from the repository root.
#
# Two ways to get the binaries:
#  - a prebuilt bundle (tests/gpu/make_bundle.sh, made on a build machine that
#    has abseil, GoogleTest and Google Benchmark): used when the bundle folder
#    holds bin/. Use it on GPU machines that have the CUDA toolkit but not those
#    libraries (configuring there fails at find_package(absl)).
#  - otherwise configure and build here (Release, the --arch architectures).
# Exits non-zero when any step failed, timed out or was not built.
set -u -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
RESULTS="${SWA_GPU_OUT:-${OUT:-$ROOT/build/gpu-results}}"
BUILD="${SWA_GPU_BUILD_DIR:-$ROOT/build-gpu}"
BUNDLE="${SWA_GPU_BUNDLE:-$ROOT/build-gpu-bundle}"
BUDGET="${SWA_GPU_BUDGET_S:-540}"
ARCH="${SWA_GPU_ARCH:-90a-real}"
CUDA_ROOT="${CUDA_HOME:-/usr/local/cuda}"
QUICK=""
abspath() { case "$1" in /*) echo "$1" ;; *) echo "$ROOT/$1" ;; esac; }
while [ $# -gt 0 ]; do
  case "$1" in
    --out) RESULTS="$(abspath "$2")"; shift 2 ;;
    --build) BUILD="$(abspath "$2")"; shift 2 ;;
    --bundle) BUNDLE="$(abspath "$2")"; shift 2 ;;
    --budget) BUDGET="$2"; shift 2 ;;
    --arch) ARCH="$2"; shift 2 ;;
    --cuda) CUDA_ROOT="$2"; shift 2 ;;
    --quick) QUICK="--quick"; shift ;;
    -h|--help) sed -n '2,/^set -u/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$RESULTS"
LOG="$RESULTS/gpu_run.log"
TABLE="$RESULTS/gpu_results.md"
STEPS="$RESULTS/gpu_steps.md"  # one row per finished step, written as it finishes
: > "$LOG"
printf '| step | result | time |\n|---|---|---|\n' > "$STEPS"
export PATH="$CUDA_ROOT/bin:$PATH"
JOBS="$(nproc 2>/dev/null || echo 4)"
START=$(date +%s)
ORIG_LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}"

log() { echo "[$(( $(date +%s) - START ))s] $*" | tee -a "$LOG"; }
elapsed() { echo $(( $(date +%s) - START )); }
record() { echo "$1" >> "$STEPS"; }
# run_step NAME TIMEOUT CMD...: runs with a timeout (cut to the time left),
# records PASS/FAIL/TIMEOUT at once (so a killed run still leaves its rows).
run_step() {
  local name="$1" limit="$2"; shift 2
  local left=$(( BUDGET - $(elapsed) ))
  if [ "$left" -lt 20 ]; then
    record "| $name | SKIPPED (time budget) | - |"
    log "== $name: skipped, ${left}s left of the budget"
    return 0
  fi
  [ "$limit" -gt "$left" ] && limit="$left"
  log "== $name: $*"
  local t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" >> "$LOG" 2>&1
  local rc=$?
  local status=PASS
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then status=TIMEOUT; elif [ $rc -ne 0 ]; then status="FAIL(rc=$rc)"; fi
  record "| $name | $status | $(( $(date +%s) - t0 ))s |"
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

# The codec and planner kernels first (small, and they isolate the step's parts).
GPU_TESTS="gpu_codec_test gpu_plan_test gpu_cuda_step_test gpu_cuda_rope_softcap_lse_test gpu_cuda_rope_table_test gpu_cuda_graph_test gpu_cuda_graph_stats_test gpu_cuda_backend_state_test gpu_cuda_project_test gpu_cuda_nonfinite_test gpu_cuda_small_tiles_test gpu_cuda_merge_test"
CPU_TESTS="cuda_kernel_math_test cuda_rope_math_test cuda_host_checks_test project_gemm_test attention_variant_test"

# 1. Binaries: the carried bundle, else a build here.
if [ -d "$BUNDLE/bin" ]; then
  log "using the prebuilt bundle $BUNDLE ($(cat "$BUNDLE/BUILD_INFO" 2>/dev/null | tr '\n' ' '))"
  UNIT_DIR="$BUNDLE/bin"; GPU_DIR="$BUNDLE/bin"; BENCH_DIR="$BUNDLE/bin"
  # Bundled: abseil, Google Benchmark; from the device's toolkit: libcudart /
  # libcublasLt (same CUDA major as the build). torch below runs without this.
  export LD_LIBRARY_PATH="$BUNDLE/lib:$CUDA_ROOT/lib64:${LD_LIBRARY_PATH:-}"
  # The device's libstdc++ serves unless it is older than the build machine's.
  if "$BUNDLE/bin/cuda_kernel_math_test" --gtest_list_tests 2>&1 | grep -q "GLIBCXX\|CXXABI"; then
    log "the system libstdc++ is too old for the bundle: using its lib-cxx/"
    export LD_LIBRARY_PATH="$BUNDLE/lib-cxx:$LD_LIBRARY_PATH"
  fi
  # libcudart / libcublasLt not in the toolkit's lib64? Look where pip puts them.
  if ldd "$BUNDLE/bin/gpu_cuda_project_test" 2>/dev/null | grep -q "libcu.*not found"; then
    for d in $(find /usr/local /usr/lib /opt "$(python3 -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null)" \
                 -maxdepth 6 \( -name 'libcublasLt.so.1*' -o -name 'libcudart.so.1*' \) 2>/dev/null |
               xargs -r -n1 dirname | sort -u); do
      export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"
    done
    log "CUDA libraries searched for: LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  fi
  missing=$(for f in "$BUNDLE"/bin/*; do ldd "$f" 2>/dev/null | grep "not found"; done | sort -u)
  if [ -n "$missing" ]; then
    log "WARNING: unresolved shared libraries:"; echo "$missing" | tee -a "$LOG"
    record "| shared libraries | FAIL(missing: $(echo $missing | tr '\n' ' ')) | - |"
  fi
  record "| bundle | PASS | - |"
else
  log "no bundle at $BUNDLE: building here"
  run_step configure 180 cmake -S "$ROOT" -B "$BUILD" -G Ninja -DSWACACHE_CUDA=ON \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$ARCH" || true
  run_step build 360 cmake --build "$BUILD" -j "$JOBS" --target $GPU_TESTS $CPU_TESTS \
    attention_cuda_bench || true
  UNIT_DIR="$BUILD/tests"; GPU_DIR="$BUILD/tests/gpu"; BENCH_DIR="$BUILD/bench"
fi

# 2. Tests: CPU checks of the device helpers, then the GPU tests.
for t in $CPU_TESTS; do
  if [ -x "$UNIT_DIR/$t" ]; then run_step "$t" 120 "$UNIT_DIR/$t" || true
  else record "| $t | NOT BUILT | - |"; fi
done
for t in $GPU_TESTS; do
  if [ -x "$GPU_DIR/$t" ]; then
    run_step "$t" 180 "$GPU_DIR/$t" --gtest_output="xml:$RESULTS/$t.xml" || true
  else
    record "| $t | NOT BUILT | - |"
  fi
done
# A skipped GPU test means no usable device: that is a failure of this run.
if grep -q "\[  SKIPPED \]" "$LOG"; then
  log "ERROR: GPU tests skipped (no usable device?), see the log"
  record "| skipped GPU tests | FAIL(see log) | - |"
fi

# 3. compute-sanitizer on the fast GPU tests (the DeepSeek-shape case is slow
# under it): memcheck, then racecheck (shared-memory hazards) and synccheck
# (barriers) on the attention kernels' tests, large and small tiles.
if command -v compute-sanitizer > /dev/null; then
  for t in gpu_cuda_graph_test gpu_cuda_graph_stats_test gpu_cuda_step_test gpu_cuda_rope_softcap_lse_test; do
    [ -x "$GPU_DIR/$t" ] || continue
    run_step "memcheck $t" 150 compute-sanitizer --tool memcheck --error-exitcode 3 \
      "$GPU_DIR/$t" --gtest_filter='-*DeepSeek*' || true
  done
  for tool in racecheck synccheck; do
    for t in gpu_cuda_step_test gpu_cuda_nonfinite_test gpu_cuda_small_tiles_test; do
      [ -x "$GPU_DIR/$t" ] || continue
      # One case per test binary: racecheck is an order of magnitude slower than memcheck.
      case "$t" in
        gpu_cuda_step_test) filter='*DecodeAndSpeculativeVerify*' ;;
        gpu_cuda_nonfinite_test) filter='*TensorCore*' ;;
        *) filter='*MatchCpu*' ;;
      esac
      run_step "$tool $t" 150 compute-sanitizer --tool "$tool" --error-exitcode 3 \
        "$GPU_DIR/$t" --gtest_filter="$filter" || true
    done
  done
else
  log "compute-sanitizer not found: memcheck, racecheck and synccheck skipped"
  record "| compute-sanitizer | SKIPPED (no compute-sanitizer) | - |"
fi

# 4. Benchmarks: ours, then PyTorch on the same shapes when torch is importable.
BENCH_OUT="$RESULTS/bench_cuda.md"
if [ -x "$BENCH_DIR/attention_cuda_bench" ]; then
  run_step attention_cuda_bench 150 bash -c '"$0" $1 > "$2"' \
    "$BENCH_DIR/attention_cuda_bench" "$QUICK" "$BENCH_OUT" || true
  [ -f "$BENCH_OUT" ] && cat "$BENCH_OUT" >> "$LOG"
fi
TORCH_OUT="$RESULTS/bench_torch.md"
export LD_LIBRARY_PATH="$ORIG_LD_LIBRARY_PATH"
if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>> "$LOG"; then
  run_step torch_swa_baseline 150 bash -c 'python3 "$0" $1 > "$2"' \
    "$ROOT/bench/torch_swa_baseline.py" "$QUICK" "$TORCH_OUT" || true
  [ -f "$TORCH_OUT" ] && cat "$TORCH_OUT" >> "$LOG"
else
  log "torch with CUDA not importable: PyTorch baselines skipped"
  record "| torch_swa_baseline | SKIPPED (no torch) | - |"
fi

{
  echo "## Steps"
  echo
  cat "$STEPS"
  echo
  for t in $GPU_TESTS; do
    [ -f "$RESULTS/$t.xml" ] || continue
    echo "- $t: $(grep -o 'tests="[0-9]*" failures="[0-9]*" disabled="[0-9]*" errors="[0-9]*"' "$RESULTS/$t.xml" | head -1), skipped: $(grep -c '<skipped' "$RESULTS/$t.xml")"
  done
  echo
  if [ -f "$BENCH_OUT" ]; then echo "## libswacache CUDA"; echo; cat "$BENCH_OUT"; echo; fi
  if [ -f "$TORCH_OUT" ]; then echo "## PyTorch baselines (same shapes)"; echo; cat "$TORCH_OUT"; echo; fi
  echo "total wall time: $(elapsed)s"
} >> "$TABLE"
log "results: $TABLE"
cat "$TABLE"
# Exit non-zero when any step failed, so the caller sees it at once (no
# `grep -q` in a pipeline: with pipefail an early exit could hide a match).
failed=$(grep -cE "FAIL|TIMEOUT|NOT BUILT" "$STEPS")
[ "$failed" -eq 0 ]
