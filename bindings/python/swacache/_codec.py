"""The standalone codec (experimental in the C API)."""

from __future__ import annotations

from ctypes import byref, c_char_p, c_uint32, c_uint64
from typing import Any, Optional, Tuple

import numpy as np

from ._tensor import as_tensor, check_dtype, check_raw_dtype, DTYPE_BF16, DTYPE_FP32, TensorArg
from .errors import InvalidArgumentError
from ._enums import DType, Format, ScaleMode
from ._util import _check, _lib, _u32


# ---- codec ---------------------------------------------------------------------


def format_vector_bytes(format: Format, dim: int) -> int:
    """``swa_format_vector_bytes``."""
    out = c_uint32()
    _check(_lib.swa_format_vector_bytes(int(format), _u32("dim", dim), byref(out)))
    return out.value


def codec_cpu_path() -> str:
    """``swa_codec_cpu_path``: "avx512", "avx2" or "scalar"."""
    return _lib.swa_codec_cpu_path().decode()


def attention_cpu_path(q_dtype: DType = DType.BF16) -> str:
    """``swa_attention_cpu_path``: the CPU attention path ``step`` takes for
    queries of ``q_dtype`` ("amx_bf16", "avx512_bf16", "avx512_wide",
    "avx512", "avx2_fma" or "portable"; docs/cpu_attention.md). Experimental."""
    name = c_char_p()
    _check(_lib.swa_attention_cpu_path(int(q_dtype), byref(name)))
    return name.value.decode()


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
    dim = _u32("dim", dim) if dim is not None else (t0.shape[-1] if t0.shape else 0)
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
    dim = _u32("dim", dim) if dim is not None else (t0.shape[-1] if t0.shape else 0)
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
    dim = _u32("dim", dim)
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
