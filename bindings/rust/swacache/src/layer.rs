//! One SWA layer (`swa_layer_desc_t`): the owned Rust mirror, the library's
//! default and the C struct (`struct_size` is filled by the binding).
use std::mem::size_of;

use swacache_sys as sys;

use crate::enums::{CompressKind, Format, LayerRole, RopeStyle};

/// One SWA layer (`swa_layer_desc_t`). `Default` is the library's default.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerDesc {
    /// Stored or dropped.
    pub role: LayerRole,
    /// Query heads Hq, a multiple of `kv_heads`.
    pub q_heads: u32,
    /// KV heads Hkv.
    pub kv_heads: u32,
    /// Head dim D.
    pub head_dim: u32,
    /// One vector is both K and V.
    pub shared_kv: bool,
    /// Ring storage format.
    pub kv_format: Format,
    /// c of the compression state; 0 = none.
    pub compress_ratio: u32,
    /// Bytes of one compression entry.
    pub compress_entry_bytes: u32,
    /// RoPE base (used when `rope_style` is not `None`).
    pub rope_theta: f32,
    /// Rotary dims n (even).
    pub rope_dims: u32,
    /// The layer has per-head attention sinks.
    pub has_sinks: bool,
    /// Rotate q and the new keys inside the step.
    pub rope_style: RopeStyle,
    /// First rotary dim of each head.
    pub rope_first_dim: u32,
    /// YaRN context factor; 0 or 1 = plain RoPE.
    pub rope_yarn_factor: f32,
    /// YaRN: pre-extension context length.
    pub rope_yarn_original_max_positions: u32,
    /// YaRN: high-frequency boundary.
    pub rope_yarn_beta_fast: f32,
    /// YaRN: low-frequency boundary.
    pub rope_yarn_beta_slow: f32,
    /// YaRN: round the boundary dims.
    pub rope_yarn_truncate: bool,
    /// Multiplies cos and sin; 0 = the default.
    pub rope_attention_factor: f32,
    /// Rotate the output's rotary dims back by the query position.
    pub rope_derotate_output: bool,
    /// Logit soft-cap; 0 = off.
    pub logit_softcap: f32,
    /// The layer's softmax scale; 0 = 1/sqrt(head_dim). A step's non-zero
    /// scale overrides it.
    pub softmax_scale: f32,
    /// The typed compressor (docs/semantics.md "Compression state"); `compress_ratio`
    /// is its rate and `compress_entry_bytes` stays 0.
    pub compress_kind: CompressKind,
    /// d of the entries; HCA rows are d wide, CSA rows 2d.
    pub compress_head_dim: u32,
    /// Trailing dims of each entry rotated at w * c; 0 = none.
    pub compress_rope_dims: u32,
    /// Storage of the buffered rows: FP32 or BF16.
    pub compress_row_format: Format,
    /// CSA: the Lightning Indexer's compressor width; 0 = none.
    pub index_head_dim: u32,
}

impl Default for LayerDesc {
    fn default() -> LayerDesc {
        let mut d = unsafe { std::mem::zeroed::<sys::swa_layer_desc_t>() };
        // SAFETY: d is a valid, writable struct.
        unsafe { sys::swa_layer_desc_init(&mut d) };
        LayerDesc {
            role: LayerRole::from_raw(d.role).unwrap_or(LayerRole::Stored),
            q_heads: d.q_heads,
            kv_heads: d.kv_heads,
            head_dim: d.head_dim,
            shared_kv: d.shared_kv != 0,
            kv_format: Format::from_raw(d.kv_format).unwrap_or(Format::Mxfp8),
            compress_ratio: d.compress_ratio,
            compress_entry_bytes: d.compress_entry_bytes,
            rope_theta: d.rope_theta,
            rope_dims: d.rope_dims,
            has_sinks: d.has_sinks != 0,
            rope_style: RopeStyle::from_raw(d.rope_style).unwrap_or(RopeStyle::None),
            rope_first_dim: d.rope_first_dim,
            rope_yarn_factor: d.rope_yarn_factor,
            rope_yarn_original_max_positions: d.rope_yarn_original_max_positions,
            rope_yarn_beta_fast: d.rope_yarn_beta_fast,
            rope_yarn_beta_slow: d.rope_yarn_beta_slow,
            rope_yarn_truncate: d.rope_yarn_truncate != 0,
            rope_attention_factor: d.rope_attention_factor,
            rope_derotate_output: d.rope_derotate_output != 0,
            logit_softcap: d.logit_softcap,
            softmax_scale: d.softmax_scale,
            compress_kind: CompressKind::from_raw(d.compress_kind).unwrap_or(CompressKind::Opaque),
            compress_head_dim: d.compress_head_dim,
            compress_rope_dims: d.compress_rope_dims,
            compress_row_format: Format::from_raw(d.compress_row_format).unwrap_or(Format::Fp32),
            index_head_dim: d.index_head_dim,
        }
    }
}

impl LayerDesc {
    pub(crate) fn to_sys(self) -> sys::swa_layer_desc_t {
        sys::swa_layer_desc_t {
            struct_size: size_of::<sys::swa_layer_desc_t>(),
            role: self.role.raw(),
            q_heads: self.q_heads,
            kv_heads: self.kv_heads,
            head_dim: self.head_dim,
            shared_kv: self.shared_kv as u32,
            kv_format: self.kv_format.raw(),
            compress_ratio: self.compress_ratio,
            compress_entry_bytes: self.compress_entry_bytes,
            rope_theta: self.rope_theta,
            rope_dims: self.rope_dims,
            has_sinks: self.has_sinks as u32,
            rope_style: self.rope_style.raw(),
            rope_first_dim: self.rope_first_dim,
            rope_yarn_factor: self.rope_yarn_factor,
            rope_yarn_original_max_positions: self.rope_yarn_original_max_positions,
            rope_yarn_beta_fast: self.rope_yarn_beta_fast,
            rope_yarn_beta_slow: self.rope_yarn_beta_slow,
            rope_yarn_truncate: self.rope_yarn_truncate as u32,
            rope_attention_factor: self.rope_attention_factor,
            rope_derotate_output: self.rope_derotate_output as u32,
            logit_softcap: self.logit_softcap,
            softmax_scale: self.softmax_scale,
            reserved: 0,
            compress_kind: self.compress_kind.raw(),
            compress_head_dim: self.compress_head_dim,
            compress_rope_dims: self.compress_rope_dims,
            compress_row_format: self.compress_row_format.raw(),
            index_head_dim: self.index_head_dim,
            compress_reserved: 0,
        }
    }
}
