"""Configuration, layouts and the plain records the calls return."""

from __future__ import annotations

import ctypes
from ctypes import byref, sizeof
from dataclasses import dataclass, field, fields
from typing import Any, List, Optional, Tuple

from . import _lib as L
from ._tensor import as_tensor
from .errors import InvalidArgumentError
from ._enums import Backend, CompressKind, Format, LayerRole, PlanPath, RopeStyle, ScaleMode
from ._util import _check, _i32, _lib, _struct_dict, _u32


# ---- configuration -----------------------------------------------------------


@dataclass
class Layer:
    """One SWA layer (``swa_layer_desc_t``). Defaults are the library's
    (``swa_layer_desc_init``): a DeepSeek-V4-like MQA layer."""

    role: LayerRole = LayerRole.STORED
    q_heads: int = 64
    kv_heads: int = 1
    head_dim: int = 512
    shared_kv: bool = True
    kv_format: Format = Format.MXFP8
    compress_ratio: int = 0
    compress_entry_bytes: int = 0
    rope_theta: float = 10000.0
    rope_dims: int = 0
    has_sinks: bool = False
    rope_style: RopeStyle = RopeStyle.NONE
    rope_first_dim: int = 0
    rope_yarn_factor: float = 0.0
    rope_yarn_original_max_positions: int = 4096
    rope_yarn_beta_fast: float = 32.0
    rope_yarn_beta_slow: float = 1.0
    rope_yarn_truncate: bool = True
    rope_attention_factor: float = 0.0
    rope_derotate_output: bool = False
    logit_softcap: float = 0.0
    softmax_scale: float = 0.0  # 0 = 1/sqrt(head_dim); a step's non-zero scale overrides it
    # The typed compressor (DeepSeek-V4 HCA/CSA; docs/semantics.md "Compression state"):
    # compress_ratio is its rate, compress_entry_bytes stays 0.
    compress_kind: CompressKind = CompressKind.OPAQUE
    compress_head_dim: int = 0  # d of the entries; HCA rows are d wide, CSA rows 2d
    compress_rope_dims: int = 0  # trailing dims of each entry rotated at w * c; 0 = none
    compress_row_format: Format = Format.FP32  # storage of the buffered rows: FP32 or BF16
    index_head_dim: int = 0  # CSA: the Lightning Indexer's compressor width; 0 = none

    def _to_c(self, out: L.LayerDesc) -> None:
        _lib.swa_layer_desc_init(byref(out))
        for f in fields(self):
            v = getattr(self, f.name)
            ctype = dict(L.LayerDesc._fields_)[f.name]
            if ctype is ctypes.c_float:
                try:
                    setattr(out, f.name, float(v))
                except (TypeError, ValueError, OverflowError) as e:
                    raise InvalidArgumentError(f"Layer.{f.name}: bad value {v!r}: {e}") from None
            else:
                # ctypes would keep the low 32 bits of an out-of-range int and
                # truncate a float: check the range here, naming the value.
                conv = _i32 if ctype in (ctypes.c_int32, ctypes.c_int) else _u32
                setattr(out, f.name, conv(f"Layer.{f.name}", v))


@dataclass
class Config:
    """A cache configuration (``swa_config_t``); defaults from ``swa_config_init``.

    ``pool`` is optional caller-provided pool memory (a NumPy array, a PyTorch
    tensor or anything with ``__array_interface__``/``__dlpack__``); the cache
    keeps a reference to it until it is closed."""

    layers: List[Layer] = field(default_factory=list)
    window: int = 128
    draft_tokens: int = 0
    ring_len: int = 0
    alignment: int = 32
    max_slots: int = 64
    backend: Backend = Backend.AUTO
    device: int = 0
    scale_mode: ScaleMode = ScaleMode.CEIL
    num_threads: int = 0
    pool: Any = None
    #: Store secret for authenticated blobs (16 ... 1024 bytes; ``None`` = none):
    #: every blob carries an HMAC-SHA-256 tag, and a restore refuses one without a
    #: valid tag (``DataLossError``). It authenticates, it does not encrypt
    #: (docs/store.md, "Threat model"). Not shown by ``repr``.
    store_secret: Optional[bytes] = field(default=None, repr=False)
    #: Tenant namespace prefixed to every store key (1 ... 256 bytes; ``None`` = none).
    store_namespace: Optional[bytes] = None

    def _to_c(self) -> Tuple[L.Config, Any]:
        c = L.Config()
        _lib.swa_config_init(byref(c))
        for name in ("window", "draft_tokens", "ring_len", "alignment", "max_slots",
                     "num_threads"):
            setattr(c, name, _u32(f"Config.{name}", getattr(self, name)))
        c.backend = _i32("Config.backend", self.backend)
        c.device = _i32("Config.device", self.device)
        c.scale_mode = _i32("Config.scale_mode", self.scale_mode)
        layers = list(self.layers)
        arr = (L.LayerDesc * max(1, len(layers)))()
        for i, layer in enumerate(layers):
            if not isinstance(layer, Layer):
                raise InvalidArgumentError(f"Config.layers[{i}]: expected swacache.Layer, got "
                                           f"{type(layer).__name__}")
            layer._to_c(arr[i])
        c.num_layers = len(layers)
        c.layers = ctypes.cast(arr, ctypes.POINTER(L.LayerDesc)) if layers else None
        if self.pool is not None:
            t = as_tensor("Config.pool", self.pool, writable=True)
            c.pool = t.ptr
            c.pool_bytes = t.numel * t.itemsize
        keep = [arr]
        for name in ("store_secret", "store_namespace"):
            value = getattr(self, name)
            if value is None:
                continue
            if not isinstance(value, (bytes, bytearray, memoryview)):
                raise InvalidArgumentError(f"Config.{name}: expected bytes, got "
                                           f"{type(value).__name__}")
            buf = ctypes.create_string_buffer(bytes(value), len(value))
            keep.append(buf)  # borrowed by swa_cache_create only; the library copies it
            setattr(c, name, ctypes.cast(buf, ctypes.c_void_p) if len(value) else None)
            setattr(c, name + "_len", len(value))
        return c, keep


@dataclass(frozen=True)
class Layout:
    """Whole-slot layout (``swa_layout_t``)."""

    window: int
    draft_tokens: int
    ring_len: int
    alignment: int
    num_layers: int
    num_stored_layers: int
    max_slots: int
    max_ring_tokens: int
    slot_bytes: int
    stored_offset: int
    stored_bytes: int
    pool_bytes: int
    fingerprint: int
    compress_bytes: int = 0  # every layer's compression region in a slot
    compress_saved_bytes: int = 0  # the blob's compression section (0: none)


@dataclass(frozen=True)
class LayerLayout:
    """Layout of one layer inside a slot (``swa_layer_layout_t``)."""

    role: LayerRole
    kv_format: Format
    heads_per_token: int
    vec_bytes: int
    bytes_per_token: int
    ring_len: int
    ring_offset: int
    ring_bytes: int
    compress_len: int
    compress_entry_bytes: int
    compress_offset: int
    compress_bytes: int
    compress_kind: CompressKind = CompressKind.OPAQUE
    compress_ratio: int = 0
    compress_head_dim: int = 0
    index_head_dim: int = 0
    index_row_bytes: int = 0  # bytes of one indexer ring row; 0 = no indexer
    compress_row_values: int = 0  # values of the kv (and of the gate) half of a main ring row
    index_offset: int = 0
    index_bytes: int = 0


@dataclass(frozen=True)
class TensorView:
    """``swa_tensor_view_t``: a strided byte view of memory the cache owns."""

    data: int
    backend: Backend
    device: int
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]


@dataclass(frozen=True)
class SlotInfo:
    """``swa_slot_info_t``."""

    slot: int
    allocated: bool
    written_end: int
    valid_start: int
    byte_offset: int


@dataclass(frozen=True)
class CacheStats:
    """``swa_cache_stats_t``."""

    steps: int
    tokens: int
    nonfinite_blocks: int
    slots_in_use: int
    max_slots: int
    pool_bytes: int


@dataclass(frozen=True)
class PlanInfo:
    """``swa_plan_info_t``."""

    path: PlanPath
    n_seqs: int
    n_tokens: int
    window: int
    ring_len: int
    executed: bool
    max_seqlen_q: int
    max_seqlen_k: int
    n_load_segments: int
    n_store_segments: int
    history_rows: int
    staging_rows: int
    decode_index_elems: int
    pivot_elems: int


@dataclass(frozen=True)
class Seq:
    """One sequence of a step (``swa_seq_t``): ``seqlen_q`` new tokens ending at
    ``seqlen_k``; ``valid_start`` 0 keeps the slot's."""

    slot: int
    seqlen_q: int
    seqlen_k: int
    valid_start: int = 0


def _layout(s: L.Layout) -> Layout:
    return Layout(**_struct_dict(s))


def layout_compute(config: Config) -> Layout:
    """The layout a configuration would get (``swa_layout_compute``), without a cache."""
    c, _keep = config._to_c()
    out = L.Layout(struct_size=sizeof(L.Layout))
    _check(_lib.swa_layout_compute(byref(c), byref(out)))
    return _layout(out)
