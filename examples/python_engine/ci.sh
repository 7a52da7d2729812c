#!/usr/bin/env bash
# CI for the Python engine example: runs engine.py (gpt-oss; FP32 must be token-exact
# and within 1e-4 of transformers, MXFP8 is reported) against the build's library, or
# with "prefix" the shared-prefix workload prefix_reuse.py (checkpoint and exact replay
# token-exact, approximate replay reported; ctest python_engine_prefix).
#   bash examples/python_engine/ci.sh [BUILD_DIR] [engine|prefix]
# Python: examples/python_engine/venv.sh (scripts/bootstrap.sh --test creates it);
# without it the script prints SKIP and passes.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"
py="$(bash "$here/venv.sh" --print)"
if [ -z "$py" ]; then
  echo "SKIP: python engine: no environment with torch and transformers (run scripts/bootstrap.sh --test, or set SWACACHE_ENGINE_PYTHON)"
  exit 0
fi
if [ ! -e "$build/libswacache.so" ]; then
  echo "python engine: $build/libswacache.so is missing; build the library first" >&2
  exit 1
fi
export SWACACHE_LIBRARY="$build/libswacache.so" PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH="$repo/bindings/python${PYTHONPATH:+:$PYTHONPATH}"
cd "$here"
case "${2:-engine}" in
  engine) "$py" engine.py --format all ;;
  prefix) "$py" prefix_reuse.py ;;
  *) echo "python engine: unknown workload '$2' (engine or prefix)" >&2; exit 2 ;;
esac
echo "python engine (${2:-engine}): OK"
