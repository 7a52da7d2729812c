"""The cache, its slots and the calls that take it (merge, projection, stores)."""

from __future__ import annotations

import copy
import threading
from ctypes import byref, c_char_p, c_int32, c_size_t, c_uint32, c_void_p, sizeof
from typing import Any, List, Optional, Set, Tuple, Union

import numpy as np

from . import _lib as L
from ._tensor import (
    as_tensor,
    check_device,
    check_dtype,
    check_shape,
    DTYPE_BF16,
    DTYPE_FP32,
    empty_like_kind,
    torch_stream,
)
from .errors import ClosedError, FailedPreconditionError, InvalidArgumentError
from ._enums import Backend, CompressKind, DType, Format, IndexPad, LayerRole, WeightLayout
from ._util import _check, _i32, _key, _lib, _struct_dict, _u32
from ._config import CacheStats, Config, Layer, LayerLayout, Layout, _layout, SlotInfo, TensorView
from ._plan import Plan
from ._rope import merge_args
from ._life import _Life
from . import _compress
from ._stores import _REGISTRY, BuiltinStore, Store, _register


# ---- cache -------------------------------------------------------------------


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

    def begin_replay_exact(self, hit_len: int, sliding_layers: int = 0,
                           need_last_output: bool = False) -> Tuple[int, int]:
        return self._cache.begin_replay_exact(self, hit_len, sliding_layers, need_last_output)

    def checkpoint_range(self) -> Tuple[int, int]:
        return self._cache.checkpoint_range(self)

    def save(self, key: Union[bytes, str]) -> None:
        self._cache.save(self, key)

    def save_at(self, position: int, key: Union[bytes, str]) -> None:
        self._cache.save_at(self, position, key)

    def restore(self, key: Union[bytes, str]) -> None:
        self._cache.restore(self, key)


class Cache:
    """A libswacache cache (``swa_cache_t``): layout, slot pool and slot table.

    Use as a context manager, or call :meth:`close` (idempotent; also closes the
    cache's plans and releases its store). Calls on a closed cache raise
    :class:`ClosedError`.

    Threading follows the header: slot, layout, statistics, store, save and
    restore calls are thread-safe, and a free, reset, copy, save or restore of
    a slot that a step is running on fails with
    :class:`FailedPreconditionError`. A :class:`Plan` serialises its own calls
    (a lock), so threads may share one. The GIL is released during every C
    call. :meth:`close` waits for the calls other threads have in flight on
    the cache, and refuses (FailedPreconditionError) when called from inside
    one of its calls (a :class:`Store` callback). See docs/bindings.md.
    """

    def __init__(self, config: Optional[Config] = None, /, **kwargs: Any) -> None:
        if config is None:
            config = Config(**kwargs)
        elif kwargs:
            raise InvalidArgumentError("Cache: pass a Config or keyword arguments, not both")
        self._life: Optional[_Life] = None
        self.config = config
        # Copies, as the library copied them: the step's length checks read
        # these, and the caller's Layer objects may be changed (or reused for
        # another cache) afterwards. Arrays sized for a changed head_dim
        # passed the checks and the library wrote past them.
        self._descs: Tuple[Layer, ...] = tuple(copy.copy(layer) for layer in config.layers)
        c, _keep = config._to_c()
        h = c_void_p()
        _check(_lib.swa_cache_create(byref(c), byref(h)))
        # What the destroy releases, kept off the Cache so that a NumPy view
        # that outlives it (and pins the handle) does not keep it alive.
        store_box: List[Optional[object]] = [None]
        self._store_box = store_box
        # A caller-provided pool lives as long as the handle, not the Cache:
        # ring() arrays pin the handle and view the pool, and config.pool may
        # be reassigned. Held by the destroy (so by the handle's _Life).
        pool_box: List[Any] = [(config.pool, _keep)]

        def destroy(handle: int) -> None:
            _lib.swa_cache_destroy(handle)
            pool_box[0] = None
            store, store_box[0] = store_box[0], None
            if isinstance(store, BuiltinStore):
                store._mark_released()

        self._life = _Life("cache", h.value, destroy)
        # The C handles of the open plans (strong: see _plan._PlanHandle).
        self._plans: Set[Any] = set()
        # Serialises set_store; held (re-entrantly) by a built-in store's stats
        # call, which must not run while set_store replaces that store.
        self._lock = threading.RLock()
        self._store_changing = False
        self.layout = self._read_layout()
        if self._descs:
            self.backend = self.layer_view(0).backend
        else:
            self.backend = Backend.CUDA if config.backend == Backend.CUDA else Backend.CPU

    @property
    def layers(self) -> List[Layer]:
        """The layers the cache was created with (copies: changing them, or the
        Layer objects of the config, changes nothing in the cache)."""
        return [copy.copy(layer) for layer in self._descs]

    # -- lifetime
    @property
    def handle(self) -> int:
        """The raw ``swa_cache_t*`` (for calls the binding does not wrap; the
        binding does not count them as calls in flight)."""
        if self._life is None:
            raise ClosedError("the cache is closed")
        return self._life.handle()

    @property
    def closed(self) -> bool:
        return self._life is None or self._life.closing

    def _call(self, fn: Any, *args: Any) -> Any:
        """``fn(handle, *args)``, counted as a call in flight (see close())."""
        if self._life is None:
            raise ClosedError("the cache is closed")
        return self._life.call(fn, *args)

    @property
    def _store(self) -> Optional[object]:
        return self._store_box[0]

    def close(self) -> None:
        """Destroy the cache (``swa_cache_destroy``) after closing its plans.

        Idempotent. Calls that start afterwards raise :class:`ClosedError`;
        calls other threads have in flight finish first (close waits for
        them). From inside a call on this cache (a :class:`Store` callback of
        its save or restore) it raises :class:`FailedPreconditionError` and
        changes nothing. Arrays from :meth:`ring` keep the pool's memory
        alive: the library's destroy runs when the last of them is gone."""
        if self._life is None:
            return

        def close_plans() -> None:
            for p in list(self._plans):
                p.destroy()
            self._plans.clear()

        self._life.close(close_plans)

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
        _check(self._call(_lib.swa_cache_layout, byref(out)))
        return _layout(out)

    def layer_layout(self, layer: int) -> LayerLayout:
        """``swa_cache_layer_layout``."""
        out = L.LayerLayout(struct_size=sizeof(L.LayerLayout))
        _check(self._call(_lib.swa_cache_layer_layout, _u32("layer", layer), byref(out)))
        d = _struct_dict(out)
        d["role"], d["kv_format"] = LayerRole(d["role"]), Format(d["kv_format"])
        d["compress_kind"] = CompressKind(d["compress_kind"])
        return LayerLayout(**d)

    def layer_view(self, layer: int) -> TensorView:
        """``swa_cache_layer_view``: the raw view (address, shape, byte strides)."""
        out = L.TensorView(struct_size=sizeof(L.TensorView))
        _check(self._call(_lib.swa_cache_layer_view, _u32("layer", layer), byref(out)))
        n = out.ndim
        return TensorView(int(out.data or 0), Backend(out.backend), out.device,
                          tuple(out.shape[:n]), tuple(out.strides[:n]))

    def compress_view(self, layer: int, compressor: int = 0) -> TensorView:
        """``swa_cache_compress_view``: the raw view of a layer's compressor ring
        over all slots, ``uint8 [max_slots, compress_len, 2, half_bytes]`` (per row
        the kv values, then the gate values, in the layer's compress_row_format);
        ``compressor`` 1 is the layer's indexer compressor."""
        return _compress.view(self, layer, compressor)

    def compress_ring(self, layer: int, compressor: int = 0) -> np.ndarray:
        """:meth:`compress_view` as a NumPy ``uint8`` array viewing the pool (CPU
        backend only; it keeps the pool alive like :meth:`ring`)."""
        return _compress.ring(self, layer, compressor)

    def set_save_compression(self, enable: bool = True) -> None:
        """``swa_cache_set_save_compression``: whether :meth:`save` (and
        ``save_at``) carry the typed compressor rings in the blob, so that a
        restored sequence continues its compressed entries exactly."""
        _compress.set_save(self, enable)

    def ring(self, layer: int) -> np.ndarray:
        """The layer's ring over all slots as a NumPy ``uint8`` array
        ``[max_slots, R, heads_per_token, vec_bytes]`` viewing the pool (CPU
        backend only). The array (and every view of it) keeps the pool's
        memory alive, also after :meth:`close`: the cache is then closed to
        calls, and destroyed when the last such array is gone."""
        v = self.layer_view(layer)
        if v.backend != Backend.CPU:
            raise FailedPreconditionError("ring(): the pool is in device memory; use "
                                          "layer_view() for its address")
        assert self._life is not None
        return np.asarray(self._life.pin({
            "shape": v.shape,
            "typestr": "|u1",
            "data": (v.data, False),
            "strides": v.strides,
            "version": 3,
        }))

    def stats(self) -> CacheStats:
        """``swa_cache_stats``."""
        out = L.CacheStats(struct_size=sizeof(L.CacheStats))
        _check(self._call(_lib.swa_cache_stats, byref(out)))
        return CacheStats(**_struct_dict(out))

    # -- slots
    def alloc(self) -> Slot:
        """Allocate a slot (``swa_slot_alloc``); ResourceExhaustedError when none is free."""
        s = c_uint32()
        _check(self._call(_lib.swa_slot_alloc, byref(s)))
        return Slot(self, s.value)

    def free(self, slot: int) -> None:
        """``swa_slot_free``."""
        _check(self._call(_lib.swa_slot_free, _u32("slot", slot)))

    def reset(self, slot: int) -> None:
        """``swa_slot_reset``."""
        _check(self._call(_lib.swa_slot_reset, _u32("slot", slot)))

    def copy_slot(self, src: int, dst: int) -> None:
        """``swa_slot_copy``: fork ``src`` into ``dst``."""
        _check(self._call(_lib.swa_slot_copy, _u32("src", src), _u32("dst", dst)))

    def slot_info(self, slot: int) -> SlotInfo:
        """``swa_slot_info``."""
        out = L.SlotInfo(struct_size=sizeof(L.SlotInfo))
        _check(self._call(_lib.swa_slot_info, _u32("slot", slot), byref(out)))
        d = _struct_dict(out)
        d["allocated"] = bool(d["allocated"])
        return SlotInfo(**d)

    def set_valid_start(self, slot: int, valid_start: int) -> None:
        """``swa_slot_set_valid_start``."""
        _check(self._call(_lib.swa_slot_set_valid_start, _u32("slot", slot),
                                             _i32("valid_start", valid_start)))

    def begin_replay(self, slot: int, hit_len: int) -> Tuple[int, int]:
        """``swa_slot_begin_replay``; returns ``(replay_start, replay_len)``."""
        a, b = c_int32(), c_int32()
        _check(self._call(_lib.swa_slot_begin_replay, _u32("slot", slot),
                                          _i32("hit_len", hit_len), byref(a), byref(b)))
        return a.value, b.value

    def begin_replay_exact(self, slot: int, hit_len: int, sliding_layers: int = 0,
                           need_last_output: bool = False) -> Tuple[int, int]:
        """``swa_slot_begin_replay_exact``: prepare an exact replay of
        ``L * (W - 1)`` positions (+1 with ``need_last_output``; ``sliding_layers``
        0 = the cache's layer count); returns ``(replay_start, replay_len)``."""
        a, b = c_int32(), c_int32()
        _check(self._call(_lib.swa_slot_begin_replay_exact, _u32("slot", slot),
                          _i32("hit_len", hit_len), _u32("sliding_layers", sliding_layers),
                          1 if need_last_output else 0, byref(a), byref(b)))
        return a.value, b.value

    def checkpoint_range(self, slot: int) -> Tuple[int, int]:
        """``swa_slot_checkpoint_range``: ``(lo, hi)``, the positions
        :meth:`save_at` accepts now (``lo > hi``: none)."""
        lo, hi = c_int32(), c_int32()
        _check(self._call(_lib.swa_slot_checkpoint_range, _u32("slot", slot), byref(lo),
                          byref(hi)))
        return lo.value, hi.value

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
        ``lse`` receives the merged LSE when given. Returns ``out``. Without a
        cache: :func:`swacache.attention_merge`."""
        args, out, tensors = merge_args(out_a, lse_a, out_b, lse_b, out, lse)
        cuda = self.backend == Backend.CUDA
        for t in tensors:
            check_device(t, cuda)
        args.stream = stream if stream is not None else torch_stream(tensors)
        _check(self._call(_lib.swa_attention_merge, byref(args)))
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
        _check(self._call(_lib.swa_project, byref(a)))
        return out

    # -- store
    def set_store(self, store: Optional[Union["Store", "BuiltinStore"]]) -> None:
        """Attach a store (``swa_cache_set_store``) or detach it (None). The
        cache then owns it: a built-in store can no longer be attached
        elsewhere, and a :class:`Store` subclass's :meth:`Store.release` is
        called exactly once when the library drops it."""
        with self._lock:
            self._store_changing = True
            try:
                self._set_store_locked(store)
            finally:
                self._store_changing = False

    def _set_store_locked(self, store: Optional[Union["Store", "BuiltinStore"]]) -> None:
        if store is None:
            _check(self._call(_lib.swa_cache_set_store, None))
        elif isinstance(store, BuiltinStore):
            table = store._take("set_store")
            try:
                _check(self._call(_lib.swa_cache_set_store, byref(table)))
            except BaseException:  # the library took nothing: the caller still owns it
                store._untake(table)
                raise
            store._attached_to(self)
        elif isinstance(store, Store):
            table, uid = _register(store)
            try:
                _check(self._call(_lib.swa_cache_set_store, byref(table)))
            except BaseException:
                _REGISTRY.pop(uid, None)
                raise
        else:
            raise InvalidArgumentError(f"store: expected a swacache.Store, a built-in store "
                                       f"or None, got {type(store).__name__}")
        old, self._store_box[0] = self._store_box[0], store
        if isinstance(old, BuiltinStore) and old is not store:
            old._mark_released()

    def save(self, slot: int, key: Union[bytes, str]) -> None:
        """``swa_slot_save``: persist the slot's stored region under ``key``."""
        k = _key("key", key)
        _check(self._call(_lib.swa_slot_save, _u32("slot", slot), k, len(k)))

    def restore(self, slot: int, key: Union[bytes, str]) -> None:
        """``swa_slot_restore``."""
        k = _key("key", key)
        _check(self._call(_lib.swa_slot_restore, _u32("slot", slot), k, len(k)))

    def store_exists(self, key: Union[bytes, str]) -> bool:
        """``swa_cache_store_exists`` (experimental)."""
        k = _key("key", key)
        e = c_uint32()
        _check(self._call(_lib.swa_cache_store_exists, k, len(k), byref(e)))
        return bool(e.value)

    def save_at(self, slot: int, position: int, key: Union[bytes, str]) -> None:
        """``swa_slot_save_at``: save a checkpoint, the slot as it stood at
        ``position`` (within :meth:`checkpoint_range`; else OutOfRangeError
        naming the range, nothing written)."""
        k = _key("key", key)
        _check(self._call(_lib.swa_slot_save_at, _u32("slot", slot),
                          _i32("position", position), k, len(k)))

    def store_probe(self, keys: "List[Union[bytes, str]]") -> int:
        """``swa_cache_store_probe`` (experimental): the index of the first of
        ``keys`` (longest prefix first) that the store holds, or -1."""
        if isinstance(keys, (str, bytes, bytearray, memoryview)):
            # Iterating it would probe one-character (or one-int) keys.
            raise InvalidArgumentError(f"keys: expected a list of keys, got one key "
                                       f"({type(keys).__name__})")
        ks = [_key(f"keys[{i}]", k) for i, k in enumerate(keys)]
        n = len(ks)
        arr = (c_char_p * max(n, 1))(*ks)
        lens = (c_size_t * max(n, 1))(*[len(k) for k in ks])
        found = c_int32(-1)
        _check(self._call(_lib.swa_cache_store_probe, arr, lens, _u32("len(keys)", n),
                          byref(found)))
        return found.value

    def store_remove(self, key: Union[bytes, str]) -> None:
        """``swa_cache_store_remove`` (experimental)."""
        k = _key("key", key)
        _check(self._call(_lib.swa_cache_store_remove, k, len(k)))
