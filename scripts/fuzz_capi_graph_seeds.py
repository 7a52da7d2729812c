#!/usr/bin/env python3
"""Writes the graph decode seeds of fuzz_capi, tests/fuzz/corpus/capi/graph*
(run it when the op numbers or argument bytes of tests/fuzz/fuzz_capi.cc or
fuzz_capi_graph.h change). Each seed is a program of calls in the harness's
byte encoding: op byte, slot byte, other byte, then the op's own bytes.

    python3 scripts/fuzz_capi_graph_seeds.py [OUT_DIR=tests/fuzz/corpus/capi]
"""
import os
import struct
import sys

CREATE, IMPORT, RELEASE, PLAN, STEP, CHECK, RESET, SET_LENGTHS, PROBE, DESTROY = range(16, 26)
FREE, RESET_SLOT, SAVE, SET_STORE = 1, 2, 10, 12


def u32(v):
    return struct.pack("<I", v & 0xFFFFFFFF)


def call(op, *args):
    return bytes([op, 0, 0]) + b"".join(a if isinstance(a, bytes) else bytes([a]) for a in args)


def create(max_seqs, tokens):
    return call(CREATE, max_seqs, tokens)


def slot_list(op, slots):
    tail = [0] if op == IMPORT else []  # import: a byte that may ask for a NULL list
    return call(op, len(slots), *[255 if s < 0 else s for s in slots], *tail)


def plan(seqs, null=False):
    out = [len(seqs)]
    for slot, seqlen_k in seqs:
        # -1...3 as b % 5 - 1 (b < 200); 4 and 5 as b % 7 - 1 (200 <= b < 250)
        out.append(slot + 1 if -1 <= slot <= 3 else next(b for b in range(200, 250) if b % 7 == slot + 1))
        out.append(0)
        out.append(u32(seqlen_k + 2))  # Int(-2, 24)
    out.append(3 if null else 0)
    return call(PLAN, *out)


def step(rows, layer=0, flags=0x80, pattern=b"\x90"):
    n = rows * 64 + 1 + 2 * (rows * 32 + 1)  # q, k, v values: (c - 128) / 16, 253...255 non-finite
    data = (pattern * n)[:n]
    return call(STEP, layer, flags, data, 8, 1, 0)


def set_lengths(slots, ends, flags=0):
    out = [len(slots)] + slots
    for e in ends:
        out += [0, u32(e + 2), u32(1)]
    out.append(flags)
    return call(SET_LENGTHS, *out)


def seeds():
    # A plain decode: import two slots, pad one row, step with NaN/Inf among
    # the values, check, report the lengths, probe and save.
    nonfinite = bytes([255, 254, 253, 0x90, 0x70, 0x85])
    yield (create(2, 1) + slot_list(IMPORT, [0, 1]) + plan([(0, 1), (-1, 0)]) + step(2)
           + step(2, layer=1, flags=0x30, pattern=nonfinite) + call(CHECK, 1) + call(PROBE, 0)
           + set_lengths([0, 1], [1, 0]) + call(SET_STORE, 2, 0) + call(SAVE, 0, 1)
           + plan([(0, 2), (1, 1)]) + step(2))
    # Refused sequences: out of range, repeated, not imported, seqlen_k below
    # tokens_per_seq, a gap; check and reset between.
    yield (create(4, 2) + slot_list(IMPORT, [1]) + plan([(5, 2), (1, 2), (1, 2), (0, 2)])
           + step(8, flags=0x84) + call(CHECK, 1) + call(RESET, 0) + call(CHECK, 0)
           + plan([(1, -1), (1, 9)]) + call(CHECK, 1) + slot_list(RELEASE, [1, 1, 3])
           + plan([(1, 4)]) + step(2) + call(CHECK, 1))
    # Bad arguments: invalid sizes, free and repeated slots, out-of-range
    # lists, a step before any plan, NULL arrays, destroy and use.
    yield (create(0, 1) + create(1, 0) + create(1, 3) + call(CREATE, 241, 242) + create(3, 2)
           + step(1) + slot_list(IMPORT, [2]) + slot_list(IMPORT, [0, 0])
           + slot_list(IMPORT, [-1]) + slot_list(RELEASE, [4]) + plan([(0, 2)] * 5)
           + plan([(0, 2)], null=True) + set_lengths([0], [30]) + set_lengths([0, 0], [1, 1])
           + call(DESTROY) + plan([(0, 2)]) + call(CHECK, 1))
    # Device-advanced slots against host calls: free, reset, re-import.
    yield (create(2, 1) + slot_list(IMPORT, [0]) + call(PROBE, 0) + call(SAVE, 0, 1)
           + slot_list(IMPORT, [0]) + call(RESET_SLOT) + slot_list(IMPORT, [0])
           + plan([(0, 1)]) + step(1) + set_lengths([0], [1], flags=4) + slot_list(IMPORT, [0])
           + plan([(0, 2)]) + step(1, layer=1, flags=0x30))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fuzz", "corpus", "capi")
    os.makedirs(out, exist_ok=True)
    for i, s in enumerate(seeds()):
        with open(os.path.join(out, "graph%d" % i), "wb") as f:
            f.write(s)


if __name__ == "__main__":
    main()
