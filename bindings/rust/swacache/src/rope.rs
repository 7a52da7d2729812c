//! RoPE as a service (`swa_rope_table`, `swa_rope_apply`) on host slices: a
//! layer's FP32 frequencies, and its rotation of a caller's tensor, bit for
//! bit as the CPU step rotates (docs/semantics.md, "RoPE as a service").
//! Device tensors: call `sys::swa_rope_apply` with `device` >= 0.
use std::mem::size_of;
use std::ptr;

use swacache_sys as sys;

use crate::enums::{Dtype, RopeStyle};
use crate::error::{check, invalid, Result};
use crate::layer::LayerDesc;
use crate::step::Output;

/// A layer's RoPE as the step applies it (`swa_rope_info_t`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RopeInfo {
    /// The layer's style (`None`: no table).
    pub style: RopeStyle,
    /// First rotary dim of each head.
    pub first_dim: u32,
    /// Rotary dims n; the table has n/2 frequencies.
    pub dims: u32,
    /// What multiplies cos and sin of q and k (YaRN's default resolved).
    pub attention_factor: f32,
    /// The step rotates its output back.
    pub derotate_output: bool,
}

/// The layer's frequencies `inv_freq[rope_dims / 2]` (empty without RoPE) and
/// its [`RopeInfo`]; the layer is validated as a cache validates it.
pub fn rope_table(layer: &LayerDesc) -> Result<(Vec<f32>, RopeInfo)> {
    let d = layer.to_sys();
    // SAFETY: zeroed is a valid bit pattern for this plain C struct.
    let mut info: sys::swa_rope_info_t = unsafe { std::mem::zeroed() };
    info.struct_size = size_of::<sys::swa_rope_info_t>();
    // SAFETY: capacity 0 with a NULL table; `info` is ours and sized.
    check(unsafe { sys::swa_rope_table(&d, ptr::null_mut(), 0, &mut info) })?;
    let mut freq = vec![0f32; (info.dims / 2) as usize];
    if !freq.is_empty() {
        // SAFETY: `freq` holds the capacity passed.
        check(unsafe { sys::swa_rope_table(&d, freq.as_mut_ptr(), freq.len() as u32, &mut info) })?;
    }
    let style = RopeStyle::from_raw(info.style).unwrap_or(RopeStyle::None);
    Ok((
        freq,
        RopeInfo {
            style,
            first_dim: info.first_dim,
            dims: info.dims,
            attention_factor: info.attention_factor,
            derotate_output: info.derotate_output != 0,
        },
    ))
}

/// Rotate `x` (`[positions.len(), heads, head_dim]`, FP32 or BF16) in place
/// with the layer's RoPE at `positions` (each >= 0): forward with the
/// attention factor (as the step rotates q and k), or `inverse` (minus the
/// position, no factor, as the step de-rotates its output). Thread-safe.
pub fn rope_apply(layer: &LayerDesc, x: Output<'_>, heads: u32, positions: &[i32], inverse: bool) -> Result<()> {
    let d = layer.to_sys();
    let (px, len, dtype) = match x {
        Output::F32(s) => (s.as_mut_ptr().cast(), s.len(), Dtype::Fp32),
        Output::Bf16(s) => (s.as_mut_ptr().cast(), s.len(), Dtype::Bf16),
    };
    let want = positions.len().checked_mul(heads as usize).and_then(|n| n.checked_mul(layer.head_dim as usize));
    if want != Some(len) {
        return Err(invalid(format!(
            "x holds {len} values; positions.len() = {} times heads = {heads} times head_dim = {} needed",
            positions.len(),
            layer.head_dim
        )));
    }
    let args = sys::swa_rope_args_t {
        struct_size: size_of::<sys::swa_rope_args_t>(),
        layer: &d,
        x: px,
        dtype: dtype.raw(),
        heads,
        tokens: positions.len() as i64,
        positions: positions.as_ptr(),
        inverse: inverse as u32,
        device: -1,
        stream: ptr::null_mut(),
    };
    // SAFETY: x holds tokens * heads * head_dim values (checked); host memory.
    check(unsafe { sys::swa_rope_apply(&args) })
}
