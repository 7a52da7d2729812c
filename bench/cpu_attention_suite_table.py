#!/usr/bin/env python3
"""One markdown table from the outputs of bench/run_cpu_attention_suite.sh.

    cpu_attention_suite_table.py --cpu NAME --flags FLAGS --torch TORCH.txt \
        [--prefill PREFILL.txt ...] STEP.txt [STEP.txt ...]

STEP.txt: step_cpu_bench outputs (several runs: each figure's best run is
kept; the percentages come from the same run as their figure). TORCH.txt:
bench/attention_torch_baseline.py --no-ours. PREFILL.txt: prefill_cpu_bench
outputs (FP32 and --bf16 queries). Standard library only.
"""
import argparse
import re
import sys

TARGET_TORCH = 1.5   # issue 34: ours >= 1.5x PyTorch SDPA, FP32 and BF16
TARGET_FMA = 75      # FP32 path >= 75 % of the FMA peak
TARGET_AMX = 40      # AMX path >= 40 % of the tdpbf16ps peak


def num(x):
    try:
        return float(x.rstrip("%x"))
    except ValueError:
        return None


def parse_step(path):
    head, rows = {}, {}
    with open(path) as f:
        for line in f:
            m = re.search(r"AVX2 ([0-9.]+), AVX-512 ([0-9.]+) GFLOP/s.*vdpbf16ps peak ([0-9.]+)"
                          r".*tdpbf16ps \(AMX-BF16\) peak ([0-9.]+)", line)
            if m:
                head.update(avx2=float(m[1]), avx512=float(m[2]), vdpbf=float(m[3]),
                            amx=float(m[4]))
            m = re.search(r"SWACACHE_ATTENTION=([^:]+): (\S+) kernels\).*path chosen: ([^)]+)\)",
                          line)
            if m:
                head.update(forced=m[1], fp32_path=m[2], bf16_path=m[3])
            if line.startswith("machine load") and "load" not in head:
                head["load"] = line.split(":", 1)[1].strip()
            parts = line.rstrip("\n").split("|")
            if len(parts) < 5 or len(parts[0]) < 40:
                continue
            left = parts[0]
            name, rest = left[:32].strip(), left[32:].split()
            if len(rest) != 2 or not rest[0].isdigit():
                continue
            wall, cpu, probes = parts[1].split(), parts[2].split(), parts[4].split()
            rows[(name, int(rest[0]), int(rest[1]))] = {
                "fp32": num(wall[0]), "bf16": num(wall[1]), "base": num(wall[2]),
                "fma_pct": num(cpu[6]) if len(cpu) > 6 else None,
                "pk16_pct": num(cpu[7]) if len(cpu) > 7 else None,
                "pkfma_run": num(probes[0]) if probes else None,
                "pk16_run": num(probes[1]) if len(probes) > 1 else None,
                "fma_pct_run": num(probes[2]) if len(probes) > 2 else None,
                "pk16_pct_run": num(probes[3]) if len(probes) > 3 else None,
            }
    return head, rows


def parse_torch(path):
    out = {}
    pat = re.compile(r"^(.{42}) +(\d+) +(\d+) +(fp32|bf16) +([0-9.]+) +([0-9.]+)")
    with open(path) as f:
        for line in f:
            m = pat.match(line)
            if m:
                out[(m[1].strip()[:32], int(m[2]), int(m[3]), m[4])] = float(m[6])
    return out


def parse_prefill(path):
    kind, rows = "?", {}
    with open(path) as f:
        for line in f:
            m = re.search(r"(FP32|BF16) queries, no sinks; kernels (\S+)", line)
            if m:
                kind = f"{m[1]} ({m[2]})"
            parts = line.rstrip("\n").split("|")
            if len(parts) < 5:
                continue
            left = parts[0].split()
            if len(left) < 3 or not left[-1].isdigit() or not left[-2].isdigit():
                continue
            vals = parts[1].split()
            best = parts[2].split()
            pk = parts[3].split()
            rows[(" ".join(left[:-2]), int(left[-2]), int(left[-1]))] = {
                "ours": num(vals[0]), "blas": num(vals[1]), "sdpa": num(vals[2]),
                "flex": num(vals[4]) if len(vals) > 4 else None,
                "best": num(best[0]) if best else None, "pk": num(pk[0]) if pk else None}
    return kind, rows


def fmt(x, unit=""):
    return "-" if x is None else f"{x:.1f}{unit}" if unit != "%" else f"{x:.0f}%"


def verdict(x, target):
    if x is None:
        return "-"
    return f"{x:.2f}x {'ok' if x >= target else '**below**'}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu", default="?")
    ap.add_argument("--flags", default="")
    ap.add_argument("--torch")
    ap.add_argument("--prefill", action="append", default=[])
    ap.add_argument("step", nargs="+")
    a = ap.parse_args()
    runs = [parse_step(p) for p in a.step]
    head = runs[0][0]
    torch = parse_torch(a.torch) if a.torch else {}
    print(f"## CPU attention suite: {a.cpu}\n")
    print(f"- CPU flags: {a.flags.strip() or '-'}; FP32 path `{head.get('fp32_path', '?')}`, "
          f"BF16 path `{head.get('bf16_path', '?')}` (SWACACHE_ATTENTION={head.get('forced', '?')})")
    peaks = {k: max(r[0].get(k, 0) for r in runs) for k in ("avx512", "vdpbf", "amx")}
    print(f"- 1-core peaks probed at start (best of {len(runs)} runs): AVX-512 FMA "
          f"{peaks['avx512']:.1f}, vdpbf16ps {peaks['vdpbf']:.1f}, tdpbf16ps {peaks['amx']:.1f} "
          "GFLOP/s")
    print(f"- machine load at the start of each decode run: "
          + "; ".join(r[0].get("load", "?") for r in runs))
    print("- ours: `step_cpu_bench --repeat 7` (whole swa_step, wall clock, best call; best of "
          f"{len(runs)} runs); torch: `attention_torch_baseline.py --no-ours --repeat 7` "
          "(SDPA call only, KV already dequantised); %peak: per CPU-second against the probes "
          "timed interleaved with the same row (pkFMA, pk16)\n")
    print("| case | seqs | thr | ours FP32 | torch FP32 | FP32 ours/torch | ours BF16 | torch BF16 "
          "| BF16 ours/torch | %FMA peak (FP32) | %BF16-path peak (BF16) | pkFMA / pk16 in run |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    keys = sorted({k for _, rows in runs for k in rows}, key=lambda k: (k[0][:3] != "Dee", k[1], k[2]))
    for key in keys:
        cand = [rows[key] for _, rows in runs if key in rows]
        b32 = max(cand, key=lambda r: r["fp32"] or 0)
        b16 = max(cand, key=lambda r: r["bf16"] or 0)
        t32 = torch.get((key[0], key[1], key[2], "fp32"))
        t16 = torch.get((key[0], key[1], key[2], "bf16"))
        r32 = b32["fp32"] / t32 if t32 and b32["fp32"] else None
        r16 = b16["bf16"] / t16 if t16 and b16["bf16"] else None
        fma = b32["fma_pct_run"]
        pk16 = b16["pk16_pct_run"]
        fma_s = "-" if fma is None else f"{fma:.0f}% {'ok' if fma >= TARGET_FMA else '**below**'}"
        pk_s = "-" if pk16 is None else (f"{pk16:.0f}% "
                                         f"{'ok' if pk16 >= TARGET_AMX else '**below**'}")
        print(f"| {key[0]} | {key[1]} | {key[2]} | {fmt(b32['fp32'])} | {fmt(t32)} | "
              f"{verdict(r32, TARGET_TORCH)} | {fmt(b16['bf16'])} | {fmt(t16)} | "
              f"{verdict(r16, TARGET_TORCH)} | {fma_s} | {pk_s} | "
              f"{fmt(b32['pkfma_run'])} / {fmt(b16['pk16_run'])} |")
    print(f"\nTargets (issue 34): ours/torch >= {TARGET_TORCH}x in FP32 and BF16; FP32 >= "
          f"{TARGET_FMA}% of the FMA peak; the AMX path >= {TARGET_AMX}% of the tdpbf16ps peak "
          "(the BF16-path column, when the path is amx_bf16). GFLOP/s count 4 * D * W * Hq per "
          "token.")
    if a.prefill:
        print("\n### Chunked prefill (`prefill_cpu_bench --quick [--bf16 --no-torch]`, 512-token chunk), GFLOP/s of the "
              "band, wall clock\n")
        print("| queries | case | T | thr | ours | best of OpenBLAS / torch | ours/best | torch sdpa "
              "| flex | %pk |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for p in a.prefill:
            kind, rows = parse_prefill(p)
            for key, r in rows.items():
                ratio = r["ours"] / r["best"] if r["ours"] and r["best"] else None
                print(f"| {kind} | {key[0]} | {key[1]} | {key[2]} | {fmt(r['ours'])} | "
                      f"{fmt(r['best'])} | {'-' if ratio is None else f'{ratio:.2f}x'} | "
                      f"{fmt(r['sdpa'])} | {fmt(r['flex'])} | {fmt(r['pk'], '%')} |")
        print("\n%pk: ours per thread against the FMA peak (FP32) or the BF16 path's peak "
              "(BF16), probed at the start of that run.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
