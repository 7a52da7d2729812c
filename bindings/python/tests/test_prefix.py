"""Prefix reuse (issue 32): checkpoints (save_at, checkpoint_range), the
longest-prefix probe (store_probe) and the exact replay span
(begin_replay_exact), through the Python binding."""
import numpy as np
import pytest

import swacache as sc
from helpers import layer

W = 8  # R = W + 1 = 9: a checkpoint may lag written_end by R - W + 1 = 2


def _steps(c, s, chunks, seed=0):
    r = np.random.default_rng(seed)
    pos = s.info().written_end
    with c.plan() as p:
        for n in chunks:
            pos += n
            p.build([(s, n, pos)])
            p.step(0, r.standard_normal((n, 4, 32)).astype(np.float32),
                   r.standard_normal((n, 2, 32)).astype(np.float32),
                   r.standard_normal((n, 2, 32)).astype(np.float32))


def test_checkpoint_save_at_and_probe():
    with sc.Cache(window=W, max_slots=4, layers=[layer()]) as c:
        c.set_store(sc.MemoryStore())
        s = c.alloc()
        assert s.checkpoint_range() == (0, 0)
        _steps(c, s, [5, 5, 2])
        assert s.checkpoint_range() == (10, 12)
        s.save_at(11, b"ck-11")
        with pytest.raises(sc.OutOfRangeError, match=r"10 \.\.\. 12"):
            s.save_at(9, b"ck-9")
        with pytest.raises(sc.OutOfRangeError):
            s.save_at(13, b"ck-13")
        assert not c.store_exists(b"ck-9") and not c.store_exists(b"ck-13")
        t = c.alloc()
        t.restore(b"ck-11")
        i = t.info()
        assert i.written_end == 11 and i.valid_start == 0
        # The probe: longest first, the first present wins; -1 for none.
        assert c.store_probe([b"ck-20", "ck-11", b"ck-5"]) == 1
        s.save_at(12, "ck-12")
        assert c.store_probe(["ck-12", b"ck-11"]) == 0
        assert c.store_probe([b"nope", b"nada"]) == -1
        assert c.store_probe([]) == -1
        with pytest.raises(sc.InvalidArgumentError, match=r"keys\[1\]"):
            c.store_probe([b"a", b""])


def test_probe_without_store():
    with sc.Cache(window=W, max_slots=2, layers=[layer()]) as c:
        with pytest.raises(sc.FailedPreconditionError):
            c.store_probe([b"a"])


def test_begin_replay_exact_span():
    with sc.Cache(window=W, max_slots=4, layers=[layer(), layer(role=sc.LayerRole.DROPPED)]) as c:
        s = c.alloc()
        # The cache's 2 layers: S = 2 * 7 = 14.
        assert s.begin_replay_exact(30) == (16, 14)
        i = s.info()
        assert i.valid_start == 16 and i.written_end == 16
        s.reset()
        assert s.begin_replay_exact(30, need_last_output=True) == (15, 15)
        s.reset()
        assert s.begin_replay_exact(30, sliding_layers=3) == (9, 21)
        s.reset()
        assert s.begin_replay_exact(30, sliding_layers=5, need_last_output=True) == (0, 30)
        s.reset()
        assert s.begin_replay(30) == (22, 8)  # the approximate mode: W
        assert s.begin_replay_exact(30) == (16, 14)  # a prepared slot may be prepared again
        _steps(c, s, [14])
        with pytest.raises(sc.FailedPreconditionError):
            s.begin_replay_exact(40)  # holds positions 16 ... 29
        with pytest.raises(sc.InvalidArgumentError):
            c.alloc().begin_replay_exact(-1)
