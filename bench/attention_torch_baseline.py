#!/usr/bin/env python3
"""PyTorch CPU baseline for the decode cases of bench/step_cpu_bench.

    ~/.cache/swacache-torch-venv-*/bin/python bench/attention_torch_baseline.py \
        [--step-bench build/bench/step_cpu_bench] [--repeat 7] [--quick] \
        [--ours CASE:SEQS:THREADS=GFLOPS[/BF16_GFLOPS] ...] [--no-ours] [--no-bf16]

(the venv comes from examples/python_engine/venv.sh; without torch the script
prints "SKIP: ..." and exits 0.)

Same shapes as step_cpu_bench: W 128, 6 tokens per sequence (5 drafts + 1),
500-token history, 16 and 64 sequences, sinks on, and its two cases:
  0  DeepSeek-V4-like: Hq 64, one shared 512-wide KV vector (K = V), MXFP8 ring
  1  gpt-oss-like:     Hq 64, 8 KV heads of 64, separate K and V, BF16 ring
PyTorch gets the KV already dequantised to FP32 (W + 5 = 133 rows per sequence
and KV head; for case 0 the values went through an E4M3 cast with a power-of-two
scale per 32 elements, for case 1 through BF16), i.e. the dequantisation and the
ring bookkeeping that our step includes are free for it. Timed: one call of
torch.nn.functional.scaled_dot_product_attention for all sequences, with
  - the query heads that share a KV head folded into the query length
    (q: [seqs, Hkv, (Hq/Hkv) * 6, D], k/v: [seqs, Hkv, 134, D]): one GEMM pair per
    KV head instead of Hq/Hkv, the strongest layout for SDPA;
  - a float mask: 0 inside each token's band (its W most recent positions),
    -inf outside;
  - the sinks: SDPA has no sink argument, so each sink is emulated exactly by
    one extra key column whose key and value are zero and whose mask entry is
    the sink logit (score = 0 * q + sink; adds exp(sink) to the denominator and
    nothing to the output).
torch.set_num_threads(1) and (2), best of --repeat calls after one warm-up.
GF/s uses step_cpu_bench's count, 4 * D * W * Hq per token (a token sees W
keys), over seqs * 6 tokens. With BF16 (unless --no-bf16) the same call runs on
BF16 q/k/v/mask (PyTorch's CPU kernels for BF16; no exactness claims).

"ours" is step_cpu_bench's GF/s (wall clock, best repeat) for the same case,
sequence count and threads, got by running it (--step-bench, one row per run:
--case C --seqs S --threads T) or given with --ours: its FP32-query figure next
to torch's FP32 row and its BF16-query figure next to torch's BF16 row. The
table prints ours / torch. The two processes do not run at the same time.
"""
import argparse
import math
import os
import re
import subprocess
import sys
import time

W, TOKENS, HISTORY = 128, 6, 500
CASES = [
    # name (as step_cpu_bench prints it), hq, hkv, d, shared K = V, ring format
    ("DeepSeek-V4-like MXFP8 Hq64 1xD512 shared", 64, 1, 512, True, "mxfp8"),
    ("gpt-oss-like BF16 Hq64 8xD64 K+V", 64, 8, 64, False, "bf16"),
]
SEQS = (16, 64)
THREADS = (1, 2)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--step-bench", default="build/bench/step_cpu_bench",
                   help="path of step_cpu_bench (default: %(default)s)")
    p.add_argument("--repeat", type=int, default=7, help="timed calls per row, best kept")
    p.add_argument("--quick", action="store_true", help="3 repeats, 16 sequences only")
    p.add_argument("--ours", action="append", default=[], metavar="C:S:T=GFLOPS[/BF16]",
                   help="our GF/s for case C, S sequences, T threads (skips running the bench)")
    p.add_argument("--no-ours", action="store_true", help="do not run step_cpu_bench")
    p.add_argument("--no-bf16", action="store_true", help="skip the BF16 rows")
    return p.parse_args()


def quantise_like_ring(x, fmt, torch):
    """FP32 values that a ring of `fmt` could hold (what dequantising gives)."""
    if fmt == "bf16":
        return x.to(torch.bfloat16).float()
    blocks = x.reshape(-1, 32)
    amax = blocks.abs().amax(dim=1, keepdim=True).clamp_min(2.0 ** -126)
    scale = torch.exp2(torch.ceil(torch.log2(amax / 448.0)))
    q = (blocks / scale).to(torch.float8_e4m3fn).float() * scale
    return q.reshape(x.shape)


def build_inputs(case, seqs, torch):
    """q, k, v, float mask in the folded layout (see the header)."""
    _, hq, hkv, d, shared, fmt = case
    g = torch.Generator().manual_seed(1234 + seqs)
    rows = W + TOKENS - 1  # keys any token of the step can see
    group = hq // hkv
    q = torch.randn(seqs, hkv, group * TOKENS, d, generator=g)
    k = quantise_like_ring(torch.randn(seqs, hkv, rows, d, generator=g), fmt, torch)
    v = k if shared else quantise_like_ring(torch.randn(seqs, hkv, rows, d, generator=g), fmt, torch)
    zero = torch.zeros(seqs, hkv, 1, d)
    k = torch.cat([k, zero], dim=2).contiguous()
    v = torch.cat([v, zero], dim=2).contiguous()
    sinks = torch.randn(hq, generator=g)
    # Token t (0..5) is at position HISTORY + t; key row r at HISTORY + t_max - rows + 1 + r.
    first = HISTORY + TOKENS - rows
    qpos = HISTORY + torch.arange(TOKENS)
    kpos = first + torch.arange(rows)
    band = (kpos[None, :] <= qpos[:, None]) & (qpos[:, None] - kpos[None, :] < W)
    keys = torch.where(band, 0.0, -math.inf)  # [TOKENS, rows]
    mask = torch.empty(hkv, group, TOKENS, rows + 1)
    mask[..., :rows] = keys
    mask[..., rows] = sinks.reshape(hkv, group, 1)
    mask = mask.reshape(1, hkv, group * TOKENS, rows + 1).expand(seqs, -1, -1, -1).contiguous()
    return q, k, v, mask


def time_sdpa(q, k, v, mask, reps, torch):
    F = torch.nn.functional
    with torch.inference_mode():
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # warm-up
        best = math.inf
        for _ in range(reps):
            t0 = time.perf_counter()
            F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            best = min(best, time.perf_counter() - t0)
    return best


def check_against_reference(case, torch):
    """The emulated sink and band give the attention the step computes (FP64, 2 sequences)."""
    _, hq, hkv, d, _, _ = case
    q, k, v, mask = build_inputs(case, 2, torch)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    rows = k.shape[2] - 1
    s = (q.double() @ k[:, :, :rows].double().transpose(-1, -2)) / math.sqrt(d)
    s = s + mask[..., :rows].double()
    sink = mask[..., rows:].double()
    m = torch.maximum(s.amax(dim=-1, keepdim=True), sink)
    p = torch.exp(s - m)
    ref = (p @ v[:, :, :rows].double()) / (p.sum(dim=-1, keepdim=True) + torch.exp(sink - m))
    return (out.double() - ref).abs().max().item()


def ours_from_bench(path, ci, seqs, threads, repeat):
    """GF/s column of step_cpu_bench's row for (case, seqs, threads), or None."""
    if not os.path.exists(path):
        return None, f"{path} not found"
    cmd = [path, "--case", str(ci), "--seqs", str(seqs), "--threads", str(threads),
           "--repeat", str(repeat)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, str(e)
    # step_cpu_bench prints the case name cut to 32 characters, seqs, thr,
    # "|", then the wall-clock GF/s of FP32 queries and of BF16 queries.
    name = re.escape(CASES[ci][0][:32])
    pat = re.compile(rf"^{name}\s*(\d+)\s+(\d+)\s+\|\s+([0-9.]+)\s+([0-9.]+)\s")
    for line in out.splitlines():
        m = pat.match(line)
        if m and int(m.group(1)) == seqs and int(m.group(2)) == threads:
            return {"fp32": float(m.group(3)), "bf16": float(m.group(4))}, " ".join(cmd)
    return None, "no matching row in: " + " ".join(cmd)


def main():
    args = parse_args()
    try:
        import torch
    except ImportError:
        print("SKIP: torch is not installed (create the venv with examples/python_engine/venv.sh "
              "and run this script with its python)")
        return 0
    reps = 3 if args.quick else args.repeat
    seqs_list = (16,) if args.quick else SEQS
    given = {}
    for spec in args.ours:
        m = re.fullmatch(r"(\d+):(\d+):(\d+)=([0-9.]+)(?:/([0-9.]+))?", spec)
        if not m:
            print(f"bad --ours {spec!r} (want C:S:T=GFLOPS or C:S:T=FP32/BF16)", file=sys.stderr)
            return 2
        fp32 = float(m.group(4))
        given[(int(m.group(1)), int(m.group(2)), int(m.group(3)))] = {
            "fp32": fp32, "bf16": float(m.group(5)) if m.group(5) else fp32}

    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"PyTorch {torch.__version__} CPU scaled_dot_product_attention baseline "
          f"(W {W}, {TOKENS} tokens per sequence, {HISTORY}-token history, sinks as an extra key)")
    print(f"machine load (1/5/15 min): {load}")
    for case in CASES:
        err = check_against_reference(case, torch)
        print(f"check vs FP64 reference, {case[0]}: max abs error {err:.2e}")
    print()
    print(f"{'case':42} {'seqs':>4} {'thr':>3} {'dtype':>5} {'torch us':>10} {'torch GF/s':>10} "
          f"{'ours GF/s':>9} {'ours/torch':>10}")
    notes = []
    for ci, case in enumerate(CASES):
        name, hq, _, d = case[:4]
        for seqs in seqs_list:
            q, k, v, mask = build_inputs(case, seqs, torch)
            flops = 4.0 * d * W * hq * TOKENS * seqs
            for threads in THREADS:
                ours = given.get((ci, seqs, threads))
                if ours is None and not args.no_ours:
                    ours, how = ours_from_bench(args.step_bench, ci, seqs, threads, reps)
                    notes.append(f"ours {ci}:{seqs}:{threads}: {how}")
                torch.set_num_threads(threads)
                dtypes = [("fp32", q, k, v, mask)]
                if not args.no_bf16:
                    dtypes.append(("bf16", q.bfloat16(), k.bfloat16(), v.bfloat16(), mask.bfloat16()))
                for label, qq, kk, vv, mm in dtypes:
                    t = time_sdpa(qq, kk, vv, mm, reps, torch)
                    gf = flops / t / 1e9
                    mine = ours.get(label) if ours else None
                    ours_s = f"{mine:9.1f}" if mine else f"{'-':>9}"
                    ratio = f"{mine / gf:9.2f}x" if mine else f"{'-':>10}"
                    print(f"{name:42} {seqs:4d} {threads:3d} {label:>5} {t * 1e6:10.1f} {gf:10.1f} "
                          f"{ours_s} {ratio}", flush=True)
    print(f"\nmachine load (1/5/15 min): {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("torch: SDPA call only, KV already dequantised to FP32 (or BF16); "
          "ours: step_cpu_bench GF/s (whole swa_step: encode, dequantise, attend, store).")
    for n in notes:
        print(n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
