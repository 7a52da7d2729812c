"""Authenticated blobs and tenant namespaces (issue 33): Config.store_secret
and Config.store_namespace, through two caches sharing one directory store."""

import numpy as np
import pytest

import swacache as sc
from helpers import layer

W = 8
SECRET = b"0123456789abcdef0123456789abcdef"


def filled_cache(path, **kw):
    c = sc.Cache(window=W, max_slots=4, layers=[layer()], **kw)
    c.set_store(sc.DirectoryStore(str(path), sync=False))
    s = c.alloc()
    r = np.random.default_rng(len(kw))
    with c.plan() as p:
        p.build([(s, 6, 6)])
        p.step(0, r.standard_normal((6, 4, 32)).astype(np.float32),
               r.standard_normal((6, 2, 32)).astype(np.float32),
               r.standard_normal((6, 2, 32)).astype(np.float32))
    return c, s


def test_tagged_blobs_need_the_same_secret(tmp_path):
    a, s = filled_cache(tmp_path, store_secret=SECRET)
    with a:
        before = a.ring(0)[int(s)].copy()
        s.save(b"req")
        # the same secret reads it back, bit for bit
        t = a.alloc()
        t.restore(b"req")
        np.testing.assert_array_equal(a.ring(0)[int(t)], before)
        for kw in ({}, {"store_secret": b"another secret of 32 bytes......"}):
            b, u = filled_cache(tmp_path, **kw)
            with b:
                ring = b.ring(0)[int(u)].copy()
                with pytest.raises(sc.DataLossError):
                    u.restore(b"req")
                np.testing.assert_array_equal(b.ring(0)[int(u)], ring)  # untouched
                u.save(b"plain")
        # an untagged blob is refused by a cache with a secret
        ring = a.ring(0)[int(t)].copy()
        with pytest.raises(sc.DataLossError):
            t.restore(b"plain")
        np.testing.assert_array_equal(a.ring(0)[int(t)], ring)


def test_secret_is_checked_and_not_printed():
    with pytest.raises(sc.InvalidArgumentError, match="store_secret_len = 15"):
        sc.Cache(window=W, max_slots=1, layers=[layer()], store_secret=b"x" * 15)
    with pytest.raises(sc.InvalidArgumentError):
        sc.Cache(window=W, max_slots=1, layers=[layer()], store_secret="not bytes")
    with pytest.raises(sc.InvalidArgumentError, match="store_namespace_len = 257"):
        sc.Cache(window=W, max_slots=1, layers=[layer()], store_namespace=b"n" * 257)
    cfg = sc.Config(layers=[layer()], store_secret=SECRET)
    assert "0123456789" not in repr(cfg)


def test_namespaces_isolate_equal_keys(tmp_path):
    a, s = filled_cache(tmp_path, store_namespace=b"tenant-a")
    b, u = filled_cache(tmp_path, store_namespace=b"tenant-b", store_secret=SECRET)
    with a, b:
        s.save(b"shared")
        assert a.store_exists(b"shared")
        assert not b.store_exists(b"shared")
        assert b.store_probe([b"x", b"shared"]) == -1
        assert a.store_probe([b"x", b"shared"]) == 1
        with pytest.raises(sc.NotFoundError):
            u.restore(b"shared")
        with pytest.raises(sc.NotFoundError):
            b.store_remove(b"shared")
        b_ring = b.ring(0)[int(u)].copy()
        u.save(b"shared")
        a_ring = a.ring(0)[int(s)].copy()
        t = a.alloc()
        t.restore(b"shared")
        np.testing.assert_array_equal(a.ring(0)[int(t)], a_ring)
        v = b.alloc()
        v.restore(b"shared")
        np.testing.assert_array_equal(b.ring(0)[int(v)], b_ring)
        a.store_remove(b"shared")
        assert b.store_exists(b"shared")
