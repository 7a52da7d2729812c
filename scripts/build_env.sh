# Sourced by the build scripts (test.sh, sanitize.sh, demo.sh, fuzz.sh): the
# compiler cache and the configuration of the shared trees. Defines
#   SWA_LAUNCHER_ARGS  CMake arguments that put ccache in front of the C, C++
#                      and CUDA compilers (empty when ccache is missing)
#   SWA_ASAN_ARGS      the configuration of build-asan/ (clang, -O1, ASan +
#                      UBSan + libFuzzer, no CUDA), shared by sanitize.sh and
#                      fuzz.sh so that both reuse one tree; line tables only
#                      (-gline-tables-only: every report's stack has files,
#                      lines and inlined frames; full debug info cost about a
#                      tenth of the tree's compile time); the library's
#                      precompiled header on (SWACACHE_LIB_PCH, cmake/pch.cmake:
#                      off in the main tree, whose objects the quick starts
#                      share through ccache)
# The cache lives outside the repository ($CCACHE_DIR, default ~/.cache/ccache)
# so that a later run on the same machine, from any clone, reuses it: paths
# under the repository are hashed relative to its root (CCACHE_BASEDIR) and
# the build directory is not hashed (CCACHE_NOHASHDIR).
[ -x /usr/local/cuda/bin/nvcc ] && case ":$PATH:" in
  *:/usr/local/cuda/bin:*) ;;
  *) export PATH="$PATH:/usr/local/cuda/bin" ;;
esac
SWA_LAUNCHER_ARGS=()
if command -v ccache >/dev/null; then
  export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(pwd)}"
  export CCACHE_NOHASHDIR=1
  export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-10G}"
  # The tests' precompiled header (tests/CMakeLists.txt): ccache caches it and
  # the objects compiled with it only with pch_defines and time_macros; it is
  # written moments before the tests that include it, and include_file_mtime
  # and include_file_ctime keep ccache from refusing so new a file.
  export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
  SWA_LAUNCHER_ARGS=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
                     -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
SWA_ASAN_ARGS=(-G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DSWACACHE_CUDA=OFF
               -DSWACACHE_TESTS=ON -DSWACACHE_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug
               -DCMAKE_C_FLAGS_DEBUG="-gline-tables-only -O1"
               -DCMAKE_CXX_FLAGS_DEBUG="-gline-tables-only -O1"
               -DSWACACHE_ASAN=ON -DSWACACHE_FUZZ=ON -DSWACACHE_LIB_PCH=ON "${SWA_LAUNCHER_ARGS[@]}")
