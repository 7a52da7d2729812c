#!/usr/bin/env bash
# CPU attention suite (issue 34): the decode step (ours FP32 and BF16 queries,
# the FMA / BF16-path peak probes measured in the same process, interleaved with
# the steps), PyTorch SDPA on the same shapes with the KV already dequantised,
# and chunked prefill with FP32 and BF16 queries; one markdown table.
#
#   bench/run_cpu_attention_suite.sh [BUILD_DIR] [OUT.md]
#
# BUILD_DIR (default build) must hold bench/step_cpu_bench and
# bench/prefill_cpu_bench (ninja -C BUILD_DIR step_cpu_bench prefill_cpu_bench).
# The raw outputs stay in OUT.d/ (default cpu-attention-suite.md.d/).
# The torch venv: $SWA_TORCH_VENV, default
# ~/.cache/swacache-torch-venv-torch2.15.0-transformers5.24.0 (without it the
# torch columns say "-"). Runs the decode bench $RUNS times (default 2) and keeps
# each figure's best; prefill at the 512-token chunk (--quick; the BF16 row
# without torch, whose figures do not depend on our query dtype). About 4-5
# minutes on 2 idle cores. Run it on an idle
# machine: on a shared VM the tdpbf16ps rate itself halves under other load
# (docs/perf/cpu-attention-2026-12-03-amx.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
out=${2:-cpu-attention-suite.md}
venv=${SWA_TORCH_VENV:-$HOME/.cache/swacache-torch-venv-torch2.15.0-transformers5.24.0}
runs=${RUNS:-2}
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}
tmp=$out.d
mkdir -p "$tmp"

for r in $(seq 1 "$runs"); do
  echo "step_cpu_bench run $r/$runs" >&2
  "$build/bench/step_cpu_bench" --repeat 7 > "$tmp/step$r.txt"
done
py=python3
torch_args=()
if [ -x "$venv/bin/python" ]; then
  echo "attention_torch_baseline.py" >&2
  "$venv/bin/python" "$here/attention_torch_baseline.py" --no-ours --repeat 7 > "$tmp/torch.txt" || true
  torch_args=(--python "$venv/bin/python")
else
  echo "SKIP: no torch venv at $venv" > "$tmp/torch.txt"
  torch_args=(--no-torch)
fi
echo "prefill_cpu_bench (FP32, BF16 queries)" >&2
"$build/bench/prefill_cpu_bench" --quick "${torch_args[@]}" > "$tmp/prefill32.txt" || true
"$build/bench/prefill_cpu_bench" --quick --bf16 --no-torch > "$tmp/prefill16.txt" || true

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -xE 'avx512f|avx512_bf16|amx_bf16|amx_tile' | tr '\n' ' ')
"$py" "$here/cpu_attention_suite_table.py" --cpu "$cpu" --flags "$flags" \
  --torch "$tmp/torch.txt" --prefill "$tmp/prefill32.txt" --prefill "$tmp/prefill16.txt" \
  "$tmp"/step*.txt > "$out"
cat "$out"
echo "wrote $out (raw outputs in $tmp/)" >&2
