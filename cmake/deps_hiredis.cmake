# Optional dependency: hiredis for the Redis store (src/store/redis_store.cc).
# Found through pkg-config, else by plain find_path/find_library. Without it
# the Redis sources are left out and swa_store_redis_create() returns
# SWA_UNIMPLEMENTED. SWACACHE_REDIS=OFF leaves it out on purpose.
option(SWACACHE_REDIS "Build the Redis store when hiredis is found" ON)

set(SWA_HIREDIS_LIB "")
set(SWA_HIREDIS_INCLUDE "")
if(SWACACHE_REDIS)
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(SWA_PC_HIREDIS QUIET hiredis)
  endif()
  if(SWA_PC_HIREDIS_FOUND)
    find_library(SWA_HIREDIS_LIB_PATH NAMES hiredis HINTS ${SWA_PC_HIREDIS_LIBRARY_DIRS})
  else()
    find_library(SWA_HIREDIS_LIB_PATH NAMES hiredis)
  endif()
  # The sources include <hiredis/hiredis.h>: look for the folder above it.
  find_path(SWA_HIREDIS_INCLUDE_DIR NAMES hiredis/hiredis.h)
  if(SWA_HIREDIS_LIB_PATH AND SWA_HIREDIS_INCLUDE_DIR)
    set(SWA_HIREDIS_LIB ${SWA_HIREDIS_LIB_PATH})
    set(SWA_HIREDIS_INCLUDE ${SWA_HIREDIS_INCLUDE_DIR})
  endif()
endif()

if(SWA_HIREDIS_LIB)
  # TLS to Redis (src/store/redis_tls.cc, redis_connection.cc) runs on
  # OpenSSL's libssl: Debian bookworm's hiredis 0.14 has no hiredis_ssl.
  find_package(OpenSSL REQUIRED COMPONENTS SSL)
  message(STATUS "swacache: Redis store enabled (${SWA_HIREDIS_LIB}; TLS through OpenSSL ${OPENSSL_VERSION})")
  list(APPEND SWA_EXTRA_LIBS ${SWA_HIREDIS_LIB} OpenSSL::SSL)
  list(APPEND SWA_EXTRA_DEFS SWACACHE_HAVE_REDIS=1)
  include_directories(SYSTEM ${SWA_HIREDIS_INCLUDE})
else()
  message(STATUS "swacache: hiredis not found, the Redis store is not built (Debian: libhiredis-dev)")
  list(FILTER SWA_SOURCES EXCLUDE REGEX "/src/store/redis_[^/]*\\.cc$")
endif()
