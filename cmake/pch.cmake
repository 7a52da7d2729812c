# Precompiled headers: how they are made, for every target of this directory
# and below (the library's objects with SWACACHE_LIB_PCH, the tests'
# swa_test_pch: tests/CMakeLists.txt). docs/building.md, "CI time", has what
# each one saves. ccache caches precompiled headers and the objects that use
# them only with the sloppiness that scripts/build_env.sh sets (pch_defines,
# time_macros, include_file_mtime, include_file_ctime).
#
# For ccache, clang's precompiled header must not depend on the clone's path:
# CMake passes the header behind -Xclang, where ccache does not make paths
# relative to CCACHE_BASEDIR, so take the driver's -include and -include-pch
# (the other extension keeps the driver from picking the file up for
# -include <header> itself); and the file cached from another clone names
# that clone's header, so it embeds its inputs and records no file times.
# One limit remains: where the precompiled header came from a clone that is
# gone, a source that changed compiles right but uncached (ccache's
# preprocessor pass needs the named header); unchanged sources are direct hits.
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  set(CMAKE_PCH_EXTENSION .clang-pch)
  set(CMAKE_CXX_COMPILE_OPTIONS_CREATE_PCH -Xclang -emit-pch -Xclang -fno-pch-timestamp
      -Xclang -fmodules-embed-all-files -include <PCH_HEADER> -x c++-header)
  set(CMAKE_CXX_COMPILE_OPTIONS_USE_PCH -include-pch <PCH_FILE>)
endif()

# The library's objects: the Abseil and standard headers most of its sources
# include, parsed once per tree instead of once per source. Off by default:
# the precompiled header's path (in the build folder) is on every command
# line, so objects of two build folders would no longer share ccache entries
# (the Rust and Python quick starts reuse the main tree's: bindings/).
# scripts/build_env.sh (SWA_ASAN_ARGS) and scripts/sanitize.sh turn it on for
# the sanitizer trees, which nothing shares. The SIMD sources compiled with
# their own -m flags (*_avx2.cc, *_avx512*.cc, *_amx.cc: CMakeLists.txt) skip
# it: a precompiled header made without those flags does not fit them (clang
# refuses it, GCC ignores it). CUDA sources never use one.
option(SWACACHE_LIB_PCH
  "Precompile Abseil and the standard headers for the library's C++ sources" OFF)
function(swa_library_pch target)
  if(NOT SWACACHE_LIB_PCH)
    return()
  endif()
  get_target_property(_sources ${target} SOURCES)
  foreach(src ${_sources})
    if(src MATCHES "_(avx2|avx512|avx512_bf16|amx)\\.cc$")
      set_source_files_properties(${src} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
    endif()
  endforeach()
  target_precompile_headers(${target} PRIVATE
    <algorithm> <atomic> <cstddef> <cstdint> <cstring> <functional> <memory>
    <string> <string_view> <utility> <vector>
    <absl/status/status.h> <absl/status/statusor.h> <absl/strings/str_cat.h>
    <absl/strings/str_format.h> <absl/synchronization/mutex.h> <absl/types/span.h>)
endfunction()
