"""RoPE as a service, per-token positions and the merge without a cache.

- ``rope_apply`` gives the bits the step stores for its new keys (FP32 ring)
  at the same positions, for both styles, a partial slice and YaRN;
- ``rope_table`` matches a NumPy computation of the published formula;
- ``plan.step(positions=...)``: explicit cache positions equal none, and a
  uniform shift leaves plain-RoPE attention unchanged (relative positions);
- ``attention_merge`` without a cache gives the cached merge's bits;
- with PyTorch and transformers: ``rope_apply`` against transformers' own
  ``apply_rotary_pos_emb`` (Llama's rotate-half, DeepSeek-V4's interleaved
  trailing slice) fed with the library's table.
"""

import numpy as np
import pytest

import swacache as sc

POS = np.array([0, 1, 5, 4095, 65537, 131071, 2**24 + 3], np.int32)


def rope_layer(style, first, dims, head_dim=64, **kw):
    return sc.Layer(q_heads=2, kv_heads=2, head_dim=head_dim, shared_kv=False,
                    kv_format=sc.Format.FP32, rope_style=style, rope_first_dim=first,
                    rope_dims=dims, rope_theta=150000.0, **kw)


CASES = [
    dict(style=sc.RopeStyle.NEOX, first=0, dims=64),
    dict(style=sc.RopeStyle.GPTJ, first=32, dims=32),
    dict(style=sc.RopeStyle.NEOX, first=16, dims=32, rope_yarn_factor=8.0,
         rope_yarn_original_max_positions=4096),
]


def stored_keys(lay, k, positions):
    """The FP32 K rows the step stores for one-token sequences at `positions`."""
    n = len(positions)
    with sc.Cache(window=4, max_slots=n, layers=[lay]) as c:
        slots = [c.alloc() for _ in range(n)]
        with c.plan() as p:
            p.build([(s, 1, 1) for s in slots])
            q = np.ones((n, 2, lay.head_dim), np.float32)
            p.step(0, q, k, np.zeros_like(k), positions=positions)
        ring = c.ring(0)  # [slots, R, heads (K then V), vec_bytes]
        return np.stack([ring[s, 0, :2].copy() for s in slots]).view(np.float32)


@pytest.mark.parametrize("case", CASES)
def test_rope_apply_equals_the_steps_rotation(case):
    lay = rope_layer(**case)
    rng = np.random.default_rng(1)
    k = rng.uniform(-3, 3, (len(POS), 2, 64)).astype(np.float32)
    want = stored_keys(lay, k, POS)
    mine = sc.rope_apply(lay, k.copy(), POS)
    assert mine.tobytes() == want.reshape(mine.shape).tobytes()
    back = sc.rope_apply(lay, mine.copy(), POS, inverse=True)
    af = sc.rope_table(lay)[1].attention_factor
    np.testing.assert_allclose(back, k * np.where(_rot_mask(lay), af, 1.0), rtol=2e-5, atol=2e-4)


def _rot_mask(lay):
    m = np.zeros(lay.head_dim, bool)
    m[lay.rope_first_dim:lay.rope_first_dim + lay.rope_dims] = True
    return m


def test_rope_table_formula():
    lay = rope_layer(sc.RopeStyle.NEOX, 0, 64)
    f, info = sc.rope_table(lay)
    assert info == sc.RopeInfo(sc.RopeStyle.NEOX, 0, 64, 1.0, False)
    want = (1.0 / (np.float32(150000.0) ** (np.arange(0, 64, 2, dtype=np.float32) / 64)))
    np.testing.assert_allclose(f, want.astype(np.float32), rtol=3e-7)
    f2, info2 = sc.rope_table(sc.Layer())
    assert f2.size == 0 and info2.style == sc.RopeStyle.NONE
    y = sc.rope_table(rope_layer(sc.RopeStyle.NEOX, 0, 64, rope_yarn_factor=4.0))[1]
    assert y.attention_factor == pytest.approx(0.1 * np.log(4.0) + 1)
    with pytest.raises(sc.InvalidArgumentError, match="rope_dims = 7"):
        sc.rope_table(rope_layer(sc.RopeStyle.NEOX, 0, 7))


def test_rope_apply_refusals():
    lay = rope_layer(sc.RopeStyle.NEOX, 0, 64)
    x = np.ones((2, 1, 64), np.float32)
    with pytest.raises(sc.InvalidArgumentError, match=r"positions\[1\] = -4"):
        sc.rope_apply(lay, x, [0, -4])
    assert (x == 1).all()
    with pytest.raises(sc.InvalidArgumentError, match="positions: expected shape"):
        sc.rope_apply(lay, x, [0])
    with pytest.raises(sc.InvalidArgumentError, match="x: expected shape"):
        sc.rope_apply(lay, np.ones((2, 1, 32), np.float32), [0, 1])


def test_step_positions():
    lay = rope_layer(sc.RopeStyle.NEOX, 0, 64)
    rng = np.random.default_rng(2)
    q = rng.standard_normal((6, 2, 64)).astype(np.float32)
    k = rng.standard_normal((6, 2, 64)).astype(np.float32)
    v = rng.standard_normal((6, 2, 64)).astype(np.float32)
    outs = []
    for pos in (None, np.arange(6), np.arange(6) + 1000):
        with sc.Cache(window=8, max_slots=1, layers=[lay]) as c:
            s = c.alloc()
            with c.plan() as p:
                p.build([(s, 6, 6)])
                outs.append(p.step(0, q, k, v, positions=pos))
    assert outs[0].tobytes() == outs[1].tobytes()
    np.testing.assert_allclose(outs[2], outs[0], atol=5e-4)  # relative positions only
    assert outs[2].tobytes() != outs[0].tobytes()
    with sc.Cache(window=8, max_slots=1, layers=[lay]) as c:
        s = c.alloc()
        with c.plan() as p:
            p.build([(s, 6, 6)])
            with pytest.raises(sc.InvalidArgumentError, match=r"positions\[2\] = -1"):
                p.step(0, q, k, v, positions=[0, 1, -1, 3, 4, 5])
            with pytest.raises(sc.InvalidArgumentError, match="positions: expected integers"):
                p.step(0, q, k, v, positions=np.zeros(6, np.float32))


def test_attention_merge_without_a_cache():
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal((5, 4, 32)).astype(np.float32) for _ in range(2))
    la, lb = (rng.standard_normal((5, 4)).astype(np.float32) for _ in range(2))
    lse = np.zeros((5, 4), np.float32)
    out = sc.attention_merge(a, la, b, lb, lse=lse)
    with sc.Cache(window=8, max_slots=1, layers=[sc.Layer(head_dim=32, q_heads=2)]) as c:
        lse2 = np.zeros_like(lse)
        out2 = c.attention_merge(a, la, b, lb, lse=lse2)
    assert out.tobytes() == out2.tobytes() and lse.tobytes() == lse2.tobytes()
    m = np.maximum(la, lb).astype(np.float64)
    wa, wb = np.exp(la - m), np.exp(lb - m)
    ref = (wa[..., None] * a + wb[..., None] * b) / (wa + wb)[..., None]
    np.testing.assert_allclose(out, ref, rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(lse, m + np.log(wa + wb), rtol=2e-6, atol=2e-6)


def test_rope_apply_against_transformers():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    dsv4 = pytest.importorskip("transformers.models.deepseek_v4.modeling_deepseek_v4")
    rng = np.random.default_rng(4)
    pos = torch.tensor(POS.astype(np.int64))
    # Llama: rotate-half over the whole head.
    lay = rope_layer(sc.RopeStyle.NEOX, 0, 64, rope_yarn_factor=8.0,
                     rope_yarn_original_max_positions=4096)
    f, info = sc.rope_table(lay)
    x = rng.uniform(-2, 2, (len(POS), 2, 64)).astype(np.float32)
    freqs = pos.float()[:, None] * torch.from_numpy(f)[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    cos, sin = emb.cos() * info.attention_factor, emb.sin() * info.attention_factor
    xt = torch.from_numpy(x).transpose(0, 1)[None]  # [1, heads, T, D]
    want, _ = llama.apply_rotary_pos_emb(xt, xt, cos[None], sin[None])
    want = want[0].transpose(0, 1).numpy()
    mine = sc.rope_apply(lay, x.copy(), POS)
    np.testing.assert_allclose(mine, want, rtol=0, atol=4e-6 * np.abs(want).max())
    # DeepSeek-V4: interleaved pairs on the trailing 64 of 512 dims.
    lay = rope_layer(sc.RopeStyle.GPTJ, 448, 64, head_dim=512)
    f, info = sc.rope_table(lay)
    x = rng.uniform(-2, 2, (len(POS), 2, 512)).astype(np.float32)
    freqs = pos.float()[:, None] * torch.from_numpy(f)[None, :]
    xt = torch.from_numpy(x).transpose(0, 1)[None]
    want = dsv4.apply_rotary_pos_emb(xt, freqs.cos()[None], freqs.sin()[None])
    want = want[0].transpose(0, 1).numpy()
    mine = sc.rope_apply(lay, x.copy(), POS)
    assert (mine[..., :448] == x[..., :448]).all()
    np.testing.assert_allclose(mine, want, rtol=0, atol=4e-6 * np.abs(want).max())


def test_rope_apply_and_merge_on_a_cuda_device():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    lay = rope_layer(sc.RopeStyle.GPTJ, 32, 32, rope_yarn_factor=8.0)
    x = torch.randn(len(POS), 2, 64)
    host = sc.rope_apply(lay, x.clone(), POS)
    dev = sc.rope_apply(lay, x.cuda(), torch.from_numpy(POS)).cpu()
    # Host and device cosf/sinf may differ by an ulp or two.
    torch.testing.assert_close(dev, host, rtol=1e-5, atol=1e-5)
    back = sc.rope_apply(lay, dev.cuda(), POS, inverse=True).cpu()
    af = sc.rope_table(lay)[1].attention_factor
    scale = torch.from_numpy(np.where(_rot_mask(lay), af, 1.0).astype(np.float32))
    torch.testing.assert_close(back, x * scale, rtol=2e-5, atol=2e-4)
    a, b = torch.randn(5, 32), torch.randn(5, 32)
    la, lb = torch.randn(5), torch.randn(5)
    on_dev = sc.attention_merge(a.cuda(), la.cuda(), b.cuda(), lb.cuda()).cpu()
    torch.testing.assert_close(on_dev, sc.attention_merge(a, la, b, lb), rtol=2e-6, atol=2e-6)
