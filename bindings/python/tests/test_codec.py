"""Codec calls."""

import numpy as np
import pytest

import swacache as sc


def test_vector_bytes():
    assert sc.format_vector_bytes(sc.Format.MXFP8, 64) == 66
    assert sc.format_vector_bytes(sc.Format.BF16, 64) == 128
    assert sc.format_vector_bytes(sc.Format.FP32, 64) == 256
    with pytest.raises(sc.InvalidArgumentError):
        sc.format_vector_bytes(sc.Format.MXFP8, 33)
    with pytest.raises(sc.InvalidArgumentError):
        sc.format_vector_bytes(7, 32)


def test_roundtrips():
    x = np.random.default_rng(0).standard_normal((5, 64)).astype(np.float32)
    b, nf = sc.encode(sc.Format.FP32, x)
    assert b.shape == (5, 256) and nf == 0
    y, _ = sc.decode(sc.Format.FP32, b, 64)
    np.testing.assert_array_equal(x, y)
    b, _ = sc.encode(sc.Format.BF16, x)
    y, _ = sc.decode(sc.Format.BF16, b, 64)
    np.testing.assert_allclose(x, y, rtol=1e-2)
    yb, _ = sc.decode(sc.Format.BF16, b, 64, sc.DType.BF16)
    assert yb.dtype == np.uint16
    m, nf = sc.mxfp8_encode(x)
    assert m.shape == (5, 66)
    y, _ = sc.mxfp8_decode(m, 64)
    np.testing.assert_allclose(x, y, rtol=0.07, atol=0.02)
    m2, _ = sc.encode(sc.Format.MXFP8, x, mode=sc.ScaleMode.CEIL)
    np.testing.assert_array_equal(m, m2)
    sc.mxfp8_encode(x, mode=sc.ScaleMode.FLOOR)
    x[0, 3] = np.nan
    _, nf = sc.mxfp8_encode(x)
    assert nf == 1
    y, nf = sc.mxfp8_decode(sc.mxfp8_encode(x)[0], 64)
    assert nf == 1 and np.isnan(y[0, :32]).all()
    assert sc.codec_cpu_path() in ("avx512", "avx2", "scalar")


def test_attention_cpu_path():
    fp32 = sc.attention_cpu_path(sc.DType.FP32)
    assert fp32 in ("avx512_wide", "avx512", "avx2_fma", "portable")
    assert sc.attention_cpu_path() in ("amx_bf16", "avx512_bf16", fp32)
    with pytest.raises(sc.InvalidArgumentError, match="q_dtype"):
        sc.attention_cpu_path(7)


def test_codec_errors():
    x = np.zeros((2, 33), np.float32)
    with pytest.raises(sc.InvalidArgumentError):
        sc.encode(sc.Format.MXFP8, x)
    with pytest.raises(sc.InvalidArgumentError, match="src: expected dtype"):
        sc.encode(sc.Format.FP32, np.zeros((2, 32), np.float64))
    with pytest.raises(sc.InvalidArgumentError, match="src: 7 bytes"):
        sc.decode(sc.Format.FP32, np.zeros(7, np.uint8), 32)
    with pytest.raises(sc.InvalidArgumentError, match="src: expected dtype uint8"):
        sc.mxfp8_decode(np.zeros(66, np.float32), 64)
    with pytest.raises(sc.InvalidArgumentError, match="not a multiple of dim"):
        sc.mxfp8_encode(np.zeros(40, np.float32), 32)
