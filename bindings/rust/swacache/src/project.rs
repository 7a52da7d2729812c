//! The merged projection GEMM (experimental, `swa_project`).
use std::mem::size_of;

use swacache_sys as sys;

use crate::cache::Cache;
use crate::error::{check, invalid, Result};
use crate::step::{Bf16, Output};

/// How the weight matrix is laid out (`swa_weight_layout_t`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WeightLayout {
    /// weight[q_dim + kv_dim, hidden_dim] row-major (torch.nn.Linear.weight).
    #[default]
    OutIn,
    /// weight[hidden_dim, q_dim + kv_dim] row-major.
    InOut,
}

/// Sizes of a projection: `out[T, q_dim + kv_dim] = hidden[T, hidden_dim] x weight`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProjectDims {
    /// K, columns of `hidden`.
    pub hidden_dim: u32,
    /// Query columns of `out`.
    pub q_dim: u32,
    /// KV columns of `out`.
    pub kv_dim: u32,
}

impl Cache {
    /// Run the merged projection on host slices (CPU backend); T is
    /// `hidden.len() / hidden_dim`. Thread-safe.
    pub fn project(
        &self,
        hidden: &[Bf16],
        weight: &[Bf16],
        layout: WeightLayout,
        dims: ProjectDims,
        out: Output<'_>,
    ) -> Result<()> {
        self.require_host("project")?;
        let k = dims.hidden_dim as usize;
        let n = dims.q_dim as usize + dims.kv_dim as usize;
        if k == 0 || hidden.len() % k != 0 {
            return Err(invalid(format!("hidden holds {} values, not whole rows of {k}", hidden.len())));
        }
        let t = hidden.len() / k;
        if weight.len() != k * n {
            return Err(invalid(format!("weight holds {} values, {k} x {n} needed", weight.len())));
        }
        let (out, out_len, out_dtype) = match out {
            Output::F32(s) => (s.as_mut_ptr().cast(), s.len(), sys::SWA_DTYPE_FP32),
            Output::Bf16(s) => (s.as_mut_ptr().cast(), s.len(), sys::SWA_DTYPE_BF16),
        };
        if out_len != t * n {
            return Err(invalid(format!("out holds {out_len} values, {t} x {n} needed")));
        }
        let args = sys::swa_project_args_t {
            struct_size: size_of::<sys::swa_project_args_t>(),
            hidden: hidden.as_ptr().cast(),
            weight: weight.as_ptr().cast(),
            weight_layout: match layout {
                WeightLayout::OutIn => sys::SWA_WEIGHT_OUT_IN,
                WeightLayout::InOut => sys::SWA_WEIGHT_IN_OUT,
            },
            out,
            out_dtype,
            n_tokens: i32::try_from(t).map_err(|_| invalid(format!("{t} tokens overflow int32")))?,
            hidden_dim: dims.hidden_dim,
            q_dim: dims.q_dim,
            kv_dim: dims.kv_dim,
            stream: std::ptr::null_mut(),
        };
        // SAFETY: sizes checked above; buffers borrowed for the call.
        check(unsafe { sys::swa_project(self.as_ptr(), &args) })
    }
}
