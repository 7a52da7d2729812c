"""Tensor arguments: NumPy arrays, PyTorch tensors and anything exposing
``__array_interface__``, ``__cuda_array_interface__`` or ``__dlpack__``,
passed to C by address (never copied) after their dtype, shape, contiguity
and device are checked here, with messages that name the argument."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Tuple

import numpy as np

from .errors import InvalidArgumentError

DTYPE_FP32 = 0
DTYPE_BF16 = 1
_DTYPE_NAMES = {DTYPE_FP32: "float32", DTYPE_BF16: "bfloat16"}


@dataclass
class TensorArg:
    """A checked tensor argument: its address and what was found out about it."""

    name: str
    obj: Any
    ptr: int
    dtype: Optional[int]  # DTYPE_FP32 / DTYPE_BF16 / None (another element type)
    np_dtype: str  # element type as text, for messages
    shape: Tuple[int, ...]
    itemsize: int
    device: str  # "cpu" or "cuda"
    device_index: int
    is_torch: bool

    @property
    def numel(self) -> int:
        return int(math.prod(self.shape))


def _is_torch(obj: Any) -> bool:
    return type(obj).__module__.split(".")[0] == "torch" and hasattr(obj, "data_ptr")


def _np_kind(dt: np.dtype) -> Optional[int]:
    if dt == np.float32:
        return DTYPE_FP32
    if dt == np.uint16 or dt.name == "bfloat16":
        return DTYPE_BF16
    return None


def _from_torch(name: str, t: Any, writable: bool) -> TensorArg:
    import torch

    if t.dtype == torch.float32:
        kind: Optional[int] = DTYPE_FP32
    elif t.dtype == torch.bfloat16:
        kind = DTYPE_BF16
    elif t.dtype in (torch.int32, torch.uint8, torch.int64, torch.uint16):
        kind = None
    else:
        kind = None
    if not t.is_contiguous():
        raise InvalidArgumentError(
            f"{name}: the tensor must be contiguous (row-major), got strides {tuple(t.stride())} "
            f"for shape {tuple(t.shape)}; call .contiguous() first")
    if writable and t.requires_grad:
        raise InvalidArgumentError(f"{name}: an output tensor must not require grad")
    dev = t.device.type
    if dev not in ("cpu", "cuda"):
        raise InvalidArgumentError(f"{name}: tensors on device '{t.device}' are not supported "
                                   "(cpu or cuda only)")
    return TensorArg(name, t, int(t.data_ptr()), kind, str(t.dtype).replace("torch.", ""),
                     tuple(int(s) for s in t.shape), int(t.element_size()), dev,
                     int(t.device.index or 0) if dev == "cuda" else -1, True)


def _from_numpy(name: str, a: np.ndarray, writable: bool) -> TensorArg:
    if not a.flags.c_contiguous:
        raise InvalidArgumentError(
            f"{name}: the array must be C-contiguous, got strides {a.strides} for shape "
            f"{a.shape}; use numpy.ascontiguousarray() first")
    if not a.flags.aligned:
        raise InvalidArgumentError(f"{name}: the array is not aligned to its element type")
    if writable and not a.flags.writeable:
        raise InvalidArgumentError(f"{name}: the output array is read-only")
    return TensorArg(name, a, int(a.ctypes.data), _np_kind(a.dtype), a.dtype.name,
                     tuple(int(s) for s in a.shape), int(a.itemsize), "cpu", -1, False)


def _from_cuda_interface(name: str, obj: Any, writable: bool) -> TensorArg:
    iface = obj.__cuda_array_interface__
    shape = tuple(int(s) for s in iface["shape"])
    dt = np.dtype(iface["typestr"])
    strides = iface.get("strides")
    if strides is not None:
        expect, acc = [], dt.itemsize
        for s in reversed(shape):
            expect.append(acc)
            acc *= s
        if tuple(strides) != tuple(reversed(expect)):
            raise InvalidArgumentError(f"{name}: the device array must be C-contiguous")
    ptr, read_only = iface["data"]
    if writable and read_only:
        raise InvalidArgumentError(f"{name}: the output device array is read-only")
    return TensorArg(name, obj, int(ptr), _np_kind(dt), dt.name, shape, dt.itemsize, "cuda", 0,
                     False)


def as_tensor(name: str, obj: Any, *, writable: bool = False) -> TensorArg:
    """Inspect a tensor argument without copying it."""
    if obj is None:
        raise InvalidArgumentError(f"{name}: a tensor is required, got None")
    if isinstance(obj, np.ndarray):
        return _from_numpy(name, obj, writable)
    if _is_torch(obj):
        return _from_torch(name, obj, writable)
    if hasattr(obj, "__cuda_array_interface__"):
        return _from_cuda_interface(name, obj, writable)
    if hasattr(obj, "__array_interface__"):
        return _from_numpy(name, np.asarray(obj), writable)
    if hasattr(obj, "__dlpack__"):
        try:
            arr = np.from_dlpack(obj)
        except Exception as e:  # noqa: BLE001 - report what NumPy said
            raise InvalidArgumentError(f"{name}: cannot view the DLPack tensor: {e}") from e
        return _from_numpy(name, arr, writable)
    raise InvalidArgumentError(
        f"{name}: expected a NumPy array, a PyTorch tensor or an object with "
        f"__array_interface__/__dlpack__, got {type(obj).__name__}")


def check_dtype(t: TensorArg, allowed: Sequence[int]) -> int:
    if t.dtype is None or t.dtype not in allowed:
        names = " or ".join(_DTYPE_NAMES[a] + (" (numpy.uint16 bits)" if a == DTYPE_BF16 else "")
                            for a in allowed)
        raise InvalidArgumentError(f"{t.name}: expected dtype {names}, got {t.np_dtype}")
    return t.dtype


def check_raw_dtype(t: TensorArg, np_dtype: Any) -> None:
    want = np.dtype(np_dtype)
    if t.np_dtype != want.name or t.itemsize != want.itemsize:
        raise InvalidArgumentError(f"{t.name}: expected dtype {want.name}, got {t.np_dtype}")


def check_shape(t: TensorArg, expected: Tuple[int, ...], what: str) -> None:
    """Accept the exact shape, or the same elements with trailing dims flattened
    ((T, H, D) may come as (T, H * D) or (T * H * D,))."""
    if t.shape == tuple(expected):
        return
    total = int(math.prod(expected))
    ok = False
    if t.numel == total:
        for k in range(1, len(expected)):
            head = tuple(expected[:k - 1]) + (int(math.prod(expected[k - 1:])),)
            if t.shape == head:
                ok = True
    if total == 0 and t.numel == 0:
        ok = True
    if not ok:
        raise InvalidArgumentError(
            f"{t.name}: expected shape {what} = {tuple(expected)} (or with trailing dims "
            f"flattened), got {t.shape}")


def check_device(t: TensorArg, cuda: bool) -> None:
    if cuda and t.device != "cuda":
        raise InvalidArgumentError(f"{t.name}: this cache runs on the CUDA backend; pass a "
                                   f"device tensor, got one in host memory")
    if not cuda and t.device != "cpu":
        raise InvalidArgumentError(f"{t.name}: this cache runs on the CPU backend; pass a "
                                   f"host tensor, got one on {t.device}")


def empty_like_kind(ref: TensorArg, shape: Tuple[int, ...], dtype: int) -> Any:
    """A new zero-filled output of `shape` in the library dtype `dtype`, of the same
    kind (NumPy or PyTorch, same device) as `ref`."""
    if ref.is_torch:
        import torch

        tdt = torch.float32 if dtype == DTYPE_FP32 else torch.bfloat16
        return torch.zeros(shape, dtype=tdt, device=ref.obj.device)
    if ref.device == "cuda":
        raise InvalidArgumentError(f"{ref.name}: pass the output tensor explicitly for "
                                   "device arrays that are not PyTorch tensors")
    return np.zeros(shape, dtype=np.float32 if dtype == DTYPE_FP32 else np.uint16)


def torch_stream(tensors: Sequence[TensorArg]) -> Optional[int]:
    """The current CUDA stream of the first PyTorch CUDA tensor, as an address."""
    for t in tensors:
        if t.is_torch and t.device == "cuda":
            import torch

            return int(torch.cuda.current_stream(t.obj.device).cuda_stream)
    return None


def _byte_span(t: TensorArg) -> Tuple[int, int]:
    return t.ptr, t.ptr + t.numel * t.itemsize


def check_no_overlap(outputs: Sequence[Optional[TensorArg]],
                     inputs: Sequence[Optional[TensorArg]],
                     exact_ok: Sequence[Tuple[str, str]] = ()) -> None:
    """Refuse an output whose bytes overlap an input or another output, unless
    the pair (output name, input name) is in ``exact_ok`` and both are exactly
    the same bytes. The library reads inputs after writing earlier output rows,
    so a shifted output would return OK with wrong values."""
    outs = [t for t in outputs if t is not None and t.numel > 0]
    ins = [t for t in inputs if t is not None and t.numel > 0]
    for i, o in enumerate(outs):
        o0, o1 = _byte_span(o)
        for x in ins + outs[i + 1:]:
            x0, x1 = _byte_span(x)
            if o0 < x1 and x0 < o1:
                if (o.name, x.name) in exact_ok and (o0, o1) == (x0, x1):
                    continue
                raise InvalidArgumentError(
                    f"{o.name}: overlaps {x.name}"
                    + (" without being it" if (o.name, x.name) in exact_ok else "")
                    + " (an output may not share memory with another argument)")
