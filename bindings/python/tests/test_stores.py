"""Built-in stores, Python stores through the callback table, save/restore."""

import threading

import numpy as np
import pytest

import swacache as sc
from helpers import layer

W = 8


def filled_cache(**kw):
    c = sc.Cache(window=W, max_slots=4, layers=[layer()], **kw)
    s = c.alloc()
    r = np.random.default_rng(0)
    with c.plan() as p:
        p.build([(s, 6, 6)])
        p.step(0, r.standard_normal((6, 4, 32)).astype(np.float32),
               r.standard_normal((6, 2, 32)).astype(np.float32),
               r.standard_normal((6, 2, 32)).astype(np.float32))
    return c, s


def roundtrip(c, s):
    ring = c.ring(0)
    before = ring[int(s)].copy()
    s.save(b"req-1")
    t = c.alloc()
    t.restore("req-1")
    np.testing.assert_array_equal(ring[int(t)], before)
    assert t.info().written_end == 6
    t.free()


def test_memory_store_and_stats():
    c, s = filled_cache()
    with c:
        with pytest.raises(sc.FailedPreconditionError):
            s.save(b"k")  # no store yet
        m = sc.MemoryStore(budget_bytes=1 << 20)
        assert m.state == "owned" and m.stats().entries == 0
        c.set_store(m)
        assert m.state == "attached"
        roundtrip(c, s)
        st = m.stats()
        assert st.puts == 1 and st.hits == 1 and st.entries == 1
        assert c.store_exists("req-1") and not c.store_exists(b"other")
        c.store_remove(b"req-1")
        with pytest.raises(sc.NotFoundError):
            c.store_remove(b"req-1")
        with pytest.raises(sc.NotFoundError):
            s.restore(b"req-1")
        with pytest.raises(sc.FailedPreconditionError, match="once"):
            c.set_store(m)  # already handed over
        with pytest.raises(sc.InvalidArgumentError, match="key"):
            s.save(12)
        with pytest.raises(sc.InvalidArgumentError):
            s.save(b"")
        with pytest.raises(sc.InvalidArgumentError):
            s.save(b"x" * 2000)
        c.set_store(None)  # detach: the memory store is released
        assert m.state == "released"
        with pytest.raises(sc.ClosedError):
            m.stats()
    with pytest.raises(sc.InvalidArgumentError):
        sc.MemoryStore(budget_bytes=0)
    with pytest.raises(sc.InvalidArgumentError):
        sc.MemoryStore(budget_bytes=-1)
    unused = sc.MemoryStore()
    unused.close()
    unused.close()
    assert unused.state == "released"


def test_directory_store_survives_the_cache(tmp_path):
    c, s = filled_cache()
    before = c.ring(0)[int(s)].copy()
    with c:
        c.set_store(sc.DirectoryStore(str(tmp_path / "kv"), sync=False))
        s.save(b"req")
    c2 = sc.Cache(window=W, max_slots=4, layers=[layer()])
    with c2:
        c2.set_store(sc.DirectoryStore(str(tmp_path / "kv"), create=False))
        t = c2.alloc()
        t.restore(b"req")
        np.testing.assert_array_equal(c2.ring(0)[int(t)], before)
    with pytest.raises(sc.NotFoundError):
        sc.DirectoryStore(str(tmp_path / "missing"), create=False)
    (tmp_path / "file").write_text("x")
    with pytest.raises(sc.FailedPreconditionError):
        sc.DirectoryStore(str(tmp_path / "file"))
    with pytest.raises(sc.InvalidArgumentError):
        sc.DirectoryStore("")


def test_blob_of_another_layout_is_refused(tmp_path):
    c, s = filled_cache()
    with c:
        c.set_store(sc.DirectoryStore(str(tmp_path)))
        s.save(b"req")
    with sc.Cache(window=W + 1, max_slots=2, layers=[layer()]) as c2:
        c2.set_store(sc.DirectoryStore(str(tmp_path)))
        # the key is prefixed by the fingerprint: another layout does not see it
        with pytest.raises(sc.NotFoundError):
            c2.alloc().restore(b"req")


def test_tiered_store():
    fast, slow = sc.MemoryStore(), sc.MemoryStore()
    tiered = sc.TieredStore([fast, slow])
    assert fast.state == "tier"
    with pytest.raises(sc.FailedPreconditionError):
        sc.TieredStore([fast])
    c, s = filled_cache()
    with c:
        c.set_store(tiered)
        roundtrip(c, s)
        assert tiered.tier_stats(0).puts == 1 and tiered.tier_stats(1).puts == 1
        assert tiered.tier_stats(0).hits == 1
        assert fast.stats().entries == 1
        with pytest.raises(sc.OutOfRangeError):
            tiered.tier_stats(2)
    assert tiered.state == "released" and fast.state == "released"
    with pytest.raises(sc.ClosedError):
        fast.stats()
    with pytest.raises(sc.InvalidArgumentError):
        sc.TieredStore([])
    a = sc.MemoryStore()
    with pytest.raises(sc.InvalidArgumentError, match="tiers\\[1\\]"):
        sc.TieredStore([a, "x"])
    assert a.state == "owned"  # a failed create leaves ownership with the caller
    a.close()
    unused = sc.TieredStore([sc.MemoryStore()])
    unused.close()
    assert unused.tiers[0].state == "released"


def test_redis_store_errors():
    # Nothing listens on port 1; a build without hiredis says UNIMPLEMENTED.
    with pytest.raises((sc.UnavailableError, sc.UnimplementedError, sc.DeadlineExceededError)):
        sc.RedisStore("127.0.0.1", 1, timeout_ms=200)
    with pytest.raises((sc.UnavailableError, sc.UnimplementedError, sc.DeadlineExceededError)):
        sc.RedisClusterStore("127.0.0.1:1", timeout_ms=200, max_attempts=1)
    with pytest.raises(sc.InvalidArgumentError):
        sc.RedisStore("127.0.0.1", 0)
    with pytest.raises(sc.InvalidArgumentError):
        sc.RedisClusterStore("", timeout_ms=200)


class DictStore(sc.Store):
    def __init__(self):
        self.d = {}
        self.released = 0
        self.lock = threading.Lock()

    def put(self, key, value):
        with self.lock:
            self.d[key] = value

    def get(self, key):
        with self.lock:
            return self.d.get(key)

    def exists(self, key):
        return key in self.d

    def remove(self, key):
        if key not in self.d:
            raise sc.NotFoundError("no such key in DictStore")
        del self.d[key]

    def release(self):
        self.released += 1


def test_python_store_roundtrip_and_release_once():
    n0 = sc.live_python_stores()
    c, s = filled_cache()
    st = DictStore()
    with c:
        c.set_store(st)
        assert sc.live_python_stores() == n0 + 1
        roundtrip(c, s)
        (key,) = st.d
        assert key.endswith(b":req-1") and len(key) == 16 + 1 + 5
        assert c.store_exists(b"req-1")
        c.store_remove(b"req-1")
        with pytest.raises(sc.NotFoundError, match="no such key in DictStore"):
            c.store_remove(b"req-1")
        with pytest.raises(sc.NotFoundError):
            s.restore(b"req-1")
        st2 = DictStore()
        c.set_store(st2)  # replaces: st released once
        assert st.released == 1 and st2.released == 0
        c.set_store(None)
        assert st2.released == 1
        c.set_store(st)  # the same object may be attached again
    assert st.released == 2 and st2.released == 1
    assert sc.live_python_stores() == n0


class Failing(sc.Store):
    def __init__(self, exc):
        self.exc = exc

    def put(self, key, value):
        raise self.exc

    def get(self, key):
        raise self.exc


def test_callback_exceptions_become_statuses():
    c, s = filled_cache()
    with c:
        c.set_store(Failing(RuntimeError("disk on fire")))
        with pytest.raises(sc.UnknownError, match="RuntimeError: disk on fire"):
            s.save(b"k")
        with pytest.raises(sc.UnknownError, match="disk on fire"):
            s.restore(b"k")
        c.set_store(Failing(sc.UnavailableError("try later")))
        with pytest.raises(sc.UnavailableError, match="try later"):
            s.save(b"k")
        c.set_store(Failing(KeyboardInterrupt()))
        with pytest.raises(sc.UnknownError, match="KeyboardInterrupt"):
            s.save(b"k")
        with pytest.raises(sc.UnimplementedError):
            c.store_exists(b"k")  # no exists override: NULL entry
        with pytest.raises(sc.UnimplementedError):
            c.store_remove(b"k")


class PutOnly(sc.Store):
    def __init__(self):
        self.n = 0

    def put(self, key, value):
        self.n += len(value)


class WrongSize(sc.Store):
    def __init__(self):
        self.d = {}

    def put(self, key, value):
        self.d[key] = value

    def get(self, key):
        return self.d[key][:-3]


class Corrupting(WrongSize):
    def get(self, key):
        b = bytearray(self.d[key])
        b[-1] ^= 0xFF
        return bytes(b)


def test_partial_stores_and_bad_blobs():
    c, s = filled_cache()
    with c:
        po = PutOnly()
        c.set_store(po)
        s.save(b"k")
        assert po.n > 0
        with pytest.raises(sc.UnimplementedError):
            s.restore(b"k")
        c.set_store(WrongSize())
        s.save(b"k")
        with pytest.raises((sc.DataLossError, sc.UnknownError)):
            s.restore(b"k")  # truncated blob
        c.set_store(Corrupting())
        s.save(b"k")
        with pytest.raises(sc.DataLossError):
            s.restore(b"k")
        with pytest.raises(sc.InvalidArgumentError, match="put or get"):
            c.set_store(sc.Store())
        with pytest.raises(sc.InvalidArgumentError, match="store"):
            c.set_store(42)


def test_python_store_as_a_tier():
    st = DictStore()
    mem = sc.MemoryStore()
    tiered = sc.TieredStore([mem, st])
    c, s = filled_cache()
    with c:
        c.set_store(tiered)
        roundtrip(c, s)
        assert len(st.d) == 1
    assert st.released == 1


def test_concurrent_saves_and_restores():
    c, s = filled_cache()
    with c:
        st = DictStore()
        c.set_store(st)
        s.save(b"base")
        slots = [c.alloc() for _ in range(3)]
        errors = []

        def worker(slot, i):
            try:
                for j in range(20):
                    slot.restore(b"base")
                    slot.save(f"w{i}-{j}")
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        th = [threading.Thread(target=worker, args=(sl, i)) for i, sl in enumerate(slots)]
        for t in th:
            t.start()
        for t in th:
            t.join()
        assert not errors
        assert len(st.d) == 61
