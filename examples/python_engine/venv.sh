#!/usr/bin/env bash
# The Python environment of the engine example: torch (CPU) and transformers at
# the versions the example was verified with, outside the repository, keyed by
# those versions so that repeated runs on one machine reuse it.
#   bash examples/python_engine/venv.sh --print    print its interpreter ("" if absent)
#   bash examples/python_engine/venv.sh --create   create it when missing
# $SWACACHE_ENGINE_PYTHON overrides the interpreter; $SWACACHE_TORCH_VENV the location.
set -euo pipefail
TORCH_VERSION=2.15.0
TRANSFORMERS_VERSION=5.24.0
venv="${SWACACHE_TORCH_VENV:-$HOME/.cache/swacache-torch-venv-torch$TORCH_VERSION-transformers$TRANSFORMERS_VERSION}"
py="${SWACACHE_ENGINE_PYTHON:-$venv/bin/python}"
ready() { [ -x "$1" ] && "$1" -c 'import numpy, torch, transformers' >/dev/null 2>&1; }
case "${1:---print}" in
  --print)
    if ready "$py"; then echo "$py"; else echo ""; fi ;;
  --create)
    if ready "$py"; then exit 0; fi
    if [ -n "${SWACACHE_ENGINE_PYTHON:-}" ]; then
      echo "engine venv: SWACACHE_ENGINE_PYTHON=$py lacks numpy, torch or transformers" >&2
      exit 1
    fi
    echo "bootstrap: creating the engine environment $venv (torch $TORCH_VERSION, transformers $TRANSFORMERS_VERSION)"
    mkdir -p "$(dirname "$venv")"
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
    "${pip[@]}" --retries 0 --timeout 15 --index-url https://download.pytorch.org/whl/cpu \
      "torch==$TORCH_VERSION" \
      || "${pip[@]}" "torch==$TORCH_VERSION"
    "${pip[@]}" "transformers==$TRANSFORMERS_VERSION" numpy pytest ;;
  *) echo "usage: $0 --print|--create" >&2; exit 2 ;;
esac
