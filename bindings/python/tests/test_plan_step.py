"""Plans, their exports, steps (against a NumPy reference), merge, project."""

import math

import numpy as np
import pytest

import swacache as sc
from helpers import layer, ref_attention

W = 8


def rng(seed=0):
    return np.random.default_rng(seed)


def test_plan_paths_and_exports():
    with sc.Cache(window=W, max_slots=4, layers=[layer()]) as c:
        a, b = c.alloc(), c.alloc()
        with c.plan() as p:
            assert p.info().path == sc.PlanPath.NONE
            with pytest.raises(sc.FailedPreconditionError):
                p.store_rows()
            # staged: a prefill longer than R - W + 1
            p.build([sc.Seq(a, 6, 6), (b, 3, 3)])
            i = p.info()
            assert i.path == sc.PlanPath.STAGED and i.n_tokens == 9 and i.n_seqs == 2
            segs = p.load_segments()
            assert segs.shape == (i.n_load_segments, 3) and segs.dtype == np.int32
            assert segs[:, 2].sum() == 2 * W
            piv = p.pivots()
            assert piv.shape == (9, 4)
            rows = p.store_rows()
            assert rows.shape == (9,) and (rows >= 0).all()
            ss = p.store_segments()
            assert ss[:, 2].sum() == 9
            cu, qs, vs = p.seq_offsets()
            assert list(cu) == [0, 6, 9] and list(qs) == [0, 0] and list(vs) == [0, 0]
            with pytest.raises(sc.FailedPreconditionError):
                p.decode_index()
            # ring path: one decode token each
            p.cancel()
            assert c.slot_info(a).written_end == 0
        with c.plan(index_pad=sc.IndexPad.LAST_ROW) as p:
            p.build([(a, 6, 6)])
            p.step(0, *qkv(6))
            with pytest.raises(sc.FailedPreconditionError):
                p.cancel()  # executed
            p.build([(a, 1, 7), (b, 2, 2)])
            i = p.info()
            assert i.path == sc.PlanPath.RING and i.decode_index_elems == 3 * W
            ol, ix = p.decode_index()
            assert ol.shape == (3, 2) and ix.shape == (3, W)
            assert list(ol[:, 1]) == [7, 1, 2]
            assert (ix[0, :7] >= 0).all()
            np.testing.assert_array_equal(p.offset_len(), ol)
            with pytest.raises(sc.FailedPreconditionError):
                p.pivots()
            with pytest.raises(sc.FailedPreconditionError):
                p.load_segments()
        with c.plan(materialize_index=False) as p:
            p.build([(a, 1, 8)])
            assert p.offset_len()[0, 1] == 8
        with c.plan(options=False) as p:
            p.build([])
            assert p.info().n_tokens == 0


def qkv(T, hq=4, hkv=2, d=32, seed=0):
    r = rng(seed)
    return (r.standard_normal((T, hq, d)).astype(np.float32),
            r.standard_normal((T, hkv, d)).astype(np.float32),
            r.standard_normal((T, hkv, d)).astype(np.float32))


def test_build_errors_name_the_sequence():
    with sc.Cache(window=W, max_slots=4, layers=[layer()]) as c:
        a = c.alloc()
        with c.plan() as p:
            with pytest.raises(sc.InvalidArgumentError):
                p.build([(a, 3, 2)])
            with pytest.raises(sc.FailedPreconditionError):
                p.build([(a, 1, 5)])  # gap
            with pytest.raises(sc.InvalidArgumentError):
                p.build([(a, 1, 1), (a, 1, 1)])
            with pytest.raises(sc.OutOfRangeError):
                p.build([(77, 1, 1)])
            with pytest.raises(sc.FailedPreconditionError):
                p.build([(1, 1, 1)])  # not allocated
            with pytest.raises(sc.InvalidArgumentError, match="seqs\\[0\\]"):
                p.build([(a, 1)])
            with pytest.raises(sc.InvalidArgumentError, match="seqs\\[0\\].seqlen_k"):
                p.build([(a, 1, 2**40)])
            with pytest.raises(sc.FailedPreconditionError):
                p.cancel()


@pytest.mark.parametrize("shared", [False, True])
def test_steps_match_reference_across_the_window(shared):
    hq, hkv, d = 4, (1 if shared else 2), 32
    lay = layer(q_heads=hq, kv_heads=hkv, head_dim=d, shared_kv=shared, has_sinks=True)
    r = rng(1)
    sinks = r.standard_normal(hq).astype(np.float32)
    with sc.Cache(window=W, max_slots=2, layers=[lay]) as c:
        s = c.alloc()
        keys, vals = [], []
        pos = 0
        with c.plan() as p:
            for n_new in [5, 1, 1, 11, 1, 3, 1, 1]:
                q = r.standard_normal((n_new, hq, d)).astype(np.float32)
                k = r.standard_normal((n_new, hkv, d)).astype(np.float32)
                v = k if shared else r.standard_normal((n_new, hkv, d)).astype(np.float32)
                keys.append(k)
                vals.append(v)
                p.build([(s, n_new, pos + n_new)])
                out, lse = p.step(0, q, k, None if shared else v, sinks=sinks, lse=True)
                K, V = np.concatenate(keys), np.concatenate(vals)
                ref, ref_lse = ref_attention(q, K, V, list(range(pos, pos + n_new)),
                                             list(range(len(K))), W, 1 / math.sqrt(d), sinks)
                np.testing.assert_allclose(out, ref, atol=2e-5, rtol=1e-5)
                np.testing.assert_allclose(lse, ref_lse, atol=2e-5, rtol=1e-5)
                pos += n_new
        st = c.stats()
        assert st.steps == 8 and st.tokens == pos


def test_step_argument_errors_name_the_argument():
    lay = layer(has_sinks=True)
    with sc.Cache(window=W, max_slots=2, layers=[lay, layer(shared_kv=True, kv_heads=1)]) as c:
        s = c.alloc()
        q, k, v = qkv(3)
        sinks = np.zeros(4, np.float32)
        k1 = np.ascontiguousarray(k[:, :1])
        with c.plan() as p:
            p.build([(s, 3, 3)])
            with pytest.raises(sc.InvalidArgumentError, match="^.*q: expected dtype"):
                p.step(0, q.astype(np.float64), k, v, sinks=sinks)
            with pytest.raises(sc.InvalidArgumentError, match="k: expected shape"):
                p.step(0, q, k[:2], v, sinks=sinks)
            with pytest.raises(sc.InvalidArgumentError, match="v: .*C-contiguous"):
                p.step(0, q, k, np.zeros((3, 32, 2), np.float32).transpose(0, 2, 1),
                       sinks=sinks)
            with pytest.raises(sc.InvalidArgumentError, match="v: .*required"):
                p.step(0, q, k, sinks=sinks)
            with pytest.raises(sc.InvalidArgumentError, match="sinks"):
                p.step(0, q, k, v)
            with pytest.raises(sc.InvalidArgumentError, match="sinks: expected shape"):
                p.step(0, q, k, v, sinks=np.zeros(3, np.float32))
            with pytest.raises(sc.InvalidArgumentError, match="v: .*shares"):
                p.step(1, q, k1, k1)
            with pytest.raises(sc.InvalidArgumentError, match="sinks: layer 1 has no sinks"):
                p.step(1, q, k1, sinks=sinks)
            ro = np.zeros((3, 4, 32), np.float32)
            ro.flags.writeable = False
            with pytest.raises(sc.InvalidArgumentError, match="out: .*read-only"):
                p.step(0, q, k, v, sinks=sinks, out=ro)
            with pytest.raises(sc.InvalidArgumentError, match="lse: expected shape"):
                p.step(0, q, k, v, sinks=sinks, lse=np.zeros((3, 3), np.float32))
            with pytest.raises(sc.InvalidArgumentError, match="v: dtype"):
                p.step(0, q, k, v.view(np.uint16)[..., ::2].copy(), sinks=sinks)
            with pytest.raises(sc.InvalidArgumentError, match="q: expected a NumPy array"):
                p.step(0, [1, 2], k, v, sinks=sinks)
            with pytest.raises(sc.InvalidArgumentError, match="q: a tensor is required"):
                p.step(0, None, k, v, sinks=sinks)
            with pytest.raises(sc.OutOfRangeError):
                p.step(9, q, k, v)
            with pytest.raises(sc.InvalidArgumentError, match="softmax_scale"):
                p.step(0, q, k, v, sinks=sinks, softmax_scale=-1.0)
            # flattened trailing dims are accepted; the output may be given
            out = np.empty((3, 128), np.float32)
            r = p.step(0, q.reshape(3, -1), k.reshape(-1), v, sinks=sinks, out=out)
            assert r is out
        with pytest.raises(sc.FailedPreconditionError):
            with c.plan() as p2:
                p2.step(0, q[:0], k[:0], v[:0], sinks=sinks)  # not built: T = 0


def test_step_after_free_and_other_cache():
    with sc.Cache(window=W, max_slots=2, layers=[layer()]) as c, \
            sc.Cache(window=W, max_slots=2, layers=[layer()]) as c2:
        s = c.alloc()
        with c.plan() as p:
            p.build([(s, 2, 2)])
            s.free()
            with pytest.raises(sc.FailedPreconditionError, match="slot"):
                p.step(0, *qkv(2))
            with pytest.raises(sc.InvalidArgumentError, match="another cache"):
                c2.step(p, 0, *qkv(2))


def test_bf16_inputs_and_outputs():
    def bf16(x):
        u = x.astype(np.float32).view(np.uint32)
        return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)

    def f32(b):
        return (b.astype(np.uint32) << 16).view(np.float32)

    with sc.Cache(window=W, max_slots=2, layers=[layer(kv_format=sc.Format.BF16)]) as c:
        s = c.alloc()
        q, k, v = qkv(4)
        with c.plan() as p:
            p.build([(s, 4, 4)])
            out = p.step(0, bf16(q), bf16(k), bf16(v), out_dtype=sc.DType.BF16)
        assert out.dtype == np.uint16
        ref, _ = ref_attention(f32(bf16(q)), f32(bf16(k)), f32(bf16(v)), range(4), range(4), W,
                               1 / math.sqrt(32))
        np.testing.assert_allclose(f32(out), ref, atol=1e-2, rtol=1e-2)


def test_array_interface_and_dlpack_objects():
    class AI:
        def __init__(self, a):
            self.a = a
            self.__array_interface__ = a.__array_interface__

    class DL:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    with sc.Cache(window=W, max_slots=2, layers=[layer()]) as c:
        s, t = c.alloc(), c.alloc()
        q, k, v = qkv(3)
        with c.plan() as p:
            p.build([(s, 3, 3)])
            o1 = p.step(0, q, k, v)
            p.build([(t, 3, 3)])
            out = np.zeros((3, 4, 32), np.float32)
            p.step(0, AI(q), DL(k), AI(v), out=AI(out))
        np.testing.assert_array_equal(o1, out)


def test_attention_merge_matches_the_union():
    r = rng(3)
    rows, d = 6, 32
    with sc.Cache(window=W, max_slots=1, layers=[layer()]) as c:
        oa = r.standard_normal((rows, d)).astype(np.float32)
        ob = r.standard_normal((rows, d)).astype(np.float32)
        la = r.standard_normal(rows).astype(np.float32)
        lb = r.standard_normal(rows).astype(np.float32)
        lb[0] = -np.inf
        lse = np.zeros(rows, np.float32)
        out = c.attention_merge(oa, la, ob, lb, lse=lse)
        wa, wb = np.exp(la.astype(np.float64)), np.exp(lb.astype(np.float64))
        ref = (wa[:, None] * oa + wb[:, None] * ob) / (wa + wb)[:, None]
        np.testing.assert_allclose(out, ref, atol=1e-6, rtol=1e-5)
        np.testing.assert_allclose(lse, np.log(wa + wb), atol=1e-6)
        np.testing.assert_array_equal(out[0], oa[0])
        c.attention_merge(oa, la, ob, lb, out=oa)  # in place
        np.testing.assert_allclose(oa, ref, atol=1e-6, rtol=1e-5)
        with pytest.raises(sc.InvalidArgumentError, match="lse_b: expected 6"):
            c.attention_merge(oa, la, ob, lb[:3])
        with pytest.raises(sc.InvalidArgumentError, match="out_b: shape"):
            c.attention_merge(oa, la, ob[:3], lb)
        with pytest.raises(sc.InvalidArgumentError, match="out_a: expected dtype"):
            c.attention_merge(oa.astype(np.float64), la, ob, lb)
        with pytest.raises(sc.InvalidArgumentError, match="out: expected"):
            c.attention_merge(oa, la, ob, lb, out=np.zeros(3, np.float32))


def test_project():
    def bf16(x):
        u = x.astype(np.float32).view(np.uint32)
        return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)

    def f32(b):
        return (b.astype(np.uint32) << 16).view(np.float32)

    r = rng(4)
    h = bf16(r.standard_normal((5, 64)))
    w = bf16(r.standard_normal((48, 64)))
    with sc.Cache(window=W, max_slots=1, layers=[layer()]) as c:
        out = c.project(h, w, q_dim=32, kv_dim=16)
        np.testing.assert_allclose(out, f32(h) @ f32(w).T, atol=1e-3, rtol=1e-4)
        out2 = c.project(h, np.ascontiguousarray(w.T), q_dim=32, kv_dim=16,
                         weight_layout=sc.WeightLayout.IN_OUT, out_dtype=sc.DType.BF16)
        assert out2.dtype == np.uint16
        with pytest.raises(sc.InvalidArgumentError, match="weight: expected shape"):
            c.project(h, w, q_dim=32, kv_dim=8)
        with pytest.raises(sc.InvalidArgumentError, match="hidden: expected dtype"):
            c.project(f32(h), w, q_dim=32, kv_dim=16)
        with pytest.raises(sc.InvalidArgumentError):
            c.project(h[:, :0], w[:, :0], q_dim=32, kv_dim=16)  # hidden_dim = 0: the library
