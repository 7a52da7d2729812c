"""fp8_ds_mla (DeepSeek-V4's 584-byte record) against an independent oracle.

The oracle is written from the published layout (FlashMLA's MODEL1 record as
vLLM's fp8_ds_mla uses it; docs/codec.md, "fp8_ds_mla"), with numpy and
ml_dtypes only: for a 512-value vector,
  * NoPE dims 0..447 in 7 groups of 64: scale = 2**ceil(log2(max(amax/448, 1e-4)))
    (amax/448 in float32 as the reference quantizer computes it, the log2 in
    float64), codes = float8_e4m3fn(x / scale) (round to nearest even);
  * RoPE dims 448..511: bfloat16(x) (round to nearest even), little-endian;
  * record = codes (448) | RoPE BF16 (128) | 7 scale bytes (127 + log2 scale) | 0.
A group holding a NaN or Inf: scale 0xFF, codes 0x7F (the library's marker, as
for MXFP8). The library is reached through its C ABI (ctypes) at the path in
SWACACHE_LIB.
"""
import ctypes
import os

import ml_dtypes
import numpy as np
import pytest

SWA_OK = 0
SWA_INVALID_ARGUMENT = 3
FP32, BF16 = 0, 1
CEIL, FLOOR = 0, 1
FP8_DS_MLA = 3
DIM, NOPE, ROPE, GROUP, RECORD = 512, 448, 64, 64, 584


@pytest.fixture(scope="module")
def lib():
    path = os.environ.get("SWACACHE_LIB")
    if not path:
        pytest.skip("SWACACHE_LIB is not set")
    so = ctypes.CDLL(path)
    so.swa_codec_encode.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                                    ctypes.c_size_t, ctypes.c_uint32, ctypes.c_void_p,
                                    ctypes.POINTER(ctypes.c_uint64)]
    so.swa_codec_encode.restype = ctypes.c_int
    so.swa_codec_decode.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint32,
                                    ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_uint64)]
    so.swa_codec_decode.restype = ctypes.c_int
    so.swa_format_vector_bytes.argtypes = [ctypes.c_int, ctypes.c_uint32,
                                           ctypes.POINTER(ctypes.c_uint32)]
    so.swa_format_vector_bytes.restype = ctypes.c_int
    so.swa_last_error.restype = ctypes.c_char_p
    return so


def oracle_encode(x32):
    """x32: float32 [n, 512] -> uint8 [n, 584], non-finite group/half count."""
    n = x32.shape[0]
    nope = x32[:, :NOPE].reshape(n, NOPE // GROUP, GROUP)
    finite = np.isfinite(nope).all(axis=2)
    amax = np.where(np.isfinite(nope), np.abs(nope), 0).max(axis=2).astype(np.float32)
    s = np.maximum(amax / np.float32(448.0), np.float32(1e-4))
    e = np.ceil(np.log2(s.astype(np.float64))).astype(np.int64)
    scale_byte = np.where(finite, 127 + e, 255).astype(np.uint8)
    with np.errstate(invalid="ignore"):
        y = nope.astype(np.float64) / np.exp2(e.astype(np.float64))[..., None]
    y = np.nan_to_num(y, nan=0.0, posinf=0.0, neginf=0.0)  # those groups get 0x7F below
    codes = y.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    codes = np.where(finite[..., None], codes, np.uint8(0x7F)).reshape(n, NOPE)
    rope = x32[:, NOPE:].astype(ml_dtypes.bfloat16).view(np.uint16).astype("<u2").view(np.uint8)
    rope_bad = (~np.isfinite(x32[:, NOPE:].reshape(n, 2, 32))).any(axis=2)
    rec = np.concatenate([codes, rope.reshape(n, 2 * ROPE), scale_byte,
                          np.zeros((n, 1), np.uint8)], axis=1)
    return rec, int((~finite).sum() + rope_bad.sum())


def oracle_decode(rec):
    n = rec.shape[0]
    codes = rec[:, :NOPE].reshape(n, 7, GROUP).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    sb = rec[:, 576:583].astype(np.float64)
    nope = (codes * np.exp2(sb - 127)[..., None]).reshape(n, NOPE)
    rope = rec[:, NOPE:576].copy().view("<u2").view(ml_dtypes.bfloat16).astype(np.float64)
    return np.concatenate([nope, rope], axis=1).astype(np.float32)


def encode(lib, x, dtype=FP32, mode=CEIL):
    n = x.shape[0]
    out = np.full((n, RECORD), 0xA5, np.uint8)
    bad = ctypes.c_uint64(99)
    st = lib.swa_codec_encode(FP8_DS_MLA, mode, x.ctypes.data, dtype, n, DIM, out.ctypes.data,
                              ctypes.byref(bad))
    assert st == SWA_OK, lib.swa_last_error()
    return out, bad.value


def random_vectors(rng, n):
    # magnitudes over many binades, signs mixed, a few exact zeros in places
    mag = np.exp2(rng.uniform(-30, 30, size=(n, 1))) * rng.uniform(-1, 1, size=(n, DIM))
    mag[:, ::97] = 0.0
    return mag.astype(np.float32)


def test_record_size(lib):
    out = ctypes.c_uint32(0)
    assert lib.swa_format_vector_bytes(FP8_DS_MLA, DIM, ctypes.byref(out)) == SWA_OK
    assert out.value == RECORD
    assert lib.swa_format_vector_bytes(FP8_DS_MLA, 256, ctypes.byref(out)) == SWA_INVALID_ARGUMENT
    assert b"dim = 256" in lib.swa_last_error()


def test_golden_bytes_fp32(lib):
    rng = np.random.default_rng(1)
    x = random_vectors(rng, 400)
    want, want_bad = oracle_encode(x)
    got, bad = encode(lib, x)
    np.testing.assert_array_equal(got, want)
    assert bad == want_bad == 0


def test_golden_bytes_bf16_and_mode_ignored(lib):
    rng = np.random.default_rng(2)
    x = random_vectors(rng, 200).astype(ml_dtypes.bfloat16)
    want, _ = oracle_encode(x.astype(np.float32))
    got, _ = encode(lib, x.view(np.uint16).copy(), BF16, FLOOR)
    np.testing.assert_array_equal(got, want)


def test_golden_bytes_boundaries(lib):
    # group amaxes at and next to the powers of two that pick a scale, and
    # under the 1e-4 floor
    vals = [448.0, np.nextafter(np.float32(448.0), np.float32(1e9)), 224.0,
            np.nextafter(np.float32(224.0), np.float32(0)), 1.0, 1e-3, 448 * 2.0 ** -13,
            np.nextafter(np.float32(448 * 2.0 ** -13), np.float32(1)), 1e-30, 3e38]
    rng = np.random.default_rng(3)
    x = np.zeros((len(vals), DIM), np.float32)
    for i, v in enumerate(vals):
        x[i] = rng.uniform(-1, 1, DIM).astype(np.float32) * np.float32(v)
        x[i, :NOPE:GROUP] = np.float32(v)  # each group's amax is v exactly
    want, _ = oracle_encode(x)
    got, _ = encode(lib, x)
    np.testing.assert_array_equal(got, want)


def test_nonfinite_groups(lib):
    rng = np.random.default_rng(4)
    x = random_vectors(rng, 8)
    x[1, 70] = np.nan
    x[2, 400] = -np.inf
    x[3, 500] = np.inf
    want, want_bad = oracle_encode(x)
    got, bad = encode(lib, x)
    np.testing.assert_array_equal(got, want)
    assert bad == want_bad == 3


def test_decode_matches_oracle_and_roundtrip(lib):
    rng = np.random.default_rng(5)
    x = random_vectors(rng, 100)
    rec, _ = encode(lib, x)
    back = np.full((100, DIM), np.nan, np.float32)
    bad = ctypes.c_uint64(99)
    assert lib.swa_codec_decode(FP8_DS_MLA, rec.ctypes.data, 100, DIM, back.ctypes.data, FP32,
                                ctypes.byref(bad)) == SWA_OK
    assert bad.value == 0
    np.testing.assert_array_equal(back.view(np.uint32), oracle_decode(rec).view(np.uint32))
    # Decoded values are representable, but encoding them again keeps the
    # bytes only for groups whose decoded amax still picks the same scale (a
    # rounded-down amax of exactly 224 * 2^c picks 2^(c-1)): the bytes of the
    # decoded vector equal the oracle's encoding of it either way.
    again, _ = encode(lib, back)
    np.testing.assert_array_equal(again, oracle_encode(back)[0])


def test_bad_dim_refused_and_nothing_written(lib):
    x = np.ones((2, 256), np.float32)
    out = np.full((2, RECORD), 0xA5, np.uint8)
    st = lib.swa_codec_encode(FP8_DS_MLA, CEIL, x.ctypes.data, FP32, 2, 256, out.ctypes.data, None)
    assert st == SWA_INVALID_ARGUMENT
    assert b"FP8_DS_MLA" in lib.swa_last_error()
    assert (out == 0xA5).all()
