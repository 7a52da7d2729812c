//! Plans (built once per step, read by every layer) and steps.
use std::mem::size_of;
use std::ptr::{self, NonNull};
use std::sync::MutexGuard;

use swacache_sys as sys;

use crate::cache::Cache;
use crate::config::{sized, Dtype};
use crate::error::{check, invalid, Code, Error, Result};

/// One sequence of a step (`swa_seq_t`, same 16-byte layout: a `&[Seq]` is
/// passed to the library without a copy).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Seq {
    /// State slot of the sequence.
    pub slot: u32,
    /// New tokens this step.
    pub seqlen_q: i32,
    /// Tokens after the step.
    pub seqlen_k: i32,
    /// Missing positions end; 0 uses the slot's valid_start.
    pub valid_start: i32,
}

impl Seq {
    /// `seqlen_q` new tokens ending at `seqlen_k`, with the slot's valid_start.
    pub fn new(slot: u32, seqlen_q: i32, seqlen_k: i32) -> Seq {
        Seq { slot, seqlen_q, seqlen_k, valid_start: 0 }
    }
}

/// A run of rows (`swa_segment_t`, same layout).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Segment {
    /// First destination row.
    pub dst_row: i32,
    /// First source row, or -1 for zero rows.
    pub src_row: i32,
    /// Rows in the run.
    pub count: i32,
}

const _: () = assert!(size_of::<Seq>() == size_of::<sys::swa_seq_t>());
const _: () = assert!(size_of::<Segment>() == size_of::<sys::swa_segment_t>());

/// What fills the unused tail of a decode index row (`swa_index_pad_t`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IndexPad {
    /// -1.
    #[default]
    Neg1,
    /// The token's own ring row.
    LastRow,
}

/// Execution path of a plan (`swa_plan_path_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanPath {
    /// Not built, or cancelled.
    None,
    /// Ring-only.
    Ring,
    /// Staged.
    Staged,
}

/// Plan options (`swa_plan_options_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanOptions {
    /// Padding of the decode index.
    pub index_pad: IndexPad,
    /// Keep the [T, W] decode index for the library's own step.
    pub materialize_index: bool,
}

impl Default for PlanOptions {
    fn default() -> PlanOptions {
        let mut o = unsafe { std::mem::zeroed::<sys::swa_plan_options_t>() };
        // SAFETY: o is writable.
        unsafe { sys::swa_plan_options_init(&mut o) };
        PlanOptions {
            index_pad: if o.index_pad == sys::SWA_INDEX_PAD_LAST_ROW { IndexPad::LastRow } else { IndexPad::Neg1 },
            materialize_index: o.materialize_index != 0,
        }
    }
}

/// Shape of a plan and sizes of its exported arrays (`swa_plan_info_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanInfo {
    /// The path; `None` when not built.
    pub path: PlanPath,
    /// Sequences in the batch.
    pub n_seqs: u32,
    /// T, new tokens of all sequences.
    pub n_tokens: i32,
    /// W.
    pub window: u32,
    /// R.
    pub ring_len: u32,
    /// A layer ran (the plan can no longer be cancelled).
    pub executed: bool,
    /// Largest seqlen_q.
    pub max_seqlen_q: i32,
    /// Largest seqlen_k.
    pub max_seqlen_k: i32,
    /// Load segments (staged).
    pub n_load_segments: u32,
    /// Store segments.
    pub n_store_segments: u32,
    /// Staging section 1 rows (staged).
    pub history_rows: i32,
    /// Staging rows in all (staged).
    pub staging_rows: i32,
    /// int32 entries of the decode index (ring-only).
    pub decode_index_elems: u64,
    /// int32 entries of the pivots (staged).
    pub pivot_elems: u64,
}

/// An owned plan (`swa_plan_t`) that borrows its cache: it cannot outlive it.
///
/// ```compile_fail
/// use swacache::{Cache, Config, LayerDesc};
/// let config = Config { layers: vec![LayerDesc::default()], ..Config::default() };
/// let cache = Cache::new(&config).unwrap();
/// let plan = cache.plan().unwrap();
/// drop(cache); // error[E0505]: cannot move out of `cache` because it is borrowed
/// let _ = plan.info();
/// ```
pub struct Plan<'c> {
    raw: NonNull<sys::swa_plan_t>,
    cache: &'c Cache,
    /// T of the current build; `None` when not built or cancelled.
    n_tokens: Option<usize>,
    n_seqs: usize,
}

// SAFETY: the plan is plain memory owned by the library; exporters (`&self`) are
// safe concurrently with each other, build/cancel/step need `&mut self`.
unsafe impl Send for Plan<'_> {}
unsafe impl Sync for Plan<'_> {}

impl Drop for Plan<'_> {
    fn drop(&mut self) {
        // SAFETY: we own the plan; its cache is still alive (borrowed by 'c).
        unsafe { sys::swa_plan_destroy(self.raw.as_ptr()) }
    }
}

impl std::fmt::Debug for Plan<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan").field("n_seqs", &self.n_seqs).field("n_tokens", &self.n_tokens).finish()
    }
}

impl<'c> Plan<'c> {
    pub(crate) fn new(cache: &'c Cache, options: Option<&PlanOptions>) -> Result<Plan<'c>> {
        let mut raw = ptr::null_mut();
        let status = match options {
            None => unsafe { sys::swa_plan_create(cache.as_ptr(), &mut raw) },
            Some(o) => {
                let mut c = unsafe { std::mem::zeroed::<sys::swa_plan_options_t>() };
                unsafe { sys::swa_plan_options_init(&mut c) };
                c.index_pad = match o.index_pad {
                    IndexPad::Neg1 => sys::SWA_INDEX_PAD_NEG1,
                    IndexPad::LastRow => sys::SWA_INDEX_PAD_LAST_ROW,
                };
                c.materialize_index = o.materialize_index as u32;
                // SAFETY: valid cache and options.
                unsafe { sys::swa_plan_create_with_options(cache.as_ptr(), &c, &mut raw) }
            }
        };
        check(status)?;
        let raw = NonNull::new(raw).ok_or_else(|| Error::new(Code::Internal, "swa_plan_create returned NULL"))?;
        Ok(Plan { raw, cache, n_tokens: None, n_seqs: 0 })
    }

    /// The cache this plan belongs to.
    pub fn cache(&self) -> &'c Cache {
        self.cache
    }

    /// The raw handle, for calls through `swacache_sys`. It stays owned by `self`.
    pub fn as_ptr(&self) -> *mut sys::swa_plan_t {
        self.raw.as_ptr()
    }

    /// Plan one step (`swa_plan_build`): validate every sequence, advance the
    /// slots, compute the indices. On failure nothing changes.
    pub fn build(&mut self, seqs: &[Seq]) -> Result<()> {
        let n = u32::try_from(seqs.len()).map_err(|_| invalid(format!("{} sequences", seqs.len())))?;
        let p = if seqs.is_empty() { ptr::null() } else { seqs.as_ptr() as *const sys::swa_seq_t };
        // SAFETY: Seq has swa_seq_t's layout; the slice is borrowed for the call.
        check(unsafe { sys::swa_plan_build(self.raw.as_ptr(), p, n) })?;
        // The library validated every seqlen_q >= 0 and that T fits in int32.
        self.n_tokens = Some(seqs.iter().map(|s| s.seqlen_q as usize).sum());
        self.n_seqs = seqs.len();
        Ok(())
    }

    /// Undo a built plan that no layer has run (`swa_plan_cancel`).
    pub fn cancel(&mut self) -> Result<()> {
        // SAFETY: we own the plan.
        check(unsafe { sys::swa_plan_cancel(self.raw.as_ptr()) })?;
        self.n_tokens = None;
        self.n_seqs = 0;
        Ok(())
    }

    /// T of the current build, `None` when the plan is not built.
    pub fn n_tokens(&self) -> Option<usize> {
        self.n_tokens
    }

    /// Shape and array sizes (`swa_plan_info`).
    pub fn info(&self) -> Result<PlanInfo> {
        let mut i = sized::<sys::swa_plan_info_t>();
        // SAFETY: valid plan, sized output.
        check(unsafe { sys::swa_plan_info(self.raw.as_ptr(), &mut i) })?;
        Ok(PlanInfo {
            path: match i.path {
                sys::SWA_PLAN_PATH_RING => PlanPath::Ring,
                sys::SWA_PLAN_PATH_STAGED => PlanPath::Staged,
                _ => PlanPath::None,
            },
            n_seqs: i.n_seqs,
            n_tokens: i.n_tokens,
            window: i.window,
            ring_len: i.ring_len,
            executed: i.executed != 0,
            max_seqlen_q: i.max_seqlen_q,
            max_seqlen_k: i.max_seqlen_k,
            n_load_segments: i.n_load_segments,
            n_store_segments: i.n_store_segments,
            history_rows: i.history_rows,
            staging_rows: i.staging_rows,
            decode_index_elems: i.decode_index_elems,
            pivot_elems: i.pivot_elems,
        })
    }

    fn tokens_or_precondition(&self) -> Result<usize> {
        self.n_tokens.ok_or_else(|| Error::new(Code::FailedPrecondition, "the plan is not built"))
    }

    /// Export the ring-only decode gather (`swa_plan_decode_index`):
    /// `offset_len` is [T, 2], `index` is [T, W]; either may be `None`.
    pub fn decode_index(&self, offset_len: Option<&mut [i32]>, index: Option<&mut [i32]>) -> Result<()> {
        let t = self.tokens_or_precondition()?;
        let w = self.cache.layout()?.window as usize;
        let ol = out_ptr(offset_len, t * 2, "offset_len")?;
        let ix = out_ptr(index, t * w, "index")?;
        // SAFETY: the buffers hold at least the entries the library writes.
        check(unsafe { sys::swa_plan_decode_index(self.raw.as_ptr(), ol, ix) })
    }

    /// The staged path's load plan (`swa_plan_load_segments`).
    pub fn load_segments(&self) -> Result<Vec<Segment>> {
        self.segments(sys::swa_plan_load_segments)
    }

    /// The store plan as runs (`swa_plan_store_segments`).
    pub fn store_segments(&self) -> Result<Vec<Segment>> {
        self.segments(sys::swa_plan_store_segments)
    }

    fn segments(
        &self,
        f: unsafe extern "C" fn(
            *const sys::swa_plan_t,
            *mut sys::swa_segment_t,
            usize,
            *mut usize,
        ) -> sys::swa_status_t,
    ) -> Result<Vec<Segment>> {
        let mut count = 0usize;
        // SAFETY: NULL out asks for the count only.
        check(unsafe { f(self.raw.as_ptr(), ptr::null_mut(), 0, &mut count) })?;
        let mut v = vec![Segment::default(); count];
        // SAFETY: Segment has swa_segment_t's layout; capacity is v's length.
        check(unsafe { f(self.raw.as_ptr(), v.as_mut_ptr() as *mut sys::swa_segment_t, v.len(), &mut count) })?;
        v.truncate(count);
        Ok(v)
    }

    /// The staged path's pivots (`swa_plan_pivots`), [T, 4].
    pub fn pivots(&self, pivots: &mut [i32]) -> Result<()> {
        let t = self.tokens_or_precondition()?;
        let p = out_ptr(Some(pivots), t * 4, "pivots")?;
        // SAFETY: the buffer holds 4 T entries.
        check(unsafe { sys::swa_plan_pivots(self.raw.as_ptr(), p) })
    }

    /// The ring row of each new token, or -1 (`swa_plan_store_rows`), [T].
    pub fn store_rows(&self, rows: &mut [i32]) -> Result<()> {
        let t = self.tokens_or_precondition()?;
        let p = out_ptr(Some(rows), t, "rows")?;
        // SAFETY: the buffer holds T entries.
        check(unsafe { sys::swa_plan_store_rows(self.raw.as_ptr(), p) })
    }

    /// Per-sequence offsets (`swa_plan_seq_offsets`): `cu_seqlens_q` [n_seqs + 1],
    /// `q_start` [n_seqs], `valid_start` [n_seqs]; any may be `None`.
    pub fn seq_offsets(
        &self,
        cu_seqlens_q: Option<&mut [i32]>,
        q_start: Option<&mut [i32]>,
        valid_start: Option<&mut [i32]>,
    ) -> Result<()> {
        self.tokens_or_precondition()?;
        let n = self.n_seqs;
        let a = out_ptr(cu_seqlens_q, n + 1, "cu_seqlens_q")?;
        let b = out_ptr(q_start, n, "q_start")?;
        let c = out_ptr(valid_start, n, "valid_start")?;
        // SAFETY: each buffer holds the entries the library writes.
        check(unsafe { sys::swa_plan_seq_offsets(self.raw.as_ptr(), a, b, c) })
    }
}

fn out_ptr(buf: Option<&mut [i32]>, need: usize, name: &str) -> Result<*mut i32> {
    match buf {
        None => Ok(ptr::null_mut()),
        Some(b) if b.len() < need => Err(invalid(format!("{name} holds {} entries, the plan writes {need}", b.len()))),
        Some(b) => Ok(b.as_mut_ptr()),
    }
}

/// A bfloat16 value, stored as its 16 bits (`SWA_DTYPE_BF16`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Bf16(pub u16);

impl Bf16 {
    /// Round an `f32` to nearest even (NaN stays NaN).
    pub fn from_f32(x: f32) -> Bf16 {
        let bits = x.to_bits();
        if x.is_nan() {
            return Bf16(((bits >> 16) as u16) | 0x0040);
        }
        let round = 0x7fff + ((bits >> 16) & 1);
        Bf16((bits.wrapping_add(round) >> 16) as u16)
    }

    /// The exact `f32` value.
    pub fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }
}

/// A read-only tensor of a step: FP32 or BF16 values in a host slice.
#[derive(Clone, Copy, Debug)]
pub enum Input<'a> {
    /// FP32 values.
    F32(&'a [f32]),
    /// BF16 values.
    Bf16(&'a [Bf16]),
}

impl<'a> From<&'a [f32]> for Input<'a> {
    fn from(s: &'a [f32]) -> Input<'a> {
        Input::F32(s)
    }
}
impl<'a> From<&'a Vec<f32>> for Input<'a> {
    fn from(s: &'a Vec<f32>) -> Input<'a> {
        Input::F32(s)
    }
}
impl<'a> From<&'a [Bf16]> for Input<'a> {
    fn from(s: &'a [Bf16]) -> Input<'a> {
        Input::Bf16(s)
    }
}
impl<'a> From<&'a Vec<Bf16>> for Input<'a> {
    fn from(s: &'a Vec<Bf16>) -> Input<'a> {
        Input::Bf16(s)
    }
}

impl Input<'_> {
    fn parts(&self) -> (*const std::ffi::c_void, usize, Dtype) {
        match self {
            Input::F32(s) => (s.as_ptr().cast(), s.len(), Dtype::Fp32),
            Input::Bf16(s) => (s.as_ptr().cast(), s.len(), Dtype::Bf16),
        }
    }
}

/// The output tensor of a step: FP32 or BF16 values in a host slice.
#[derive(Debug)]
pub enum Output<'a> {
    /// FP32 values.
    F32(&'a mut [f32]),
    /// BF16 values.
    Bf16(&'a mut [Bf16]),
}

impl<'a> From<&'a mut [f32]> for Output<'a> {
    fn from(s: &'a mut [f32]) -> Output<'a> {
        Output::F32(s)
    }
}
impl<'a> From<&'a mut Vec<f32>> for Output<'a> {
    fn from(s: &'a mut Vec<f32>) -> Output<'a> {
        Output::F32(s)
    }
}
impl<'a> From<&'a mut [Bf16]> for Output<'a> {
    fn from(s: &'a mut [Bf16]) -> Output<'a> {
        Output::Bf16(s)
    }
}
impl<'a> From<&'a mut Vec<Bf16>> for Output<'a> {
    fn from(s: &'a mut Vec<Bf16>) -> Output<'a> {
        Output::Bf16(s)
    }
}

/// The tensors of one layer of a step (`swa_step_args_t`), as host slices in
/// batch order. Lengths are checked against the plan and the layer before the
/// C call: `q` and `out` hold T·Hq·D values, `k_new` (and `v_new` for layers with
/// separate K and V) T·Hkv·D, `sinks` Hq.
#[derive(Debug)]
pub struct StepArgs<'a> {
    /// Layer id.
    pub layer: u32,
    /// Queries [T, Hq, D].
    pub q: Input<'a>,
    /// New keys [T, Hkv, D] (the shared vector for shared K/V).
    pub k_new: Input<'a>,
    /// New values [T, Hkv, D]; `None` for shared K/V layers. Same dtype as `k_new`.
    pub v_new: Option<Input<'a>>,
    /// Output [T, Hq, D].
    pub out: Output<'a>,
    /// Sink logits [Hq] for layers with sinks.
    pub sinks: Option<&'a [f32]>,
    /// Score scale; 0 = 1/sqrt(D).
    pub softmax_scale: f32,
    /// Optional [T, Hq] output: ln of each row's softmax denominator (sink
    /// included), for merging with other attention.
    pub lse: Option<&'a mut [f32]>,
}

impl<'a> StepArgs<'a> {
    /// Arguments for a shared-K/V layer without sinks, default scale.
    pub fn new(layer: u32, q: impl Into<Input<'a>>, k_new: impl Into<Input<'a>>, out: impl Into<Output<'a>>) -> Self {
        StepArgs {
            layer,
            q: q.into(),
            k_new: k_new.into(),
            v_new: None,
            out: out.into(),
            sinks: None,
            softmax_scale: 0.0,
            lse: None,
        }
    }
}

/// Exclusive access to the steps of a cache (from [`Cache::steps`]): at most one
/// thread runs steps at a time, while other threads keep using `&Cache`.
pub struct StepGuard<'c> {
    cache: &'c Cache,
    _lock: MutexGuard<'c, ()>,
}

impl std::fmt::Debug for StepGuard<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepGuard").finish_non_exhaustive()
    }
}

impl<'c> StepGuard<'c> {
    pub(crate) fn new(cache: &'c Cache, lock: MutexGuard<'c, ()>) -> StepGuard<'c> {
        StepGuard { cache, _lock: lock }
    }

    /// Run one layer of a planned step (`swa_step`) on host slices (CPU backend).
    pub fn step(&mut self, plan: &mut Plan<'_>, args: StepArgs<'_>) -> Result<()> {
        if !ptr::eq(plan.cache, self.cache) {
            return Err(Error::new(Code::FailedPrecondition, "the plan belongs to another cache"));
        }
        self.cache.require_host("step")?;
        let t = plan.tokens_or_precondition()?;
        let layer = self.cache.layer_desc(args.layer)?;
        let (hq, hkv, d) = (layer.q_heads as usize, layer.kv_heads as usize, layer.head_dim as usize);
        let (q, q_len, q_dtype) = args.q.parts();
        let (k, k_len, kv_dtype) = args.k_new.parts();
        expect_len("q", q_len, t * hq * d)?;
        expect_len("k_new", k_len, t * hkv * d)?;
        let v = match (args.v_new, layer.shared_kv) {
            (None, true) => ptr::null(),
            (Some(v), false) => {
                let (v, v_len, v_dtype) = v.parts();
                expect_len("v_new", v_len, t * hkv * d)?;
                if v_dtype != kv_dtype {
                    return Err(invalid("v_new and k_new have different dtypes".into()));
                }
                v
            }
            (None, false) => {
                return Err(invalid(format!("layer {} has separate K and V: v_new is required", args.layer)))
            }
            (Some(_), true) => return Err(invalid(format!("layer {} shares K and V: v_new must be None", args.layer))),
        };
        let sinks = match (args.sinks, layer.has_sinks) {
            (Some(s), true) => {
                expect_len("sinks", s.len(), hq)?;
                s.as_ptr()
            }
            (None, false) => ptr::null(),
            (None, true) => return Err(invalid(format!("layer {} has sinks: sinks is required", args.layer))),
            (Some(_), false) => return Err(invalid(format!("layer {} has no sinks: sinks must be None", args.layer))),
        };
        let (out, out_len, out_dtype) = match args.out {
            Output::F32(s) => (s.as_mut_ptr().cast(), s.len(), Dtype::Fp32),
            Output::Bf16(s) => (s.as_mut_ptr().cast(), s.len(), Dtype::Bf16),
        };
        expect_len("out", out_len, t * hq * d)?;
        let lse = match args.lse {
            Some(l) => {
                expect_len("lse", l.len(), t * hq)?;
                l.as_mut_ptr()
            }
            None => ptr::null_mut(),
        };
        let c = sys::swa_step_args_t {
            struct_size: size_of::<sys::swa_step_args_t>(),
            layer: args.layer,
            q,
            q_dtype: q_dtype.raw(),
            k_new: k,
            v_new: v,
            kv_dtype: kv_dtype.raw(),
            out,
            out_dtype: out_dtype.raw(),
            sinks,
            softmax_scale: args.softmax_scale,
            stream: ptr::null_mut(),
            lse,
        };
        // SAFETY: every buffer was checked to hold what the plan and layer need;
        // the guard makes this the only step on the cache; the plan is ours (&mut).
        check(unsafe { sys::swa_step(self.cache.as_ptr(), plan.as_ptr(), &c) })
    }

    /// Run one layer with raw arguments (device pointers on the CUDA backend).
    ///
    /// # Safety
    /// Every pointer in `args` must satisfy the header's contract for `swa_step`
    /// (sizes from the plan and the layer, memory on the cache's backend).
    pub unsafe fn step_raw(&mut self, plan: &mut Plan<'_>, args: &sys::swa_step_args_t) -> Result<()> {
        if !ptr::eq(plan.cache, self.cache) {
            return Err(Error::new(Code::FailedPrecondition, "the plan belongs to another cache"));
        }
        check(sys::swa_step(self.cache.as_ptr(), plan.as_ptr(), args))
    }
}

fn expect_len(name: &str, got: usize, want: usize) -> Result<()> {
    if got != want {
        return Err(invalid(format!("{name} holds {got} values, the plan and layer need {want}")));
    }
    Ok(())
}
