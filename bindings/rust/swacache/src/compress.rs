//! The typed compressor of DeepSeek-V4's HCA/CSA layers (docs/semantics.md,
//! "Compression state"): the plan's closing windows and store runs, the step
//! that computes their entries, the ring's view and the blob option.
use std::mem::size_of;
use std::ptr;

use swacache_sys as sys;

use crate::cache::Cache;
use crate::enums::{Backend, CompressKind, Dtype};
use crate::error::{check, invalid, Code, Error, Result};
use crate::layout::{sized, TensorView};
use crate::plan::{Plan, Segment};
use crate::step::{Input, Output, StepGuard};

/// One compressed entry that closes in a built plan (`swa_compress_window_t`).
/// Its S slots (c for HCA, 2c for CSA) split, in order, into `n_missing` slots
/// without a row, `n_ring` from the ring (rows `(ring_row + j) % compress_len`
/// of `slot`, before the step's store) and `n_new` from the step's batch rows
/// `new_row + j`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct CompressWindow {
    /// Index of the sequence in the plan's batch.
    pub seq: u32,
    /// Its state slot.
    pub slot: u32,
    /// w, the entry's absolute index: write it there (overwriting a rewound one).
    pub entry: i32,
    /// RoPE position of the entry, w * c.
    pub position: i32,
    /// Source position of slot 0: w * c (HCA), (w - 1) * c (CSA).
    pub first_position: i32,
    /// Leading slots without a row.
    pub n_missing: i32,
    /// Slots read from the ring.
    pub n_ring: i32,
    /// Ring row of the first ring slot.
    pub ring_row: i32,
    /// Last slots, from the step's new rows.
    pub n_new: i32,
    /// Batch row of the first new slot.
    pub new_row: i32,
}

const _: () = assert!(size_of::<CompressWindow>() == size_of::<sys::swa_compress_window_t>());

/// One compressor of one layer of a planned step (`swa_compress_args_t`), host slices.
#[derive(Debug)]
pub struct CompressArgs<'a> {
    /// Layer id.
    pub layer: u32,
    /// 0 = the layer's compressor, 1 = its Lightning Indexer's.
    pub compressor: u32,
    /// New source rows [T, S] (S = d for HCA, 2d for CSA).
    pub kv: Input<'a>,
    /// Gate rows [T, S], same dtype as `kv`, without the position bias.
    pub gate: Input<'a>,
    /// [c, S].
    pub position_bias: &'a [f32],
    /// [d], the entries' RMSNorm weight.
    pub norm_weight: &'a [f32],
    /// RMSNorm epsilon (finite, > 0).
    pub norm_eps: f32,
    /// [rows >= windows, d]: row k is the entry of window k of `compress_windows`.
    pub out: Output<'a>,
}

/// (S, d) of a layer's compressor, or the error naming what it lacks.
fn widths(cache: &Cache, layer: u32, compressor: u32) -> Result<(usize, usize)> {
    let l = cache.layer_desc(layer)?;
    let csa = match l.compress_kind {
        CompressKind::Opaque => return Err(invalid(format!("layer {layer} has no typed compressor"))),
        k => k == CompressKind::Csa,
    };
    let d = match compressor {
        0 => l.compress_head_dim as usize,
        1 if csa && l.index_head_dim > 0 => l.index_head_dim as usize,
        _ => return Err(invalid(format!("compressor = {compressor}: layer {layer} has no such compressor"))),
    };
    Ok((if csa { 2 * d } else { d }, d))
}

impl Plan<'_> {
    /// The windows of `layer`'s compressor that close in this built plan, in
    /// batch order then by entry (`swa_plan_compress_windows`).
    pub fn compress_windows(&self, layer: u32) -> Result<Vec<CompressWindow>> {
        let mut count = 0usize;
        // SAFETY: NULL out asks for the count only.
        check(unsafe { sys::swa_plan_compress_windows(self.raw.as_ptr(), layer, ptr::null_mut(), 0, &mut count) })?;
        let mut v = vec![CompressWindow::default(); count];
        // SAFETY: CompressWindow has swa_compress_window_t's layout; capacity is v's length.
        check(unsafe {
            sys::swa_plan_compress_windows(
                self.raw.as_ptr(),
                layer,
                v.as_mut_ptr() as *mut sys::swa_compress_window_t,
                v.len(),
                &mut count,
            )
        })?;
        v.truncate(count);
        Ok(v)
    }

    /// Where the plan stores `layer`'s new source rows in its compressor ring
    /// (`swa_plan_compress_store_segments`): `dst_row` = slot * compress_len + p % compress_len.
    pub fn compress_store_segments(&self, layer: u32) -> Result<Vec<Segment>> {
        let mut count = 0usize;
        // SAFETY: NULL out asks for the count only.
        check(unsafe {
            sys::swa_plan_compress_store_segments(self.raw.as_ptr(), layer, ptr::null_mut(), 0, &mut count)
        })?;
        let mut v = vec![Segment::default(); count];
        // SAFETY: Segment has swa_segment_t's layout; capacity is v's length.
        check(unsafe {
            sys::swa_plan_compress_store_segments(
                self.raw.as_ptr(),
                layer,
                v.as_mut_ptr() as *mut sys::swa_segment_t,
                v.len(),
                &mut count,
            )
        })?;
        v.truncate(count);
        Ok(v)
    }
}

impl StepGuard<'_> {
    /// Run one compressor of one layer of a planned step (`swa_compress_step`) on
    /// the CPU backend: the entries of the closing windows into `args.out`, then
    /// the new rows into the ring. Slice lengths are checked against the plan's T
    /// and the layer's widths first; nothing is written on failure.
    pub fn compress_step(&mut self, plan: &mut Plan<'_>, args: CompressArgs<'_>) -> Result<()> {
        if !ptr::eq(plan.cache, self.cache) {
            return Err(Error::new(Code::FailedPrecondition, "the plan belongs to another cache"));
        }
        self.cache.require_host("compress_step")?;
        let t = plan.tokens_or_precondition()?;
        let (s, d) = widths(self.cache, args.layer, args.compressor)?;
        let rate = self.cache.layer_desc(args.layer)?.compress_ratio as usize;
        let (kv, kv_len, dtype) = args.kv.parts();
        let (gate, gate_len, gate_dtype) = args.gate.parts();
        let want = |name: &str, got: usize, want: usize| -> Result<()> {
            if got == want {
                Ok(())
            } else {
                Err(invalid(format!("{name} has {got} elements, want {want}")))
            }
        };
        want("kv", kv_len, t * s)?;
        want("gate", gate_len, t * s)?;
        if gate_dtype != dtype {
            return Err(invalid("kv and gate have different dtypes".into()));
        }
        want("position_bias", args.position_bias.len(), rate * s)?;
        want("norm_weight", args.norm_weight.len(), d)?;
        let (out, out_len, out_dtype) = match args.out {
            Output::F32(o) => (o.as_mut_ptr().cast(), o.len(), Dtype::Fp32),
            Output::Bf16(o) => (o.as_mut_ptr().cast(), o.len(), Dtype::Bf16),
        };
        if out_len % d != 0 {
            return Err(invalid(format!("out has {out_len} elements, not a multiple of d = {d}")));
        }
        let c = sys::swa_compress_args_t {
            struct_size: size_of::<sys::swa_compress_args_t>(),
            layer: args.layer,
            compressor: args.compressor,
            kv,
            gate,
            dtype: dtype.raw(),
            row_width: s as u32,
            rows: t as i64,
            position_bias: args.position_bias.as_ptr(),
            norm_weight: args.norm_weight.as_ptr(),
            norm_eps: args.norm_eps,
            out,
            out_dtype: out_dtype.raw(),
            out_rows: (out_len / d) as u64,
            stream: ptr::null_mut(),
        };
        // SAFETY: every slice holds what the plan and the layer need; the library
        // checks out_rows against the window count before writing.
        check(unsafe { sys::swa_compress_step(self.cache.raw.as_ptr(), plan.raw.as_ptr(), &c) })
    }
}

impl Cache {
    /// A view of one layer's compressor ring over all slots
    /// (`swa_cache_compress_view`): u8 [max_slots, compress_len, 2, half_bytes],
    /// per row the kv values then the gate values; `compressor` 1 is the indexer's.
    pub fn compress_view(&self, layer: u32, compressor: u32) -> Result<TensorView> {
        let mut out = sized::<sys::swa_tensor_view_t>();
        // SAFETY: valid handle, sized output.
        check(unsafe { sys::swa_cache_compress_view(self.raw.as_ptr(), layer, compressor, &mut out) })?;
        Ok(TensorView {
            data: out.data as *mut u8,
            backend: Backend::from_raw(out.backend),
            device: out.device,
            ndim: out.ndim,
            shape: out.shape,
            strides: out.strides,
        })
    }

    /// Whether saves carry the typed compressor rings (`swa_cache_set_save_compression`).
    pub fn set_save_compression(&self, enable: bool) -> Result<()> {
        // SAFETY: valid handle.
        check(unsafe { sys::swa_cache_set_save_compression(self.raw.as_ptr(), enable as u32) })
    }
}
