"""Low-level ctypes declarations of ``include/swacache.h``.

Every struct mirrors the header field by field; every function gets its
argument and return types here, so a wrong call fails in ctypes rather than
in C. Nothing in this module is public API: use the objects in
:mod:`swacache` instead.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from ctypes import (
    POINTER,
    Structure,
    c_char_p,
    c_float,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_uint32,
    c_uint64,
    c_void_p,
)
from typing import List, Optional

#: Version of ``include/swacache.h`` this binding was written against
#: (``SWA_VERSION_MAJOR``, ``SWA_VERSION_MINOR``, ``SWA_VERSION_PATCH``).
HEADER_VERSION = (0, 2, 0)
HEADER_VERSION_NUMBER = HEADER_VERSION[0] * 10000 + HEADER_VERSION[1] * 100 + HEADER_VERSION[2]

SWA_STORE_MAX_KEY_BYTES = 1024
SWA_STORE_MESSAGE_BYTES = 256

c_enum = c_int  # C enums are int-sized on every ABI the library supports.
c_status = c_int


class LayerDesc(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("role", c_enum),
        ("q_heads", c_uint32),
        ("kv_heads", c_uint32),
        ("head_dim", c_uint32),
        ("shared_kv", c_uint32),
        ("kv_format", c_enum),
        ("compress_ratio", c_uint32),
        ("compress_entry_bytes", c_uint32),
        ("rope_theta", c_float),
        ("rope_dims", c_uint32),
        ("has_sinks", c_uint32),
        ("rope_style", c_enum),
        ("rope_first_dim", c_uint32),
        ("rope_yarn_factor", c_float),
        ("rope_yarn_original_max_positions", c_uint32),
        ("rope_yarn_beta_fast", c_float),
        ("rope_yarn_beta_slow", c_float),
        ("rope_yarn_truncate", c_uint32),
        ("rope_attention_factor", c_float),
        ("rope_derotate_output", c_uint32),
        ("logit_softcap", c_float),
        ("softmax_scale", c_float),
        ("reserved", c_uint32),
        # Appended after 0.2.0: the typed compressor (issue 31).
        ("compress_kind", c_enum),
        ("compress_head_dim", c_uint32),
        ("compress_rope_dims", c_uint32),
        ("compress_row_format", c_enum),
        ("index_head_dim", c_uint32),
        ("compress_reserved", c_uint32),
    ]


class Config(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("window", c_uint32),
        ("draft_tokens", c_uint32),
        ("ring_len", c_uint32),
        ("alignment", c_uint32),
        ("max_slots", c_uint32),
        ("backend", c_enum),
        ("device", c_int32),
        ("scale_mode", c_enum),
        ("num_threads", c_uint32),
        ("num_layers", c_uint32),
        ("layers", POINTER(LayerDesc)),
        ("pool", c_void_p),
        ("pool_bytes", c_size_t),
        # Appended after 0.2.0: authenticated blobs and tenant namespaces.
        ("store_secret", c_void_p),
        ("store_secret_len", c_size_t),
        ("store_namespace", c_void_p),
        ("store_namespace_len", c_size_t),
    ]


class Layout(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("window", c_uint32),
        ("draft_tokens", c_uint32),
        ("ring_len", c_uint32),
        ("alignment", c_uint32),
        ("num_layers", c_uint32),
        ("num_stored_layers", c_uint32),
        ("max_slots", c_uint32),
        ("max_ring_tokens", c_uint32),
        ("slot_bytes", c_uint64),
        ("stored_offset", c_uint64),
        ("stored_bytes", c_uint64),
        ("pool_bytes", c_uint64),
        ("fingerprint", c_uint64),
        ("compress_bytes", c_uint64),
        ("compress_saved_bytes", c_uint64),
    ]


class LayerLayout(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("role", c_enum),
        ("kv_format", c_enum),
        ("heads_per_token", c_uint32),
        ("vec_bytes", c_uint32),
        ("bytes_per_token", c_uint32),
        ("ring_len", c_uint32),
        ("ring_offset", c_uint64),
        ("ring_bytes", c_uint64),
        ("compress_len", c_uint32),
        ("compress_entry_bytes", c_uint32),
        ("compress_offset", c_uint64),
        ("compress_bytes", c_uint64),
        ("compress_kind", c_enum),
        ("compress_ratio", c_uint32),
        ("compress_head_dim", c_uint32),
        ("index_head_dim", c_uint32),
        ("index_row_bytes", c_uint32),
        ("compress_row_values", c_uint32),
        ("index_offset", c_uint64),
        ("index_bytes", c_uint64),
    ]


class TensorView(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("data", c_void_p),
        ("backend", c_enum),
        ("device", c_int32),
        ("ndim", c_uint32),
        ("shape", c_int64 * 4),
        ("strides", c_int64 * 4),
    ]


class SlotInfo(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("slot", c_uint32),
        ("allocated", c_uint32),
        ("written_end", c_int32),
        ("valid_start", c_int32),
        ("byte_offset", c_uint64),
    ]


class Seq(Structure):
    _fields_ = [
        ("slot", c_uint32),
        ("seqlen_q", c_int32),
        ("seqlen_k", c_int32),
        ("valid_start", c_int32),
    ]


class PlanOptions(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("index_pad", c_enum),
        ("materialize_index", c_uint32),
    ]


class PlanInfo(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("path", c_enum),
        ("n_seqs", c_uint32),
        ("n_tokens", c_int32),
        ("window", c_uint32),
        ("ring_len", c_uint32),
        ("executed", c_uint32),
        ("max_seqlen_q", c_int32),
        ("max_seqlen_k", c_int32),
        ("n_load_segments", c_uint32),
        ("n_store_segments", c_uint32),
        ("history_rows", c_int32),
        ("staging_rows", c_int32),
        ("decode_index_elems", c_uint64),
        ("pivot_elems", c_uint64),
    ]


class Segment(Structure):
    _fields_ = [("dst_row", c_int32), ("src_row", c_int32), ("count", c_int32)]


class StepArgs(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("layer", c_uint32),
        ("q", c_void_p),
        ("q_dtype", c_enum),
        ("k_new", c_void_p),
        ("v_new", c_void_p),
        ("kv_dtype", c_enum),
        ("out", c_void_p),
        ("out_dtype", c_enum),
        ("sinks", c_void_p),
        ("softmax_scale", c_float),
        ("stream", c_void_p),
        ("lse", c_void_p),
        ("positions", c_void_p),
    ]


class CacheStats(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("steps", c_uint64),
        ("tokens", c_uint64),
        ("nonfinite_blocks", c_uint64),
        ("slots_in_use", c_uint32),
        ("max_slots", c_uint32),
        ("pool_bytes", c_uint64),
    ]


class MergeArgs(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("rows", c_int64),
        ("head_dim", c_uint32),
        ("dtype", c_enum),
        ("out_a", c_void_p),
        ("lse_a", c_void_p),
        ("out_b", c_void_p),
        ("lse_b", c_void_p),
        ("out", c_void_p),
        ("lse", c_void_p),
        ("stream", c_void_p),
        ("device", c_int32),
    ]


class RopeInfo(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("style", c_enum),
        ("first_dim", c_uint32),
        ("dims", c_uint32),
        ("attention_factor", c_float),
        ("derotate_output", c_uint32),
    ]


class RopeArgs(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("layer", c_void_p),
        ("x", c_void_p),
        ("dtype", c_enum),
        ("heads", c_uint32),
        ("tokens", c_int64),
        ("positions", c_void_p),
        ("inverse", c_uint32),
        ("device", c_int32),
        ("stream", c_void_p),
    ]


class CompressWindow(Structure):
    _fields_ = [("seq", c_uint32), ("slot", c_uint32)] + [
        (n, c_int32) for n in ("entry", "position", "first_position", "n_missing", "n_ring",
                               "ring_row", "n_new", "new_row")]


class CompressArgs(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("layer", c_uint32),
        ("compressor", c_uint32),
        ("kv", c_void_p),
        ("gate", c_void_p),
        ("dtype", c_enum),
        ("row_width", c_uint32),
        ("rows", c_int64),
        ("position_bias", c_void_p),
        ("norm_weight", c_void_p),
        ("norm_eps", c_float),
        ("out", c_void_p),
        ("out_dtype", c_enum),
        ("out_rows", c_uint64),
        ("stream", c_void_p),
    ]


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


class ProjectArgs(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("hidden", c_void_p),
        ("weight", c_void_p),
        ("weight_layout", c_enum),
        ("out", c_void_p),
        ("out_dtype", c_enum),
        ("n_tokens", c_int32),
        ("hidden_dim", c_uint32),
        ("q_dim", c_uint32),
        ("kv_dim", c_uint32),
        ("stream", c_void_p),
    ]


P = POINTER
_vp = c_void_p
#: name -> (restype, argtypes)
_PROTOTYPES = {
    "swa_version_number": (c_uint32, []),
    "swa_version_string": (c_char_p, []),
    "swa_status_string": (c_char_p, [c_status]),
    "swa_last_error": (c_char_p, []),
    "swa_layer_desc_init": (None, [P(LayerDesc)]),
    "swa_config_init": (None, [P(Config)]),
    "swa_layout_compute": (c_status, [P(Config), P(Layout)]),
    "swa_cache_create": (c_status, [P(Config), P(_vp)]),
    "swa_cache_destroy": (None, [_vp]),
    "swa_cache_layout": (c_status, [_vp, P(Layout)]),
    "swa_cache_layer_layout": (c_status, [_vp, c_uint32, P(LayerLayout)]),
    "swa_cache_layer_view": (c_status, [_vp, c_uint32, P(TensorView)]),
    "swa_slot_alloc": (c_status, [_vp, P(c_uint32)]),
    "swa_slot_free": (c_status, [_vp, c_uint32]),
    "swa_slot_reset": (c_status, [_vp, c_uint32]),
    "swa_slot_copy": (c_status, [_vp, c_uint32, c_uint32]),
    "swa_slot_info": (c_status, [_vp, c_uint32, P(SlotInfo)]),
    "swa_slot_set_valid_start": (c_status, [_vp, c_uint32, c_int32]),
    "swa_slot_begin_replay": (c_status, [_vp, c_uint32, c_int32, P(c_int32), P(c_int32)]),
    "swa_slot_begin_replay_exact": (c_status, [_vp, c_uint32, c_int32, c_uint32, c_int32,
                                               P(c_int32), P(c_int32)]),
    "swa_slot_checkpoint_range": (c_status, [_vp, c_uint32, P(c_int32), P(c_int32)]),
    "swa_slot_save_at": (c_status, [_vp, c_uint32, c_int32, c_char_p, c_size_t]),
    "swa_cache_store_probe": (c_status, [_vp, P(c_char_p), P(c_size_t), c_uint32, P(c_int32)]),
    "swa_plan_options_init": (None, [P(PlanOptions)]),
    "swa_plan_create": (c_status, [_vp, P(_vp)]),
    "swa_plan_create_with_options": (c_status, [_vp, P(PlanOptions), P(_vp)]),
    "swa_plan_destroy": (None, [_vp]),
    "swa_plan_build": (c_status, [_vp, P(Seq), c_uint32]),
    "swa_plan_cancel": (c_status, [_vp]),
    "swa_plan_info": (c_status, [_vp, P(PlanInfo)]),
    "swa_plan_decode_index": (c_status, [_vp, _vp, _vp]),
    "swa_plan_load_segments": (c_status, [_vp, P(Segment), c_size_t, P(c_size_t)]),
    "swa_plan_pivots": (c_status, [_vp, _vp]),
    "swa_plan_store_rows": (c_status, [_vp, _vp]),
    "swa_plan_store_segments": (c_status, [_vp, P(Segment), c_size_t, P(c_size_t)]),
    "swa_plan_seq_offsets": (c_status, [_vp, _vp, _vp, _vp]),
    "swa_step_args_init": (None, [P(StepArgs)]),
    "swa_step": (c_status, [_vp, _vp, P(StepArgs)]),
    "swa_cache_stats": (c_status, [_vp, P(CacheStats)]),
    "swa_merge_args_init": (None, [P(MergeArgs)]),
    "swa_attention_merge": (c_status, [_vp, P(MergeArgs)]),
    "swa_plan_compress_windows": (c_status, [_vp, c_uint32, P(CompressWindow), c_size_t,
                                             P(c_size_t)]),
    "swa_plan_compress_store_segments": (c_status, [_vp, c_uint32, P(Segment), c_size_t,
                                                    P(c_size_t)]),
    "swa_cache_compress_view": (c_status, [_vp, c_uint32, c_uint32, P(TensorView)]),
    "swa_compress_args_init": (None, [P(CompressArgs)]),
    "swa_compress_step": (c_status, [_vp, _vp, P(CompressArgs)]),
    "swa_cache_set_save_compression": (c_status, [_vp, c_uint32]),
    "swa_rope_table": (c_status, [P(LayerDesc), _vp, c_uint32, P(RopeInfo)]),
    "swa_rope_args_init": (None, [P(RopeArgs)]),
    "swa_rope_apply": (c_status, [P(RopeArgs)]),
    "swa_format_vector_bytes": (c_status, [c_enum, c_uint32, P(c_uint32)]),
    "swa_codec_encode": (c_status, [c_enum, c_enum, _vp, c_enum, c_size_t, c_uint32, _vp,
                                    P(c_uint64)]),
    "swa_codec_decode": (c_status, [c_enum, _vp, c_size_t, c_uint32, _vp, c_enum, P(c_uint64)]),
    "swa_mxfp8_encode": (c_status, [_vp, c_enum, c_size_t, c_uint32, c_enum, _vp, P(c_uint64)]),
    "swa_mxfp8_decode": (c_status, [_vp, c_size_t, c_uint32, _vp, c_enum, P(c_uint64)]),
    "swa_codec_cpu_path": (c_char_p, []),
    "swa_attention_cpu_path": (c_status, [c_enum, P(c_char_p)]),
    "swa_kv_store_init": (None, [P(KvStore)]),
    "swa_cache_set_store": (c_status, [_vp, P(KvStore)]),
    "swa_slot_save": (c_status, [_vp, c_uint32, c_char_p, c_size_t]),
    "swa_slot_restore": (c_status, [_vp, c_uint32, c_char_p, c_size_t]),
    "swa_cache_store_exists": (c_status, [_vp, c_char_p, c_size_t, P(c_uint32)]),
    "swa_cache_store_remove": (c_status, [_vp, c_char_p, c_size_t]),
    "swa_store_memory_config_init": (None, [P(MemoryConfig)]),
    "swa_store_memory_create": (c_status, [P(MemoryConfig), P(KvStore)]),
    "swa_store_memory_stats": (c_status, [P(KvStore), P(MemoryStats)]),
    "swa_store_directory_config_init": (None, [P(DirectoryConfig)]),
    "swa_store_directory_create": (c_status, [P(DirectoryConfig), P(KvStore)]),
    "swa_store_redis_config_init": (None, [P(RedisConfig)]),
    "swa_store_redis_create": (c_status, [P(RedisConfig), P(KvStore)]),
    "swa_store_redis_cluster_config_init": (None, [P(RedisClusterConfig)]),
    "swa_store_redis_cluster_create": (c_status, [P(RedisClusterConfig), P(KvStore)]),
    "swa_store_tiered_config_init": (None, [P(TieredConfig)]),
    "swa_store_tiered_create": (c_status, [P(TieredConfig), P(KvStore)]),
    "swa_store_tiered_stats": (c_status, [P(KvStore), c_uint32, P(TierStats)]),
    "swa_project_args_init": (None, [P(ProjectArgs)]),
    "swa_project": (c_status, [_vp, P(ProjectArgs)]),
}


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
