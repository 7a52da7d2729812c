//! Plans (built once per step, read by every layer) and steps.
use std::mem::size_of;
use std::ptr::{self, NonNull};

use swacache_sys as sys;

use crate::cache::Cache;
use crate::error::{check, invalid, Code, Error, Result};
use crate::layout::sized;

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
    pub(crate) raw: NonNull<sys::swa_plan_t>,
    pub(crate) cache: &'c Cache,
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

    pub(crate) fn tokens_or_precondition(&self) -> Result<usize> {
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
