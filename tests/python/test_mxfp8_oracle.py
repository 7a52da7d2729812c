"""MXFP8 codec against an independent oracle: numpy + ml_dtypes.

Expected bytes follow docs/semantics.md, "MXFP8", literally: the scale byte from the FP32
bits of the block's largest magnitude (ceil and floor formulas), elements
x * 2^(127 - byte) clamped to +-448 and converted with ml_dtypes'
float8_e4m3fn (round to nearest even). Non-finite blocks: scale 0xFF, codes
0x7F (docs/codec.md). The library is reached through its C ABI (ctypes) at
the path in the environment variable SWACACHE_LIB.
"""
import ctypes
import os

import ml_dtypes
import numpy as np
import pytest

SWA_OK = 0
FP32, BF16 = 0, 1
CEIL, FLOOR = 0, 1


@pytest.fixture(scope="module")
def lib():
    path = os.environ.get("SWACACHE_LIB")
    if not path:
        pytest.skip("SWACACHE_LIB is not set")
    so = ctypes.CDLL(path)
    so.swa_mxfp8_encode.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_uint32,
                                    ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64)]
    so.swa_mxfp8_encode.restype = ctypes.c_int
    so.swa_mxfp8_decode.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint32, ctypes.c_void_p,
                                    ctypes.c_int, ctypes.POINTER(ctypes.c_uint64)]
    so.swa_mxfp8_decode.restype = ctypes.c_int
    so.swa_last_error.restype = ctypes.c_char_p
    return so


# ---- the oracle ---------------------------------------------------------------

def oracle_encode(x32, dim, mode):
    """x32: float32 [n, dim] -> uint8 [n, dim + dim/32], non-finite block count."""
    n = x32.shape[0]
    blocks = x32.reshape(n, dim // 32, 32)
    bits = np.abs(blocks).view(np.uint32)
    finite = np.isfinite(blocks).all(axis=2)
    amax = np.where(np.isfinite(blocks), bits, 0).max(axis=2).astype(np.int64)
    e = amax >> 23
    m = amax & 0x7FFFFF
    byte = e - 8 + ((m > 0x600000) if mode == CEIL else 0)
    byte = np.clip(byte, 0, 254)
    byte = np.where(finite, byte, 255)
    k = (127 - np.minimum(byte, 254)).astype(np.float64)
    with np.errstate(invalid="ignore"):  # NaN lanes are replaced below
        y = blocks.astype(np.float64) * np.exp2(k)[..., None]
    y = np.clip(np.nan_to_num(y, nan=0.0, posinf=448.0, neginf=-448.0), -448.0, 448.0)
    codes = y.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    codes = np.where(finite[..., None], codes, np.uint8(0x7F))
    out = np.concatenate([codes.reshape(n, dim), byte.astype(np.uint8)], axis=1)
    return out, int((~finite).sum())


def oracle_decode(rows, dim):
    """uint8 [n, dim + dim/32] -> float32 bits [n, dim] (NaN as 0x7FC00000)."""
    n = rows.shape[0]
    codes = rows[:, :dim].reshape(n, dim // 32, 32)
    scale = rows[:, dim:].astype(np.int64)
    val = codes.view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    val = val * np.exp2((scale - 127).astype(np.float64))[..., None]
    with np.errstate(over="ignore"):
        f = val.astype(np.float32)
    f = np.where((scale == 255)[..., None], np.float32(np.nan), f)
    bits = f.reshape(n, dim).view(np.uint32).copy()
    bits[np.isnan(f.reshape(n, dim))] = 0x7FC00000
    return bits


# ---- inputs -------------------------------------------------------------------

def random_blocks(rng, n_blocks):
    """Random blocks of several kinds (float32 [n_blocks, 32])."""
    kinds = rng.integers(0, 7, n_blocks)
    x = np.empty((n_blocks, 32), np.float32)
    # 0: any finite bit pattern
    b = rng.integers(0, 0x7F800000, (n_blocks, 32), dtype=np.uint32) | (
        rng.integers(0, 2, (n_blocks, 32), dtype=np.uint32) << 31)
    x[kinds == 0] = b[kinds == 0].view(np.float32)
    # 1: gaussian at log-uniform magnitude
    mag = np.exp2(rng.integers(-135, 120, n_blocks)).astype(np.float32)
    g = (rng.standard_normal((n_blocks, 32)) * mag[:, None]).astype(np.float32)
    x[kinds == 1] = g[kinds == 1]
    # 2: exact E4M3 grid values and midpoints (ties) under a common power of two
    grid = np.arange(0, 0x7E, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    idx = rng.integers(0, len(grid) - 1, (n_blocks, 32))
    tie = rng.integers(0, 2, (n_blocks, 32)).astype(bool)
    v = np.where(tie, (grid[idx] + grid[idx + 1]) / 2, grid[idx])
    sgn = np.where(rng.integers(0, 2, (n_blocks, 32)) == 1, -1.0, 1.0)
    k = rng.integers(-126, 118, n_blocks)
    t = (v * sgn * np.exp2(k)[:, None]).astype(np.float32)
    t[np.arange(n_blocks), rng.integers(0, 32, n_blocks)] = (448.0 * np.exp2(k)).astype(np.float32)
    x[kinds == 2] = t[kinds == 2]
    # 3: amax on boundaries 448 * 2^k, 1.75 * 2^k, 2^k and one ulp around them
    base = np.array([448.0, 1.75, 1.0, 1.5], np.float32)[rng.integers(0, 4, n_blocks)]
    a = (base * np.exp2(rng.integers(-140, 118, n_blocks))).astype(np.float32)
    nudge = rng.integers(-1, 2, n_blocks)
    a = np.where(nudge > 0, np.nextafter(a, np.float32(np.inf)), a)
    a = np.where(nudge < 0, np.nextafter(a, np.float32(0)), a)
    c = (rng.random((n_blocks, 32)) * a[:, None]).astype(np.float32)
    c[:, 0] = a
    x[kinds == 3] = c[kinds == 3]
    # 4: FP32 subnormals only
    s = rng.integers(0, 0x800000, (n_blocks, 32), dtype=np.uint32)
    x[kinds == 4] = s[kinds == 4].view(np.float32)
    # 5: zeros and negative zeros with one value
    z = np.where(rng.integers(0, 2, (n_blocks, 32)) == 1, np.float32(-0.0), np.float32(0.0))
    z[:, 7] = np.exp2(rng.integers(-140, 127, n_blocks)).astype(np.float32)
    x[kinds == 5] = z[kinds == 5]
    # 6: a NaN or Inf in a normal block
    w = rng.standard_normal((n_blocks, 32)).astype(np.float32)
    w[np.arange(n_blocks), rng.integers(0, 32, n_blocks)] = np.array(
        [np.inf, -np.inf, np.nan], np.float32)[rng.integers(0, 3, n_blocks)]
    x[kinds == 6] = w[kinds == 6]
    return x


def encode(lib, src, dtype, n, dim, mode):
    out = np.full((n, dim + dim // 32), 0xA5, np.uint8)
    bad = ctypes.c_uint64(12345)
    st = lib.swa_mxfp8_encode(src.ctypes.data, dtype, n, dim, mode, out.ctypes.data, ctypes.byref(bad))
    assert st == SWA_OK, lib.swa_last_error()
    return out, bad.value


# ---- tests --------------------------------------------------------------------

@pytest.mark.parametrize("mode", [CEIL, FLOOR])
@pytest.mark.parametrize("dim", [32, 512])
def test_encode_fp32_matches_oracle(lib, mode, dim):
    rng = np.random.default_rng(100 + mode * 10 + dim)
    n = 40000 // (dim // 32)
    x = random_blocks(rng, n * dim // 32).reshape(n, dim)
    got, bad = encode(lib, x, FP32, n, dim, mode)
    want, want_bad = oracle_encode(x, dim, mode)
    mismatch = np.argwhere(got != want)
    assert mismatch.size == 0, f"first mismatch at {mismatch[0]}: got {got[tuple(mismatch[0])]:#x} " \
                               f"want {want[tuple(mismatch[0])]:#x}"
    assert bad == want_bad


@pytest.mark.parametrize("mode", [CEIL, FLOOR])
def test_encode_bf16_matches_oracle(lib, mode):
    rng = np.random.default_rng(7 + mode)
    n, dim = 2000, 512
    h = (random_blocks(rng, n * dim // 32).view(np.uint32) >> 16).astype(np.uint16).reshape(n, dim)
    h[::7] = rng.integers(0, 0x10000, (len(h[::7]), dim), dtype=np.uint16)  # any BF16 pattern
    x = (h.astype(np.uint32) << 16).view(np.float32)
    got, bad = encode(lib, h, BF16, n, dim, mode)
    want, want_bad = oracle_encode(x, dim, mode)
    np.testing.assert_array_equal(got, want)
    assert bad == want_bad


def test_adversarial_edges(lib):
    def block(*vals):
        b = np.zeros(32, np.float32)
        b[:len(vals)] = vals
        return b
    f = np.float32
    blocks = np.stack([
        block(448.0), block(449.0), block(np.nextafter(f(448), f(0))), block(464.0, 1.0),
        block(1.75), block(np.nextafter(f(1.75), f(2))), block(-0.0, 0.0, -0.0),
        block(2.0 ** -10, 3 * 2.0 ** -10, 1.0), block(f(3.4e38), f(1e30)), block(f(1e-45), f(-1e-40)),
        block(np.inf), block(np.nan, 1.0), block(-np.inf, np.nan), block(*([1.0] * 31 + [-500.0])),
        block(*(np.float32(2.0) ** -np.arange(32, dtype=np.float32))),
    ]).astype(np.float32)
    for mode in (CEIL, FLOOR):
        got, bad = encode(lib, blocks, FP32, len(blocks), 32, mode)
        want, want_bad = oracle_encode(blocks, 32, mode)
        np.testing.assert_array_equal(got, want, err_msg=f"mode {mode}")
        assert bad == want_bad == 3
    # FLOOR saturates: 500 alone -> scale byte 127, code 0x7E; CEIL -> 128.
    got, _ = encode(lib, block(500.0)[None], FP32, 1, 32, FLOOR)
    assert got[0, 32] == 127 and got[0, 0] == 0x7E
    got, _ = encode(lib, block(500.0)[None], FP32, 1, 32, CEIL)
    assert got[0, 32] == 128


@pytest.mark.parametrize("dtype", [FP32, BF16])
def test_decode_matches_oracle(lib, dtype):
    rng = np.random.default_rng(5 + dtype)
    n, dim = 3000, 512
    rows = rng.integers(0, 256, (n, dim + dim // 32), dtype=np.uint8)  # any bytes
    rows[: n // 2, dim:] = rng.integers(100, 150, (n // 2, dim // 32), dtype=np.uint8)
    rows[0, dim] = 0  # scale byte 0: subnormal results, exact
    out = np.full((n, dim), 0xA5A5A5A5 if dtype == FP32 else 0xA5A5,
                  np.uint32 if dtype == FP32 else np.uint16)
    bad = ctypes.c_uint64(0)
    st = lib.swa_mxfp8_decode(rows.ctypes.data, n, dim, out.ctypes.data, dtype, ctypes.byref(bad))
    assert st == SWA_OK, lib.swa_last_error()
    want = oracle_decode(rows, dim)
    if dtype == BF16:
        f = want.view(np.float32)
        want = f.astype(ml_dtypes.bfloat16).view(np.uint16).copy()
        want[np.isnan(f)] = 0x7FC0
    np.testing.assert_array_equal(out, want)
    assert bad.value == int((rows[:, dim:] == 255).sum())


def test_round_trip_error_bound(lib):
    rng = np.random.default_rng(11)
    n, dim = 2000, 512
    x = (rng.standard_normal((n, dim)) * np.exp2(rng.integers(-120, 120, (n, 1)))).astype(np.float32)
    rows, _ = encode(lib, x, FP32, n, dim, CEIL)
    y = np.empty((n, dim), np.float32)
    assert lib.swa_mxfp8_decode(rows.ctypes.data, n, dim, y.ctypes.data, FP32, None) == SWA_OK
    scale = np.exp2(rows[:, dim:].astype(np.float64) - 127).repeat(32, axis=1)
    scaled = np.abs(x) / scale
    err = np.abs(y.astype(np.float64) - x)
    normal = scaled >= 2.0 ** -6
    assert np.all(err[normal] <= np.abs(x[normal]) * 2.0 ** -4)
    assert np.all(err[~normal] <= scale[~normal] * 2.0 ** -10)
