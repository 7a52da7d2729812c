//! Enumerations, configuration and layout structs (owned Rust mirrors of the
//! header's structs; `struct_size` is filled by the binding).
use std::mem::size_of;

use swacache_sys as sys;

macro_rules! c_enum {
    ($(#[$m:meta])* $name:ident: $raw:ty { $($(#[$vm:meta])* $variant:ident = $value:path,)+ }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vm])* $variant,)+
        }
        impl $name {
            /// The pinned C value.
            pub fn raw(self) -> $raw {
                match self { $($name::$variant => $value,)+ }
            }
            /// The variant of a C value; `None` for a value this binding does not know.
            pub fn from_raw(raw: $raw) -> Option<$name> {
                match raw { $($value => Some($name::$variant),)+ _ => None }
            }
        }
    };
}

c_enum!(
    /// Storage format of a layer's ring (`swa_format_t`).
    Format: sys::swa_format_t {
        /// D E4M3 codes then D/32 E8M0 scales.
        Mxfp8 = sys::SWA_FORMAT_MXFP8,
        /// 2D bytes.
        Bf16 = sys::SWA_FORMAT_BF16,
        /// 4D bytes (debug and reference).
        Fp32 = sys::SWA_FORMAT_FP32,
        /// DeepSeek-V4's 584-byte record (dim 512): 448 E4M3 NoPE codes, 64 BF16
        /// RoPE dims, 7 UE8M0 scales and a pad byte.
        Fp8DsMla = sys::SWA_FORMAT_FP8_DS_MLA,
    }
);
c_enum!(
    /// Element type of tensors exchanged with the library (`swa_dtype_t`).
    Dtype: sys::swa_dtype_t {
        /// IEEE binary32.
        Fp32 = sys::SWA_DTYPE_FP32,
        /// bfloat16 bits ([`crate::Bf16`]).
        Bf16 = sys::SWA_DTYPE_BF16,
    }
);
c_enum!(
    /// How an MXFP8 block's scale is chosen (`swa_scale_mode_t`).
    ScaleMode: sys::swa_scale_mode_t {
        /// Smallest power of two with amax/scale <= 448 (default).
        Ceil = sys::SWA_SCALE_CEIL,
        /// OCP rule: exponent(amax) - 8.
        Floor = sys::SWA_SCALE_FLOOR,
    }
);
c_enum!(
    /// Whether a layer's ring is persisted (`swa_layer_role_t`).
    LayerRole: sys::swa_layer_role_t {
        /// Part of the stored (persisted) region.
        Stored = sys::SWA_LAYER_STORED,
        /// Kept for decoding, never persisted.
        Dropped = sys::SWA_LAYER_DROPPED,
    }
);
c_enum!(
    /// Where the pool lives and which backend runs steps (`swa_backend_t`).
    Backend: sys::swa_backend_t {
        /// CUDA when built with it and a device exists, else CPU.
        Auto = sys::SWA_BACKEND_AUTO,
        /// Host memory, CPU kernels.
        Cpu = sys::SWA_BACKEND_CPU,
        /// Device memory, CUDA kernels.
        Cuda = sys::SWA_BACKEND_CUDA,
    }
);

c_enum!(
    /// How a layer's rotary dims pair up (`swa_rope_style_t`).
    RopeStyle: sys::swa_rope_style_t {
        /// No rotation inside the step.
        None = sys::SWA_ROPE_NONE,
        /// "Rotate half": dim i pairs with dim i + n/2 of the rotary slice.
        Neox = sys::SWA_ROPE_NEOX,
        /// Interleaved: dims 2i and 2i + 1 of the rotary slice.
        Gptj = sys::SWA_ROPE_GPTJ,
    }
);

c_enum!(
    /// What a layer's compression region holds (`swa_compress_kind_t`).
    CompressKind: sys::swa_compress_kind_t {
        /// Entries the engine packs itself (`compress_entry_bytes` each).
        Opaque = sys::SWA_COMPRESS_OPAQUE,
        /// DeepSeek-V4 HCA: non-overlapping windows, rows `compress_head_dim` wide.
        Hca = sys::SWA_COMPRESS_HCA,
        /// DeepSeek-V4 CSA: windows overlapping by one stride, rows `2 * compress_head_dim`
        /// wide (Ca | Cb), optionally with the Lightning Indexer's compressor.
        Csa = sys::SWA_COMPRESS_CSA,
    }
);

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

/// Configuration of one cache (`swa_config_t`). `Default` is the library's
/// default with no layers. The binding always lets the library allocate the pool.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// W, keys visible to a query including itself.
    pub window: u32,
    /// N, speculative draft tokens per step.
    pub draft_tokens: u32,
    /// R; 0 = W + N + 1.
    pub ring_len: u32,
    /// Region alignment in bytes.
    pub alignment: u32,
    /// Number of state slots.
    pub max_slots: u32,
    /// Backend.
    pub backend: Backend,
    /// CUDA device ordinal.
    pub device: i32,
    /// MXFP8 scale rule.
    pub scale_mode: ScaleMode,
    /// CPU backend threads; 0 = hardware threads.
    pub num_threads: u32,
    /// Layers in model order; the index is the layer id.
    pub layers: Vec<LayerDesc>,
    /// Store secret for authenticated blobs (`store_secret`): empty = none,
    /// else 16 ... 1024 bytes. Every blob saved carries an HMAC-SHA-256 tag and
    /// a restore refuses one without a valid tag ([`Code::DataLoss`]). It
    /// authenticates, it does not encrypt (docs/store.md, "Threat model").
    pub store_secret: StoreSecret,
    /// Tenant namespace prefixed to every store key (`store_namespace`):
    /// empty = none, else 1 ... 256 bytes.
    pub store_namespace: Vec<u8>,
}

/// The bytes of a store secret; its `Debug` prints the length only.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct StoreSecret(pub Vec<u8>);

impl std::fmt::Debug for StoreSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StoreSecret({} bytes)", self.0.len())
    }
}

impl Default for Config {
    fn default() -> Config {
        let mut c = unsafe { std::mem::zeroed::<sys::swa_config_t>() };
        // SAFETY: c is a valid, writable struct.
        unsafe { sys::swa_config_init(&mut c) };
        Config {
            window: c.window,
            draft_tokens: c.draft_tokens,
            ring_len: c.ring_len,
            alignment: c.alignment,
            max_slots: c.max_slots,
            backend: Backend::from_raw(c.backend).unwrap_or(Backend::Auto),
            device: c.device,
            scale_mode: ScaleMode::from_raw(c.scale_mode).unwrap_or(ScaleMode::Ceil),
            num_threads: c.num_threads,
            layers: Vec::new(),
            store_secret: StoreSecret::default(),
            store_namespace: Vec::new(),
        }
    }
}

impl Config {
    /// The C struct; `layers` must outlive its use.
    pub(crate) fn to_sys(&self, layers: &[sys::swa_layer_desc_t]) -> sys::swa_config_t {
        sys::swa_config_t {
            struct_size: size_of::<sys::swa_config_t>(),
            window: self.window,
            draft_tokens: self.draft_tokens,
            ring_len: self.ring_len,
            alignment: self.alignment,
            max_slots: self.max_slots,
            backend: self.backend.raw(),
            device: self.device,
            scale_mode: self.scale_mode.raw(),
            num_threads: self.num_threads,
            num_layers: layers.len() as u32,
            layers: if layers.is_empty() { std::ptr::null() } else { layers.as_ptr() },
            pool: std::ptr::null_mut(),
            pool_bytes: 0,
            store_secret: if self.store_secret.0.is_empty() { std::ptr::null() } else { self.store_secret.0.as_ptr() },
            store_secret_len: self.store_secret.0.len(),
            store_namespace: if self.store_namespace.is_empty() {
                std::ptr::null()
            } else {
                self.store_namespace.as_ptr()
            },
            store_namespace_len: self.store_namespace.len(),
        }
    }
}

/// Whole-slot layout of a cache (`swa_layout_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// W.
    pub window: u32,
    /// N.
    pub draft_tokens: u32,
    /// R.
    pub ring_len: u32,
    /// Region alignment in bytes.
    pub alignment: u32,
    /// Layers in the cache.
    pub num_layers: u32,
    /// Layers whose rings are persisted.
    pub num_stored_layers: u32,
    /// Slots in the pool.
    pub max_slots: u32,
    /// R - W + 1: most query tokens of a ring-only step.
    pub max_ring_tokens: u32,
    /// Bytes of one slot.
    pub slot_bytes: u64,
    /// Offset of the stored region in a slot.
    pub stored_offset: u64,
    /// Bytes of the stored region.
    pub stored_bytes: u64,
    /// max_slots * slot_bytes.
    pub pool_bytes: u64,
    /// Stable 64-bit hash of everything that shapes the bytes.
    pub fingerprint: u64,
    /// Every layer's compression regions in a slot.
    pub compress_bytes: u64,
    /// The blob's compression section (0: none).
    pub compress_saved_bytes: u64,
}

impl From<&sys::swa_layout_t> for Layout {
    fn from(l: &sys::swa_layout_t) -> Layout {
        Layout {
            window: l.window,
            draft_tokens: l.draft_tokens,
            ring_len: l.ring_len,
            alignment: l.alignment,
            num_layers: l.num_layers,
            num_stored_layers: l.num_stored_layers,
            max_slots: l.max_slots,
            max_ring_tokens: l.max_ring_tokens,
            slot_bytes: l.slot_bytes,
            stored_offset: l.stored_offset,
            stored_bytes: l.stored_bytes,
            pool_bytes: l.pool_bytes,
            fingerprint: l.fingerprint,
            compress_bytes: l.compress_bytes,
            compress_saved_bytes: l.compress_saved_bytes,
        }
    }
}

/// Layout of one layer inside a slot (`swa_layer_layout_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayerLayout {
    /// Stored or dropped (`None` for a value this binding does not know).
    pub role: Option<LayerRole>,
    /// Ring format (`None` for a value this binding does not know).
    pub kv_format: Option<Format>,
    /// kv_heads, times 2 when K and V are separate.
    pub heads_per_token: u32,
    /// Bytes of one vector.
    pub vec_bytes: u32,
    /// heads_per_token * vec_bytes.
    pub bytes_per_token: u32,
    /// R.
    pub ring_len: u32,
    /// Offset of the ring inside a slot.
    pub ring_offset: u64,
    /// Bytes of the ring (aligned).
    pub ring_bytes: u64,
    /// Compression ring entries, 0 = none.
    pub compress_len: u32,
    /// Bytes of one compression entry.
    pub compress_entry_bytes: u32,
    /// Offset of the compression region.
    pub compress_offset: u64,
    /// Bytes of the compression region.
    pub compress_bytes: u64,
    /// The layer's compressor kind (`None` for a value this binding does not know).
    pub compress_kind: Option<CompressKind>,
    /// c (0 = none).
    pub compress_ratio: u32,
    /// d of the entries (typed kinds).
    pub compress_head_dim: u32,
    /// The indexer compressor's entry width; 0 = none.
    pub index_head_dim: u32,
    /// Bytes of one indexer ring row; 0 = none.
    pub index_row_bytes: u32,
    /// Values per kv (or gate) half of a main ring row: d or 2d.
    pub compress_row_values: u32,
    /// Offset of the indexer ring.
    pub index_offset: u64,
    /// Bytes of the indexer ring.
    pub index_bytes: u64,
}

impl From<&sys::swa_layer_layout_t> for LayerLayout {
    fn from(l: &sys::swa_layer_layout_t) -> LayerLayout {
        LayerLayout {
            role: LayerRole::from_raw(l.role),
            kv_format: Format::from_raw(l.kv_format),
            heads_per_token: l.heads_per_token,
            vec_bytes: l.vec_bytes,
            bytes_per_token: l.bytes_per_token,
            ring_len: l.ring_len,
            ring_offset: l.ring_offset,
            ring_bytes: l.ring_bytes,
            compress_len: l.compress_len,
            compress_entry_bytes: l.compress_entry_bytes,
            compress_offset: l.compress_offset,
            compress_bytes: l.compress_bytes,
            compress_kind: CompressKind::from_raw(l.compress_kind),
            compress_ratio: l.compress_ratio,
            compress_head_dim: l.compress_head_dim,
            index_head_dim: l.index_head_dim,
            index_row_bytes: l.index_row_bytes,
            compress_row_values: l.compress_row_values,
            index_offset: l.index_offset,
            index_bytes: l.index_bytes,
        }
    }
}

/// Strided byte-tensor view of a layer's ring over all slots (`swa_tensor_view_t`).
/// The pointer borrows the cache's pool (host or device memory per `backend`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorView {
    /// Base address.
    pub data: *mut u8,
    /// Where `data` lives (`None` for a value this binding does not know).
    pub backend: Option<Backend>,
    /// CUDA device ordinal, -1 for host memory.
    pub device: i32,
    /// Number of dimensions.
    pub ndim: u32,
    /// Extents; unused entries are 1.
    pub shape: [i64; 4],
    /// Byte strides; unused entries are 0.
    pub strides: [i64; 4],
}

/// Counters of a cache since creation (`swa_cache_stats_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheStats {
    /// Successful steps (one per layer).
    pub steps: u64,
    /// New tokens processed by those steps.
    pub tokens: u64,
    /// 32-value blocks with a NaN or Inf met while encoding.
    pub nonfinite_blocks: u64,
    /// Allocated slots now.
    pub slots_in_use: u32,
    /// Slots in the pool.
    pub max_slots: u32,
    /// Bytes of the pool.
    pub pool_bytes: u64,
}

/// A sized, zeroed output struct for the library to fill.
pub(crate) fn sized<T>() -> T {
    // SAFETY: every swa_* output struct is plain data for which all-zero bytes are
    // valid (integers, floats, nullable pointers); the first field is struct_size.
    unsafe {
        let mut v = std::mem::zeroed::<T>();
        *(&mut v as *mut T as *mut usize) = size_of::<T>();
        v
    }
}
