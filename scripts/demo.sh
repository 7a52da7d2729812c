#!/usr/bin/env bash
# Build the library and the swacache tool, then run the demo on the embedded
# defaults (CPU backend when no GPU, built-in store).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="$PATH:/usr/local/cuda/bin"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target swacache_cli
./build/swacache demo "$@"
