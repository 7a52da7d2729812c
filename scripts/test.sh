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
# The language bindings' suites are ctest entries (bindings/CMakeLists.txt):
# bindings/rust (rust_binding: rustfmt, clippy, cargo test), bindings/go
# (go_binding: gofmt, go vet, go test -race) and bindings/python
# (python_binding: pytest; python_engine: examples/python_engine against
# transformers). CI must run them: refuse a tree where they are not registered.
bindings='^(rust_binding|go_binding|python_binding|python_engine)$'
registered=$(ctest --test-dir build -N -R "$bindings" | sed -n 's/^Total Tests: //p')
if [ "$registered" != 4 ]; then
  echo "test.sh: expected the 4 binding tests (rust, go, python, python engine), found $registered" >&2
  exit 1
fi
ctest --test-dir build --output-on-failure -j "$jobs"
# clang build, the whole suite under ASan + UBSan (with the fuzz harnesses for
# a bounded time) and the concurrency tests under TSan: scripts/sanitize.sh.
bash scripts/sanitize.sh all
