//! The cache handle and its thread-safe calls (layout, slots, store, save/restore).
use std::ptr::NonNull;
use std::sync::{Mutex, TryLockError};

use swacache_sys as sys;

use crate::config::Config;
use crate::enums::Backend;
use crate::error::{check, Code, Error, Result};
use crate::layer::LayerDesc;
use crate::layout::{sized, CacheStats, LayerLayout, Layout, TensorView};
use crate::plan::{Plan, PlanOptions};
use crate::step::StepGuard;
use crate::store::Store;

/// State of one slot (`swa_slot_info_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotInfo {
    /// The slot id.
    pub slot: u32,
    /// Whether the slot is allocated.
    pub allocated: bool,
    /// One past the highest position written.
    pub written_end: i32,
    /// Positions below it are missing.
    pub valid_start: i32,
    /// Offset of the slot in the pool.
    pub byte_offset: u64,
}

/// An owned cache: layout, slot pool, slot table (`swa_cache_t`). Destroyed on drop.
///
/// `Cache` is `Send + Sync`: every call the header documents as thread-safe takes
/// `&Cache` (slots, layout, statistics, plans, the store, save and restore). Steps
/// are not thread-safe with each other, so they run through a [`StepGuard`] that
/// [`Cache::steps`] hands out to one thread at a time.
///
/// # One scheduler thread, several saver threads
/// Share the cache as `Arc<Cache>`. The scheduler thread owns the plans, takes the
/// step guard and runs every layer of each step; saver threads call
/// [`Cache::save`] and [`Cache::restore`] on slots the scheduler does not step at
/// that moment (e.g. a preempted sequence). The library marks a slot busy while it
/// is read or written for the store, and a step or plan build naming a busy slot
/// fails with [`Code::FailedPrecondition`] instead of racing; the engine keeps
/// a slot out of the batch until its save or restore has returned. Freeing,
/// copying or restoring a slot that a step in flight uses is the engine's race to
/// avoid (the pool never moves, so such a race spoils that sequence's bytes, not
/// memory safety of the process).
///
/// ```
/// use swacache::{Cache, Config, Format, LayerDesc};
/// let mut config = Config { window: 8, max_slots: 4, ..Config::default() };
/// config.layers.push(LayerDesc { q_heads: 2, kv_heads: 1, head_dim: 32,
///     kv_format: Format::Fp32, ..LayerDesc::default() });
/// let cache = Cache::new(&config)?;
/// let slot = cache.alloc_slot()?;
/// assert_eq!(cache.slot_info(slot)?.written_end, 0);
/// cache.free_slot(slot)?;
/// # Ok::<(), swacache::Error>(())
/// ```
pub struct Cache {
    pub(crate) raw: NonNull<sys::swa_cache_t>,
    layers: Vec<LayerDesc>,
    backend: Backend,
    steps: Mutex<()>,
}

// SAFETY: the library's cache is internally locked for every call that takes
// `&Cache`; the calls that are not thread-safe (steps) go through the step mutex,
// and destroy needs ownership.
unsafe impl Send for Cache {}
unsafe impl Sync for Cache {}

impl Drop for Cache {
    fn drop(&mut self) {
        // SAFETY: we own the handle; no plan borrows it any more (they borrow `&self`).
        unsafe { sys::swa_cache_destroy(self.raw.as_ptr()) }
    }
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache").field("backend", &self.backend).field("layers", &self.layers.len()).finish()
    }
}

impl Layout {
    /// The layout a configuration would get, without creating a cache (`swa_layout_compute`).
    pub fn compute(config: &Config) -> Result<Layout> {
        let layers: Vec<_> = config.layers.iter().map(|l| l.to_sys()).collect();
        let c = config.to_sys(&layers);
        let mut out = sized::<sys::swa_layout_t>();
        // SAFETY: c and its layers live across the call; out is a sized struct.
        check(unsafe { sys::swa_layout_compute(&c, &mut out) })?;
        Ok(Layout::from(&out))
    }
}

impl Cache {
    /// Validate a configuration and create a cache (`swa_cache_create`).
    pub fn new(config: &Config) -> Result<Cache> {
        let layers: Vec<_> = config.layers.iter().map(|l| l.to_sys()).collect();
        let c = config.to_sys(&layers);
        let mut raw = std::ptr::null_mut();
        // SAFETY: c and its layers live across the call.
        check(unsafe { sys::swa_cache_create(&c, &mut raw) })?;
        let raw = NonNull::new(raw).ok_or_else(|| Error::new(Code::Internal, "swa_cache_create returned NULL"))?;
        let mut cache = Cache { raw, layers: config.layers.clone(), backend: Backend::Cpu, steps: Mutex::new(()) };
        if !cache.layers.is_empty() {
            cache.backend = cache.layer_view(0)?.backend.unwrap_or(Backend::Cpu);
        }
        Ok(cache)
    }

    /// The raw handle, for calls through `swacache_sys`. It stays owned by `self`.
    pub fn as_ptr(&self) -> *mut sys::swa_cache_t {
        self.raw.as_ptr()
    }

    /// The backend the cache runs on (CPU or CUDA; never `Auto`).
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The layer descriptions the cache was created with.
    pub fn layers(&self) -> &[LayerDesc] {
        &self.layers
    }

    /// The whole-slot layout (`swa_cache_layout`).
    pub fn layout(&self) -> Result<Layout> {
        let mut out = sized::<sys::swa_layout_t>();
        // SAFETY: valid handle, sized output.
        check(unsafe { sys::swa_cache_layout(self.raw.as_ptr(), &mut out) })?;
        Ok(Layout::from(&out))
    }

    /// The layout of one layer (`swa_cache_layer_layout`).
    pub fn layer_layout(&self, layer: u32) -> Result<LayerLayout> {
        let mut out = sized::<sys::swa_layer_layout_t>();
        // SAFETY: valid handle, sized output.
        check(unsafe { sys::swa_cache_layer_layout(self.raw.as_ptr(), layer, &mut out) })?;
        Ok(LayerLayout::from(&out))
    }

    /// A view of one layer's ring over all slots (`swa_cache_layer_view`); its
    /// pointer is valid while the cache lives.
    pub fn layer_view(&self, layer: u32) -> Result<TensorView> {
        let mut out = sized::<sys::swa_tensor_view_t>();
        // SAFETY: valid handle, sized output.
        check(unsafe { sys::swa_cache_layer_view(self.raw.as_ptr(), layer, &mut out) })?;
        Ok(TensorView {
            data: out.data as *mut u8,
            backend: Backend::from_raw(out.backend),
            device: out.device,
            ndim: out.ndim,
            shape: out.shape,
            strides: out.strides,
        })
    }

    /// Counters since creation (`swa_cache_stats`).
    pub fn stats(&self) -> Result<CacheStats> {
        let mut s = sized::<sys::swa_cache_stats_t>();
        // SAFETY: valid handle, sized output.
        check(unsafe { sys::swa_cache_stats(self.raw.as_ptr(), &mut s) })?;
        Ok(CacheStats {
            steps: s.steps,
            tokens: s.tokens,
            nonfinite_blocks: s.nonfinite_blocks,
            slots_in_use: s.slots_in_use,
            max_slots: s.max_slots,
            pool_bytes: s.pool_bytes,
        })
    }

    /// Allocate a free slot (`swa_slot_alloc`); `ResourceExhausted` when none is left.
    pub fn alloc_slot(&self) -> Result<u32> {
        let mut slot = 0;
        // SAFETY: thread-safe call on a valid handle.
        check(unsafe { sys::swa_slot_alloc(self.raw.as_ptr(), &mut slot) })?;
        Ok(slot)
    }

    /// Return a slot to the pool (`swa_slot_free`).
    pub fn free_slot(&self, slot: u32) -> Result<()> {
        // SAFETY: thread-safe call on a valid handle.
        check(unsafe { sys::swa_slot_free(self.raw.as_ptr(), slot) })
    }

    /// Reset a slot for recompute (`swa_slot_reset`).
    pub fn reset_slot(&self, slot: u32) -> Result<()> {
        // SAFETY: thread-safe call on a valid handle.
        check(unsafe { sys::swa_slot_reset(self.raw.as_ptr(), slot) })
    }

    /// Fork a sequence: copy slot `src` into slot `dst` (`swa_slot_copy`).
    pub fn copy_slot(&self, src: u32, dst: u32) -> Result<()> {
        // SAFETY: thread-safe call on a valid handle.
        check(unsafe { sys::swa_slot_copy(self.raw.as_ptr(), src, dst) })
    }

    /// A slot's state (`swa_slot_info`).
    pub fn slot_info(&self, slot: u32) -> Result<SlotInfo> {
        let mut s = sized::<sys::swa_slot_info_t>();
        // SAFETY: valid handle, sized output.
        check(unsafe { sys::swa_slot_info(self.raw.as_ptr(), slot, &mut s) })?;
        Ok(SlotInfo {
            slot: s.slot,
            allocated: s.allocated != 0,
            written_end: s.written_end,
            valid_start: s.valid_start,
            byte_offset: s.byte_offset,
        })
    }

    /// Raise a slot's valid_start (`swa_slot_set_valid_start`).
    pub fn set_valid_start(&self, slot: u32, valid_start: i32) -> Result<()> {
        // SAFETY: thread-safe call on a valid handle.
        check(unsafe { sys::swa_slot_set_valid_start(self.raw.as_ptr(), slot, valid_start) })
    }

    /// Prepare a slot for bounded replay after a prefix hit of `hit_len` tokens
    /// (`swa_slot_begin_replay`); returns `(replay_start, replay_len)`.
    pub fn begin_replay(&self, slot: u32, hit_len: i32) -> Result<(i32, i32)> {
        let (mut start, mut len) = (0, 0);
        // SAFETY: thread-safe call on a valid handle.
        check(unsafe { sys::swa_slot_begin_replay(self.raw.as_ptr(), slot, hit_len, &mut start, &mut len) })?;
        Ok((start, len))
    }

    /// Prepare a slot for an exact replay (`swa_slot_begin_replay_exact`):
    /// `S = L * (W - 1)` positions, plus one with `need_last_output`, where `L`
    /// is `sliding_layers` (0: the cache's layer count). Returns
    /// `(replay_start, replay_len)`. Exact when the engine's full-attention
    /// layers read their cached prefix KV during the replay.
    pub fn begin_replay_exact(
        &self,
        slot: u32,
        hit_len: i32,
        sliding_layers: u32,
        need_last_output: bool,
    ) -> Result<(i32, i32)> {
        let (mut start, mut len) = (0, 0);
        // SAFETY: thread-safe call on a valid handle.
        check(unsafe {
            sys::swa_slot_begin_replay_exact(
                self.raw.as_ptr(),
                slot,
                hit_len,
                sliding_layers,
                i32::from(need_last_output),
                &mut start,
                &mut len,
            )
        })?;
        Ok((start, len))
    }

    /// The positions `lo ..= hi` that [`Cache::save_at`] accepts for the slot
    /// now (`swa_slot_checkpoint_range`); `lo > hi` when none.
    pub fn checkpoint_range(&self, slot: u32) -> Result<(i32, i32)> {
        let (mut lo, mut hi) = (0, 0);
        // SAFETY: thread-safe call on a valid handle.
        check(unsafe { sys::swa_slot_checkpoint_range(self.raw.as_ptr(), slot, &mut lo, &mut hi) })?;
        Ok((lo, hi))
    }

    /// An empty plan with default options (`swa_plan_create`). The plan borrows
    /// the cache, so it cannot outlive it.
    pub fn plan(&self) -> Result<Plan<'_>> {
        Plan::new(self, None)
    }

    /// An empty plan with options (`swa_plan_create_with_options`).
    pub fn plan_with_options(&self, options: &PlanOptions) -> Result<Plan<'_>> {
        Plan::new(self, Some(options))
    }

    /// Exclusive access to steps: blocks while another thread holds the guard.
    pub fn steps(&self) -> StepGuard<'_> {
        let lock = self.steps.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        StepGuard::new(self, lock)
    }

    /// Like [`Cache::steps`], but `None` instead of waiting.
    pub fn try_steps(&self) -> Option<StepGuard<'_>> {
        match self.steps.try_lock() {
            Ok(lock) => Some(StepGuard::new(self, lock)),
            Err(TryLockError::Poisoned(p)) => Some(StepGuard::new(self, p.into_inner())),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// Attach a store (`swa_cache_set_store`); the cache owns it from now on and
    /// releases it exactly once (when replaced, detached or when the cache drops).
    /// On failure the store is dropped here.
    pub fn set_store(&self, store: Store) -> Result<()> {
        let table = store.table();
        // SAFETY: the table is valid; on success the library owns user_data.
        let status = unsafe { sys::swa_cache_set_store(self.raw.as_ptr(), &table) };
        match check(status) {
            Ok(()) => {
                store.forget();
                Ok(())
            }
            Err(e) => Err(e), // `store` drops here and releases its user_data.
        }
    }

    /// Detach the store (`swa_cache_set_store(cache, NULL)`); it is released.
    pub fn detach_store(&self) -> Result<()> {
        // SAFETY: NULL detaches.
        check(unsafe { sys::swa_cache_set_store(self.raw.as_ptr(), std::ptr::null()) })
    }

    /// Persist a slot's stored region under `key` (`swa_slot_save`). Thread-safe.
    pub fn save(&self, slot: u32, key: &[u8]) -> Result<()> {
        // SAFETY: the key is borrowed for the call.
        check(unsafe { sys::swa_slot_save(self.raw.as_ptr(), slot, key_ptr(key), key.len()) })
    }

    /// Restore a slot from the blob saved under `key` (`swa_slot_restore`).
    /// `NotFound`, `DataLoss` and `FailedPrecondition` mean "recompute".
    pub fn restore(&self, slot: u32, key: &[u8]) -> Result<()> {
        // SAFETY: the key is borrowed for the call.
        check(unsafe { sys::swa_slot_restore(self.raw.as_ptr(), slot, key_ptr(key), key.len()) })
    }

    /// Save a checkpoint: the slot as it stood at `position`, under `key`
    /// (`swa_slot_save_at`). A position outside [`Cache::checkpoint_range`] is
    /// `OutOfRange` naming the range; nothing is written then.
    pub fn save_at(&self, slot: u32, position: i32, key: &[u8]) -> Result<()> {
        // SAFETY: the key is borrowed for the call.
        check(unsafe { sys::swa_slot_save_at(self.raw.as_ptr(), slot, position, key_ptr(key), key.len()) })
    }

    /// The index of the first of `keys` (longest prefix first) that the store
    /// holds, or `None` (`swa_cache_store_probe`). Experimental. A store error
    /// for a key before the first present one is returned, naming its index.
    pub fn store_probe<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Option<usize>> {
        let n = u32::try_from(keys.len())
            .map_err(|_| Error::new(Code::InvalidArgument, format!("{} keys exceed u32", keys.len())))?;
        let ptrs: Vec<*const u8> = keys.iter().map(|k| key_ptr(k.as_ref())).collect();
        let lens: Vec<usize> = keys.iter().map(|k| k.as_ref().len()).collect();
        let mut found = -1;
        // SAFETY: the keys, their pointers and lengths are borrowed for the call.
        check(unsafe { sys::swa_cache_store_probe(self.raw.as_ptr(), ptrs.as_ptr(), lens.as_ptr(), n, &mut found) })?;
        Ok(usize::try_from(found).ok())
    }

    /// Whether the store holds a blob under `key` (`swa_cache_store_exists`). Experimental.
    pub fn store_exists(&self, key: &[u8]) -> Result<bool> {
        let mut exists = 0;
        // SAFETY: the key is borrowed for the call.
        check(unsafe { sys::swa_cache_store_exists(self.raw.as_ptr(), key_ptr(key), key.len(), &mut exists) })?;
        Ok(exists != 0)
    }

    /// Delete the blob under `key` (`swa_cache_store_remove`). Experimental.
    pub fn store_remove(&self, key: &[u8]) -> Result<()> {
        // SAFETY: the key is borrowed for the call.
        check(unsafe { sys::swa_cache_store_remove(self.raw.as_ptr(), key_ptr(key), key.len()) })
    }

    pub(crate) fn layer_desc(&self, layer: u32) -> Result<&LayerDesc> {
        self.layers.get(layer as usize).ok_or_else(|| {
            Error::new(Code::OutOfRange, format!("layer {layer} is past the last layer ({} layers)", self.layers.len()))
        })
    }

    pub(crate) fn require_host(&self, what: &str) -> Result<()> {
        if self.backend == Backend::Cuda {
            return Err(Error::new(
                Code::Unimplemented,
                format!("{what} takes host slices; a CUDA cache needs device pointers (use the raw call)"),
            ));
        }
        Ok(())
    }
}

/// An empty key still needs a non-NULL pointer for the library to report its length.
fn key_ptr(key: &[u8]) -> *const u8 {
    static NUL: u8 = 0;
    if key.is_empty() {
        &NUL
    } else {
        key.as_ptr()
    }
}
