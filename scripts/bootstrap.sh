#!/usr/bin/env bash
# Make sure the build dependencies are present. As root, missing Debian
# packages are installed with apt-get; otherwise the missing ones are listed.
# Usage: scripts/bootstrap.sh [--test]   (--test adds what the test suite needs)
#
# With --test, the Python test dependencies (numpy, ml_dtypes, pytest) go into
# a virtual environment of their own, never into the system interpreter:
#   SWACACHE_VENV   where it lives (default: $HOME/.cache/swacache-venv)
#   SWACACHE_WHEELS wheels for the offline Python quick start test
#                   (default: $HOME/.cache/swacache-wheels)
# Its interpreter, $SWACACHE_VENV/bin/python, is what CMake gets as
# -DSWACACHE_PYTHON (scripts/test.sh does that).
set -euo pipefail
want_test=0
[ "${1:-}" = "--test" ] && want_test=1

pkgs=(cmake g++ ninja-build pkg-config libabsl-dev libssl-dev)
if [ $want_test = 1 ]; then
  pkgs+=(libgtest-dev libbenchmark-dev libopenblas-dev doxygen libhiredis-dev redis-server
         python3 python3-venv binutils bindgen golang-go ccache openssl)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "bootstrap: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "bootstrap: missing Debian packages: ${missing[*]}"
    echo "bootstrap: run as root, or: sudo apt-get install ${missing[*]}"
    exit 1
  fi
fi

if [ $want_test = 1 ]; then
  venv="${SWACACHE_VENV:-$HOME/.cache/swacache-venv}"
  if [ ! -x "$venv/bin/python" ]; then
    echo "bootstrap: creating the Python test environment $venv"
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv"
  fi
  if ! "$venv/bin/python" -c 'import numpy, ml_dtypes, pytest' 2>/dev/null; then
    echo "bootstrap: installing numpy ml_dtypes pytest into $venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check numpy ml_dtypes pytest
  fi
  # The Python quick start (ctest quickstart_python) pip-installs bindings/python
  # into a fresh venv offline, from these wheels: its build backend and numpy.
  wheels="${SWACACHE_WHEELS:-$HOME/.cache/swacache-wheels}"
  if ! ls "$wheels"/scikit_build_core-*.whl "$wheels"/numpy-*.whl >/dev/null 2>&1; then
    echo "bootstrap: downloading the scikit-build-core and numpy wheels into $wheels"
    "$venv/bin/python" -m pip download --quiet --disable-pip-version-check -d "$wheels" scikit-build-core numpy
  fi
fi
# SWACACHE_ENGINE_VENV=later: the caller prepares it itself (scripts/test.sh does,
# in the background while the main tree compiles).
if [ $want_test = 1 ] && [ "${SWACACHE_ENGINE_VENV:-}" != later ]; then bash "$(dirname "$0")/../examples/python_engine/venv.sh" --create || echo "bootstrap: warning: no torch/transformers venv; the python_engine test will SKIP"; fi  # pinned torch + transformers for examples/python_engine
# nvcc is often installed outside PATH.
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "bootstrap: note: nvcc found at /usr/local/cuda/bin (add it to PATH to build the CUDA backend)"
fi
