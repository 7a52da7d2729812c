#!/usr/bin/env python3
"""The compressor step (swa_compress_step) on the CPU against NumPy and PyTorch
implementations of the same math, in the same process, and the memory of the
compression region per sequence next to the SWA rings (issue 31, benchmark).

    SWACACHE_LIBRARY=build-dev/libswacache.so PYTHONPATH=bindings/python \\
        ~/.cache/swacache-torch-venv-*/bin/python bench/compress_bench.py [--repeat 5] [--quick]

(without torch the PyTorch column is left out; NumPy is required.)

DeepSeek-V4-Flash-like compressors (transformers' defaults): entries d = 512 with
64 rotary dims (the "compress" YaRN table), CSA rate 4 (rows 2d = 1024, plus the
Lightning Indexer's compressor, d = 128, rows 256), HCA rate 128 (rows 512), FP32
source rows, N = 3 drafts. Two workloads per compressor, each timed as the best of
--repeat runs of the whole schedule, per new token:
  prefill: 1 sequence, chunks of 512 tokens up to 4096;
  decode:  64 sequences, 1 + N tokens per step (N drafts, all rejected but one, so
           every step rewinds), for 128 steps (a window closes every c accepted tokens).
All three do the same work per step: store the new rows of each sequence, and for each
window that closes, gather its S slots (c for HCA, 2c for CSA: the previous window's
Ca half and this one's Cb half), softmax over the slots per feature of gate +
position_bias, weight the kv values, sum, RMSNorm, rotate the trailing 64 dims at w*c.
NumPy and PyTorch keep each sequence's rows in a per-sequence array (the engine-side
alternative to the library's ring: appended, truncated on rejection) and gather the
closing windows with fancy indexing, vectorised over the windows of the step; the
library gets the step's rows and a built plan. Threads: the library's cache runs with
num_threads 1 and torch.set_num_threads(1), NumPy single-threaded (no BLAS in the math).
The entries of the three are checked against each other (max |difference| printed).
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

import swacache as sc

try:
    import torch
except ImportError:  # the PyTorch column is optional
    torch = None

N = 3
D, ROPE, DI = 512, 64, 128
COMPRESSORS = {  # name: (kind, rate, entry width, row width)
    "CSA (c=4, d=512)": ("csa", 4, D, 2 * D),
    "CSA indexer (c=4, d=128)": ("csa", 4, DI, 2 * DI),
    "HCA (c=128, d=512)": ("hca", 128, D, D),
}


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def flash_layers(row_format=sc.Format.FP32, kv_format=sc.Format.FP8_DS_MLA):
    """DeepSeek-V4-Flash's 43 layers (0, 1 sliding; even 2..42 CSA; odd 3..41 HCA), with
    their compressors (docs/models.md)."""
    out = []
    for i in range(43):
        base = dict(q_heads=64, kv_heads=1, head_dim=512, shared_kv=True, kv_format=kv_format,
                    has_sinks=True, rope_style=sc.RopeStyle.GPTJ, rope_first_dim=448,
                    rope_dims=64, rope_derotate_output=True)
        if i < 2:
            out.append(sc.Layer(**base, rope_theta=10000.0))
            continue
        yarn = dict(rope_theta=160000.0, rope_yarn_factor=16.0,
                    rope_yarn_original_max_positions=65536, rope_attention_factor=1.0)
        comp = (dict(compress_kind=sc.CompressKind.CSA, compress_ratio=4, index_head_dim=DI)
                if i % 2 == 0 else dict(compress_kind=sc.CompressKind.HCA, compress_ratio=128))
        out.append(sc.Layer(**base, **yarn, **comp, compress_head_dim=D, compress_rope_dims=ROPE,
                            compress_row_format=row_format))
    return out


def memory_table():
    rows = []
    for fmt in (sc.Format.FP32, sc.Format.BF16):
        cfg = sc.Config(layers=flash_layers(fmt), window=128, draft_tokens=N, max_slots=1)
        lay = sc.layout_compute(cfg)
        rows.append((fmt.name, lay.slot_bytes, lay.stored_bytes, lay.compress_bytes,
                     lay.compress_saved_bytes))
    # The rings alone: the same layers without compressors.
    plain = [sc.Layer(**{k: getattr(lay_, k) for k in ("q_heads", "kv_heads", "head_dim",
                                                       "shared_kv", "kv_format", "has_sinks")})
             for lay_ in flash_layers()]
    lay = sc.layout_compute(sc.Config(layers=plain, window=128, draft_tokens=N, max_slots=1))
    return rows, lay.slot_bytes


# ---- the reference math (NumPy / PyTorch), vectorised over a step's closing windows


def inv_freq_of() -> np.ndarray:
    lay = flash_layers()[2]
    freq, info = sc.rope_table(sc.Layer(q_heads=1, head_dim=D, kv_format=sc.Format.FP32,
                                        rope_style=sc.RopeStyle.GPTJ, rope_first_dim=D - ROPE,
                                        rope_dims=ROPE, rope_theta=lay.rope_theta,
                                        rope_yarn_factor=lay.rope_yarn_factor,
                                        rope_yarn_original_max_positions=65536,
                                        rope_attention_factor=1.0))
    return freq, info.attention_factor


def np_entries(kind, c, d, hist, wins, bias, weight, eps, freq, factor):
    """hist: per-sequence [P, 2, S] rows (kv, gate); wins: [(seq, w)]. -> [nw, d]."""
    S = 2 * d if kind == "csa" else d
    nw = len(wins)
    slots = 2 * c if kind == "csa" else c
    kv = np.zeros((nw, slots, d), np.float32)
    lg = np.full((nw, slots, d), -np.inf, np.float32)
    for k, (s, w) in enumerate(wins):
        h = hist[s]
        if kind == "hca":
            rows = h[w * c:(w + 1) * c]
            kv[k], lg[k] = rows[:, 0], rows[:, 1] + bias
        else:
            cur = h[w * c:(w + 1) * c]
            kv[k, c:], lg[k, c:] = cur[:, 0, d:], cur[:, 1, d:] + bias[:, d:]
            if w > 0:
                prev = h[(w - 1) * c:w * c]
                kv[k, :c], lg[k, :c] = prev[:, 0, :d], prev[:, 1, :d] + bias[:, :d]
    del S
    m = lg.max(axis=1, keepdims=True)
    e = np.exp(lg - m)
    x = (kv * (e / e.sum(axis=1, keepdims=True))).sum(axis=1)
    x = weight * (x / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps))
    pos = np.array([w * c for _, w in wins], np.float32)[:, None]
    ang = pos * freq[None, :]
    cs, sn = np.cos(ang) * factor, np.sin(ang) * factor
    a, b = x[:, d - ROPE::2].copy(), x[:, d - ROPE + 1::2].copy()
    x[:, d - ROPE::2], x[:, d - ROPE + 1::2] = a * cs - b * sn, b * cs + a * sn
    return x


def torch_entries(kind, c, d, hist, wins, bias, weight, eps, freq, factor):
    idx_seq = [s for s, _ in wins]
    ws = torch.tensor([w for _, w in wins])
    slots = 2 * c if kind == "csa" else c
    nw = len(wins)
    kv = torch.zeros(nw, slots, d)
    lg = torch.full((nw, slots, d), float("-inf"))
    ar = torch.arange(c)
    for s in set(idx_seq):
        sel = torch.tensor([k for k, q in enumerate(idx_seq) if q == s])
        h = hist[s]
        wsel = ws[sel]
        if kind == "hca":
            rows = h[(wsel[:, None] * c + ar[None])]  # [n, c, 2, S]
            kv[sel], lg[sel] = rows[:, :, 0], rows[:, :, 1] + bias
        else:
            cur = h[(wsel[:, None] * c + ar[None])]
            kv[sel, c:], lg[sel, c:] = cur[:, :, 0, d:], cur[:, :, 1, d:] + bias[:, d:]
            ok = wsel > 0
            if ok.any():
                ps = sel[ok]
                prev = h[((wsel[ok] - 1)[:, None] * c + ar[None])]
                kv[ps, :c], lg[ps, :c] = prev[:, :, 0, :d], prev[:, :, 1, :d] + bias[:, :d]
    p = torch.softmax(lg, dim=1)
    x = (kv * p).sum(dim=1)
    x = weight * (x * torch.rsqrt((x * x).mean(dim=1, keepdim=True) + eps))
    ang = (ws.float() * c)[:, None] * freq[None, :]
    cs, sn = ang.cos() * factor, ang.sin() * factor
    a, b = x[:, d - ROPE::2].clone(), x[:, d - ROPE + 1::2].clone()
    x[:, d - ROPE::2], x[:, d - ROPE + 1::2] = a * cs - b * sn, b * cs + a * sn
    return x


# ---- the schedules


def schedule(kind_of_run: str, quick: bool):
    """Steps as lists of (seq, q_start, n_new)."""
    if kind_of_run == "prefill":
        total = 1024 if quick else 4096
        return 1, [[(0, s, 512)] for s in range(0, total, 512)]
    seqs, steps = (16, 64) if quick else (64, 128)
    out, end = [], [0] * seqs
    rng = np.random.default_rng(0)
    # a prompt of 37 tokens per sequence first (not timed separately; part of the run)
    out.append([(s, 0, 37) for s in range(seqs)])
    end = [37] * seqs
    for _ in range(steps):
        st = []
        for s in range(seqs):
            accepted = int(rng.integers(0, 2))  # 0 or 1 draft accepted: every step rewinds
            q = end[s]
            st.append((s, q, 1 + N))
            end[s] = q + 1 + accepted
        out.append(st)
    return seqs, out


def run_library(kind, c, d, S, n_seqs, steps, rows, bias, weight):
    comp_kind = sc.CompressKind.CSA if kind == "csa" else sc.CompressKind.HCA
    lay = sc.Layer(q_heads=1, kv_heads=1, head_dim=64, kv_format=sc.Format.FP32,
                   rope_style=sc.RopeStyle.GPTJ, rope_first_dim=0, rope_dims=64,
                   rope_theta=160000.0, rope_yarn_factor=16.0,
                   rope_yarn_original_max_positions=65536, rope_attention_factor=1.0,
                   compress_kind=comp_kind, compress_ratio=c, compress_head_dim=d,
                   compress_rope_dims=ROPE)
    outs = []
    with sc.Cache(window=8, draft_tokens=N, max_slots=n_seqs, num_threads=1,
                  layers=[lay]) as cache:
        slots = [int(cache.alloc()) for _ in range(n_seqs)]
        with cache.plan() as plan:
            t0 = time.perf_counter()
            for st, (kv, gate) in zip(steps, rows):
                plan.build([sc.Seq(slots[s], n, q + n) for s, q, n in st])
                outs.append(plan.compress_step(0, kv, gate, bias, weight))
            t = time.perf_counter() - t0
    return t, outs


def run_reference(fn, kind, c, d, S, n_seqs, steps, rows, bias, weight, freq, factor, lib):
    """fn: np_entries or torch_entries; lib: np or torch (array module)."""
    if lib == "torch":
        conv = torch.from_numpy
        hist = [torch.zeros(0, 2, S) for _ in range(n_seqs)]
        cat = lambda a, b: torch.cat([a, b])  # noqa: E731
        stack = lambda a, b: torch.stack([a, b], dim=1)  # noqa: E731
        bias_, weight_, freq_ = conv(bias), conv(weight), conv(freq)
    else:
        conv = lambda a: a  # noqa: E731
        hist = [np.zeros((0, 2, S), np.float32) for _ in range(n_seqs)]
        cat = lambda a, b: np.concatenate([a, b])  # noqa: E731
        stack = lambda a, b: np.stack([a, b], axis=1)  # noqa: E731
        bias_, weight_, freq_ = bias, weight, freq
    outs = []
    t0 = time.perf_counter()
    for st, (kv, gate) in zip(steps, rows):
        kv_, gate_ = conv(kv), conv(gate)
        off, wins = 0, []
        for s, q, n in st:
            hist[s] = cat(hist[s][:q], stack(kv_[off:off + n], gate_[off:off + n]))
            # keep what the next windows can read: the last 2c + N rows (as the ring)
            wins += [(s, w) for w in range(q // c, (q + n) // c)]
            off += n
        outs.append(fn(kind, c, d, hist, wins, bias_, weight_, 1e-6, freq_, factor)
                    if wins else None)
    return time.perf_counter() - t0, outs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if torch is not None:
        torch.set_num_threads(1)
    freq, factor = inv_freq_of()
    print(f"CPU: {cpu_name()}; libswacache {sc.version()}; numpy {np.__version__}; "
          f"torch {torch.__version__ if torch is not None else 'absent'}")
    print(f"{'compressor':26s} {'workload':8s} {'tokens':>7s} {'windows':>7s} "
          f"{'ours us/tok':>11s} {'numpy us/tok':>12s} {'torch us/tok':>12s} "
          f"{'np/ours':>7s} {'torch/ours':>10s} {'max|diff|':>9s}")
    rng = np.random.default_rng(1)
    for name, (kind, c, d, S) in COMPRESSORS.items():
        bias = (0.5 * rng.standard_normal((c, S))).astype(np.float32)
        weight = (1 + 0.1 * rng.standard_normal(d)).astype(np.float32)
        for wl in ("prefill", "decode"):
            n_seqs, steps = schedule(wl, args.quick)
            rows = []
            for st in steps:
                T = sum(n for _, _, n in st)
                rows.append((rng.standard_normal((T, S)).astype(np.float32),
                             (2 * rng.standard_normal((T, S))).astype(np.float32)))
            tokens = sum(n for st in steps for _, _, n in st)
            best = {}
            outs = {}
            for _ in range(args.repeat):
                t, o = run_library(kind, c, d, S, n_seqs, steps, rows, bias, weight)
                best["ours"] = min(best.get("ours", t), t)
                outs["ours"] = o
                t, o = run_reference(np_entries, kind, c, d, S, n_seqs, steps, rows, bias,
                                     weight, freq, factor, "np")
                best["np"] = min(best.get("np", t), t)
                outs["np"] = o
                if torch is not None:
                    with torch.no_grad():
                        t, o = run_reference(torch_entries, kind, c, d, S, n_seqs, steps, rows,
                                             bias, weight, freq, factor, "torch")
                    best["torch"] = min(best.get("torch", t), t)
                    outs["torch"] = o
            n_win = sum(len(o) for o in outs["ours"])
            diff = 0.0
            for k, o in enumerate(outs["ours"]):
                if len(o) == 0:
                    continue
                diff = max(diff, float(np.abs(o - outs["np"][k]).max()))
                if "torch" in outs:
                    diff = max(diff, float(np.abs(o - outs["torch"][k].numpy()).max()))
            us = {k: 1e6 * v / tokens for k, v in best.items()}
            tt = f"{us['torch']:12.2f}" if "torch" in us else f"{'-':>12s}"
            tr = f"{us['torch'] / us['ours']:10.1f}" if "torch" in us else f"{'-':>10s}"
            print(f"{name:26s} {wl:8s} {tokens:7d} {n_win:7d} {us['ours']:11.2f} "
                  f"{us['np']:12.2f} {tt} {us['np'] / us['ours']:7.1f} {tr} {diff:9.2g}")
    rows_mem, rings_only = memory_table()
    print("\nDeepSeek-V4-Flash-like slot (43 layers, W = 128, N = 3, FP8_DS_MLA rings), bytes "
          "per sequence:")
    print(f"  SWA rings only (no compression state): {rings_only:,}")
    for fmt, slot, stored, comp, saved in rows_mem:
        print(f"  compressor rows {fmt}: compression region {comp:,} (blob section {saved:,}); "
              f"whole slot {slot:,}; stored rings {stored:,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
