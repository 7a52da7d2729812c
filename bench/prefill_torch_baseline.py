#!/usr/bin/env python3
"""PyTorch CPU contenders of bench/prefill_cpu_bench, driven over a pipe.

prefill_cpu_bench starts this script with the torch venv's python and talks to
it one line at a time (stdin: commands, stdout: answers), so that the PyTorch
calls are timed interleaved with ours and OpenBLAS's, call by call, in the
same run (see TimeInterleaved in bench/cpu_bench_common.h):

  load HQ HKV D T W BLOCK QFILE KFILE VFILE
      FP32 arrays written by the bench: q [T, HQ, D]; k and v [W - 1 + T, HKV, D]
      (the dequantised KV the step attends: W - 1 history rows, then the
      chunk's rows; v may name the same file as k). Token t sees key rows
      [t, t + W). Builds the inputs of each contender and compiles flex.
      Answers "ok" or "err MESSAGE".
  check NAME OUTFILE
      runs contender NAME once and writes its output as FP32 [T, HQ, D].
      Answers "ok" or "err MESSAGE" (e.g. flex_attention could not compile).
  run NAME THREADS
      torch.set_num_threads(THREADS), one call of NAME. Answers
      "WALL_S CPU_S" (time.perf_counter / time.process_time around the call).
  quit

Contenders (sinks off, FP32, scale 1/sqrt(D)):
  sdpa        torch.nn.functional.scaled_dot_product_attention with a boolean
              band mask, on the band's blocks only: the chunk is cut into
              query blocks of BLOCK tokens (the same blocks as the bench's
              (a)), each attends to its BLOCK + W - 1 keys (an overlapping
              strided view of k), all blocks in one
              batched call; query heads that share a KV head folded into the
              query length (one GEMM pair per KV head and block).
  sdpa_full   the same call over the whole chunk at once: T x (W - 1 + T)
              band mask, O(T^2) work. Only loaded when T <= FULL_MAX.
  flex        torch.compile(flex_attention) with a sliding-window BlockMask
              (create_block_mask, 128 x 128 blocks; only blocks that meet the
              band are computed), GQA via enable_gqa.
"""
import os
import sys
import time

FULL_MAX = int(os.environ.get("SWA_PREFILL_SDPA_FULL_MAX", "2048"))


def reply(s):
    sys.stdout.write(s + "\n")
    sys.stdout.flush()


class Case:
    def __init__(self, torch, hq, hkv, d, t, w, block, qf, kf, vf):
        import numpy as np
        self.torch = torch
        self.hq, self.hkv, self.d, self.t, self.w, self.block = hq, hkv, d, t, w, block
        nk = w - 1 + t
        self.nk = nk
        self.q = torch.from_numpy(np.fromfile(qf, dtype=np.float32).reshape(t, hq, d))
        self.k = torch.from_numpy(np.fromfile(kf, dtype=np.float32).reshape(nk, hkv, d))
        self.v = self.k if vf == kf else torch.from_numpy(
            np.fromfile(vf, dtype=np.float32).reshape(nk, hkv, d))
        self.ratio = hq // hkv
        self.fns = {}
        self.errors = {}
        self._sdpa_blocks()
        if t <= FULL_MAX:
            self._sdpa_full()
        else:
            self.errors["sdpa_full"] = (f"not run: T {t} > {FULL_MAX} (O(T^2) band mask; "
                                        f"set SWA_PREFILL_SDPA_FULL_MAX)")
        self._flex()

    # q [T, HQ, D] -> [B, HKV, n * ratio, D] with n tokens per block, rows
    # token-major within each KV head (free view when HKV == 1).
    def _fold_q(self, n):
        b = self.t // n
        q = self.q.reshape(b, n, self.hkv, self.ratio, self.d)
        return q.permute(0, 2, 1, 3, 4).reshape(b, self.hkv, n * self.ratio, self.d)

    def _unfold_out(self, o, n):
        b = self.t // n
        o = o.reshape(b, self.hkv, n, self.ratio, self.d).permute(0, 2, 1, 3, 4)
        return o.reshape(self.t, self.hq, self.d)

    def _band(self, n_tok, n_keys):
        torch = self.torch
        qi = torch.arange(n_tok)[:, None]
        ki = torch.arange(n_keys)[None, :]
        band = (ki >= qi) & (ki < qi + self.w)
        return band.repeat_interleave(self.ratio, dim=0)  # rows token-major

    def _sdpa_blocks(self):
        torch = self.torch
        F = torch.nn.functional
        n = min(self.block, self.t)
        if self.t % n:
            self.errors["sdpa"] = f"T {self.t} not a multiple of the block {n}"
            return
        b, nkb, hkv, d = self.t // n, n + self.w - 1, self.hkv, self.d
        mask = self._band(n, nkb)
        row = hkv * d

        def kv_blocks(x):
            return x.as_strided((b, hkv, nkb, d), (n * row, d, row, 1))

        def fn():
            out = F.scaled_dot_product_attention(self._fold_q(n), kv_blocks(self.k),
                                                 kv_blocks(self.v), attn_mask=mask)
            return self._unfold_out(out, n).contiguous()
        self.fns["sdpa"] = fn

    def _sdpa_full(self):
        torch = self.torch
        F = torch.nn.functional
        mask = self._band(self.t, self.nk)
        k = self.k.permute(1, 0, 2).unsqueeze(0)
        v = self.v.permute(1, 0, 2).unsqueeze(0)

        def fn():
            out = F.scaled_dot_product_attention(self._fold_q(self.t), k, v, attn_mask=mask)
            return self._unfold_out(out, self.t).contiguous()
        self.fns["sdpa_full"] = fn

    def _flex(self):
        torch = self.torch
        try:
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            w = self.w

            def band(b, h, qi, ki):
                return (ki >= qi) & (ki < qi + w)
            bm = create_block_mask(band, None, None, self.t, self.nk, device="cpu")
            flex = torch.compile(flex_attention)
            q = self.q.permute(1, 0, 2).unsqueeze(0)
            k = self.k.permute(1, 0, 2).unsqueeze(0)
            v = self.v.permute(1, 0, 2).unsqueeze(0)
            gqa = self.hkv != self.hq

            def fn():
                out = flex(q, k, v, block_mask=bm, enable_gqa=gqa)
                return out[0].permute(1, 0, 2).contiguous()
            with torch.inference_mode():
                fn()  # compiles
            self.fns["flex"] = fn
        except Exception as e:  # noqa: BLE001 (any failure is reported, not fatal)
            msg = " ".join(f"{type(e).__name__}: {e}".split())
            self.errors["flex"] = "torch.compile(flex_attention) failed on the CPU: " + msg[:300]


def main():
    try:
        import torch
    except ImportError:
        reply("err torch is not installed")
        return 0
    reply(f"hello torch {torch.__version__} (sdpa_full up to T {FULL_MAX})")
    case = None
    threads = None
    for line in sys.stdin:
        a = line.split()
        if not a:
            continue
        try:
            if a[0] == "quit":
                break
            if a[0] == "load":
                hq, hkv, d, t, w, block = map(int, a[1:7])
                torch.set_num_threads(1)
                threads = 1
                case = None
                with torch.inference_mode():
                    case = Case(torch, hq, hkv, d, t, w, block, a[7], a[8], a[9])
                reply("ok")
            elif a[0] == "check":
                name = a[1]
                if name not in case.fns:
                    reply("err " + case.errors.get(name, f"unknown contender {name}"))
                    continue
                with torch.inference_mode():
                    out = case.fns[name]()
                out.numpy().astype("float32").tofile(a[2])
                reply("ok")
            elif a[0] == "run":
                name, n = a[1], int(a[2])
                if n != threads:
                    torch.set_num_threads(n)
                    threads = n
                fn = case.fns[name]
                with torch.inference_mode():
                    c0, t0 = time.process_time(), time.perf_counter()
                    fn()
                    t1, c1 = time.perf_counter(), time.process_time()
                reply(f"{t1 - t0:.9f} {c1 - c0:.9f}")
            else:
                reply(f"err unknown command {a[0]}")
        except Exception as e:  # noqa: BLE001
            reply("err " + " ".join(f"{type(e).__name__}: {e}".split())[:300])
    return 0


if __name__ == "__main__":
    sys.exit(main())
