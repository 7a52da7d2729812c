//! Configuration of one cache (`swa_config_t`) and its store secret (owned
//! Rust mirrors; `struct_size` is filled by the binding).
use std::mem::size_of;

use swacache_sys as sys;

use crate::enums::{Backend, ScaleMode};
use crate::layer::LayerDesc;

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
