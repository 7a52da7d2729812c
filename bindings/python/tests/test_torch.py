"""PyTorch tensors (CPU zero-copy; CUDA when the library and a GPU allow)."""

import math

import numpy as np
import pytest

import swacache as sc
from helpers import layer, ref_attention

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
W = 8


def test_cpu_tensors_zero_copy():
    g = torch.Generator().manual_seed(0)
    q = torch.randn(5, 4, 32, generator=g)
    k = torch.randn(5, 2, 32, generator=g)
    v = torch.randn(5, 2, 32, generator=g)
    sinks = torch.randn(4, generator=g)
    with sc.Cache(window=W, max_slots=2, layers=[layer(has_sinks=True)]) as c:
        s = c.alloc()
        with c.plan() as p:
            p.build([(s, 5, 5)])
            out = torch.zeros(5, 4, 32)
            ptr = out.data_ptr()
            r, lse = p.step(0, q, k, v, sinks=sinks, out=out, lse=True)
            assert r is out and out.data_ptr() == ptr and isinstance(lse, torch.Tensor)
        ref, ref_lse = ref_attention(q.numpy(), k.numpy(), v.numpy(), range(5), range(5), W,
                                     1 / math.sqrt(32), sinks.numpy())
        np.testing.assert_allclose(out.numpy(), ref, atol=2e-5)
        np.testing.assert_allclose(lse.numpy(), ref_lse, atol=2e-5)
        t = c.alloc()
        with c.plan() as p:
            p.build([(t, 5, 5)])
            o2 = p.step(0, q.bfloat16(), k.bfloat16(), v.bfloat16(), sinks=sinks,
                        out_dtype=sc.DType.BF16)
            assert o2.dtype == torch.bfloat16
            np.testing.assert_allclose(o2.float().numpy(), ref, atol=3e-2)
            with pytest.raises(sc.InvalidArgumentError, match="q: the tensor must be contiguous"):
                p.step(0, q.transpose(0, 1).contiguous().transpose(0, 1), k, v, sinks=sinks)
            with pytest.raises(sc.InvalidArgumentError, match="k: expected dtype"):
                p.step(0, q, k.double(), v, sinks=sinks)
            with pytest.raises(sc.InvalidArgumentError, match="out: an output tensor must not"):
                p.step(0, q, k, v, sinks=sinks, out=torch.zeros(5, 4, 32, requires_grad=True))


def test_merge_with_torch():
    with sc.Cache(window=W, max_slots=1, layers=[layer()]) as c:
        oa, ob = torch.randn(3, 4, 32), torch.randn(3, 4, 32)
        la, lb = torch.randn(3, 4), torch.full((3, 4), -math.inf)
        out = c.attention_merge(oa, la, ob, lb)
        assert isinstance(out, torch.Tensor)
        torch.testing.assert_close(out, oa)


def _cuda_cache():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device visible to PyTorch")
    try:
        # Head dim 64: the CUDA kernels are compiled for 64/128/256/512.
        return sc.Cache(window=W, max_slots=2, backend=sc.Backend.CUDA,
                        layers=[layer(head_dim=64, kv_format=sc.Format.BF16)])
    except (sc.UnimplementedError, sc.UnavailableError) as e:
        pytest.skip(f"libswacache has no usable CUDA backend here (built without CUDA?): {e}")


def test_cuda_tensors_pass_through():
    c = _cuda_cache()
    with c:
        assert c.backend == sc.Backend.CUDA
        s = c.alloc()
        g = torch.Generator().manual_seed(1)
        q, k, v = (torch.randn(5, 4, 64, generator=g), torch.randn(5, 2, 64, generator=g),
                   torch.randn(5, 2, 64, generator=g))
        with c.plan() as p:
            p.build([(s, 5, 5)])
            out = p.step(0, q.cuda(), k.cuda(), v.cuda())
            assert out.is_cuda
            torch.cuda.synchronize()
            with pytest.raises(sc.InvalidArgumentError, match="CUDA backend"):
                p.step(0, q, k, v)
        ref, _ = ref_attention(q.numpy(), k.bfloat16().float().numpy(),
                               v.bfloat16().float().numpy(), range(5), range(5), W,
                               1 / math.sqrt(64))
        np.testing.assert_allclose(out.cpu().numpy(), ref, atol=2e-2)
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            la = torch.zeros(3, device="cuda")
            o = c.attention_merge(torch.ones(3, 32, device="cuda"), la,
                                  torch.zeros(3, 32, device="cuda"), la)
        stream.synchronize()
        torch.testing.assert_close(o.cpu(), torch.full((3, 32), 0.5))
