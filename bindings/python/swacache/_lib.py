"""Low-level ctypes declarations of ``include/swacache.h``, and the library's
loading and version check.

Every struct mirrors the header field by field (:mod:`swacache._lib_cache`,
:mod:`swacache._lib_store`, re-exported here); every function gets its
argument and return types (:mod:`swacache._lib_prototypes`) when the library
is loaded, so a wrong call fails in ctypes rather than in C. Nothing in this
module is public API: use the objects in :mod:`swacache` instead.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from typing import List, Optional

from ._lib_cache import (  # noqa: F401 (re-exported: the modules use L.<name>)
    CacheStats,
    CompressArgs,
    CompressWindow,
    Config,
    LayerDesc,
    LayerLayout,
    Layout,
    MergeArgs,
    PlanInfo,
    PlanOptions,
    ProjectArgs,
    RopeArgs,
    RopeInfo,
    Segment,
    Seq,
    SlotInfo,
    StepArgs,
    TensorView,
    c_enum,
    c_status,
)
from ._lib_prototypes import _PROTOTYPES
from ._lib_store import (  # noqa: F401 (re-exported: the modules use L.<name>)
    DirectoryConfig,
    EXISTS_FN,
    GET_FN,
    Iov,
    KvStore,
    MemoryConfig,
    MemoryStats,
    PUT_FN,
    RELEASE_FN,
    REMOVE_FN,
    RedisClusterConfig,
    RedisConfig,
    TierStats,
    TieredConfig,
)

#: Version of ``include/swacache.h`` this binding was written against
#: (``SWA_VERSION_MAJOR``, ``SWA_VERSION_MINOR``, ``SWA_VERSION_PATCH``).
HEADER_VERSION = (0, 2, 0)
HEADER_VERSION_NUMBER = HEADER_VERSION[0] * 10000 + HEADER_VERSION[1] * 100 + HEADER_VERSION[2]

SWA_STORE_MAX_KEY_BYTES = 1024
SWA_STORE_MESSAGE_BYTES = 256


class LibraryNotFoundError(ImportError):
    """libswacache could not be loaded; the message lists every place tried."""


def _candidates() -> List[str]:
    names = {"linux": ["libswacache.so", "libswacache.so.0"],
             "darwin": ["libswacache.dylib"],
             "win32": ["swacache.dll"]}.get(sys.platform, ["libswacache.so"])
    found = ctypes.util.find_library("swacache")
    return ([found] if found else []) + names


def _bundled() -> List[str]:
    """Libraries a wheel may carry inside the package: ``swacache/lib/`` (where
    the library's CMake install puts it) or ``swacache/`` itself."""
    here = os.path.dirname(os.path.abspath(__file__))
    names = [n for n in _candidates() if os.sep not in n and not n.startswith("/")]
    return [p for d in (os.path.join(here, "lib"), here) for n in names
            for p in [os.path.join(d, n)] if os.path.exists(p)]


def load_library() -> ctypes.CDLL:
    """Load libswacache: ``$SWACACHE_LIBRARY`` (a file, or a directory holding
    the library) first, then a library bundled in the package (a wheel built
    with the library), then the platform loader's usual search."""
    tried: List[str] = []
    env = os.environ.get("SWACACHE_LIBRARY")
    if env:
        paths = [env]
        if os.path.isdir(env):
            paths = [os.path.join(env, n) for n in _candidates() if os.sep not in n]
        for p in paths:
            try:
                return ctypes.CDLL(p)
            except OSError as e:
                tried.append(f"SWACACHE_LIBRARY={env}: {p}: {e}")
        raise LibraryNotFoundError(
            "libswacache could not be loaded from SWACACHE_LIBRARY:\n  " + "\n  ".join(tried)
            + "\nPoint SWACACHE_LIBRARY at libswacache.so (or its directory), or unset it "
              "to use the loader's search path (LD_LIBRARY_PATH, ldconfig).")
    for path in _bundled():
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"bundled {path}: {e}")
    for name in _candidates():
        try:
            return ctypes.CDLL(name)
        except OSError as e:
            tried.append(f"{name}: {e}")
    raise LibraryNotFoundError(
        "libswacache was not found: SWACACHE_LIBRARY is not set, the package bundles no "
        "library, and the loader's search "
        "path (LD_LIBRARY_PATH, DYLD_LIBRARY_PATH, ldconfig's cache, the system "
        "directories) has no libswacache:\n  " + "\n  ".join(tried)
        + "\nSet SWACACHE_LIBRARY=/path/to/libswacache.so (e.g. <repo>/build/libswacache.so) "
          "or install the library.")


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    for name, (restype, argtypes) in _PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


class VersionMismatchError(ImportError):
    """The loaded library is older than, or ABI-incompatible with, the header
    this binding was written against."""


def check_version(lib: ctypes.CDLL) -> int:
    got = int(lib.swa_version_number())
    major, minor = got // 10000, (got // 100) % 100
    want_major, want_minor = HEADER_VERSION[0], HEADER_VERSION[1]
    if major != want_major or minor < want_minor:
        raise VersionMismatchError(
            f"libswacache {lib.swa_version_string().decode()} (version number {got}) is not "
            f"compatible with the header version {'.'.join(map(str, HEADER_VERSION))} this "
            f"binding was written for (needs major {want_major}, minor >= {want_minor})")
    return got


_LIB: Optional[ctypes.CDLL] = None


def lib() -> ctypes.CDLL:
    """The loaded, declared and version-checked library (loaded on first use)."""
    global _LIB
    if _LIB is None:
        loaded = load_library()
        _declare(loaded)
        check_version(loaded)
        _LIB = loaded
    return _LIB
