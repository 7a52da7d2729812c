//! Safe Rust API of libswacache: sliding-window-attention KV caches for
//! inference engines, over the C ABI of `include/swacache.h` (raw declarations
//! in the `swacache-sys` crate).
//!
//! - [`Cache`] owns a cache and is `Send + Sync`; the header's thread-safe calls
//!   take `&Cache`. Steps, which are not thread-safe, run through the
//!   [`StepGuard`] of [`Cache::steps`].
//! - [`Plan`] borrows its cache; build it once per step, then run every layer.
//! - Every fallible call returns [`Result`]; [`Error`] carries the library's
//!   pinned [`Code`] and message.
//! - Stores: implement [`KvStore`] or use the built-in [`Store::memory`],
//!   [`Store::directory`], [`Store::redis`], [`Store::redis_cluster`], and
//!   [`Store::tiered`] over any of them.
//! - [`Cache::attention_merge`] combines two partial attentions by their LSEs.
//! - The `experimental` feature adds the raw declarations the header shows only
//!   under `SWACACHE_EXPERIMENTAL` (the graph decode) to [`sys`]; they may
//!   change in any 0.x minor release.
//!
//! ```
//! use swacache::{Cache, Config, Format, LayerDesc, Seq, StepArgs};
//! let mut config = Config { window: 4, max_slots: 2, ..Config::default() };
//! config.layers.push(LayerDesc { q_heads: 2, kv_heads: 1, head_dim: 32,
//!     kv_format: Format::Fp32, ..LayerDesc::default() });
//! let cache = Cache::new(&config)?;
//! let slot = cache.alloc_slot()?;
//! let mut plan = cache.plan()?;
//! plan.build(&[Seq::new(slot, 3, 3)])?; // prefill 3 tokens
//! let (q, k) = (vec![0.5f32; 3 * 2 * 32], vec![0.25f32; 3 * 32]);
//! let mut out = vec![0f32; 3 * 2 * 32];
//! cache.steps().step(&mut plan, StepArgs::new(0, &q, &k, &mut out))?;
//! assert!((out[0] - 0.25).abs() < 1e-6); // every key is the same vector
//! # Ok::<(), swacache::Error>(())
//! ```
#![deny(missing_docs)]

mod cache;
pub mod codec;
mod compress;
mod config;
mod enums;
mod error;
mod layer;
mod layout;
mod merge;
mod plan;
mod project;
mod rope;
mod step;
mod store;
mod store_redis_tls;
mod store_tiered;

pub use cache::{Cache, SlotInfo};
pub use compress::{CompressArgs, CompressWindow};
pub use config::{Config, StoreSecret};
pub use enums::{Backend, CompressKind, Dtype, Format, LayerRole, RopeStyle, ScaleMode};
pub use error::{Code, Error, Result};
pub use layer::LayerDesc;
pub use layout::{CacheStats, LayerLayout, Layout, TensorView};
pub use merge::{attention_merge, attention_merge_into, MergeArgs};
pub use plan::{IndexPad, Plan, PlanInfo, PlanOptions, PlanPath, Segment, Seq};
pub use project::{ProjectDims, WeightLayout};
pub use rope::{rope_apply, rope_table, RopeInfo};
pub use step::{Bf16, Input, Output, StepArgs, StepGuard};
pub use store::{Blob, GetSink, KvStore, MemoryStats, RedisConfig, Store};
pub use store_redis_tls::RedisSecurity;
pub use store_tiered::{RedisClusterConfig, TierStats};
pub use swacache_sys as sys;

/// The raw experimental declarations (the graph decode, behind
/// `SWACACHE_EXPERIMENTAL` in the header) exist only with the `experimental`
/// feature:
///
/// ```compile_fail
/// let _ = swacache::sys::swa_decode_graph_create;
/// ```
#[cfg(not(feature = "experimental"))]
#[allow(dead_code)]
const EXPERIMENTAL_OFF: () = ();

/// Most bytes of an engine key (`SWA_STORE_MAX_KEY_BYTES`).
pub const MAX_KEY_BYTES: usize = sys::SWA_STORE_MAX_KEY_BYTES as usize;

/// Version of the header the binding was generated from (`SWA_VERSION_NUMBER`).
pub const HEADER_VERSION: u32 = sys::SWA_VERSION_NUMBER;

/// Version of the linked library, `major * 10000 + minor * 100 + patch`.
pub fn version_number() -> u32 {
    // SAFETY: no arguments.
    unsafe { sys::swa_version_number() }
}

/// Version of the linked library as "major.minor.patch".
pub fn version_string() -> &'static str {
    // SAFETY: a static NUL-terminated string.
    unsafe { std::ffi::CStr::from_ptr(sys::swa_version_string()) }.to_str().unwrap_or("")
}
