"""The typed compressor (DeepSeek-V4 HCA/CSA): Plan.compress_windows,
compress_store_segments, compress_step, Cache.compress_view/compress_ring and
set_save_compression, against a float64 NumPy reference of the entries computed
from each sequence's true history (transformers' math: per feature a softmax
over the window's slots of gate + position_bias, times kv, summed; RMSNorm;
interleaved RoPE of the trailing dims at w * c). Chunked prefill, then decode
steps with drafts rejected at random depths: the rejected rows must leave no
trace in later entries."""

import random

import numpy as np
import pytest

import swacache as sc
from swacache import errors

N = 3  # draft tokens


def layers(row_format=sc.Format.FP32):
    base = dict(q_heads=2, kv_heads=1, head_dim=64, shared_kv=True, kv_format=sc.Format.FP32,
                rope_style=sc.RopeStyle.GPTJ, rope_first_dim=48, rope_dims=16,
                rope_theta=10000.0)
    csa = sc.Layer(**base, compress_kind=sc.CompressKind.CSA, compress_ratio=4,
                   compress_head_dim=32, index_head_dim=16, compress_rope_dims=8,
                   compress_row_format=row_format)
    hca = sc.Layer(**base, compress_kind=sc.CompressKind.HCA, compress_ratio=8,
                   compress_head_dim=64, compress_rope_dims=16, compress_row_format=row_format)
    plain = sc.Layer(**base)
    return [csa, hca, plain]


# (layer, compressor, S, d, c, kind)
COMPS = [(0, 0, 64, 32, 4, "csa"), (0, 1, 32, 16, 4, "csa"), (1, 0, 64, 64, 8, "hca")]


def inv_freq(theta, n):
    freq, _ = sc.rope_table(sc.Layer(q_heads=1, head_dim=n, kv_format=sc.Format.FP32,
                                     rope_style=sc.RopeStyle.GPTJ, rope_dims=n,
                                     rope_theta=theta))
    return freq.astype(np.float64)


def ref_entry(kv, gate, w, kind, c, bias, weight, eps, freq):
    """Entry w from the history rows kv/gate [P, S] (float64)."""
    S = kv.shape[1]
    d = S // 2 if kind == "csa" else S
    if kind == "hca":
        pos = [w * c + j for j in range(c)]
        cols = [(p, slice(0, d), bias[j, :d]) for j, p in enumerate(pos)]
    else:
        cols = [((w - 1) * c + j, slice(0, d), bias[j, :d]) for j in range(c)]
        cols += [(w * c + j, slice(d, 2 * d), bias[j, d:]) for j in range(c)]
    cols = [(p, sl, b) for p, sl, b in cols if p >= 0]
    logits = np.stack([gate[p, sl] + b for p, sl, b in cols])  # [slots, d]
    vals = np.stack([kv[p, sl] for p, sl, _ in cols])
    e = np.exp(logits - logits.max(axis=0))
    x = (e / e.sum(axis=0) * vals).sum(axis=0)
    x = x / np.sqrt((x * x).mean() + eps) * weight
    n = 2 * len(freq)
    if n:
        ang = w * c * freq
        a, b = x[d - n::2].copy(), x[d - n + 1::2].copy()
        x[d - n::2] = a * np.cos(ang) - b * np.sin(ang)
        x[d - n + 1::2] = b * np.cos(ang) + a * np.sin(ang)
    return x


def run_schedule(cache, plan, slots, rng, steps, on_entries, hist):
    """Drives `steps` steps over `slots`; hist[s][comp] = (kv, gate) of accepted rows."""
    pos = {s: 0 for s in slots}
    ends = {s: 0 for s in slots}
    for step in range(steps):
        seqs = []
        for s in slots:
            if step < 6:
                start, n = ends[s], rng.randint(1, 11)
            else:
                start = max(0, ends[s] - N - 1 + rng.randint(0, N + 1)) if ends[s] else 0
                n = 1 + N
            pos[s] = start
            seqs.append(sc.Seq(s, n, start + n))
            ends[s] = start + n
        plan.build(seqs)
        T = sum(q.seqlen_q for q in seqs)
        for ci, (lay, comp, S, d, c, kind) in enumerate(COMPS):
            kv = rng_np(rng).standard_normal((T, S)).astype(np.float32)
            gate = (3 * rng_np(rng).standard_normal((T, S))).astype(np.float32)
            wins = plan.compress_windows(lay)
            out = plan.compress_step(lay, kv, gate, BIAS[ci], WEIGHT[ci], compressor=comp)
            assert out.shape == (len(wins), d)
            off = 0
            for q in seqs:
                h_kv, h_gate = hist[q.slot][ci]
                start = q.seqlen_k - q.seqlen_q
                hist[q.slot][ci] = (np.concatenate([h_kv[:start], kv[off:off + q.seqlen_q]]),
                                    np.concatenate([h_gate[:start], gate[off:off + q.seqlen_q]]))
                off += q.seqlen_q
            on_entries(ci, seqs, wins, out)


BIAS, WEIGHT = [], []
_np_rng = {}


def rng_np(rng):
    key = id(rng)
    if key not in _np_rng:
        _np_rng[key] = np.random.default_rng(rng.randint(0, 2**31))
    return _np_rng[key]


@pytest.fixture(autouse=True)
def weights():
    g = np.random.default_rng(7)
    BIAS.clear(), WEIGHT.clear()
    for (_, _, S, d, c, _) in COMPS:
        BIAS.append((0.5 * g.standard_normal((c, S))).astype(np.float32))
        WEIGHT.append((1 + 0.2 * g.standard_normal(d)).astype(np.float32))


def test_entries_match_the_reference_through_drafts_and_rewinds():
    freqs = [inv_freq(10000.0, 8), inv_freq(10000.0, 8), inv_freq(10000.0, 16)]
    with sc.Cache(window=8, draft_tokens=N, max_slots=3, layers=layers()) as cache:
        plan = cache.plan()
        slots = [int(cache.alloc()) for _ in range(2)]
        hist = {s: [(np.zeros((0, S), np.float32), np.zeros((0, S), np.float32))
                    for (_, _, S, _, _, _) in COMPS] for s in slots}
        rng = random.Random(3)
        checked = [0]

        def check(ci, seqs, wins, out):
            lay, comp, S, d, c, kind = COMPS[ci]
            for k, win in enumerate(wins):
                q = seqs[win["seq"]]
                assert win["slot"] == q.slot
                w = int(win["entry"])
                assert win["position"] == w * c
                h_kv, h_gate = hist[q.slot][ci]
                assert (w + 1) * c <= q.seqlen_k  # the window closed within the step
                ref = ref_entry(h_kv.astype(np.float64), h_gate.astype(np.float64), w, kind, c,
                                BIAS[ci].astype(np.float64), WEIGHT[ci].astype(np.float64),
                                1e-6, freqs[ci])
                np.testing.assert_allclose(out[k], ref, rtol=2e-5, atol=2e-5)
                checked[0] += 1
            # Every window that closes in the step is there, once.
            want = sorted((i, w) for i, q in enumerate(seqs)
                          for w in range((q.seqlen_k - q.seqlen_q) // c, q.seqlen_k // c))
            assert sorted((int(x["seq"]), int(x["entry"])) for x in wins) == want

        run_schedule(cache, plan, slots, rng, 40, check, hist)
        assert checked[0] > 100
        plan.close()


def test_store_segments_and_the_ring_view():
    with sc.Cache(window=8, draft_tokens=N, max_slots=2, layers=layers()) as cache:
        lay = cache.layer_layout(0)
        assert lay.compress_kind == sc.CompressKind.CSA
        assert lay.compress_len == 2 * 4 + N and lay.compress_ratio == 4
        assert lay.compress_row_values == 64 and lay.index_head_dim == 16
        assert lay.index_row_bytes == 2 * 32 * 4
        assert lay.compress_entry_bytes == 2 * 64 * 4
        assert cache.layer_layout(1).compress_len == 8 + N
        assert cache.layer_layout(2).compress_kind == sc.CompressKind.OPAQUE
        assert cache.layout.compress_bytes > 0
        slot = int(cache.alloc())
        with cache.plan() as plan:
            plan.build([sc.Seq(slot, 6, 6)])
            segs = plan.compress_store_segments(0)
            L = lay.compress_len
            assert segs.tolist() == [[slot * L + 0, 0, 6]]
            kv = np.arange(6 * 64, dtype=np.float32).reshape(6, 64)
            gate = -kv
            plan.compress_step(0, kv, gate, BIAS[0], WEIGHT[0])
            ring = cache.compress_ring(0)
            assert ring.shape[:3] == (2, L, 2)
            rows = ring[slot, :6].copy().view(np.float32).reshape(6, 2, 64)
            np.testing.assert_array_equal(rows[:, 0], kv)
            np.testing.assert_array_equal(rows[:, 1], gate)
            v = cache.compress_view(0, 1)
            assert v.shape[:3] == (2, L, 2) and v.strides[3] == 1


def test_bf16_rows_round_like_the_ring():
    with sc.Cache(window=8, draft_tokens=N, max_slots=1,
                  layers=layers(sc.Format.BF16)) as cache:
        slot = int(cache.alloc())
        with cache.plan() as plan:
            plan.build([sc.Seq(slot, 5, 5)])
            kv = np.random.default_rng(1).standard_normal((5, 64)).astype(np.float32)
            plan.compress_step(1, kv, kv, BIAS[2], WEIGHT[2])
            ring = cache.compress_ring(1)[slot, :5].copy().view(np.uint16).reshape(5, 2, 64)
            u = kv.view(np.uint32).astype(np.uint64)
            want = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)  # nearest even
            np.testing.assert_array_equal(ring[:, 0], want)
            np.testing.assert_array_equal(ring[:, 1], want)


def test_bad_input_names_the_value_and_writes_nothing():
    with sc.Cache(window=8, draft_tokens=N, max_slots=1, layers=layers()) as cache:
        slot = int(cache.alloc())
        with cache.plan() as plan:
            plan.build([sc.Seq(slot, 4, 4)])
            kv = np.ones((4, 64), np.float32)
            before = cache.compress_ring(0).copy()
            with pytest.raises(errors.InvalidArgumentError, match=r"\(T, S\)"):
                plan.compress_step(0, kv[:, :32].copy(), kv[:, :32].copy(), BIAS[0], WEIGHT[0])
            with pytest.raises(errors.InvalidArgumentError, match="compress_ratio"):
                plan.compress_step(0, kv, kv, BIAS[0][:2], WEIGHT[0])
            with pytest.raises(errors.InvalidArgumentError):
                plan.compress_step(2, kv, kv, BIAS[0], WEIGHT[0])  # no compressor
            with pytest.raises(errors.InvalidArgumentError):
                plan.compress_step(1, kv, kv, BIAS[2], WEIGHT[2], compressor=1)  # HCA: no indexer
            with pytest.raises(errors.InvalidArgumentError, match="norm_eps"):
                plan.compress_step(0, kv, kv, BIAS[0], WEIGHT[0], norm_eps=0.0)
            with pytest.raises(errors.OutOfRangeError):
                plan.compress_step(9, kv, kv, BIAS[0], WEIGHT[0])
            with pytest.raises(errors.InvalidArgumentError, match="out"):
                plan.compress_step(0, kv, kv, BIAS[0], WEIGHT[0],
                                   out=np.zeros((0, 32), np.float32))
            np.testing.assert_array_equal(cache.compress_ring(0), before)
            with pytest.raises(errors.InvalidArgumentError):
                plan.compress_windows(2)


def test_hf_layer_descs_declare_the_compressors():
    cfg = dict(model_type="deepseek_v4", num_hidden_layers=3, num_attention_heads=4,
               num_key_value_heads=1, head_dim=64, hidden_size=64, sliding_window=16,
               index_head_dim=32, partial_rotary_factor=0.25,
               compress_rates={"compressed_sparse_attention": 4,
                               "heavily_compressed_attention": 128},
               layer_types=["sliding_attention", "compressed_sparse_attention",
                            "heavily_compressed_attention"],
               rope_parameters={"main": {"rope_type": "default", "rope_theta": 10000.0},
                                "compress": {"rope_type": "default", "rope_theta": 160000.0}})
    plain = sc.hf.layer_descs(cfg)
    assert all(lay.compress_kind == sc.CompressKind.OPAQUE for lay in plain.layers)
    hf = sc.hf.layer_descs(cfg, compressors=True)
    s, csa, hca = hf.layers
    assert s.compress_kind == sc.CompressKind.OPAQUE and s.compress_ratio == 0
    assert (csa.compress_kind, csa.compress_ratio, csa.compress_head_dim, csa.index_head_dim,
            csa.compress_rope_dims) == (sc.CompressKind.CSA, 4, 64, 32, 16)
    assert (hca.compress_kind, hca.compress_ratio, hca.index_head_dim) == (
        sc.CompressKind.HCA, 128, 0)
    with pytest.raises(errors.InvalidArgumentError, match="compressors"):
        sc.hf.layer_descs(dict(cfg, model_type="mistral", layer_types=None), compressors=True)
