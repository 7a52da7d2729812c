"""Plans: build, the exporters and the step."""

from __future__ import annotations

import ctypes
import functools
import threading
from ctypes import byref, c_size_t, c_void_p, sizeof
from typing import Any, Iterable, Optional, Tuple, Union

import numpy as np

from . import _lib as L
from ._tensor import (
    as_tensor,
    check_device,
    check_dtype,
    check_no_overlap,
    check_shape,
    DTYPE_BF16,
    DTYPE_FP32,
    empty_like_kind,
    torch_stream,
)
from .errors import ClosedError, InvalidArgumentError
from ._enums import Backend, DType, IndexPad, PlanPath
from ._util import _check, _i32, _lib, _struct_dict, _u32, host_positions
from ._config import PlanInfo, Seq
from . import _compress


# ---- plan --------------------------------------------------------------------


def _locked(method: Any) -> Any:
    """Runs the whole method under the plan's lock: a step reads the plan's
    token count and then passes buffers of that size, which another thread's
    build must not change in between."""

    @functools.wraps(method)
    def wrapper(self: "Plan", *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    return wrapper


class _PlanHandle:
    """A plan's C handle and lock, shared by the :class:`Plan` and its cache's
    registry (strongly): the cache's close destroys every plan still open,
    also one whose Plan object is unreachable garbage already (in a reference
    cycle with the cache, the Plan's weak references are cleared before any
    ``__del__`` runs, so a registry of Plans saw none and the plans leaked)."""

    __slots__ = ("handle", "lock")

    def __init__(self) -> None:
        self.handle: Optional[int] = None
        self.lock = threading.RLock()

    def destroy(self) -> None:
        with self.lock:
            h, self.handle = self.handle, None
            if h is not None:
                _lib.swa_plan_destroy(h)


class Plan:
    """A step plan (``swa_plan_t``): build it once per step, then run every
    layer with :meth:`step`. A context manager; :meth:`close` is idempotent and
    the cache closes its plans when it closes.

    Thread-safe by serialisation: every call takes the plan's lock, so two
    threads using one plan run one after the other (they still see each
    other's builds: give each thread its own plan to run steps in parallel)."""

    def __init__(self, cache: Cache, *, index_pad: IndexPad = IndexPad.NEG1,
                 materialize_index: bool = True, use_options: bool = True) -> None:
        self._h = _PlanHandle()
        self._lock = self._h.lock
        self.cache = cache
        h = c_void_p()
        o = None
        if use_options:
            o = L.PlanOptions()
            _lib.swa_plan_options_init(byref(o))
            o.index_pad = _i32("index_pad", index_pad)
            o.materialize_index = 1 if materialize_index else 0

        def create(ch: int) -> int:
            # Registered inside the counted call: a close() on another thread
            # waits for it and then closes this plan too. Registered after the
            # call returned, a close() in between destroyed the cache without
            # it, and the plan was never destroyed (its __del__ skips plans of
            # a closed cache).
            if o is not None:
                st = _lib.swa_plan_create_with_options(ch, byref(o), byref(h))
            else:
                st = _lib.swa_plan_create(ch, byref(h))
            if st == 0:
                self._h.handle = h.value
                cache._plans.add(self._h)
            return st

        _check(cache._call(create))

    @property
    def _handle(self) -> Optional[int]:
        return self._h.handle

    @property
    def handle(self) -> int:
        if self._handle is None or self.cache.closed:
            raise ClosedError("the plan (or its cache) is closed")
        return self._handle

    def _call(self, fn: Any, *args: Any) -> Any:
        """``fn(plan handle, *args)`` under the plan's lock, counted as a call
        in flight on the cache (the plan points into it)."""
        with self._lock:
            if self._handle is None:
                raise ClosedError("the plan is closed")
            return self.cache._call(lambda _cache_h: fn(self._handle, *args))

    def _cache_plan_call(self, fn: Any, *args: Any) -> Any:
        """``fn(cache handle, plan handle, *args)`` under the plan's lock, counted
        as a call in flight on the cache."""
        with self._lock:
            if self._handle is None:
                raise ClosedError("the plan is closed")
            return self.cache._call(lambda ch: fn(ch, self._handle, *args))

    def _step_call(self, args: Any) -> Any:
        with self._lock:
            if self._handle is None:
                raise ClosedError("the plan is closed")
            return self.cache._call(lambda ch: _lib.swa_step(ch, self._handle, args))

    def close(self) -> None:
        """``swa_plan_destroy``; waits for a call of another thread on the plan."""
        self._h.destroy()
        self.cache._plans.discard(self._h)

    def __enter__(self) -> "Plan":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if self._h.handle is not None and not self.cache.closed:
                self.close()
        except Exception:  # noqa: BLE001
            pass

    @_locked
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
        _check(self._call(_lib.swa_plan_build, arr if items else None, len(items)))
        return self

    def cancel(self) -> None:
        """``swa_plan_cancel``."""
        _check(self._call(_lib.swa_plan_cancel))

    @_locked
    def info(self) -> PlanInfo:
        """``swa_plan_info``."""
        out = L.PlanInfo(struct_size=sizeof(L.PlanInfo))
        _check(self._call(_lib.swa_plan_info, byref(out)))
        d = _struct_dict(out)
        d["path"], d["executed"] = PlanPath(d["path"]), bool(d["executed"])
        return PlanInfo(**d)

    # -- exports (NumPy int32)
    @_locked
    def decode_index(self) -> Tuple[np.ndarray, np.ndarray]:
        """``swa_plan_decode_index``: ``(offset_len int32 [T, 2], index int32 [T, W])``."""
        i = self.info()
        ol = np.zeros((i.n_tokens, 2), np.int32)
        ix = np.zeros((i.n_tokens, i.window), np.int32)
        _check(self._call(_lib.swa_plan_decode_index, ol.ctypes.data, ix.ctypes.data))
        return ol, ix

    @_locked
    def offset_len(self) -> np.ndarray:
        """``swa_plan_decode_index`` with only ``offset_len`` (int32 [T, 2])."""
        ol = np.zeros((self.info().n_tokens, 2), np.int32)
        _check(self._call(_lib.swa_plan_decode_index, ol.ctypes.data, None))
        return ol

    @_locked
    def _segments(self, fn: Any) -> np.ndarray:
        n = c_size_t()
        _check(self._call(fn, None, 0, byref(n)))
        arr = np.zeros((n.value, 3), np.int32)
        if n.value:
            _check(self._call(fn, arr.ctypes.data_as(ctypes.POINTER(L.Segment)), n.value,
                      byref(n)))
        return arr

    def load_segments(self) -> np.ndarray:
        """``swa_plan_load_segments``: int32 ``[n, 3]`` rows of (dst_row, src_row, count)."""
        return self._segments(_lib.swa_plan_load_segments)

    def store_segments(self) -> np.ndarray:
        """``swa_plan_store_segments``: int32 ``[n, 3]`` rows of (dst_row, src_row, count)."""
        return self._segments(_lib.swa_plan_store_segments)

    @_locked
    def pivots(self) -> np.ndarray:
        """``swa_plan_pivots``: int32 ``[T, 4]``."""
        p = np.zeros((self.info().n_tokens, 4), np.int32)
        _check(self._call(_lib.swa_plan_pivots, p.ctypes.data))
        return p

    @_locked
    def store_rows(self) -> np.ndarray:
        """``swa_plan_store_rows``: int32 ``[T]`` (-1: not stored)."""
        r = np.zeros(self.info().n_tokens, np.int32)
        _check(self._call(_lib.swa_plan_store_rows, r.ctypes.data))
        return r

    @_locked
    def seq_offsets(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``swa_plan_seq_offsets``: ``(cu_seqlens_q [n+1], q_start [n], valid_start [n])``."""
        n = self.info().n_seqs
        cu = np.zeros(n + 1, np.int32)
        qs = np.zeros(n, np.int32)
        vs = np.zeros(n, np.int32)
        _check(self._call(_lib.swa_plan_seq_offsets, cu.ctypes.data, qs.ctypes.data,
                                         vs.ctypes.data))
        return cu, qs, vs

    # -- step
    @_locked
    def step(self, layer: int, q: Any, k: Any, v: Any = None, *, out: Any = None,
             sinks: Any = None, softmax_scale: float = 0.0, lse: Any = None,
             out_dtype: Optional[DType] = None, stream: Optional[int] = None,
             positions: Any = None) -> Any:
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
            positions: optional RoPE positions ``[T]`` (integers >= 0; copied to
                host int32 on both backends): RoPE rotates by them instead of the
                cache positions; the ring, window and mask keep cache positions.
        Returns:
            ``out``, or ``(out, lse)`` when ``lse`` was given.
        """
        lay = _u32("layer", layer)
        layers = self.cache._descs
        if lay >= len(layers):
            # Let the library report it (OUT_OF_RANGE) with its own message.
            a = L.StepArgs()
            _lib.swa_step_args_init(byref(a))
            a.layer = lay
            _check(self._step_call(byref(a)))
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
        pos = host_positions("positions", positions, T) if positions is not None else None
        tp = as_tensor("positions", pos) if pos is not None else None
        # out may be q itself (in place); nothing else may share memory.
        check_no_overlap([to, tl], [tq, tk, tv, ts, tp], exact_ok=[("out", "q")])
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
        a.positions = pos.ctypes.data if pos is not None else None
        _check(self._step_call(byref(a)))
        return (out, lse) if want_lse else out

    # -- the typed compressor (DeepSeek-V4 HCA/CSA; docs/semantics.md "Compression state")
    @_locked
    def compress_windows(self, layer: int) -> np.ndarray:
        """``swa_plan_compress_windows``: the windows of ``layer``'s compressor that
        close in this step, in batch order then by entry (the rows of
        :meth:`compress_step`'s output), as a NumPy record array of
        :data:`swacache.COMPRESS_WINDOW_DTYPE` (fields seq, slot, entry, position,
        first_position, n_missing, n_ring, ring_row, n_new, new_row). The layer's
        indexer compressor closes the same windows."""
        return _compress.windows(self, layer)

    @_locked
    def compress_store_segments(self, layer: int) -> np.ndarray:
        """``swa_plan_compress_store_segments``: int32 ``[n, 3]`` rows of (dst_row,
        src_row, count) where the step's new source rows go in the compressor ring
        (dst_row = slot * compress_len + p % compress_len), for an engine that runs
        its own compressor kernel on :meth:`Cache.compress_view`."""
        return _compress.store_segments(self, layer)

    @_locked
    def compress_step(self, layer: int, kv: Any, gate: Any, position_bias: Any,
                      norm_weight: Any, *, compressor: int = 0, norm_eps: float = 1e-6,
                      out: Any = None, out_dtype: Optional[DType] = None,
                      stream: Optional[int] = None) -> Any:
        """Run one compressor of one layer of this plan (``swa_compress_step``).

        Args:
            layer: a layer with a typed compressor (``Layer.compress_kind`` HCA/CSA).
            kv, gate: the step's new source rows ``[T, S]`` (float32 or bfloat16, the
                same), in batch order; S = d (HCA) or 2d (CSA: Ca | Cb), d the
                compressor's entry width; ``gate`` without the position bias.
            position_bias: float32 ``[compress_ratio, S]``.
            norm_weight: float32 ``[d]``, the entries' RMSNorm weight (``kv_norm``).
            compressor: 0 = the layer's compressor, 1 = its Lightning Indexer's.
            norm_eps: the RMSNorm epsilon.
            out: ``[n >= windows, d]``; allocated (like ``kv``) when None.
            out_dtype: dtype of an allocated ``out`` (default float32).
            stream: CUDA stream address; default: PyTorch's current stream.
        Returns:
            ``out``: row k is the entry of window k of :meth:`compress_windows`
            (normalised and rotated at its position), rows past them untouched.
        """
        return _compress.step(self, layer, kv, gate, position_bias, norm_weight,
                              compressor=compressor, norm_eps=norm_eps, out=out,
                              out_dtype=int(out_dtype) if out_dtype is not None else None,
                              stream=stream)
