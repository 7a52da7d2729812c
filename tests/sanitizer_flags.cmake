# What the test programs are compiled with in the sanitizer trees
# (SWACACHE_ASAN: build-asan/, SWACACHE_TSAN: build-tsan/; included from
# tests/CMakeLists.txt, so it applies to every program of tests/ and its
# subfolders: unit, API and C tests, the fuzz harnesses, the precompiled
# header). The library itself is configured in the top CMakeLists.txt and
# scripts/build_env.sh (-O1, ASan + UBSan with every report fatal, libFuzzer
# coverage) and is not changed here. docs/building.md, "CI time", has the
# measurements behind each choice.
if(NOT (SWACACHE_ASAN OR SWACACHE_TSAN))
  return()
endif()

# Optimised: the tests' FP64 references and random inputs are most of the
# suite's run time. They stay instrumented (ASan keeps redzones around the
# tests' own stack and heap buffers, which the library writes into).
add_compile_options(-O2)

# The API tests (tests/api/, which link the shared library only) without
# UBSan's checks in their own code: UBSan checks the code it is compiled into,
# and no code of the library is compiled into these programs: they include the
# C header (declarations only) and the tests' own helpers, and the library's
# inline functions are its own hidden copies inside libswacache.so
# (VISIBILITY_INLINES_HIDDEN), so every check in the library stays. UBSan's
# runtime is still linked (the link options of the top CMakeLists.txt), so a
# report from the library still stops the test. -fsanitize=function stays on:
# the library's calls through the store and graph callbacks' pointers check
# the callee's type from a prologue that only a callee compiled with it has.
# Not for the unit tests and fuzz harnesses: they link the internal archive
# and compile library headers' inline functions themselves, and the linker
# keeps one copy of each, the first object's, so the library's own calls
# could take an unchecked copy of the test's. Measured: 12 test programs'
# cold compiles 10 % less CPU time without UBSan in the test code.
if(SWACACHE_ASAN)
  add_compile_options(
    "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<IN_LIST:swacache,$<TARGET_PROPERTY:LINK_LIBRARIES>>>:-fno-sanitize=undefined;-fsanitize=function>")
endif()
