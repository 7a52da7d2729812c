#!/usr/bin/env bash
# Build everything (CUDA backend too when nvcc is present) and run every test.
# The Python tests run on the virtual environment that bootstrap.sh prepares
# ($SWACACHE_VENV, default $HOME/.cache/swacache-venv).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh --test
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="$PATH:/usr/local/cuda/bin"
jobs=$(nproc)
venv="${SWACACHE_VENV:-$HOME/.cache/swacache-venv}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSWACACHE_PYTHON="$venv/bin/python"
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"
# clang build, the whole suite under ASan + UBSan (with the fuzz harnesses for
# a bounded time) and the concurrency tests under TSan: scripts/sanitize.sh.
bash scripts/sanitize.sh all
