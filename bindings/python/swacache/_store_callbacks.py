"""Stores written in Python: the :class:`Store` base class and the C callback
table through which the library drives its subclasses (one registry entry per
table handed to the library, trampolines that never let an exception reach C).
The built-in stores are in :mod:`swacache._stores`."""

from __future__ import annotations

import ctypes
import itertools
from ctypes import byref
from typing import Dict, Optional, Tuple

from . import _lib as L
from ._util import _lib
from .errors import Error, InvalidArgumentError, Status


class Store:
    """Base class of stores written in Python, driven through the C callback table.

    Override ``put`` and/or ``get`` (at least one), and optionally ``exists``
    and ``remove``; a method left as inherited is a NULL entry, which makes the
    library answer UNIMPLEMENTED. Keys are ``bytes`` (the library prefixes the
    engine's key with the layout fingerprint and a colon). Callbacks run on the
    thread that called save/restore/store_exists/store_remove, so a store used
    from several threads must be thread-safe.

    Errors: raise a :class:`swacache.Error` subclass to return its code and
    message; any other exception becomes UNKNOWN with ``"Type: text"`` as the
    message. Nothing escapes into C. :meth:`release` is called exactly once
    when the library drops the store (replaced, detached, cache closed).
    """

    def put(self, key: bytes, value: bytes) -> None:
        """Store ``value`` under ``key`` (replacing any blob)."""
        raise NotImplementedError

    def get(self, key: bytes) -> Optional[bytes]:
        """The blob under ``key``, or None when missing (NOT_FOUND)."""
        raise NotImplementedError

    def exists(self, key: bytes) -> bool:
        """Whether a blob is stored under ``key``."""
        raise NotImplementedError

    def remove(self, key: bytes) -> None:
        """Delete the blob under ``key``; raise :class:`NotFoundError` when missing."""
        raise NotImplementedError

    def release(self) -> None:
        """Called once when the library drops this store."""


_REGISTRY: Dict[int, Store] = {}
_IDS = itertools.count(1)


def _write_message(msg_ptr: int, cap: int, text: str) -> None:
    if not msg_ptr or cap <= 0:
        return
    b = text.encode("utf-8", "replace")[: cap - 1]
    ctypes.memmove(msg_ptr, b + b"\0", len(b) + 1)


def _error_status(e: BaseException) -> int:
    """The status a callback returns for ``e``: an Error's code when it is a
    failure status, else UNKNOWN. ctypes keeps only the low 32 bits of the
    callback's int (an Error whose code was set to 2**40 returned OK) and
    returns an undefined value when computing it raises (``code = None``)."""
    try:
        if isinstance(e, Error):
            code = Status(int(e.code))
            if code != Status.OK:
                return int(code)
    except BaseException:  # noqa: BLE001 - a code that is not a status
        pass
    return int(Status.UNKNOWN)


def _fail(e: BaseException, msg_ptr: int, cap: int) -> int:
    status = _error_status(e)
    try:
        if isinstance(e, Error) and isinstance(e.message, str):
            text = e.message
        else:
            text = f"{type(e).__name__}: {e}"
    except BaseException:  # noqa: BLE001 - an exception whose str() raises
        text = f"{type(e).__name__} (its message could not be read)"
    try:
        _write_message(msg_ptr, cap, text)
    except BaseException:  # noqa: BLE001 - nothing may escape into C
        pass
    return status


def _store_of(ud: Optional[int]) -> Store:
    s = _REGISTRY.get(int(ud or 0))
    if s is None:
        raise Error("store callback for an unknown or released store", Status.INTERNAL)
    return s


def _cb_put(ud, key, key_len, iov, n_iov, msg, cap):  # type: ignore[no-untyped-def]
    try:
        k = ctypes.string_at(key, key_len)
        value = b"".join(ctypes.string_at(iov[i].data, iov[i].size) for i in range(n_iov))
        _store_of(ud).put(k, value)
        return 0
    except BaseException as e:  # noqa: BLE001 - never let an exception reach C
        return _fail(e, msg, cap)


def _cb_get(ud, key, key_len, iov, n_iov, blob_size, msg, cap):  # type: ignore[no-untyped-def]
    try:
        k = ctypes.string_at(key, key_len)
        data = _store_of(ud).get(k)
        if data is None:
            raise Error("no blob under this key", Status.NOT_FOUND)
        # The blob's bytes as the buffer protocol gives them: a bytes subclass
        # may override __len__ or __bytes__, and copying n bytes from a shorter
        # object than it claims would read past it.
        raw = data if type(data) is bytes else bytes(memoryview(data).cast("B"))
        if len(raw) != blob_size[0]:
            blob_size[0] = len(raw)
            return 0
        off = 0
        for i in range(n_iov):
            n = iov[i].size
            if n:
                ctypes.memmove(iov[i].data, raw[off:off + n], n)
            off += n
        return 0
    except BaseException as e:  # noqa: BLE001
        return _fail(e, msg, cap)


def _cb_exists(ud, key, key_len, exists, msg, cap):  # type: ignore[no-untyped-def]
    try:
        exists[0] = 1 if _store_of(ud).exists(ctypes.string_at(key, key_len)) else 0
        return 0
    except BaseException as e:  # noqa: BLE001
        return _fail(e, msg, cap)


def _cb_remove(ud, key, key_len, msg, cap):  # type: ignore[no-untyped-def]
    try:
        _store_of(ud).remove(ctypes.string_at(key, key_len))
        return 0
    except BaseException as e:  # noqa: BLE001
        return _fail(e, msg, cap)


def _cb_release(ud):  # type: ignore[no-untyped-def]
    s = _REGISTRY.pop(int(ud or 0), None)
    if s is not None:
        try:
            s.release()
        except BaseException:  # noqa: BLE001 - release cannot report
            pass


# The thunks live as long as the module: the library may call them until
# every table is released.
_PUT = L.PUT_FN(_cb_put)
_GET = L.GET_FN(_cb_get)
_EXISTS = L.EXISTS_FN(_cb_exists)
_REMOVE = L.REMOVE_FN(_cb_remove)
_RELEASE = L.RELEASE_FN(_cb_release)


def _overrides(store: Store, name: str) -> bool:
    return getattr(type(store), name) is not getattr(Store, name)


def _register(store: Store) -> Tuple[L.KvStore, int]:
    if not (_overrides(store, "put") or _overrides(store, "get")):
        raise InvalidArgumentError("store: a Store subclass must override put or get")
    uid = next(_IDS)
    t = L.KvStore()
    _lib.swa_kv_store_init(byref(t))
    t.user_data = uid
    if _overrides(store, "put"):
        t.put = _PUT
    if _overrides(store, "get"):
        t.get = _GET
    if _overrides(store, "exists"):
        t.exists = _EXISTS
    if _overrides(store, "remove"):
        t.remove = _REMOVE
    t.release = _RELEASE
    _REGISTRY[uid] = store
    return t, uid


def live_python_stores() -> int:
    """How many Python :class:`Store` tables the library still holds (for tests)."""
    return len(_REGISTRY)
