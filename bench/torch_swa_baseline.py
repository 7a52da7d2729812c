#!/usr/bin/env python3
"""PyTorch baselines for the SWA attention shapes of attention_cuda_bench.

Same shapes and table columns as bench/attention_cuda_bench.cc:
  decode: Hq 64, one shared 512-wide KV vector (K = V), 6 query tokens per
          sequence, W 128, batch 8/64/256/1024; the KV is the dequantised BF16
          window (W + 5 rows per sequence), i.e. PyTorch gets the cache for free.
  prefill: 4096-token chunks after W history rows.
Paths: scaled_dot_product_attention with a boolean band mask, and
flex_attention with a sliding-window block mask (when available).
Usage: python3 bench/torch_swa_baseline.py [--quick]
"""
import sys

import torch
import torch.nn.functional as F

HQ, D, W, N = 64, 512, 128, 5
QUICK = "--quick" in sys.argv
dev = "cuda"


def time_ms(fn, iters):
    fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(iters):
        fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / iters


def ceilings():
    x = torch.empty(1 << 29, dtype=torch.float16, device=dev)  # 1 GiB
    y = torch.empty_like(x)
    ms = time_ms(lambda: y.copy_(x), 5 if QUICK else 20)
    bw = 2 * x.numel() * 2 / (ms * 1e-3) / 1e9
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev)
    b = torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev)
    gms = time_ms(lambda: a @ b, 3 if QUICK else 10)
    return bw, 2 * 8192 ** 3 / (gms * 1e-3) / 1e12


def row(name, ms, nbytes, flops, bw, gemm):
    gbs = nbytes / (ms * 1e-3) / 1e9
    tfs = flops / (ms * 1e-3) / 1e12
    print(f"| {name:<34} | {ms:10.4f} | {gbs:9.1f} | {100 * gbs / bw:6.1f}% | {tfs:8.2f} | "
          f"{100 * tfs / gemm:6.1f}% |", flush=True)


def band_mask(nq, nk, q_pos0, k_pos0):
    qp = torch.arange(nq, device=dev)[:, None] + q_pos0
    kp = torch.arange(nk, device=dev)[None, :] + k_pos0
    return (kp <= qp) & (qp - kp < W)


def main():
    bw, gemm = ceilings()
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}\n")
    print(f"| {'case':<34} | {'ms':>10} | {'GB/s':>9} | {'of bw':>7} | {'TFLOP/s':>8} | {'of GEMM':>7} |")
    print("|" + "-" * 36 + "|" + "-" * 12 + "|" + "-" * 11 + "|" + "-" * 9 + "|" + "-" * 10 + "|" + "-" * 9 + "|")
    row("device copy 1 GiB (torch)", 0.0 + 2 * (1 << 30) / bw / 1e6, 2 * (1 << 30), 0, bw, gemm)
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        flex = torch.compile(flex_attention)
    except Exception as e:  # noqa: BLE001
        print(f"(flex_attention unavailable: {e})")
        flex = None
    iters = 5 if QUICK else 20
    nq = N + 1
    nk = W + N  # keys of the 6 query tokens: positions q0 - W + 1 ... q0 + 5
    for batch in (8, 64, 256, 1024):
        q = torch.randn(batch, HQ, nq, D, dtype=torch.bfloat16, device=dev)
        kv = torch.randn(batch, 1, nk, D, dtype=torch.bfloat16, device=dev)
        mask = band_mask(nq, nk, W - 1, 0)
        kvx = kv.expand(batch, HQ, nk, D)
        nbytes = 2 * q.numel() * 2 + kv.numel() * 2
        band = float(mask.sum().item()) * batch
        flops = 4 * band * HQ * D
        ms = time_ms(lambda: F.scaled_dot_product_attention(q, kvx, kvx, attn_mask=mask), iters)
        row(f"torch SDPA decode B={batch}", ms, nbytes, flops, bw, gemm)
        if flex is not None:
            def mod(b, h, qi, ki):
                return (ki <= qi + W - 1) & (qi + W - 1 - ki < W)
            bm = create_block_mask(mod, None, None, nq, nk, device=dev)
            try:
                ms = time_ms(lambda: flex(q, kvx, kvx, block_mask=bm), iters)
                row(f"torch flex decode B={batch}", ms, nbytes, flops, bw, gemm)
            except Exception as e:  # noqa: BLE001
                print(f"(flex decode B={batch} failed: {type(e).__name__}: {e})")
    for nseq in ((1,) if QUICK else (1, 4)):
        T = 4096
        q = torch.randn(nseq, HQ, T, D, dtype=torch.bfloat16, device=dev)
        kv = torch.randn(nseq, 1, T + W, D, dtype=torch.bfloat16, device=dev)
        kvx = kv.expand(nseq, HQ, T + W, D)
        mask = band_mask(T, T + W, W, 0)
        band = float(mask.sum().item()) * nseq
        flops = 4 * band * HQ * D
        nbytes = 2 * q.numel() * 2 + kv.numel() * 2
        ms = time_ms(lambda: F.scaled_dot_product_attention(q, kvx, kvx, attn_mask=mask), 3)
        row(f"torch SDPA prefill {nseq} x 4096", ms, nbytes, flops, bw, gemm)
        if flex is not None:
            def mod(b, h, qi, ki):
                return (ki <= qi + W) & (qi + W - ki < W)
            bm = create_block_mask(mod, None, None, T, T + W, device=dev)
            try:
                ms = time_ms(lambda: flex(q, kvx, kvx, block_mask=bm), 3)
                row(f"torch flex prefill {nseq} x 4096", ms, nbytes, flops, bw, gemm)
            except Exception as e:  # noqa: BLE001
                print(f"(flex prefill failed: {type(e).__name__}: {e})")
    print("\nSame byte and FLOP accounting as attention_cuda_bench (in-band FLOPs only).")


if __name__ == "__main__":
    main()
