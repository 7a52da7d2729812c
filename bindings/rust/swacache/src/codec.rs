//! The standalone codec (experimental): encode and decode vectors exactly as the
//! cache stores them.
use std::ffi::CStr;

use swacache_sys as sys;

use crate::enums::{Dtype, Format, ScaleMode};
use crate::error::{check, invalid, Result};
use crate::step::{Input, Output};

/// Bytes of one stored vector of `dim` values (`swa_format_vector_bytes`).
pub fn vector_bytes(format: Format, dim: u32) -> Result<usize> {
    let mut out = 0;
    // SAFETY: plain out-parameter.
    check(unsafe { sys::swa_format_vector_bytes(format.raw(), dim, &mut out) })?;
    Ok(out as usize)
}

/// Encode `src` (whole vectors of `dim` values) into `dst` (`swa_codec_encode`);
/// returns the number of 32-value blocks holding a NaN or Inf.
pub fn encode(format: Format, mode: ScaleMode, src: Input<'_>, dim: u32, dst: &mut [u8]) -> Result<u64> {
    let (p, len, dtype) = match src {
        Input::F32(s) => (s.as_ptr().cast(), s.len(), sys::SWA_DTYPE_FP32),
        Input::Bf16(s) => (s.as_ptr().cast(), s.len(), sys::SWA_DTYPE_BF16),
    };
    let n = vectors(len, dim)?;
    let vb = vector_bytes(format, dim)?;
    if dst.len() != n * vb {
        return Err(invalid(format!("dst holds {} bytes, {n} vectors need {}", dst.len(), n * vb)));
    }
    let mut nonfinite = 0;
    // SAFETY: sizes checked above; slices do not overlap (& vs &mut).
    check(unsafe {
        sys::swa_codec_encode(format.raw(), mode.raw(), p, dtype, n, dim, dst.as_mut_ptr().cast(), &mut nonfinite)
    })?;
    Ok(nonfinite)
}

/// Decode stored vectors from `src` into `dst` (`swa_codec_decode`); returns the
/// number of blocks that decode to NaN/Inf markers.
pub fn decode(format: Format, src: &[u8], dim: u32, dst: Output<'_>) -> Result<u64> {
    let (p, len, dtype) = match dst {
        Output::F32(s) => (s.as_mut_ptr().cast(), s.len(), sys::SWA_DTYPE_FP32),
        Output::Bf16(s) => (s.as_mut_ptr().cast(), s.len(), sys::SWA_DTYPE_BF16),
    };
    let n = vectors(len, dim)?;
    let vb = vector_bytes(format, dim)?;
    if src.len() != n * vb {
        return Err(invalid(format!("src holds {} bytes, {n} vectors need {}", src.len(), n * vb)));
    }
    let mut nonfinite = 0;
    // SAFETY: sizes checked above.
    check(unsafe { sys::swa_codec_decode(format.raw(), src.as_ptr().cast(), n, dim, p, dtype, &mut nonfinite) })?;
    Ok(nonfinite)
}

/// MXFP8 shorthand for [`encode`] (`swa_mxfp8_encode`).
pub fn mxfp8_encode(src: &[f32], dim: u32, mode: ScaleMode, dst: &mut [u8]) -> Result<u64> {
    let n = vectors(src.len(), dim)?;
    let vb = vector_bytes(Format::Mxfp8, dim)?;
    if dst.len() != n * vb {
        return Err(invalid(format!("dst holds {} bytes, {n} vectors need {}", dst.len(), n * vb)));
    }
    let mut nonfinite = 0;
    // SAFETY: sizes checked above.
    check(unsafe {
        sys::swa_mxfp8_encode(
            src.as_ptr().cast(),
            sys::SWA_DTYPE_FP32,
            n,
            dim,
            mode.raw(),
            dst.as_mut_ptr(),
            &mut nonfinite,
        )
    })?;
    Ok(nonfinite)
}

/// MXFP8 shorthand for [`decode`] (`swa_mxfp8_decode`).
pub fn mxfp8_decode(src: &[u8], dim: u32, dst: &mut [f32]) -> Result<u64> {
    let n = vectors(dst.len(), dim)?;
    let vb = vector_bytes(Format::Mxfp8, dim)?;
    if src.len() != n * vb {
        return Err(invalid(format!("src holds {} bytes, {n} vectors need {}", src.len(), n * vb)));
    }
    let mut nonfinite = 0;
    // SAFETY: sizes checked above.
    check(unsafe {
        sys::swa_mxfp8_decode(src.as_ptr(), n, dim, dst.as_mut_ptr().cast(), sys::SWA_DTYPE_FP32, &mut nonfinite)
    })?;
    Ok(nonfinite)
}

/// The CPU codec path in use: "avx512", "avx2" or "scalar" (`swa_codec_cpu_path`).
pub fn cpu_path() -> &'static str {
    // SAFETY: a static NUL-terminated string.
    unsafe { CStr::from_ptr(sys::swa_codec_cpu_path()) }.to_str().unwrap_or("unknown")
}

/// The CPU attention path `swa_step` takes for queries of `q_dtype`
/// (`swa_attention_cpu_path`): "amx_bf16", "avx512_bf16", "avx512_wide",
/// "avx512", "avx2_fma" or "portable" (docs/cpu_attention.md, "Paths").
pub fn attention_cpu_path(q_dtype: Dtype) -> Result<&'static str> {
    let mut name: *const std::os::raw::c_char = std::ptr::null();
    // SAFETY: `name` is a valid out pointer; on success it points to a static string.
    check(unsafe { sys::swa_attention_cpu_path(q_dtype.raw(), &mut name) })?;
    // SAFETY: a static NUL-terminated string (checked non-null by the call's success).
    Ok(unsafe { CStr::from_ptr(name) }.to_str().unwrap_or("unknown"))
}

fn vectors(values: usize, dim: u32) -> Result<usize> {
    if dim == 0 || values % dim as usize != 0 {
        return Err(invalid(format!("{values} values are not whole vectors of dim {dim}")));
    }
    Ok(values / dim as usize)
}
