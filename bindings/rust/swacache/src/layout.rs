//! What a cache reports about itself: its whole-slot and per-layer layouts
//! (`swa_layout_t`, `swa_layer_layout_t`), ring views and counters, and the
//! sized output structs the library fills.
use std::mem::size_of;

use swacache_sys as sys;

use crate::enums::{Backend, CompressKind, Format, LayerRole};

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
