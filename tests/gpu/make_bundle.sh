#!/usr/bin/env bash
# Builds the GPU test and benchmark binaries on THIS (CPU) machine and packs
# them, stripped, with the shared libraries the device image lacks (abseil,
# Google Benchmark) into build-gpu-bundle/ (git-ignored), for
# tests/gpu/run.sh on the GPU machine: carry "build-gpu-bundle" there.
# libcudart / libcublasLt come from the device's own CUDA toolkit (same major
# version, 13), libc and the driver from its system; libstdc++ from its system
# too unless that one is too old (lib-cxx/ then, see run.sh).
#
# Usage: tests/gpu/make_bundle.sh   (env: SWA_GPU_BUILD_DIR, default build-gpu;
#        CUDA_HOME, default /usr/local/cuda;
#        SWA_GPU_BUNDLE, default build-gpu-bundle; JOBS, default 2)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${SWA_GPU_BUILD_DIR:-$ROOT/build-gpu}"
BUNDLE="${SWA_GPU_BUNDLE:-$ROOT/build-gpu-bundle}"
JOBS="${JOBS:-2}"
export PATH="${CUDA_HOME:-/usr/local/cuda}/bin:$PATH"

TARGETS="gpu_codec_test gpu_plan_test gpu_cuda_step_test gpu_cuda_rope_softcap_lse_test gpu_cuda_rope_table_test \
gpu_cuda_graph_test gpu_cuda_graph_stats_test gpu_cuda_backend_state_test gpu_cuda_project_test \
gpu_cuda_nonfinite_test gpu_cuda_small_tiles_test gpu_cuda_merge_test \
cuda_kernel_math_test cuda_rope_math_test cuda_host_checks_test attention_variant_test \
project_gemm_test attention_cuda_bench"

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  # H200 = sm_90a; Release keeps the binaries small.
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DSWACACHE_CUDA=ON -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES=90a-real
fi
cmake --build "$BUILD" -j "$JOBS" --target $TARGETS

rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/bin" "$BUNDLE/lib"
for t in $TARGETS; do
  f=$(find "$BUILD" -type f -name "$t" -perm -u+x -print -quit)
  [ -n "$f" ] || { echo "missing binary $t" >&2; exit 1; }
  cp "$f" "$BUNDLE/bin/"
  strip --strip-unneeded "$BUNDLE/bin/$t" 2>/dev/null || true
done
# Non-system shared libraries the binaries load (ldd resolves them here).
for f in "$BUNDLE"/bin/*; do ldd "$f"; done | awk '/=> \// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*|libcuda|libcudart|libcublas[^/]*|libnvidia[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$BUNDLE/lib/"; done || true
# This machine's libstdc++ / libgcc_s, used there only if its own are too old.
mkdir -p "$BUNDLE/lib-cxx"
for f in "$BUNDLE"/bin/*; do ldd "$f"; done | awk '/=> \// {print $3}' | sort -u |
  grep -E '/(libstdc\+\+|libgcc_s)\.so' | while read -r lib; do cp -L "$lib" "$BUNDLE/lib-cxx/"; done || true
{
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
  echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown) (working tree may differ)"
  grep -E '^(CMAKE_BUILD_TYPE|CMAKE_CUDA_ARCHITECTURES):' "$BUILD/CMakeCache.txt"
  nvcc --version | tail -1
} > "$BUNDLE/BUILD_INFO"
du -sh "$BUNDLE"
ls -la "$BUNDLE/bin" "$BUNDLE/lib"
echo "carry \"$(basename "$BUNDLE")\" and run: tests/gpu/run.sh"
