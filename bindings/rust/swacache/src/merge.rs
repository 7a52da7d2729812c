//! Merging two partial attentions (`swa_attention_merge`).
use std::ffi::c_void;
use std::mem::size_of;
use std::ptr;

use swacache_sys as sys;

use crate::cache::Cache;
use crate::enums::Dtype;
use crate::error::{check, invalid, Result};
use crate::step::{Input, Output};

/// The tensors of [`Cache::attention_merge`] (`swa_merge_args_t`): two partial
/// attentions over disjoint key sets of the same query rows, each with its
/// per-row LSE as a step writes it (`-inf` for a row that saw no key). The row
/// count is `lse_a.len()`; every other length is checked against it.
#[derive(Debug)]
pub struct MergeArgs<'a> {
    /// Values per row, >= 1.
    pub head_dim: u32,
    /// Attention over key set A, `[rows, head_dim]`.
    pub out_a: Input<'a>,
    /// Its LSE, `[rows]`.
    pub lse_a: &'a [f32],
    /// Attention over key set B, `[rows, head_dim]`, same dtype as `out_a`.
    pub out_b: Input<'a>,
    /// Its LSE, `[rows]`.
    pub lse_b: &'a [f32],
    /// The merged attention, `[rows, head_dim]`, same dtype as `out_a`.
    pub out: Output<'a>,
    /// The merged LSE, `[rows]`, when wanted.
    pub lse: Option<&'a mut [f32]>,
}

fn output_parts(o: Output<'_>) -> (*mut c_void, usize, Dtype) {
    match o {
        Output::F32(s) => (s.as_mut_ptr().cast(), s.len(), Dtype::Fp32),
        Output::Bf16(s) => (s.as_mut_ptr().cast(), s.len(), Dtype::Bf16),
    }
}

/// Rows and the checked element count of each `[rows, head_dim]` tensor.
fn shape(head_dim: u32, rows: usize) -> Result<usize> {
    if head_dim == 0 {
        return Err(invalid("head_dim = 0; must be >= 1".to_string()));
    }
    rows.checked_mul(head_dim as usize)
        .filter(|&n| n <= 1usize << 60)
        .ok_or_else(|| invalid(format!("rows = {rows} times head_dim = {head_dim} overflows")))
}

fn expect(name: &str, got: usize, want: usize) -> Result<()> {
    if got != want {
        return Err(invalid(format!("{name} holds {got} values, {want} needed")));
    }
    Ok(())
}

impl Cache {
    /// Combine two partial attentions over disjoint key sets into the
    /// attention over their union: per row, with `m = max(lse_a, lse_b)`,
    /// `out = (e^(lse_a-m) out_a + e^(lse_b-m) out_b) / (e^(lse_a-m) + e^(lse_b-m))`
    /// and `lse = m + ln(e^(lse_a-m) + e^(lse_b-m))`, in FP32 (the header lists
    /// the rules for `-inf`, `+inf` and NaN LSEs). Lengths and dtypes are
    /// checked before the C call. Host slices (CPU backend). Thread-safe.
    pub fn attention_merge(&self, args: MergeArgs<'_>) -> Result<()> {
        self.require_host("attention_merge")?;
        merge_checked(Some(self), args)
    }

    /// Merge `other` into `acc` in place (`acc` is both part A and the
    /// output, `acc_lse` both its LSE and the merged LSE): the accumulation an
    /// engine runs over several key sets. Same rules and checks as
    /// [`Cache::attention_merge`]; the row count is `acc_lse.len()`.
    pub fn attention_merge_into(
        &self,
        head_dim: u32,
        acc: Output<'_>,
        acc_lse: &mut [f32],
        other: Input<'_>,
        other_lse: &[f32],
    ) -> Result<()> {
        self.require_host("attention_merge_into")?;
        merge_into_checked(Some(self), head_dim, acc, acc_lse, other, other_lse)
    }
}

/// [`Cache::attention_merge`] without a cache (`swa_attention_merge` with
/// cache NULL, device -1): host slices, merged on the calling thread; the
/// same bits as with a CPU cache. Thread-safe.
pub fn attention_merge(args: MergeArgs<'_>) -> Result<()> {
    merge_checked(None, args)
}

/// [`Cache::attention_merge_into`] without a cache (host slices).
pub fn attention_merge_into(
    head_dim: u32,
    acc: Output<'_>,
    acc_lse: &mut [f32],
    other: Input<'_>,
    other_lse: &[f32],
) -> Result<()> {
    merge_into_checked(None, head_dim, acc, acc_lse, other, other_lse)
}

fn merge_checked(cache: Option<&Cache>, args: MergeArgs<'_>) -> Result<()> {
    let rows = args.lse_a.len();
    let n = shape(args.head_dim, rows)?;
    let (a, a_len, dtype) = args.out_a.parts();
    let (b, b_len, b_dtype) = args.out_b.parts();
    let (out, out_len, out_dtype) = output_parts(args.out);
    expect("out_a", a_len, n)?;
    expect("out_b", b_len, n)?;
    expect("out", out_len, n)?;
    expect("lse_b", args.lse_b.len(), rows)?;
    if b_dtype != dtype || out_dtype != dtype {
        return Err(invalid(format!(
            "out_a is {dtype:?}, out_b {b_dtype:?}, out {out_dtype:?}: one dtype for all three"
        )));
    }
    let lse = match args.lse {
        Some(l) => {
            expect("lse", l.len(), rows)?;
            l.as_mut_ptr()
        }
        None => ptr::null_mut(),
    };
    merge_raw(cache, rows, args.head_dim, dtype, a, args.lse_a.as_ptr(), b, args.lse_b.as_ptr(), out, lse)
}

fn merge_into_checked(
    cache: Option<&Cache>,
    head_dim: u32,
    acc: Output<'_>,
    acc_lse: &mut [f32],
    other: Input<'_>,
    other_lse: &[f32],
) -> Result<()> {
    let rows = acc_lse.len();
    let n = shape(head_dim, rows)?;
    let (acc, acc_len, dtype) = output_parts(acc);
    let (b, b_len, b_dtype) = other.parts();
    expect("acc", acc_len, n)?;
    expect("other", b_len, n)?;
    expect("other_lse", other_lse.len(), rows)?;
    if b_dtype != dtype {
        return Err(invalid(format!("acc is {dtype:?}, other {b_dtype:?}: one dtype for both")));
    }
    let lse = acc_lse.as_mut_ptr();
    merge_raw(cache, rows, head_dim, dtype, acc as *const c_void, lse as *const f32, b, other_lse.as_ptr(), acc, lse)
}

#[allow(clippy::too_many_arguments)]
fn merge_raw(
    cache: Option<&Cache>,
    rows: usize,
    head_dim: u32,
    dtype: Dtype,
    out_a: *const c_void,
    lse_a: *const f32,
    out_b: *const c_void,
    lse_b: *const f32,
    out: *mut c_void,
    lse: *mut f32,
) -> Result<()> {
    if rows == 0 {
        return Ok(());
    }
    let args = sys::swa_merge_args_t {
        struct_size: size_of::<sys::swa_merge_args_t>(),
        rows: rows as i64,
        head_dim,
        dtype: dtype.raw(),
        out_a,
        lse_a,
        out_b,
        lse_b,
        out,
        lse,
        stream: ptr::null_mut(),
        device: -1,
    };
    let handle = cache.map_or(ptr::null_mut(), |c| c.as_ptr());
    // SAFETY: every length was checked against rows and head_dim; the
    // borrows make the outputs disjoint from the inputs, except the exact
    // aliasing of attention_merge_into, which the header allows. Host memory
    // (a CPU cache, or none with device -1).
    check(unsafe { sys::swa_attention_merge(handle, &args) })
}
