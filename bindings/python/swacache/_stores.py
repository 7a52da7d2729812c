"""Stores: the built-in ones (memory, directory, Redis, Redis Cluster, tiered).
The :class:`Store` base class for stores written in Python, and the callback
table that drives them, are in :mod:`swacache._store_callbacks` (re-exported
here)."""

from __future__ import annotations

import ctypes
import enum
import os
import threading
import weakref
from ctypes import byref, c_int32, c_size_t, c_uint32, c_uint64, c_void_p, sizeof
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

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

from ._util import _check, _i32, _int, _key, _lib, _struct_dict, _u32  # noqa: F401
from ._store_callbacks import _REGISTRY, Store, _register, live_python_stores  # noqa: F401

# ---- stores --------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryStoreStats:
    """``swa_store_memory_stats_t``."""

    budget_bytes: int
    bytes: int
    entries: int
    puts: int
    rejected_puts: int
    hits: int
    misses: int
    evictions: int
    evicted_bytes: int


@dataclass(frozen=True)
class TierStats:
    """``swa_store_tier_stats_t``."""

    hits: int
    misses: int
    errors: int
    bytes_read: int
    puts: int
    bytes_written: int
    promotions: int


class BuiltinStore:
    """A store implemented by the library (memory, directory, Redis, Redis
    Cluster, tiered). The object owns the store until it is attached with
    :meth:`Cache.set_store` (or made a tier of a :class:`TieredStore`); then
    the cache (or the tiered store) owns it. :meth:`close` drops a store that
    was never attached."""

    _kind = "builtin"

    def __init__(self, table: L.KvStore) -> None:
        self._table: Optional[L.KvStore] = table
        self._state = "owned"  # owned | handing over | attached | tier | released
        self._owner: Any = None
        # Makes the hand-over atomic: two threads attaching one store (to two
        # caches, or a cache and a tiered store), or a close() racing an
        # attach, would otherwise both pass the "owned" check while the GIL is
        # released in the C call, and two owners release the table twice.
        self._hand_lock = threading.Lock()

    # ownership transitions
    def _take(self, what: str) -> L.KvStore:
        with self._hand_lock:
            if self._state != "owned" or self._table is None:
                raise FailedPreconditionError(f"{what}: this {self._kind} store is "
                                              f"{self._state}; a store can be handed over once")
            self._state = "handing over"
            return self._table

    def _untake(self, table: L.KvStore) -> None:
        with self._hand_lock:
            self._state = "owned"

    def _attached_to(self, cache: Cache) -> None:
        self._state, self._owner = "attached", weakref.ref(cache)

    def _tier_of(self, parent: "TieredStore") -> None:
        self._state, self._owner = "tier", parent

    def _mark_released(self) -> None:
        self._state, self._owner = "released", None

    def _alive(self) -> bool:
        if self._state == "owned":
            return True
        if self._state == "attached":
            cache = self._owner()
            return cache is not None and not cache.closed and cache._store is self
        if self._state == "tier":
            return bool(self._owner._alive())
        return False

    @property
    def state(self) -> str:
        """"owned" (by this object), "attached" (to a cache), "tier" (of a tiered
        store) or "released"."""
        return self._state if self._alive() or self._state == "owned" else "released"

    def _live_table(self) -> L.KvStore:
        """The table while the store is alive (for tests that drive it directly;
        the binding's own reads go through _with_table)."""
        if not self._alive() or self._table is None:
            raise self._released_error()
        return self._table

    def _released_error(self) -> ClosedError:
        return ClosedError(f"this {self._kind} store was released (its cache or tiered store "
                           "is closed, or it was replaced)")

    def _with_table(self, fn: Callable[[L.KvStore], Any]) -> Any:
        """``fn(table)`` while the table cannot be released under it: an owned
        store holds off close() and hand-overs; an attached one runs as a
        counted call on its cache (close() waits for it) under the cache's
        store lock (no set_store replaces it meanwhile); a tier under its
        parent's protection. Checking first and calling after let another
        thread's close() free the table during the call."""
        with self._hand_lock:
            state, owner, table = self._state, self._owner, self._table
            if state == "owned" and table is not None:
                return fn(table)
        if table is None:
            raise self._released_error()
        if state == "attached":
            cache = owner()
            if cache is None:
                raise self._released_error()
            with cache._lock:
                if cache._store is not self or cache._store_changing:
                    # Replaced, or being replaced by this very thread (a
                    # release callback of the set_store): the table may go.
                    raise self._released_error()
                try:
                    return cache._call(lambda _h: fn(table))
                except ClosedError:
                    raise self._released_error() from None
        if state == "tier":
            return owner._with_table(lambda _parent_table: fn(table))
        raise self._released_error()

    def close(self) -> None:
        """Drop a store that was never handed over (calls its ``release``)."""
        self._release_if_owned()

    def _release_if_owned(self) -> bool:
        with self._hand_lock:
            if self._state != "owned" or self._table is None:
                return False
            t, self._table = self._table, None
            self._state = "released"
        if t.release:
            t.release(t.user_data)
        return True

    def __enter__(self) -> "BuiltinStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass


class MemoryStore(BuiltinStore):
    """``swa_store_memory_create``: in-process, LRU within ``budget_bytes``."""

    _kind = "memory"

    def __init__(self, budget_bytes: Optional[int] = None) -> None:
        c = L.MemoryConfig()
        _lib.swa_store_memory_config_init(byref(c))
        if budget_bytes is not None:
            b = _int("budget_bytes", budget_bytes)
            if not 0 <= b < 2**64:
                raise InvalidArgumentError(f"budget_bytes: must be in [0, 2**64), got {b}")
            c.budget_bytes = b
        t = L.KvStore()
        _lib.swa_kv_store_init(byref(t))
        _check(_lib.swa_store_memory_create(byref(c), byref(t)))
        super().__init__(t)

    def stats(self) -> MemoryStoreStats:
        """``swa_store_memory_stats`` (while the store is alive)."""
        out = L.MemoryStats(struct_size=sizeof(L.MemoryStats))
        _check(self._with_table(lambda t: _lib.swa_store_memory_stats(byref(t), byref(out))))
        return MemoryStoreStats(**_struct_dict(out))


class DirectoryStore(BuiltinStore):
    """``swa_store_directory_create``: one file per key under ``path``."""

    _kind = "directory"

    def __init__(self, path: str, *, create: bool = True, sync: bool = True) -> None:
        c = L.DirectoryConfig()
        _lib.swa_store_directory_config_init(byref(c))
        c.path = _cstr("path", path, path=True)
        c.create, c.sync = int(bool(create)), int(bool(sync))
        t = L.KvStore()
        _lib.swa_kv_store_init(byref(t))
        _check(_lib.swa_store_directory_create(byref(c), byref(t)))
        super().__init__(t)
        self.path = path


def _cstr(name: str, v: Optional[Union[str, bytes, "os.PathLike[str]"]], *,
          path: bool = False) -> Optional[bytes]:
    """``v`` as the bytes of a C string (None stays None): a NUL byte is refused
    (InvalidArgumentError naming ``name``) instead of cutting the string short
    there (a password "pw\\0rest" became "pw", a path "/a\\0/b" became "/a")."""
    if v is None:
        return None
    try:
        b = os.fsencode(v) if path else (v if isinstance(v, bytes) else v.encode())
    except (TypeError, AttributeError):
        raise InvalidArgumentError(f"{name}: expected a string, got {type(v).__name__}") from None
    if b"\0" in b:
        raise InvalidArgumentError(f"{name} contains a NUL byte")
    return b


def _redis_security(c, username: Optional[str], tls: bool, tls_verify: bool,
                    tls_ca_file: Optional[str], tls_ca_dir: Optional[str],
                    tls_cert_file: Optional[str], tls_key_file: Optional[str],
                    tls_server_name: Optional[str]) -> None:
    """Fills the ACL user and TLS fields of a Redis or Redis Cluster config
    (ctypes keeps the encoded strings alive with the struct)."""

    c.username = _cstr("username", username)
    c.tls, c.tls_verify = int(bool(tls)), int(bool(tls_verify))
    c.tls_ca_file = _cstr("tls_ca_file", tls_ca_file, path=True)
    c.tls_ca_dir = _cstr("tls_ca_dir", tls_ca_dir, path=True)
    c.tls_cert_file = _cstr("tls_cert_file", tls_cert_file, path=True)
    c.tls_key_file = _cstr("tls_key_file", tls_key_file, path=True)
    c.tls_server_name = _cstr("tls_server_name", tls_server_name)


class RedisStore(BuiltinStore):
    """``swa_store_redis_create`` (experimental).

    ``username``: an ACL user (``AUTH username password``). ``tls=True``:
    TLS to the server, its certificate verified against ``tls_ca_file`` /
    ``tls_ca_dir`` (else the system CAs) and ``tls_server_name`` (else
    ``host``) unless ``tls_verify=False``; ``tls_cert_file`` /
    ``tls_key_file``: a client certificate. A certificate that fails
    verification or a wrong user raises :class:`UnauthenticatedError`, an ACL
    user lacking a command :class:`PermissionDeniedError` (docs/store.md,
    "Redis TLS and ACL users")."""

    _kind = "redis"

    def __init__(self, host: str = "127.0.0.1", port: int = 6379, *, db: int = 0,
                 password: Optional[str] = None, ttl_seconds: int = 0, timeout_ms: int = 5000,
                 max_connections: int = 8, username: Optional[str] = None, tls: bool = False,
                 tls_verify: bool = True, tls_ca_file: Optional[str] = None,
                 tls_ca_dir: Optional[str] = None, tls_cert_file: Optional[str] = None,
                 tls_key_file: Optional[str] = None,
                 tls_server_name: Optional[str] = None) -> None:
        c = L.RedisConfig()
        _lib.swa_store_redis_config_init(byref(c))
        c.host = _cstr("host", host)
        c.port, c.db = _u32("port", port), _u32("db", db)
        c.password = _cstr("password", password)
        c.ttl_seconds, c.timeout_ms = _u32("ttl_seconds", ttl_seconds), _u32("timeout_ms",
                                                                              timeout_ms)
        c.max_connections = _u32("max_connections", max_connections)
        _redis_security(c, username, tls, tls_verify, tls_ca_file, tls_ca_dir,
                        tls_cert_file, tls_key_file, tls_server_name)
        t = L.KvStore()
        _lib.swa_kv_store_init(byref(t))
        _check(_lib.swa_store_redis_create(byref(c), byref(t)))
        super().__init__(t)


class RedisClusterStore(BuiltinStore):
    """``swa_store_redis_cluster_create`` (experimental). ``username`` and the
    ``tls*`` arguments as :class:`RedisStore`'s; with ``tls=True`` every node
    (seeds, slot map, MOVED/ASK targets) is reached over TLS and, without
    ``tls_server_name``, checked against its address."""

    _kind = "redis cluster"

    def __init__(self, nodes: str = "127.0.0.1:7000", *, password: Optional[str] = None,
                 ttl_seconds: int = 0, timeout_ms: int = 5000, connections_per_node: int = 4,
                 read_from_replicas: bool = False, max_attempts: int = 16,
                 username: Optional[str] = None, tls: bool = False, tls_verify: bool = True,
                 tls_ca_file: Optional[str] = None, tls_ca_dir: Optional[str] = None,
                 tls_cert_file: Optional[str] = None, tls_key_file: Optional[str] = None,
                 tls_server_name: Optional[str] = None) -> None:
        c = L.RedisClusterConfig()
        _lib.swa_store_redis_cluster_config_init(byref(c))
        c.nodes = _cstr("nodes", nodes)
        c.password = _cstr("password", password)
        c.ttl_seconds, c.timeout_ms = _u32("ttl_seconds", ttl_seconds), _u32("timeout_ms",
                                                                              timeout_ms)
        c.connections_per_node = _u32("connections_per_node", connections_per_node)
        c.read_from_replicas = int(bool(read_from_replicas))
        c.max_attempts = _u32("max_attempts", max_attempts)
        _redis_security(c, username, tls, tls_verify, tls_ca_file, tls_ca_dir,
                        tls_cert_file, tls_key_file, tls_server_name)
        t = L.KvStore()
        _lib.swa_kv_store_init(byref(t))
        _check(_lib.swa_store_redis_cluster_create(byref(c), byref(t)))
        super().__init__(t)


class TieredStore(BuiltinStore):
    """``swa_store_tiered_create`` (experimental): ``tiers`` fastest first
    (built-in stores or :class:`Store` subclasses). On success the tiered store
    owns every tier."""

    _kind = "tiered"

    def __init__(self, tiers: Sequence[Union[BuiltinStore, "Store"]]) -> None:
        tiers = list(tiers)
        arr = (L.KvStore * max(1, len(tiers)))()
        uids: List[int] = []
        taken: List[BuiltinStore] = []
        try:
            for i, s in enumerate(tiers):
                if isinstance(s, BuiltinStore):
                    if any(s is x for x in taken):
                        raise InvalidArgumentError(f"tiers[{i}]: the same {s._kind} store "
                                                   "is given twice")
                    table = s._take(f"tiers[{i}]")
                    taken.append(s)
                    ctypes.memmove(byref(arr[i]), byref(table), sizeof(L.KvStore))
                elif isinstance(s, Store):
                    table, uid = _register(s)
                    uids.append(uid)
                    ctypes.memmove(byref(arr[i]), byref(table), sizeof(L.KvStore))
                else:
                    raise InvalidArgumentError(f"tiers[{i}]: expected a store, got "
                                               f"{type(s).__name__}")
            c = L.TieredConfig()
            _lib.swa_store_tiered_config_init(byref(c))
            c.tiers = ctypes.cast(arr, ctypes.POINTER(L.KvStore)) if tiers else None
            c.n_tiers = len(tiers)
            t = L.KvStore()
            _lib.swa_kv_store_init(byref(t))
            _check(_lib.swa_store_tiered_create(byref(c), byref(t)))
        except BaseException:
            for uid in uids:
                _REGISTRY.pop(uid, None)
            for s in taken:
                s._untake(s._table)
            raise
        super().__init__(t)
        self.tiers = tiers
        for s in tiers:
            if isinstance(s, BuiltinStore):
                s._tier_of(self)

    def tier_stats(self, tier: int) -> TierStats:
        """``swa_store_tiered_stats``."""
        out = L.TierStats(struct_size=sizeof(L.TierStats))
        i = _u32("tier", tier)
        _check(self._with_table(lambda t: _lib.swa_store_tiered_stats(byref(t), i, byref(out))))
        return TierStats(**_struct_dict(out))

    def close(self) -> None:
        if self._release_if_owned():
            for s in self.tiers:
                if isinstance(s, BuiltinStore):
                    s._mark_released()
