"""ctypes declarations of the store half of ``include/swacache.h``: the
callback store table and the built-in stores' configurations and statistics.
Re-exported by :mod:`swacache._lib`; nothing here is public API.
"""

from __future__ import annotations

from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_char_p,
    c_int,
    c_size_t,
    c_uint8,
    c_uint32,
    c_uint64,
    c_void_p,
)

c_status = c_int  # swa_status_t, as in _lib

# Appended to both Redis configurations after 0.2.0: ACL user and TLS
# (docs/store.md, "Redis TLS and ACL users").
_REDIS_SECURITY = [
    ("username", c_char_p),
    ("tls", c_uint32),
    ("tls_verify", c_uint32),
    ("tls_ca_file", c_char_p),
    ("tls_ca_dir", c_char_p),
    ("tls_cert_file", c_char_p),
    ("tls_key_file", c_char_p),
    ("tls_server_name", c_char_p),
]


class Iov(Structure):
    _fields_ = [("data", c_void_p), ("size", c_size_t)]


PUT_FN = CFUNCTYPE(c_status, c_void_p, POINTER(c_uint8), c_size_t, POINTER(Iov), c_size_t,
                   c_void_p, c_size_t)
GET_FN = CFUNCTYPE(c_status, c_void_p, POINTER(c_uint8), c_size_t, POINTER(Iov), c_size_t,
                   POINTER(c_uint64), c_void_p, c_size_t)
EXISTS_FN = CFUNCTYPE(c_status, c_void_p, POINTER(c_uint8), c_size_t, POINTER(c_uint32),
                      c_void_p, c_size_t)
REMOVE_FN = CFUNCTYPE(c_status, c_void_p, POINTER(c_uint8), c_size_t, c_void_p, c_size_t)
RELEASE_FN = CFUNCTYPE(None, c_void_p)


class KvStore(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("user_data", c_void_p),
        ("put", PUT_FN),
        ("get", GET_FN),
        ("exists", EXISTS_FN),
        ("remove", REMOVE_FN),
        ("release", RELEASE_FN),
    ]


class MemoryConfig(Structure):
    _fields_ = [("struct_size", c_size_t), ("budget_bytes", c_uint64)]


class MemoryStats(Structure):
    _fields_ = [("struct_size", c_size_t)] + [
        (n, c_uint64)
        for n in ("budget_bytes", "bytes", "entries", "puts", "rejected_puts", "hits", "misses",
                  "evictions", "evicted_bytes")
    ]


class DirectoryConfig(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("path", c_char_p),
        ("create", c_uint32),
        ("sync", c_uint32),
    ]


class RedisConfig(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("host", c_char_p),
        ("port", c_uint32),
        ("db", c_uint32),
        ("password", c_char_p),
        ("ttl_seconds", c_uint32),
        ("timeout_ms", c_uint32),
        ("max_connections", c_uint32),
    ] + _REDIS_SECURITY


class RedisClusterConfig(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("nodes", c_char_p),
        ("password", c_char_p),
        ("ttl_seconds", c_uint32),
        ("timeout_ms", c_uint32),
        ("connections_per_node", c_uint32),
        ("read_from_replicas", c_uint32),
        ("max_attempts", c_uint32),
    ] + _REDIS_SECURITY


class TieredConfig(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("tiers", POINTER(KvStore)),
        ("n_tiers", c_size_t),
    ]


class TierStats(Structure):
    _fields_ = [("struct_size", c_size_t)] + [
        (n, c_uint64)
        for n in ("hits", "misses", "errors", "bytes_read", "puts", "bytes_written", "promotions")
    ]
