#!/usr/bin/env python3
"""Writes the fuzz_blob seeds, tests/fuzz/corpus/blob/ (run it when the blob
format changes; docs/store.md, "Blob format").

A seed is one repair byte (which header fields tests/fuzz/fuzz_blob.cc fixes up:
1 CRC, 2 fingerprint, 4 payload length, 8 magic/version/header size, 16 pad to
the right length, 32 key hash and reserved bytes) followed by a blob: a 64-byte
version-2 header saved under the harness's key "k" and 64 payload bytes. Fields
the harness repairs are left zero. `short` is a blob cut inside its magic.

    python3 scripts/fuzz_blob_seeds.py [OUT_DIR=tests/fuzz/corpus/blob]
"""
import os
import random
import struct
import sys

BLOB_VERSION = 2
HARNESS_KEY = b"k"

# (repair byte, written_end, valid_start, ring_high)
SEEDS = [
    (0x3F, 0, 0, 0),
    (0x3F, 5, 2, 5),
    (0x3F, 9, 9, 12),   # ring_high above written_end: rejected drafts
    (0x3D, 3, 0, 3),    # fingerprint left zero: another layout
    (0x1F, 7, 1, 7),    # key hash from the seed itself
    (0x2F, 2, 0, 2),    # not padded: the wrong length
]


def fnv1a64(data: bytes) -> int:
    """The blob's key hash (src/store/blob.h, BlobKeyHash)."""
    h = 0xCBF29CE484222325
    for byte in data:
        h ^= byte
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def seed(repair: int, written_end: int, valid_start: int, ring_high: int, index: int) -> bytes:
    header = bytearray(64)
    # magic, version, header bytes, fingerprint (0), written_end, valid_start,
    # payload bytes (0), ring_high, key hash; reserved and CRC stay zero.
    struct.pack_into("<4sHHQiiQiQ", header, 0, b"SWAB", BLOB_VERSION, 64, 0, written_end,
                     valid_start, 0, ring_high, fnv1a64(HARNESS_KEY))
    payload = random.Random(index).getrandbits(64 * 8).to_bytes(64, "little")
    return bytes([repair]) + bytes(header) + payload


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fuzz", "corpus", "blob")
    os.makedirs(out, exist_ok=True)
    for i, fields in enumerate(SEEDS):
        with open(os.path.join(out, f"seed{i}"), "wb") as f:
            f.write(seed(*fields, i))
    with open(os.path.join(out, "short"), "wb") as f:
        f.write(b"\x00SWAB")


if __name__ == "__main__":
    main()
