"""ctypes structs of the cache half of ``include/swacache.h``: layer and cache
configuration, layouts and views, slots, plans, step, merge, RoPE, compressor
and projection arguments. Each mirrors the header field by field.
Re-exported by :mod:`swacache._lib`; nothing here is public API.
"""

from __future__ import annotations

from ctypes import (
    POINTER,
    Structure,
    c_float,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_uint32,
    c_uint64,
    c_void_p,
)

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
