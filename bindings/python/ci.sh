#!/usr/bin/env bash
# CI for the Python binding: the pytest suite against the library in the
# repository's build directory, without installing anything.
#   bash bindings/python/ci.sh [BUILD_DIR]      (default: <repo>/build)
# Python: $SWACACHE_PYTHON, else the test venv of scripts/bootstrap.sh --test
# (${SWACACHE_VENV:-$HOME/.cache/swacache-venv}), else python3. It needs numpy and pytest; without
# them the script prints SKIP and passes. When the engine venv with torch exists
# ($SWACACHE_ENGINE_PYTHON, see scripts/bootstrap.sh --test), the suite runs
# there too, so the PyTorch tests (and the CUDA ones, on a GPU build) run.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"
venv="${SWACACHE_VENV:-$HOME/.cache/swacache-venv}"
py="${SWACACHE_PYTHON:-}"
if [ -z "$py" ]; then
  if [ -x "$venv/bin/python" ]; then py="$venv/bin/python"; else py=python3; fi
fi

if ! command -v "$py" >/dev/null 2>&1 || ! "$py" -c 'import numpy, pytest' >/dev/null 2>&1; then
  echo "SKIP: python binding: '$py' with numpy and pytest is needed (pip install numpy pytest)"
  exit 0
fi
if [ ! -e "$build/libswacache.so" ]; then
  echo "python binding: $build/libswacache.so is missing; build the library first" >&2
  exit 1
fi
export SWACACHE_LIBRARY="$build/libswacache.so"
export PYTHONDONTWRITEBYTECODE=1
cd "$here"
echo "== pytest ($("$py" --version 2>&1))"
"$py" -m pytest -q -p no:cacheprovider -rs tests

tpy="$(bash "$repo/examples/python_engine/venv.sh" --print)"
if [ -n "$tpy" ] && [ -x "$tpy" ] && "$tpy" -c 'import numpy, pytest, torch' >/dev/null 2>&1; then
  echo "== pytest with torch ($tpy)"
  "$tpy" -m pytest -q -p no:cacheprovider -rs tests
fi
echo "python binding: OK"
