#!/usr/bin/env bash
# Build everything (CUDA backend too when nvcc is present) and run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh --test
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="$PATH:/usr/local/cuda/bin"
jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"
