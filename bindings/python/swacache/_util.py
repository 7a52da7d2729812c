"""Helpers shared by the binding's modules: the loaded library, status
checks, integer and key conversions, version calls."""

from __future__ import annotations

import ctypes
import operator
from typing import Any, Dict, Union

import numpy as np

from . import _lib as L
from .errors import Error, error_for, InvalidArgumentError

_lib = L.lib()

# ---- helpers -----------------------------------------------------------------


def _check(status: int) -> None:
    """Raise the Error subclass for a failed status, with the thread's message."""
    if status != 0:
        raise error_for(status, (_lib.swa_last_error() or b"").decode("utf-8", "replace"))


def _int(name: str, v: Any) -> int:
    """``v`` as a Python int: ints, bools, NumPy integers and IntEnums; a float
    (even 3.0), a string or anything else without ``__index__`` is refused
    rather than truncated or parsed."""
    try:
        return operator.index(v)
    except TypeError:
        raise InvalidArgumentError(f"{name}: expected an integer, got {v!r}") from None


def _u32(name: str, v: Any) -> int:
    iv = _int(name, v)
    if not 0 <= iv <= 0xFFFFFFFF:
        raise InvalidArgumentError(f"{name}: {iv} does not fit in uint32")
    return iv


def _i32(name: str, v: Any) -> int:
    iv = _int(name, v)
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


def host_positions(name: str, positions: Any, n: int) -> np.ndarray:
    """``positions`` (a sequence, NumPy array or PyTorch tensor on any device) as
    a contiguous host int32 array of ``n`` values; InvalidArgumentError naming
    ``name`` for another length, a non-integer type or a value outside int32
    (negative values are left to the library, which names them)."""
    if type(positions).__module__.split(".")[0] == "torch":
        positions = positions.detach().cpu().numpy()
    a = np.asarray(positions)
    if a.dtype.kind not in "iu":
        raise InvalidArgumentError(f"{name}: expected integers, got dtype {a.dtype}")
    if a.ndim != 1 or a.shape[0] != n:
        raise InvalidArgumentError(f"{name}: expected shape ({n},), got {a.shape}")
    if a.size and (int(a.max()) > 2**31 - 1 or int(a.min()) < -2**31):
        raise InvalidArgumentError(f"{name}: values must fit int32")
    return np.ascontiguousarray(a, dtype=np.int32)
