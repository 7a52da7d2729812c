"""Pythonic objects over every call of ``include/swacache.h``."""

from __future__ import annotations

import ctypes
import enum
import itertools
import threading
import weakref
from ctypes import byref, c_int32, c_size_t, c_uint32, c_uint64, c_void_p, sizeof
from dataclasses import dataclass, field, fields
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _lib as L
from ._tensor import (
    DTYPE_BF16,
    DTYPE_FP32,
    TensorArg,
    as_tensor,
    check_device,
    check_dtype,
    check_raw_dtype,
    check_shape,
    empty_like_kind,
    torch_stream,
)
from .errors import (
    ClosedError,
    Error,
    FailedPreconditionError,
    InvalidArgumentError,
    Status,
    error_for,
)

_lib = L.lib()

# ---- enums -------------------------------------------------------------------


class Format(enum.IntEnum):
    """``swa_format_t``: storage format of a layer's ring."""

    MXFP8 = 0
    BF16 = 1
    FP32 = 2


class DType(enum.IntEnum):
    """``swa_dtype_t``: element type of exchanged tensors."""

    FP32 = 0
    BF16 = 1


class ScaleMode(enum.IntEnum):
    """``swa_scale_mode_t``: MXFP8 scale rule."""

    CEIL = 0
    FLOOR = 1


class LayerRole(enum.IntEnum):
    """``swa_layer_role_t``."""

    STORED = 0
    DROPPED = 1


class Backend(enum.IntEnum):
    """``swa_backend_t``."""

    AUTO = 0
    CPU = 1
    CUDA = 2


class RopeStyle(enum.IntEnum):
    """``swa_rope_style_t``."""

    NONE = 0
    NEOX = 1
    GPTJ = 2


class PlanPath(enum.IntEnum):
    """``swa_plan_path_t``."""

    NONE = 0
    RING = 1
    STAGED = 2


class IndexPad(enum.IntEnum):
    """``swa_index_pad_t``."""

    NEG1 = 0
    LAST_ROW = 1


class WeightLayout(enum.IntEnum):
    """``swa_weight_layout_t`` (experimental)."""

    OUT_IN = 0
    IN_OUT = 1


# ---- helpers -----------------------------------------------------------------


def _check(status: int) -> None:
    """Raise the Error subclass for a failed status, with the thread's message."""
    if status != 0:
        raise error_for(status, (_lib.swa_last_error() or b"").decode("utf-8", "replace"))


def _u32(name: str, v: Any) -> int:
    try:
        iv = int(v)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{name}: expected an integer, got {v!r}") from None
    if not 0 <= iv <= 0xFFFFFFFF:
        raise InvalidArgumentError(f"{name}: {iv} does not fit in uint32")
    return iv


def _i32(name: str, v: Any) -> int:
    try:
        iv = int(v)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{name}: expected an integer, got {v!r}") from None
    if not -(2**31) <= iv < 2**31:
        raise InvalidArgumentError(f"{name}: {iv} does not fit in int32")
    return iv


def _key(name: str, key: Union[bytes, bytearray, memoryview, str]) -> bytes:
    if isinstance(key, str):
        return key.encode("utf-8")
    if isinstance(key, (bytes, bytearray, memoryview)):
        return bytes(key)
    raise InvalidArgumentError(f"{name}: expected bytes or str, got {type(key).__name__}")


def _struct_dict(s: ctypes.Structure) -> Dict[str, Any]:
    return {n: getattr(s, n) for n, _ in s._fields_ if n != "struct_size"}


def version() -> str:
    """The linked library's version, ``"major.minor.patch"``."""
    return _lib.swa_version_string().decode()


def version_number() -> int:
    """The linked library's version as ``major * 10000 + minor * 100 + patch``."""
    return int(_lib.swa_version_number())


def status_string(status: int) -> str:
    """The library's fixed name of a status code (``"UNRECOGNIZED_STATUS"`` if unknown)."""
    return _lib.swa_status_string(int(status)).decode()


def last_error() -> str:
    """The calling thread's last library error message ("" if none)."""
    return (_lib.swa_last_error() or b"").decode("utf-8", "replace")


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

    def _to_c(self, out: L.LayerDesc) -> None:
        _lib.swa_layer_desc_init(byref(out))
        for f in fields(self):
            v = getattr(self, f.name)
            ctype = dict(L.LayerDesc._fields_)[f.name]
            try:
                setattr(out, f.name, float(v) if ctype is ctypes.c_float else int(v))
            except (TypeError, ValueError, OverflowError) as e:
                raise InvalidArgumentError(f"Layer.{f.name}: bad value {v!r}: {e}") from None


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

    def _to_c(self) -> Tuple[L.Config, Any]:
        c = L.Config()
        _lib.swa_config_init(byref(c))
        for name in ("window", "draft_tokens", "ring_len", "alignment", "max_slots",
                     "num_threads"):
            setattr(c, name, _u32(f"Config.{name}", getattr(self, name)))
        c.backend = int(self.backend)
        c.device = _i32("Config.device", self.device)
        c.scale_mode = int(self.scale_mode)
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
        return c, arr


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


# ---- cache -------------------------------------------------------------------


class _RingArray:
    """Holds a cache alive under a NumPy view of its pool."""

    def __init__(self, cache: "Cache", view: TensorView) -> None:
        self._cache = cache
        self.__array_interface__ = {
            "shape": view.shape,
            "typestr": "|u1",
            "data": (view.data, False),
            "strides": view.strides,
            "version": 3,
        }


class Slot(int):
    """A slot id (an ``int``) with the slot calls as methods. Returned by
    :meth:`Cache.alloc`; any ``int`` works where a slot is expected."""

    _cache: "Cache"

    def __new__(cls, cache: "Cache", slot: int) -> "Slot":
        obj = super().__new__(cls, slot)
        obj._cache = cache
        return obj

    def free(self) -> None:
        self._cache.free(self)

    def reset(self) -> None:
        self._cache.reset(self)

    def info(self) -> SlotInfo:
        return self._cache.slot_info(self)

    def copy_to(self, dst: int) -> None:
        self._cache.copy_slot(self, dst)

    def set_valid_start(self, valid_start: int) -> None:
        self._cache.set_valid_start(self, valid_start)

    def begin_replay(self, hit_len: int) -> Tuple[int, int]:
        return self._cache.begin_replay(self, hit_len)

    def save(self, key: Union[bytes, str]) -> None:
        self._cache.save(self, key)

    def restore(self, key: Union[bytes, str]) -> None:
        self._cache.restore(self, key)


class Cache:
    """A libswacache cache (``swa_cache_t``): layout, slot pool and slot table.

    Use as a context manager, or call :meth:`close` (idempotent; also closes the
    cache's plans and releases its store). Calls on a closed cache raise
    :class:`ClosedError`.

    Threading follows the header: slot, layout, statistics, store, save and
    restore calls are thread-safe; a plan and the steps that use it belong to
    one thread at a time. The GIL is released during every C call.
    """

    def __init__(self, config: Optional[Config] = None, /, **kwargs: Any) -> None:
        if config is None:
            config = Config(**kwargs)
        elif kwargs:
            raise InvalidArgumentError("Cache: pass a Config or keyword arguments, not both")
        self._handle: Optional[int] = None
        self.config = config
        self.layers: List[Layer] = list(config.layers)
        c, _keep = config._to_c()
        h = c_void_p()
        _check(_lib.swa_cache_create(byref(c), byref(h)))
        self._handle = h.value
        self._pool = config.pool
        self._plans: "weakref.WeakSet[Plan]" = weakref.WeakSet()
        self._store: Optional[object] = None
        self._lock = threading.Lock()
        self.layout = self._read_layout()
        if self.layers:
            self.backend = self.layer_view(0).backend
        else:
            self.backend = Backend.CUDA if config.backend == Backend.CUDA else Backend.CPU

    # -- lifetime
    @property
    def handle(self) -> int:
        """The raw ``swa_cache_t*`` (for calls the binding does not wrap)."""
        if self._handle is None:
            raise ClosedError("the cache is closed")
        return self._handle

    @property
    def closed(self) -> bool:
        return self._handle is None

    def close(self) -> None:
        """Destroy the cache (``swa_cache_destroy``) after closing its plans."""
        if self._handle is None:
            return
        for p in list(self._plans):
            p.close()
        h, self._handle = self._handle, None
        _lib.swa_cache_destroy(h)
        store, self._store = self._store, None
        if isinstance(store, BuiltinStore):
            store._mark_released()
        self._pool = None

    def __enter__(self) -> "Cache":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    # -- layout
    def _read_layout(self) -> Layout:
        out = L.Layout(struct_size=sizeof(L.Layout))
        _check(_lib.swa_cache_layout(self.handle, byref(out)))
        return _layout(out)

    def layer_layout(self, layer: int) -> LayerLayout:
        """``swa_cache_layer_layout``."""
        out = L.LayerLayout(struct_size=sizeof(L.LayerLayout))
        _check(_lib.swa_cache_layer_layout(self.handle, _u32("layer", layer), byref(out)))
        d = _struct_dict(out)
        d["role"], d["kv_format"] = LayerRole(d["role"]), Format(d["kv_format"])
        return LayerLayout(**d)

    def layer_view(self, layer: int) -> TensorView:
        """``swa_cache_layer_view``: the raw view (address, shape, byte strides)."""
        out = L.TensorView(struct_size=sizeof(L.TensorView))
        _check(_lib.swa_cache_layer_view(self.handle, _u32("layer", layer), byref(out)))
        n = out.ndim
        return TensorView(int(out.data or 0), Backend(out.backend), out.device,
                          tuple(out.shape[:n]), tuple(out.strides[:n]))

    def ring(self, layer: int) -> np.ndarray:
        """The layer's ring over all slots as a NumPy ``uint8`` array
        ``[max_slots, R, heads_per_token, vec_bytes]`` viewing the pool (CPU
        backend only). The array keeps the cache object alive, but not open:
        do not use it after :meth:`close`."""
        v = self.layer_view(layer)
        if v.backend != Backend.CPU:
            raise FailedPreconditionError("ring(): the pool is in device memory; use "
                                          "layer_view() for its address")
        return np.asarray(_RingArray(self, v))

    def stats(self) -> CacheStats:
        """``swa_cache_stats``."""
        out = L.CacheStats(struct_size=sizeof(L.CacheStats))
        _check(_lib.swa_cache_stats(self.handle, byref(out)))
        return CacheStats(**_struct_dict(out))

    # -- slots
    def alloc(self) -> Slot:
        """Allocate a slot (``swa_slot_alloc``); ResourceExhaustedError when none is free."""
        s = c_uint32()
        _check(_lib.swa_slot_alloc(self.handle, byref(s)))
        return Slot(self, s.value)

    def free(self, slot: int) -> None:
        """``swa_slot_free``."""
        _check(_lib.swa_slot_free(self.handle, _u32("slot", slot)))

    def reset(self, slot: int) -> None:
        """``swa_slot_reset``."""
        _check(_lib.swa_slot_reset(self.handle, _u32("slot", slot)))

    def copy_slot(self, src: int, dst: int) -> None:
        """``swa_slot_copy``: fork ``src`` into ``dst``."""
        _check(_lib.swa_slot_copy(self.handle, _u32("src", src), _u32("dst", dst)))

    def slot_info(self, slot: int) -> SlotInfo:
        """``swa_slot_info``."""
        out = L.SlotInfo(struct_size=sizeof(L.SlotInfo))
        _check(_lib.swa_slot_info(self.handle, _u32("slot", slot), byref(out)))
        d = _struct_dict(out)
        d["allocated"] = bool(d["allocated"])
        return SlotInfo(**d)

    def set_valid_start(self, slot: int, valid_start: int) -> None:
        """``swa_slot_set_valid_start``."""
        _check(_lib.swa_slot_set_valid_start(self.handle, _u32("slot", slot),
                                             _i32("valid_start", valid_start)))

    def begin_replay(self, slot: int, hit_len: int) -> Tuple[int, int]:
        """``swa_slot_begin_replay``; returns ``(replay_start, replay_len)``."""
        a, b = c_int32(), c_int32()
        _check(_lib.swa_slot_begin_replay(self.handle, _u32("slot", slot),
                                          _i32("hit_len", hit_len), byref(a), byref(b)))
        return a.value, b.value

    # -- plans and steps
    def plan(self, *, index_pad: IndexPad = IndexPad.NEG1, materialize_index: bool = True,
             options: bool = True) -> "Plan":
        """A new :class:`Plan` (``swa_plan_create_with_options``; with
        ``options=False``, ``swa_plan_create`` and the defaults)."""
        return Plan(self, index_pad=index_pad, materialize_index=materialize_index,
                    use_options=options)

    def step(self, plan: "Plan", layer: int, q: Any, k: Any, v: Any = None, **kw: Any) -> Any:
        """Same as ``plan.step(...)``."""
        if plan.cache is not self:
            raise InvalidArgumentError("plan: belongs to another cache")
        return plan.step(layer, q, k, v, **kw)

    def attention_merge(self, out_a: Any, lse_a: Any, out_b: Any, lse_b: Any, *,
                        out: Any = None, lse: Any = None, stream: Optional[int] = None) -> Any:
        """``swa_attention_merge``: combine two partial attentions over disjoint key
        sets. ``out_a``/``out_b`` are ``[rows, head_dim]`` (any leading shape whose
        last dim is head_dim), ``lse_a``/``lse_b`` float32 ``[rows]`` (any shape
        with ``rows`` elements). ``out`` (allocated when None) may be ``out_a``;
        ``lse`` receives the merged LSE when given. Returns ``out``."""
        ta = as_tensor("out_a", out_a)
        tb = as_tensor("out_b", out_b)
        dt = check_dtype(ta, (DTYPE_FP32, DTYPE_BF16))
        if check_dtype(tb, (dt,)) != dt:
            raise InvalidArgumentError("out_b: dtype differs from out_a")
        if ta.shape != tb.shape:
            raise InvalidArgumentError(f"out_b: shape {tb.shape} differs from out_a's {ta.shape}")
        if len(ta.shape) < 1 or ta.shape[-1] < 1:
            raise InvalidArgumentError(f"out_a: needs a last dim (head_dim), got {ta.shape}")
        head_dim = ta.shape[-1]
        rows = ta.numel // head_dim
        tla, tlb = as_tensor("lse_a", lse_a), as_tensor("lse_b", lse_b)
        for t in (tla, tlb):
            check_dtype(t, (DTYPE_FP32,))
            if t.numel != rows:
                raise InvalidArgumentError(f"{t.name}: expected {rows} elements (rows), got "
                                           f"{t.numel} (shape {t.shape})")
        if out is None:
            out = empty_like_kind(ta, ta.shape, dt)
        to = as_tensor("out", out, writable=True)
        check_dtype(to, (dt,))
        if to.numel != ta.numel:
            raise InvalidArgumentError(f"out: expected {ta.numel} elements, got {to.numel}")
        tensors = [ta, tb, tla, tlb, to]
        tl = None
        if lse is not None:
            tl = as_tensor("lse", lse, writable=True)
            check_dtype(tl, (DTYPE_FP32,))
            if tl.numel != rows:
                raise InvalidArgumentError(f"lse: expected {rows} elements, got {tl.numel}")
            tensors.append(tl)
        cuda = self.backend == Backend.CUDA
        for t in tensors:
            check_device(t, cuda)
        args = L.MergeArgs()
        _lib.swa_merge_args_init(byref(args))
        args.rows, args.head_dim, args.dtype = rows, head_dim, dt
        args.out_a, args.lse_a, args.out_b, args.lse_b = ta.ptr, tla.ptr, tb.ptr, tlb.ptr
        args.out = to.ptr
        args.lse = tl.ptr if tl is not None else None
        args.stream = stream if stream is not None else torch_stream(tensors)
        _check(_lib.swa_attention_merge(self.handle, byref(args)))
        return out

    def project(self, hidden: Any, weight: Any, *, q_dim: int, kv_dim: int,
                weight_layout: WeightLayout = WeightLayout.OUT_IN,
                out_dtype: DType = DType.FP32, out: Any = None,
                stream: Optional[int] = None) -> Any:
        """``swa_project`` (experimental): ``out[T, q_dim + kv_dim] = hidden x weight``
        with BF16 inputs (``torch.bfloat16`` or ``numpy.uint16`` bits)."""
        th = as_tensor("hidden", hidden)
        tw = as_tensor("weight", weight)
        check_dtype(th, (DTYPE_BF16,))
        check_dtype(tw, (DTYPE_BF16,))
        if len(th.shape) != 2:
            raise InvalidArgumentError(f"hidden: expected shape (n_tokens, hidden_dim), got "
                                       f"{th.shape}")
        n_tokens, hidden_dim = th.shape
        cols = _u32("q_dim", q_dim) + _u32("kv_dim", kv_dim)
        wshape = (cols, hidden_dim) if weight_layout == WeightLayout.OUT_IN else (hidden_dim, cols)
        check_shape(tw, wshape, "(q_dim + kv_dim, hidden_dim)" if weight_layout ==
                    WeightLayout.OUT_IN else "(hidden_dim, q_dim + kv_dim)")
        if out is None:
            out = empty_like_kind(th, (n_tokens, cols), int(out_dtype))
        to = as_tensor("out", out, writable=True)
        check_dtype(to, (int(out_dtype),))
        check_shape(to, (n_tokens, cols), "(n_tokens, q_dim + kv_dim)")
        cuda = self.backend == Backend.CUDA
        for t in (th, tw, to):
            check_device(t, cuda)
        a = L.ProjectArgs()
        _lib.swa_project_args_init(byref(a))
        a.hidden, a.weight, a.weight_layout, a.out = th.ptr, tw.ptr, int(weight_layout), to.ptr
        a.out_dtype, a.n_tokens, a.hidden_dim = int(out_dtype), n_tokens, hidden_dim
        a.q_dim, a.kv_dim = q_dim, kv_dim
        a.stream = stream if stream is not None else torch_stream([th, tw, to])
        _check(_lib.swa_project(self.handle, byref(a)))
        return out

    # -- store
    def set_store(self, store: Optional[Union["Store", "BuiltinStore"]]) -> None:
        """Attach a store (``swa_cache_set_store``) or detach it (None). The
        cache then owns it: a built-in store can no longer be attached
        elsewhere, and a :class:`Store` subclass's :meth:`Store.release` is
        called exactly once when the library drops it."""
        h = self.handle
        with self._lock:
            if store is None:
                _check(_lib.swa_cache_set_store(h, None))
            elif isinstance(store, BuiltinStore):
                table = store._take("set_store")
                try:
                    _check(_lib.swa_cache_set_store(h, byref(table)))
                except Error:
                    store._untake(table)
                    raise
                store._attached_to(self)
            elif isinstance(store, Store):
                table, uid = _register(store)
                try:
                    _check(_lib.swa_cache_set_store(h, byref(table)))
                except Error:
                    _REGISTRY.pop(uid, None)
                    raise
            else:
                raise InvalidArgumentError(f"store: expected a swacache.Store, a built-in store "
                                           f"or None, got {type(store).__name__}")
            old, self._store = self._store, store
            if isinstance(old, BuiltinStore) and old is not store:
                old._mark_released()

    def save(self, slot: int, key: Union[bytes, str]) -> None:
        """``swa_slot_save``: persist the slot's stored region under ``key``."""
        k = _key("key", key)
        _check(_lib.swa_slot_save(self.handle, _u32("slot", slot), k, len(k)))

    def restore(self, slot: int, key: Union[bytes, str]) -> None:
        """``swa_slot_restore``."""
        k = _key("key", key)
        _check(_lib.swa_slot_restore(self.handle, _u32("slot", slot), k, len(k)))

    def store_exists(self, key: Union[bytes, str]) -> bool:
        """``swa_cache_store_exists`` (experimental)."""
        k = _key("key", key)
        e = c_uint32()
        _check(_lib.swa_cache_store_exists(self.handle, k, len(k), byref(e)))
        return bool(e.value)

    def store_remove(self, key: Union[bytes, str]) -> None:
        """``swa_cache_store_remove`` (experimental)."""
        k = _key("key", key)
        _check(_lib.swa_cache_store_remove(self.handle, k, len(k)))


# ---- plan --------------------------------------------------------------------


class Plan:
    """A step plan (``swa_plan_t``): build it once per step, then run every
    layer with :meth:`step`. A context manager; :meth:`close` is idempotent and
    the cache closes its plans when it closes. Not thread-safe."""

    def __init__(self, cache: Cache, *, index_pad: IndexPad = IndexPad.NEG1,
                 materialize_index: bool = True, use_options: bool = True) -> None:
        self._handle: Optional[int] = None
        self.cache = cache
        h = c_void_p()
        if use_options:
            o = L.PlanOptions()
            _lib.swa_plan_options_init(byref(o))
            o.index_pad = int(index_pad)
            o.materialize_index = 1 if materialize_index else 0
            _check(_lib.swa_plan_create_with_options(cache.handle, byref(o), byref(h)))
        else:
            _check(_lib.swa_plan_create(cache.handle, byref(h)))
        self._handle = h.value
        cache._plans.add(self)

    @property
    def handle(self) -> int:
        if self._handle is None or self.cache.closed:
            raise ClosedError("the plan (or its cache) is closed")
        return self._handle

    def close(self) -> None:
        """``swa_plan_destroy``."""
        h, self._handle = self._handle, None
        if h is not None:
            _lib.swa_plan_destroy(h)

    def __enter__(self) -> "Plan":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if self._handle is not None and not self.cache.closed:
                self.close()
        except Exception:  # noqa: BLE001
            pass

    def build(self, seqs: Iterable[Union[Seq, Tuple[int, int, int], Tuple[int, int, int, int]]]
              ) -> "Plan":
        """``swa_plan_build``: ``seqs`` are :class:`Seq` or ``(slot, seqlen_q,
        seqlen_k[, valid_start])`` tuples, in batch order. Returns self."""
        items = list(seqs)
        arr = (L.Seq * max(1, len(items)))()
        for i, s in enumerate(items):
            if isinstance(s, Seq):
                t = (s.slot, s.seqlen_q, s.seqlen_k, s.valid_start)
            else:
                t = tuple(s)
                if len(t) == 3:
                    t = t + (0,)
                if len(t) != 4:
                    raise InvalidArgumentError(f"seqs[{i}]: expected (slot, seqlen_q, seqlen_k"
                                               f"[, valid_start]), got {s!r}")
            arr[i].slot = _u32(f"seqs[{i}].slot", t[0])
            arr[i].seqlen_q = _i32(f"seqs[{i}].seqlen_q", t[1])
            arr[i].seqlen_k = _i32(f"seqs[{i}].seqlen_k", t[2])
            arr[i].valid_start = _i32(f"seqs[{i}].valid_start", t[3])
        _check(_lib.swa_plan_build(self.handle, arr if items else None, len(items)))
        return self

    def cancel(self) -> None:
        """``swa_plan_cancel``."""
        _check(_lib.swa_plan_cancel(self.handle))

    def info(self) -> PlanInfo:
        """``swa_plan_info``."""
        out = L.PlanInfo(struct_size=sizeof(L.PlanInfo))
        _check(_lib.swa_plan_info(self.handle, byref(out)))
        d = _struct_dict(out)
        d["path"], d["executed"] = PlanPath(d["path"]), bool(d["executed"])
        return PlanInfo(**d)

    # -- exports (NumPy int32)
    def decode_index(self) -> Tuple[np.ndarray, np.ndarray]:
        """``swa_plan_decode_index``: ``(offset_len int32 [T, 2], index int32 [T, W])``."""
        i = self.info()
        ol = np.zeros((i.n_tokens, 2), np.int32)
        ix = np.zeros((i.n_tokens, i.window), np.int32)
        _check(_lib.swa_plan_decode_index(self.handle, ol.ctypes.data, ix.ctypes.data))
        return ol, ix

    def offset_len(self) -> np.ndarray:
        """``swa_plan_decode_index`` with only ``offset_len`` (int32 [T, 2])."""
        ol = np.zeros((self.info().n_tokens, 2), np.int32)
        _check(_lib.swa_plan_decode_index(self.handle, ol.ctypes.data, None))
        return ol

    def _segments(self, fn: Any) -> np.ndarray:
        n = c_size_t()
        _check(fn(self.handle, None, 0, byref(n)))
        arr = np.zeros((n.value, 3), np.int32)
        if n.value:
            _check(fn(self.handle, arr.ctypes.data_as(ctypes.POINTER(L.Segment)), n.value,
                      byref(n)))
        return arr

    def load_segments(self) -> np.ndarray:
        """``swa_plan_load_segments``: int32 ``[n, 3]`` rows of (dst_row, src_row, count)."""
        return self._segments(_lib.swa_plan_load_segments)

    def store_segments(self) -> np.ndarray:
        """``swa_plan_store_segments``: int32 ``[n, 3]`` rows of (dst_row, src_row, count)."""
        return self._segments(_lib.swa_plan_store_segments)

    def pivots(self) -> np.ndarray:
        """``swa_plan_pivots``: int32 ``[T, 4]``."""
        p = np.zeros((self.info().n_tokens, 4), np.int32)
        _check(_lib.swa_plan_pivots(self.handle, p.ctypes.data))
        return p

    def store_rows(self) -> np.ndarray:
        """``swa_plan_store_rows``: int32 ``[T]`` (-1: not stored)."""
        r = np.zeros(self.info().n_tokens, np.int32)
        _check(_lib.swa_plan_store_rows(self.handle, r.ctypes.data))
        return r

    def seq_offsets(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``swa_plan_seq_offsets``: ``(cu_seqlens_q [n+1], q_start [n], valid_start [n])``."""
        n = self.info().n_seqs
        cu = np.zeros(n + 1, np.int32)
        qs = np.zeros(n, np.int32)
        vs = np.zeros(n, np.int32)
        _check(_lib.swa_plan_seq_offsets(self.handle, cu.ctypes.data, qs.ctypes.data,
                                         vs.ctypes.data))
        return cu, qs, vs

    # -- step
    def step(self, layer: int, q: Any, k: Any, v: Any = None, *, out: Any = None,
             sinks: Any = None, softmax_scale: float = 0.0, lse: Any = None,
             out_dtype: Optional[DType] = None, stream: Optional[int] = None) -> Any:
        """Run one layer of this plan (``swa_step``).

        Args:
            layer: layer id.
            q: queries ``[T, Hq, D]``, float32 or bfloat16.
            k: new keys ``[T, Hkv, D]`` (the shared vector for shared-K/V layers).
            v: new values ``[T, Hkv, D]``; must be None for shared-K/V layers.
            out: output ``[T, Hq, D]``; allocated (zeros, like ``q``) when None.
            sinks: float32 ``[Hq]`` for layers with sinks, else None.
            softmax_scale: 0 means ``1/sqrt(D)``.
            lse: float32 ``[T, Hq]`` to receive each row's log-sum-exp, or True to
                allocate it; then ``(out, lse)`` is returned.
            out_dtype: dtype of an allocated ``out`` (default float32).
            stream: CUDA stream address; default: PyTorch's current stream.
        Returns:
            ``out``, or ``(out, lse)`` when ``lse`` was given.
        """
        lay = _u32("layer", layer)
        layers = self.cache.layers
        if lay >= len(layers):
            # Let the library report it (OUT_OF_RANGE) with its own message.
            a = L.StepArgs()
            _lib.swa_step_args_init(byref(a))
            a.layer = lay
            _check(_lib.swa_step(self.cache.handle, self.handle, byref(a)))
        desc = layers[lay]
        T = self.info().n_tokens
        hq, hkv, d = int(desc.q_heads), int(desc.kv_heads), int(desc.head_dim)
        cuda = self.cache.backend == Backend.CUDA
        tq = as_tensor("q", q)
        q_dt = check_dtype(tq, (DTYPE_FP32, DTYPE_BF16))
        check_shape(tq, (T, hq, d), "(T, Hq, D)")
        tk = as_tensor("k", k)
        kv_dt = check_dtype(tk, (DTYPE_FP32, DTYPE_BF16))
        check_shape(tk, (T, hkv, d), "(T, Hkv, D)")
        tensors = [tq, tk]
        tv = None
        if desc.shared_kv:
            if v is not None:
                raise InvalidArgumentError(f"v: layer {lay} shares K and V (shared_kv); pass "
                                           "v=None")
        else:
            if v is None:
                raise InvalidArgumentError(f"v: layer {lay} has separate K and V; v is required")
            tv = as_tensor("v", v)
            if check_dtype(tv, (DTYPE_FP32, DTYPE_BF16)) != kv_dt:
                raise InvalidArgumentError(f"v: dtype {tv.np_dtype} differs from k's "
                                           f"{tk.np_dtype}")
            check_shape(tv, (T, hkv, d), "(T, Hkv, D)")
            tensors.append(tv)
        if out is None:
            out = empty_like_kind(tq, (T, hq, d),
                                  int(out_dtype) if out_dtype is not None else DTYPE_FP32)
        to = as_tensor("out", out, writable=True)
        o_dt = check_dtype(to, (DTYPE_FP32, DTYPE_BF16))
        check_shape(to, (T, hq, d), "(T, Hq, D)")
        tensors.append(to)
        ts = None
        if desc.has_sinks:
            if sinks is None:
                raise InvalidArgumentError(f"sinks: layer {lay} has sinks (has_sinks); pass "
                                           f"float32 [{hq}]")
            ts = as_tensor("sinks", sinks)
            check_dtype(ts, (DTYPE_FP32,))
            check_shape(ts, (hq,), "(Hq,)")
            tensors.append(ts)
        elif sinks is not None:
            raise InvalidArgumentError(f"sinks: layer {lay} has no sinks; pass sinks=None")
        tl = None
        want_lse = lse is not None and lse is not False
        if want_lse:
            if lse is True:
                lse = empty_like_kind(tq, (T, hq), DTYPE_FP32)
            tl = as_tensor("lse", lse, writable=True)
            check_dtype(tl, (DTYPE_FP32,))
            check_shape(tl, (T, hq), "(T, Hq)")
            tensors.append(tl)
        for t in tensors:
            check_device(t, cuda)
        a = L.StepArgs()
        _lib.swa_step_args_init(byref(a))
        a.layer = lay
        a.q, a.q_dtype = tq.ptr, q_dt
        a.k_new, a.kv_dtype = tk.ptr, kv_dt
        a.v_new = tv.ptr if tv is not None else None
        a.out, a.out_dtype = to.ptr, o_dt
        a.sinks = ts.ptr if ts is not None else None
        a.softmax_scale = float(softmax_scale)
        a.lse = tl.ptr if tl is not None else None
        a.stream = stream if stream is not None else (torch_stream(tensors) if cuda else None)
        _check(_lib.swa_step(self.cache.handle, self.handle, byref(a)))
        return (out, lse) if want_lse else out


# ---- codec ---------------------------------------------------------------------


def format_vector_bytes(format: Format, dim: int) -> int:
    """``swa_format_vector_bytes``."""
    out = c_uint32()
    _check(_lib.swa_format_vector_bytes(int(format), _u32("dim", dim), byref(out)))
    return out.value


def codec_cpu_path() -> str:
    """``swa_codec_cpu_path``: "avx512", "avx2" or "scalar"."""
    return _lib.swa_codec_cpu_path().decode()


def _vectors(name: str, src: Any, dim: int) -> Tuple[TensorArg, int]:
    t = as_tensor(name, src)
    if t.device != "cpu":
        raise InvalidArgumentError(f"{name}: the codec runs on the host; got a device tensor")
    if dim <= 0:
        raise InvalidArgumentError(f"dim: must be positive, got {dim}")
    if t.numel % dim:
        raise InvalidArgumentError(f"{name}: {t.numel} elements is not a multiple of dim={dim}")
    return t, t.numel // dim


def encode(format: Format, src: Any, dim: Optional[int] = None,
           mode: ScaleMode = ScaleMode.CEIL) -> Tuple[np.ndarray, int]:
    """``swa_codec_encode`` (experimental): encode float32/bfloat16 vectors (last
    dim = ``dim`` unless given) into ``uint8 [n, vector_bytes]``. Returns
    ``(bytes, nonfinite_blocks)``."""
    t0 = as_tensor("src", src)
    dim = int(dim if dim is not None else (t0.shape[-1] if t0.shape else 0))
    t, n = _vectors("src", src, dim)
    dt = check_dtype(t, (DTYPE_FP32, DTYPE_BF16))
    vb = format_vector_bytes(format, dim)
    dst = np.zeros((n, vb), np.uint8)
    nf = c_uint64()
    _check(_lib.swa_codec_encode(int(format), int(mode), t.ptr, dt, n, dim, dst.ctypes.data,
                                 byref(nf)))
    return dst, nf.value


def decode(format: Format, src: Any, dim: int, dtype: DType = DType.FP32
           ) -> Tuple[np.ndarray, int]:
    """``swa_codec_decode`` (experimental): ``uint8 [n, vector_bytes]`` to
    ``[n, dim]`` float32 (or uint16 BF16 bits). Returns ``(values, nonfinite_blocks)``."""
    t = as_tensor("src", src)
    check_raw_dtype(t, np.uint8)
    vb = format_vector_bytes(format, dim)
    if t.numel % vb:
        raise InvalidArgumentError(f"src: {t.numel} bytes is not a multiple of the vector size "
                                   f"{vb}")
    n = t.numel // vb
    dst = np.zeros((n, dim), np.float32 if dtype == DType.FP32 else np.uint16)
    nf = c_uint64()
    _check(_lib.swa_codec_decode(int(format), t.ptr, n, _u32("dim", dim), dst.ctypes.data,
                                 int(dtype), byref(nf)))
    return dst, nf.value


def mxfp8_encode(src: Any, dim: Optional[int] = None, mode: ScaleMode = ScaleMode.CEIL
                 ) -> Tuple[np.ndarray, int]:
    """``swa_mxfp8_encode`` (experimental)."""
    t0 = as_tensor("src", src)
    dim = int(dim if dim is not None else (t0.shape[-1] if t0.shape else 0))
    t, n = _vectors("src", src, dim)
    dt = check_dtype(t, (DTYPE_FP32, DTYPE_BF16))
    dst = np.zeros((n, dim + dim // 32), np.uint8)
    nf = c_uint64()
    _check(_lib.swa_mxfp8_encode(t.ptr, dt, n, dim, int(mode), dst.ctypes.data, byref(nf)))
    return dst, nf.value


def mxfp8_decode(src: Any, dim: int, dtype: DType = DType.FP32) -> Tuple[np.ndarray, int]:
    """``swa_mxfp8_decode`` (experimental)."""
    t = as_tensor("src", src)
    check_raw_dtype(t, np.uint8)
    if dim <= 0 or t.numel % (dim + dim // 32):
        raise InvalidArgumentError(f"src: {t.numel} bytes is not a whole number of MXFP8 "
                                   f"vectors of dim={dim}")
    n = t.numel // (dim + dim // 32)
    dst = np.zeros((n, dim), np.float32 if dtype == DType.FP32 else np.uint16)
    nf = c_uint64()
    _check(_lib.swa_mxfp8_decode(t.ptr, n, dim, dst.ctypes.data, int(dtype), byref(nf)))
    return dst, nf.value


# The store classes live in _stores.py; Cache.set_store refers to them at call
# time (the module imports the helpers above, so it is imported last).
from ._stores import BuiltinStore, Store, _register  # noqa: E402
