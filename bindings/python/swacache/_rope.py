"""RoPE as a service (``swa_rope_table``, ``swa_rope_apply``) and the merge of
two partial attentions without a cache (``swa_attention_merge`` with cache
NULL): calls that need no :class:`Cache`. See docs/semantics.md, "RoPE as a
service" and "Merging partial attentions"."""

from __future__ import annotations

import ctypes
from ctypes import byref
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Tuple

import numpy as np

from . import _lib as L
from ._config import Layer
from ._enums import RopeStyle
from ._tensor import (
    DTYPE_BF16,
    DTYPE_FP32,
    TensorArg,
    as_tensor,
    check_dtype,
    empty_like_kind,
    torch_stream,
)
from ._util import _check, _lib, host_positions
from .errors import InvalidArgumentError


@dataclass(frozen=True)
class RopeInfo:
    """A layer's RoPE as the step applies it (``swa_rope_info_t``)."""

    style: RopeStyle
    first_dim: int
    dims: int
    attention_factor: float
    derotate_output: bool


def _desc(layer: Layer) -> L.LayerDesc:
    if not isinstance(layer, Layer):
        raise InvalidArgumentError(f"layer: expected a swacache.Layer, got {type(layer).__name__}")
    d = L.LayerDesc()
    layer._to_c(d)
    return d


def rope_table(layer: Layer) -> Tuple[np.ndarray, RopeInfo]:
    """``swa_rope_table``: the layer's FP32 frequencies ``inv_freq[rope_dims / 2]``
    (the table every cache with this layer rotates with; empty without RoPE) and
    its :class:`RopeInfo`."""
    d = _desc(layer)
    info = L.RopeInfo()
    info.struct_size = ctypes.sizeof(L.RopeInfo)
    _check(_lib.swa_rope_table(byref(d), None, 0, byref(info)))
    freq = np.zeros(info.dims // 2, np.float32)
    if freq.size:
        _check(_lib.swa_rope_table(byref(d), freq.ctypes.data, freq.size, byref(info)))
    return freq, RopeInfo(RopeStyle(info.style), int(info.first_dim), int(info.dims),
                          float(info.attention_factor), bool(info.derotate_output))


def _device_of(tensors: Sequence[TensorArg]) -> int:
    """-1 when every tensor is in host memory, the CUDA ordinal when every one is
    on that device; InvalidArgumentError naming the first that differs."""
    first = tensors[0]
    want = -1 if first.device == "cpu" else int(first.device_index)
    for t in tensors[1:]:
        dev = -1 if t.device == "cpu" else int(t.device_index)
        if dev != want:
            where = lambda d: "host memory" if d < 0 else f"CUDA device {d}"  # noqa: E731
            raise InvalidArgumentError(f"{t.name}: in {where(dev)} but {first.name} is in "
                                       f"{where(want)}")
    return want


def rope_apply(layer: Layer, x: Any, positions: Any, *, inverse: bool = False,
               stream: Optional[int] = None) -> Any:
    """``swa_rope_apply``: rotate ``x`` ``[tokens, heads, head_dim]`` (float32 or
    bfloat16; NumPy in host memory, or a PyTorch tensor on the CPU or a CUDA
    device) in place with the layer's RoPE at ``positions`` ``[tokens]``, bit for
    bit as the step rotates q and k (``inverse=False``: with the attention
    factor) or its output back (``inverse=True``: minus the position, no factor).
    Returns ``x``."""
    d = _desc(layer)
    tx = as_tensor("x", x, writable=True)
    dt = check_dtype(tx, (DTYPE_FP32, DTYPE_BF16))
    if len(tx.shape) != 3 or tx.shape[2] != int(layer.head_dim):
        raise InvalidArgumentError(f"x: expected shape (tokens, heads, {layer.head_dim}), got "
                                   f"{tx.shape}")
    tokens, heads = tx.shape[0], tx.shape[1]
    pos = host_positions("positions", positions, tokens)
    dev = _device_of([tx])
    a = L.RopeArgs()
    _lib.swa_rope_args_init(byref(a))
    a.layer = ctypes.addressof(d)
    a.x, a.dtype, a.heads, a.tokens = tx.ptr, dt, heads, tokens
    a.positions = pos.ctypes.data if pos.size else None
    a.inverse = 1 if inverse else 0
    a.device = dev
    a.stream = stream if stream is not None else (torch_stream([tx]) if dev >= 0 else None)
    _check(_lib.swa_rope_apply(byref(a)))
    return x


def _span(t: TensorArg) -> Tuple[int, int]:
    return t.ptr, t.ptr + t.numel * t.itemsize


def _check_merge_overlaps(ta: TensorArg, tb: TensorArg, tla: TensorArg, tlb: TensorArg,
                          to: TensorArg, tl: Optional[TensorArg]) -> None:
    """An output may be exactly one of its inputs (out: out_a or out_b; lse: lse_a
    or lse_b), never overlap anything else: the merge reads rows after writing
    earlier ones, so a shifted output returned OK with wrong values."""
    pairs = [(to, ta, True), (to, tb, True), (to, tla, False), (to, tlb, False)]
    if tl is not None:
        pairs += [(tl, tla, True), (tl, tlb, True), (tl, ta, False), (tl, tb, False),
                  (tl, to, False)]
    for o, i, exact_ok in pairs:
        (o0, o1), (i0, i1) = _span(o), _span(i)
        if o0 < i1 and i0 < o1 and not (exact_ok and (o0, o1) == (i0, i1)):
            raise InvalidArgumentError(f"{o.name}: overlaps {i.name} without being it (an "
                                       "output may only be exactly one of its inputs)")


def merge_args(out_a: Any, lse_a: Any, out_b: Any, lse_b: Any, out: Any,
               lse: Any) -> Tuple[L.MergeArgs, Any, Sequence[TensorArg]]:
    """The checked ``swa_merge_args_t`` of a merge, the output, and the tensors."""
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
    _check_merge_overlaps(ta, tb, tla, tlb, to, tl)
    args = L.MergeArgs()
    _lib.swa_merge_args_init(byref(args))
    args.rows, args.head_dim, args.dtype = rows, head_dim, dt
    args.out_a, args.lse_a, args.out_b, args.lse_b = ta.ptr, tla.ptr, tb.ptr, tlb.ptr
    args.out = to.ptr
    args.lse = tl.ptr if tl is not None else None
    return args, out, tensors


def attention_merge(out_a: Any, lse_a: Any, out_b: Any, lse_b: Any, *, out: Any = None,
                    lse: Any = None, stream: Optional[int] = None) -> Any:
    """``swa_attention_merge`` without a cache: as :meth:`Cache.attention_merge`,
    on host memory (NumPy or CPU tensors, merged on the calling thread) or on the
    CUDA device that holds every tensor (on ``stream``, default PyTorch's current
    one). Returns ``out``."""
    args, out, tensors = merge_args(out_a, lse_a, out_b, lse_b, out, lse)
    args.device = _device_of(tensors)
    args.stream = stream if stream is not None else torch_stream(tensors)
    _check(_lib.swa_attention_merge(None, byref(args)))
    return out
