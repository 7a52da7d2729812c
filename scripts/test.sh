#!/usr/bin/env bash
# Build everything (CUDA backend too when nvcc is present) and run every test:
# the README's test command, which .ci/run calls on a clean clone.
#
#   scripts/test.sh           what CI runs: the main tree (gcc; CUDA kernels for
#                             sm_90a SASS + compute_90a PTX), every test, then the
#                             ASan + UBSan + libFuzzer tree and the TSan tree
#                             (scripts/sanitize.sh)
#   scripts/test.sh --quick   local iteration only, NOT what CI runs: the main
#                             tree and its unit, API and C tests; no bindings,
#                             Python, packaging, docs, forced kernel paths or
#                             sanitizers
#
# The Python tests run on the virtual environment that bootstrap.sh prepares
# ($SWACACHE_VENV, default $HOME/.cache/swacache-venv). Every C, C++ and CUDA
# compile goes through ccache (scripts/build_env.sh). Release builds (demo.sh,
# a plain cmake configure) keep every architecture: sm_80, sm_90a and PTX.
# Prints one line per stage with its time, and the total, at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  *) echo "usage: $0 [--quick]" >&2; exit 2 ;;
esac

t_all=$(date +%s)
stages=()
summary() {
  local rc=$?
  for s in "${stages[@]}"; do echo "test.sh: $s"; done
  echo "test.sh: total $(( $(date +%s) - t_all )) s$([ $quick = 1 ] && echo ' (--quick: not the CI run)')$([ $rc != 0 ] && echo " (FAILED, exit $rc)")"
}
trap summary EXIT
stage() {  # name, command...
  local name=$1 t
  shift
  t=$(date +%s)
  echo "test.sh: stage '$name'"
  "$@"
  stages+=("$(printf '%-26s %5d s' "$name" $(( $(date +%s) - t )))")
}

export SWACACHE_ENGINE_VENV=later
stage bootstrap bash scripts/bootstrap.sh --test
unset SWACACHE_ENGINE_VENV
# The engine example's torch + transformers environment (a download of some
# hundred MB on a fresh machine, nothing on a warm one) is prepared while the
# main tree compiles; the tests wait for it.
engine_log=$(mktemp)
engine_pid=
if [ $quick = 0 ]; then
  ( t=$(date +%s)
    bash examples/python_engine/venv.sh --create ||
      echo "bootstrap: warning: no torch/transformers venv; the python_engine test will SKIP"
    echo "engine venv ready after $(( $(date +%s) - t )) s (in the background)" ) > "$engine_log" 2>&1 &
  engine_pid=$!
fi
source scripts/build_env.sh
jobs=$(nproc)
venv="${SWACACHE_VENV:-$HOME/.cache/swacache-venv}"
cuda_args=()
# One architecture, sm_90a, with its PTX embedded (CMake's "90a": one nvcc
# front-end pass makes both, where "90a-real;90-virtual" ran it twice and took
# 29 % longer). The PTX check is compute_90a's: the kernels use no
# sm_90a-only feature, so it is the same code as the release build's
# compute_90 PTX (docs/building.md).
command -v nvcc >/dev/null && cuda_args=(-DCMAKE_CUDA_ARCHITECTURES="90a")
# -g1 (line tables and function names, no variables): what a failure's stack
# needs, at about two thirds of the test programs' compile time with -g.
stage "main configure" cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
  -DSWACACHE_PYTHON="$venv/bin/python" "${SWA_LAUNCHER_ARGS[@]}" "${cuda_args[@]}"
stage "main build" cmake --build build -j "$jobs"

if [ $quick = 1 ]; then
  echo "test.sh --quick: unit, API and C tests of the main tree only; CI runs more"
  stage "main tests (quick)" ctest --test-dir build --output-on-failure -j "$jobs" \
    -E '^(rust_binding|go_binding|python_binding|python_engine|python_engine_prefix|python_oracles|compress_oracle|quickstart_go|quickstart_rust|quickstart_python|doxygen|doxygen_experimental|install_consumer|subproject_no_tests|readme_example|cli_help|cli_args)$|_(portable|avx2|avx512|bf16|amx)$'
  exit 0
fi

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
wait "$engine_pid" || true
cat "$engine_log"
stages+=("$(printf '%-26s %5s' "engine venv" "($(sed -n 's/^engine venv ready after \([0-9]*\) s.*/\1/p' "$engine_log") s, background)")")
stage "main tests" ctest --test-dir build --output-on-failure -j "$jobs"
# clang: the whole suite under ASan + UBSan with the fuzz harnesses for a fixed
# number of runs each, then the concurrency tests under TSan (scripts/sanitize.sh).
stage "asan+ubsan+fuzz (clang)" bash scripts/sanitize.sh asan
stage "tsan (clang)" bash scripts/sanitize.sh tsan
