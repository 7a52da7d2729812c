#!/usr/bin/env bash
# Build the library and the swacache tool, then run the demo on the embedded
# defaults (CPU backend when no GPU, built-in store).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
source scripts/build_env.sh
# A release build: every CUDA architecture (sm_80 and sm_90a SASS, compute_90
# PTX), also when scripts/test.sh configured this tree for CI's one.
cuda_args=()
command -v nvcc >/dev/null && cuda_args=(-DCMAKE_CUDA_ARCHITECTURES="80-real;90a-real;90-virtual")
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${SWA_LAUNCHER_ARGS[@]}" "${cuda_args[@]}" >/dev/null
cmake --build build -j "$(nproc)" --target swacache_cli
./build/swacache demo "$@"
