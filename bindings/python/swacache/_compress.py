"""The typed compressor of DeepSeek-V4's HCA/CSA layers (``swa_plan_compress_windows``,
``swa_plan_compress_store_segments``, ``swa_compress_step``, ``swa_cache_compress_view``,
``swa_cache_set_save_compression``; docs/semantics.md "Compression state").

The library keeps each sequence's compressor ring (the source rows of the open
window, the previous window's rows for CSA, and the rows of the step's drafts),
plans which windows close in a step and computes their entries; the entries
themselves are the engine's long-range KV. :class:`~swacache.Plan` and
:class:`~swacache.Cache` expose these as methods; this module holds their bodies.
"""

from __future__ import annotations

import ctypes
from ctypes import byref, c_size_t, sizeof
from typing import Any, Optional

import numpy as np

from . import _lib as L
from ._config import TensorView
from ._enums import Backend, CompressKind
from ._tensor import (
    DTYPE_BF16,
    DTYPE_FP32,
    as_tensor,
    check_device,
    check_dtype,
    check_shape,
    empty_like_kind,
    torch_stream,
)
from ._util import _check, _lib, _u32
from .errors import FailedPreconditionError, InvalidArgumentError

#: One closing window (``swa_compress_window_t``, 40 bytes) as a NumPy record:
#: ``entry`` is the entry's absolute index w (write it there, overwriting the entry
#: of a rewound window), ``position`` its RoPE position w * c; the window's S slots
#: (c for HCA, 2c for CSA) split into ``n_missing`` slots without a row, ``n_ring``
#: from the ring (rows ``(ring_row + j) % compress_len`` of ``slot``, before the
#: step's store) and ``n_new`` from the step's batch rows ``new_row + j``.
WINDOW_DTYPE = np.dtype([("seq", "<u4"), ("slot", "<u4"), ("entry", "<i4"), ("position", "<i4"),
                         ("first_position", "<i4"), ("n_missing", "<i4"), ("n_ring", "<i4"),
                         ("ring_row", "<i4"), ("n_new", "<i4"), ("new_row", "<i4")])
assert WINDOW_DTYPE.itemsize == sizeof(L.CompressWindow)


def entry_widths(layer: Any, compressor: int) -> Optional[tuple]:
    """(row width S, entry width d) of a layer's compressor, or None when the layer
    has no typed compressor or not that one (the library then names the problem)."""
    kind = CompressKind(int(getattr(layer, "compress_kind", 0)))
    if kind == CompressKind.OPAQUE:
        return None
    if compressor == 0:
        d = int(layer.compress_head_dim)
    elif compressor == 1 and kind == CompressKind.CSA and int(layer.index_head_dim) > 0:
        d = int(layer.index_head_dim)
    else:
        return None
    return (2 * d if kind == CompressKind.CSA else d), d


def windows(plan: Any, layer: int) -> np.ndarray:
    lay = _u32("layer", layer)
    n = c_size_t()
    _check(plan._call(_lib.swa_plan_compress_windows, lay, None, 0, byref(n)))
    arr = np.zeros(n.value, WINDOW_DTYPE)
    if n.value:
        _check(plan._call(_lib.swa_plan_compress_windows, lay,
                          arr.ctypes.data_as(ctypes.POINTER(L.CompressWindow)), n.value, byref(n)))
    return arr


def store_segments(plan: Any, layer: int) -> np.ndarray:
    lay = _u32("layer", layer)
    n = c_size_t()
    _check(plan._call(_lib.swa_plan_compress_store_segments, lay, None, 0, byref(n)))
    arr = np.zeros((n.value, 3), np.int32)
    if n.value:
        _check(plan._call(_lib.swa_plan_compress_store_segments, lay,
                          arr.ctypes.data_as(ctypes.POINTER(L.Segment)), n.value, byref(n)))
    return arr


def step(plan: Any, layer: int, kv: Any, gate: Any, position_bias: Any, norm_weight: Any, *,
         compressor: int = 0, norm_eps: float = 1e-6, out: Any = None,
         out_dtype: Optional[int] = None, stream: Optional[int] = None) -> Any:
    lay, comp = _u32("layer", layer), _u32("compressor", compressor)
    cache = plan.cache
    a = L.CompressArgs()
    _lib.swa_compress_args_init(byref(a))
    a.layer, a.compressor = lay, comp
    if lay >= len(cache._descs):
        _check(plan._cache_plan_call(_lib.swa_compress_step, byref(a)))
    widths = entry_widths(cache._descs[lay], comp)
    if widths is None:  # let the library name what is wrong with the layer
        _check(plan._cache_plan_call(_lib.swa_compress_step, byref(a)))
        raise InvalidArgumentError(f"layer {lay}: no typed compressor {comp}")  # not reached
    S, d = widths
    c = int(cache._descs[lay].compress_ratio)
    T = plan.info().n_tokens
    n_win = len(windows(plan, lay))
    cuda = cache.backend == Backend.CUDA
    tkv, tgate = as_tensor("kv", kv), as_tensor("gate", gate)
    dt = check_dtype(tkv, (DTYPE_FP32, DTYPE_BF16))
    if check_dtype(tgate, (DTYPE_FP32, DTYPE_BF16)) != dt:
        raise InvalidArgumentError(f"gate: dtype {tgate.np_dtype} differs from kv's {tkv.np_dtype}")
    check_shape(tkv, (T, S), "(T, S)")
    check_shape(tgate, (T, S), "(T, S)")
    tb, tw = as_tensor("position_bias", position_bias), as_tensor("norm_weight", norm_weight)
    check_dtype(tb, (DTYPE_FP32,))
    check_dtype(tw, (DTYPE_FP32,))
    check_shape(tb, (c, S), "(compress_ratio, S)")
    check_shape(tw, (d,), "(d,)")
    if out is None:
        out = empty_like_kind(tkv, (n_win, d), int(out_dtype) if out_dtype is not None
                              else DTYPE_FP32)
    to = as_tensor("out", out, writable=True)
    o_dt = check_dtype(to, (DTYPE_FP32, DTYPE_BF16))
    if len(to.shape) != 2 or to.shape[1] != d or to.shape[0] < n_win:
        raise InvalidArgumentError(f"out: expected shape (n >= {n_win} closing windows, d = {d}),"
                                   f" got {to.shape}")
    tensors = [tkv, tgate, tb, tw, to]
    for t in tensors:
        check_device(t, cuda)
    a.kv, a.gate, a.dtype, a.row_width, a.rows = tkv.ptr, tgate.ptr, dt, S, T
    a.position_bias, a.norm_weight, a.norm_eps = tb.ptr, tw.ptr, float(norm_eps)
    a.out, a.out_dtype, a.out_rows = to.ptr, o_dt, int(to.shape[0])
    a.stream = stream if stream is not None else (torch_stream(tensors) if cuda else None)
    _check(plan._cache_plan_call(_lib.swa_compress_step, byref(a)))
    return out


def view(cache: Any, layer: int, compressor: int = 0) -> TensorView:
    out = L.TensorView(struct_size=sizeof(L.TensorView))
    _check(cache._call(_lib.swa_cache_compress_view, _u32("layer", layer),
                       _u32("compressor", compressor), byref(out)))
    n = out.ndim
    return TensorView(int(out.data or 0), Backend(out.backend), out.device, tuple(out.shape[:n]),
                      tuple(out.strides[:n]))


def ring(cache: Any, layer: int, compressor: int = 0) -> np.ndarray:
    v = view(cache, layer, compressor)
    if v.backend != Backend.CPU:
        raise FailedPreconditionError("compress_ring(): the pool is in device memory; use "
                                      "compress_view() for its address")
    assert cache._life is not None
    return np.asarray(cache._life.pin({"shape": v.shape, "typestr": "|u1",
                                       "data": (v.data, False), "strides": v.strides,
                                       "version": 3}))


def set_save(cache: Any, enable: bool) -> None:
    _check(cache._call(_lib.swa_cache_set_save_compression, 1 if enable else 0))
