# What a static link of libswacache needs, for the Libs.private line of
# swacache.pc and swacache-uninstalled.pc (`pkg-config --static --libs
# swacache`). Spelled out as linker flags at configure time from Abseil's and
# hiredis' own .pc files (Debian's libabsl-dev and libhiredis-dev ship them)
# rather than as Requires.private, which would add their compiler flags to
# every `pkg-config --cflags swacache` and break every query on a machine
# without them.
set(SWA_PC_LIBS_PRIVATE "")
find_package(PkgConfig QUIET)
set(_swa_pc_absl absl_status absl_statusor absl_str_format absl_synchronization
                 absl_flat_hash_map absl_strings)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(SWA_PC_ABSL QUIET ${_swa_pc_absl})
endif()
if(SWA_PC_ABSL_FOUND)
  list(APPEND SWA_PC_LIBS_PRIVATE ${SWA_PC_ABSL_STATIC_LDFLAGS})
else()
  message(STATUS "swacache: Abseil has no pkg-config files; swacache.pc cannot describe a static link")
endif()
if(SWA_HIREDIS_LIB)
  list(APPEND SWA_PC_LIBS_PRIVATE ${SWA_HIREDIS_LIB} -lssl -lcrypto)  # TLS to Redis (deps_hiredis.cmake)
endif()
if(SWACACHE_CUDA)
  list(APPEND SWA_PC_LIBS_PRIVATE -L${CUDAToolkit_LIBRARY_DIR} -lcublasLt -lcudart)
endif()
list(APPEND SWA_PC_LIBS_PRIVATE -lstdc++ -lm -lpthread)
string(REPLACE ";" " " SWA_PC_LIBS_PRIVATE "${SWA_PC_LIBS_PRIVATE}")
