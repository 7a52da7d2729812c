"""Plan.step outputs that share memory with another argument: refused, except
out being exactly q (in place). Before the fix, out one head row before q in
a shared buffer returned OK with wrong values (the library writes earlier
output rows before it reads later query rows)."""

import numpy as np
import pytest

import swacache as sc
from helpers import layer

T, HQ, HKV, D = 4, 4, 2, 32


def _step(**kw):
    c = sc.Cache(window=8, max_slots=1, layers=[layer(q_heads=HQ, kv_heads=HKV, head_dim=D)])
    try:
        p = c.plan()
        p.build([(int(c.alloc()), T, T)])
        return p.step(0, **kw)
    finally:
        c.close()


def _inputs():
    g = np.random.default_rng(9)
    return (g.standard_normal((T, HQ, D)).astype(np.float32),
            g.standard_normal((T, HKV, D)).astype(np.float32),
            g.standard_normal((T, HKV, D)).astype(np.float32))


def test_overlapping_outputs_are_refused():
    q, k, v = _inputs()
    n = q.size
    buf = np.zeros(n + D, np.float32)
    buf[D:] = q.reshape(-1)
    with pytest.raises(sc.InvalidArgumentError, match="out: overlaps q without being it"):
        _step(q=buf[D:].reshape(q.shape), k=k, v=v, out=buf[:n].reshape(q.shape))
    kbuf = np.zeros(n, np.float32)
    kbuf[:k.size] = k.reshape(-1)
    with pytest.raises(sc.InvalidArgumentError, match="out: overlaps k"):
        _step(q=q, k=kbuf[:k.size].reshape(k.shape), v=v, out=kbuf.reshape(q.shape))
    out = np.zeros_like(q)
    with pytest.raises(sc.InvalidArgumentError, match="out: overlaps lse"):
        _step(q=q, k=k, v=v, out=out, lse=out.reshape(-1)[:T * HQ].reshape(T, HQ))


def test_out_exactly_q_stays_allowed_and_matches():
    q, k, v = _inputs()
    ref = _step(q=q, k=k, v=v)
    x = q.copy()
    got = _step(q=x, k=k, v=v, out=x)
    assert got is x
    np.testing.assert_array_equal(x, ref)
