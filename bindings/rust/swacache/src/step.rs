//! Steps: the tensors of one layer, checked against the plan and layer, and
//! the exclusive guard that runs them.
use std::mem::size_of;
use std::ptr;
use std::sync::MutexGuard;

use swacache_sys as sys;

use crate::cache::Cache;
use crate::enums::Dtype;
use crate::error::{check, invalid, Code, Error, Result};
use crate::plan::Plan;

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
    pub(crate) fn parts(&self) -> (*const std::ffi::c_void, usize, Dtype) {
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
    /// Optional [T] RoPE positions (each >= 0): RoPE rotates by them instead
    /// of the cache positions; ring rows, window and mask keep cache positions.
    pub positions: Option<&'a [i32]>,
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
            positions: None,
        }
    }
}

/// Exclusive access to the steps of a cache (from [`Cache::steps`]): at most one
/// thread runs steps at a time, while other threads keep using `&Cache`.
pub struct StepGuard<'c> {
    pub(crate) cache: &'c Cache,
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
        let positions = match args.positions {
            Some(p) => {
                expect_len("positions", p.len(), t)?;
                p.as_ptr()
            }
            None => ptr::null(),
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
            positions,
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
