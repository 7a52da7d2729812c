//! The header's enumerations as Rust enums, each with its pinned C value
//! (`raw`, `from_raw`).
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
