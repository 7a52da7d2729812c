"""attention_merge outputs that partly overlap an input (the Go binding's rule,
now Python's too): an output may be exactly one of its inputs (out: out_a or
out_b, lse: lse_a or lse_b), nothing else. Before the fix a shifted output
returned OK with wrong values (the merge reads later rows after writing
earlier ones)."""

import numpy as np
import pytest

import swacache as sc

R, D = 64, 32


def _inputs():
    g = np.random.default_rng(11)
    a = g.standard_normal((R, D)).astype(np.float32)
    b = g.standard_normal((R, D)).astype(np.float32)
    la = g.standard_normal(R).astype(np.float32)
    lb = g.standard_normal(R).astype(np.float32)
    return a, la, b, lb


def _refused(fn, out_name, in_name):
    with pytest.raises(sc.InvalidArgumentError) as e:
        fn()
    assert f"{out_name}: overlaps {in_name}" in str(e.value)


@pytest.mark.parametrize("merge", ["free", "cache"])
def test_partial_overlaps_are_refused_and_write_nothing(merge):
    a, la, b, lb = _inputs()
    if merge == "cache":
        c = sc.Cache(window=8, max_slots=1, layers=[sc.Layer(q_heads=1, kv_heads=1, head_dim=32)])
        fn = c.attention_merge
    else:
        fn = sc.attention_merge
    # out one row past out_b, in one buffer.
    buf = np.zeros((R + 1, D), np.float32)
    buf[:R] = b
    before = buf.copy()
    _refused(lambda: fn(a, la, buf[:R], lb, out=buf[1:]), "out", "out_b")
    np.testing.assert_array_equal(buf, before)
    # lse one element past lse_b.
    lbuf = np.zeros(R + 1, np.float32)
    lbuf[:R] = lb
    _refused(lambda: fn(a, la, b, lbuf[:R], lse=lbuf[1:]), "lse", "lse_b")
    # out over lse_a's memory.
    big = np.zeros(R * D + R, np.float32)
    big[:R] = la
    _refused(lambda: fn(a, big[:R], b, lb, out=big[R // 2:R // 2 + R * D].reshape(R, D)),
             "out", "lse_a")
    # lse inside out.
    o = np.zeros((R, D), np.float32)
    _refused(lambda: fn(a, la, b, lb, out=o, lse=o.reshape(-1)[:R]), "lse", "out")
    if merge == "cache":
        c.close()


def test_exact_aliases_stay_allowed_and_correct():
    a, la, b, lb = _inputs()
    ref_l = np.zeros(R, np.float32)
    ref = sc.attention_merge(a, la, b, lb, lse=ref_l)
    for which in ("a", "b"):
        x, lx = (a.copy(), la.copy()) if which == "a" else (b.copy(), lb.copy())
        args = (x, lx, b, lb) if which == "a" else (a, la, x, lx)
        out = sc.attention_merge(*args, out=x, lse=lx)
        assert out is x
        np.testing.assert_array_equal(x, ref)
        np.testing.assert_array_equal(lx, ref_l)
