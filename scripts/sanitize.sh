#!/usr/bin/env bash
# The second-compiler and sanitizer runs of CI (called by scripts/test.sh after
# the main build's ctest). Each mode keeps its own build tree at the repository
# root, so a rerun recompiles only what changed, and every compile goes through
# ccache (scripts/build_env.sh). The CUDA backend is off in all of them (the GPU
# has its own checks, tests/gpu/run.sh).
#
#   scripts/sanitize.sh [asan|tsan|all|clang]     (default: all = asan tsan)
#
#   asan   build-asan/   clang, -O1, line tables only, ASan + UBSan (any
#                        report fatal, leaks fatal) + libFuzzer coverage: the
#                        whole test suite and the fuzz harnesses of
#                        tests/fuzz/, each run for SWACACHE_FUZZ_RUNS inputs
#                        (default 20000) from its committed corpus. This is
#                        CI's clang build: the whole suite compiled by the
#                        second compiler.
#   tsan   build-tsan/   clang, -O1, line tables only, ThreadSanitizer: builds
#                        and runs only the concurrency tests (SWA_TSAN_TESTS
#                        below); suppressions in tests/tsan/tsan.supp.
#   clang  build-clang/  clang, RelWithDebInfo, no sanitizer: the suite once
#                        more at -O2 (not in CI: the asan tree covers clang).
#
# Environment: SWACACHE_SANITIZE_JOBS (default nproc), SWACACHE_FUZZ_RUNS.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
mode=${1:-all}
jobs=${SWACACHE_SANITIZE_JOBS:-$(nproc)}
export SWACACHE_FUZZ_RUNS=${SWACACHE_FUZZ_RUNS:-20000}
source scripts/build_env.sh

# Tests that build or load the library in another way than a test program
# does; they check packaging, bindings and docs, not the compiler or memory
# safety, and run in the main tree only: a consumer project configured against
# the install, the project as a subproject, the README compiled with the system
# compiler, Python ctypes, the Rust and Go bindings (each would need the
# sanitizer runtime preloaded into its own toolchain's programs), the
# bindings' quick starts (each builds its own uninstrumented library), Doxygen.
SWA_NOT_SANITIZED='^(install_consumer|subproject_no_tests|readme_example|python_oracles|compress_oracle|python_binding|python_engine|python_engine_prefix|rust_binding|go_binding|quickstart_go|quickstart_rust|quickstart_python|doxygen|doxygen_experimental|cli_help)$'
# Tests that run threads against one cache or store.
SWA_TSAN_TESTS=(concurrency_test store_slot_busy_test slot_step_busy_test thread_pool_test store_memory_test)

configure() {  # dir, extra cmake args...
  local dir=$1; shift
  if [ ! -f "$dir/CMakeCache.txt" ]; then
    cmake -S . -B "$dir" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
      -DSWACACHE_CUDA=OFF -DSWACACHE_TESTS=ON -DSWACACHE_BENCH=OFF "${SWA_LAUNCHER_ARGS[@]}" "$@" >/dev/null
  fi
}

stamp() { echo "sanitize: $1 $(( $(date +%s) - t0 )) s"; }

run_clang() {
  t0=$(date +%s)
  configure build-clang -DCMAKE_BUILD_TYPE=RelWithDebInfo
  cmake --build build-clang -j "$jobs"
  stamp "clang build"
  ctest --test-dir build-clang --output-on-failure -j "$jobs" -E "$SWA_NOT_SANITIZED"
  stamp "clang total"
}

run_asan() {
  t0=$(date +%s)
  [ -f build-asan/CMakeCache.txt ] || cmake -S . -B build-asan "${SWA_ASAN_ARGS[@]}" >/dev/null
  cmake --build build-asan -j "$jobs"
  stamp "asan build"
  export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  ctest --test-dir build-asan --output-on-failure -j "$jobs" -E "$SWA_NOT_SANITIZED"
  stamp "asan total"
}

run_tsan() {
  t0=$(date +%s)
  configure build-tsan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-gline-tables-only -O1" \
    -DCMAKE_CXX_FLAGS_DEBUG="-gline-tables-only -O1" -DSWACACHE_TSAN=ON -DSWACACHE_LIB_PCH=ON
  cmake --build build-tsan -j "$jobs" --target "${SWA_TSAN_TESTS[@]}"
  stamp "tsan build"
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/tsan/tsan.supp"
  local regex
  regex="^($(IFS='|'; echo "${SWA_TSAN_TESTS[*]}"))\$"
  ctest --test-dir build-tsan --output-on-failure -R "$regex"
  stamp "tsan total"
}

case $mode in
  clang) run_clang ;;
  asan) run_asan ;;
  tsan) run_tsan ;;
  all) run_asan; run_tsan ;;
  *) echo "usage: $0 [asan|tsan|all|clang]" >&2; exit 2 ;;
esac
