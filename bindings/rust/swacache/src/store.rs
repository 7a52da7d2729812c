//! External KV stores: the [`KvStore`] trait for stores written in Rust, and the
//! library's built-in memory, directory and Redis stores (the tiered and Redis
//! Cluster stores are in `store_tiered.rs`).
use std::any::Any;
use std::ffi::{c_char, c_void, CString};
use std::mem::size_of;
use std::panic::{catch_unwind, AssertUnwindSafe};

use swacache_sys as sys;

use crate::error::{check, invalid, Code, Error, Result};
use crate::layout::sized;
use crate::store_redis_tls::{ApplySecurity, RedisSecurity};

/// A blob handed to [`KvStore::put`]: the concatenation of borrowed parts (the
/// library passes a header and the slot's stored region in place).
#[derive(Debug)]
pub struct Blob<'a> {
    iov: &'a [sys::swa_iov_t],
}

impl<'a> Blob<'a> {
    /// The parts, in order.
    pub fn parts(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.iov.iter().map(|v| {
            if v.size == 0 {
                &[][..]
            } else {
                // SAFETY: the library lends `size` readable bytes for the call.
                unsafe { std::slice::from_raw_parts(v.data as *const u8, v.size) }
            }
        })
    }

    /// Total bytes.
    pub fn len(&self) -> usize {
        self.iov.iter().map(|v| v.size).sum()
    }

    /// Whether the blob is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The blob in one owned buffer.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len());
        self.parts().for_each(|p| v.extend_from_slice(p));
        v
    }
}

/// Where [`KvStore::get`] delivers a blob: the library's buffers, which expect a
/// blob of [`GetSink::expected_len`] bytes.
#[derive(Debug)]
pub struct GetSink<'a> {
    iov: &'a [sys::swa_iov_t],
    expected: u64,
    actual: Option<u64>,
}

impl GetSink<'_> {
    /// The size the library expects.
    pub fn expected_len(&self) -> usize {
        self.expected as usize
    }

    /// Deliver the blob. When its size is the expected one it is copied into the
    /// library's buffers; otherwise only its size is reported, and the library
    /// reads it again whole to tell why it does not fit.
    pub fn fill(&mut self, blob: &[u8]) {
        self.fill_parts(&[blob]);
    }

    /// Deliver a blob kept as several parts (concatenated).
    pub fn fill_parts(&mut self, parts: &[&[u8]]) {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        self.actual = Some(total as u64);
        if total as u64 != self.expected {
            return;
        }
        // Copy run by run: the parts and the library's buffers split the blob
        // at different offsets.
        let mut src = parts.iter().copied().filter(|p| !p.is_empty());
        let mut cur: &[u8] = src.next().unwrap_or(&[]);
        for v in self.iov {
            if v.size == 0 {
                continue;
            }
            // SAFETY: the library lends `size` writable bytes for the call.
            let mut dst = unsafe { std::slice::from_raw_parts_mut(v.data as *mut u8, v.size) };
            while !dst.is_empty() {
                if cur.is_empty() {
                    cur = src.next().unwrap_or(&[]);
                }
                let n = cur.len().min(dst.len());
                dst[..n].copy_from_slice(&cur[..n]);
                dst = &mut dst[n..];
                cur = &cur[n..];
            }
        }
    }
}

/// A key-value store for saved slots, implemented in Rust and attached with
/// [`Store::new`] and [`crate::Cache::set_store`].
///
/// Keys arrive prefixed by the library with the layout fingerprint
/// (`"0123456789abcdef:" + key`). Callbacks run on the thread that called
/// save/restore/exists/remove, concurrently when several threads do, hence
/// `Send + Sync`. A callback may call the library, but must not drop the cache
/// that is calling it. A panic is caught at the boundary and becomes
/// [`Code::Internal`] with the panic message; an `Err` keeps its code and message.
///
/// ```
/// use std::collections::HashMap;
/// use std::sync::Mutex;
/// use swacache::{Blob, Code, Error, GetSink, KvStore, Result};
///
/// #[derive(Default)]
/// struct MapStore(Mutex<HashMap<Vec<u8>, Vec<u8>>>);
///
/// impl KvStore for MapStore {
///     fn put(&self, key: &[u8], blob: &Blob<'_>) -> Result<()> {
///         self.0.lock().unwrap().insert(key.to_vec(), blob.to_vec());
///         Ok(())
///     }
///     fn get(&self, key: &[u8], sink: &mut GetSink<'_>) -> Result<()> {
///         match self.0.lock().unwrap().get(key) {
///             Some(blob) => Ok(sink.fill(blob)),
///             None => Err(Error::new(Code::NotFound, "no such key")),
///         }
///     }
/// }
/// let store = swacache::Store::new(MapStore::default());
/// # drop(store);
/// ```
pub trait KvStore: Send + Sync + 'static {
    /// Store `blob` under `key`, replacing any blob there; all-or-nothing for readers.
    fn put(&self, key: &[u8], blob: &Blob<'_>) -> Result<()>;

    /// Deliver the blob under `key` through `sink`; `Err(NotFound)` when missing.
    fn get(&self, key: &[u8], sink: &mut GetSink<'_>) -> Result<()>;

    /// Whether a blob is stored under `key`. Default: `Unimplemented`.
    fn exists(&self, key: &[u8]) -> Result<bool> {
        let _ = key;
        Err(Error::new(Code::Unimplemented, "this store has no exists"))
    }

    /// Delete the blob under `key` (`NotFound` when none). Default: `Unimplemented`.
    fn remove(&self, key: &[u8]) -> Result<()> {
        let _ = key;
        Err(Error::new(Code::Unimplemented, "this store has no remove"))
    }
}

/// Owned user_data of a Rust store: a thin pointer to the trait object.
type Boxed = Box<dyn KvStore>;

/// A store that is not attached yet: a Rust [`KvStore`] or a built-in store.
/// Dropping it releases what it holds; [`crate::Cache::set_store`] hands it over.
pub struct Store {
    table: sys::swa_kv_store_t,
}

// SAFETY: built-in stores are thread-safe; Rust stores are `Send + Sync`.
unsafe impl Send for Store {}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("user_data", &self.table.user_data).finish()
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if let Some(release) = self.table.release {
            // SAFETY: we still own user_data; release frees it once.
            unsafe { release(self.table.user_data) }
        }
    }
}

pub(crate) fn empty_table() -> sys::swa_kv_store_t {
    let mut t = unsafe { std::mem::zeroed::<sys::swa_kv_store_t>() };
    // SAFETY: t is writable.
    unsafe { sys::swa_kv_store_init(&mut t) };
    t
}

pub(crate) fn cstring(what: &str, s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| invalid(format!("{what} contains a NUL byte")))
}

impl Store {
    /// Wrap a Rust store in a boxed callback table. The box is dropped exactly
    /// once, by the table's `release`.
    pub fn new<S: KvStore>(store: S) -> Store {
        let boxed: Box<Boxed> = Box::new(Box::new(store));
        let mut t = empty_table();
        t.user_data = Box::into_raw(boxed) as *mut c_void;
        t.put = Some(tramp_put);
        t.get = Some(tramp_get);
        t.exists = Some(tramp_exists);
        t.remove = Some(tramp_remove);
        t.release = Some(tramp_release);
        Store { table: t }
    }

    /// The built-in in-process memory store with a byte budget and LRU eviction.
    pub fn memory(budget_bytes: u64) -> Result<Store> {
        let mut c = unsafe { std::mem::zeroed::<sys::swa_store_memory_config_t>() };
        unsafe { sys::swa_store_memory_config_init(&mut c) };
        c.budget_bytes = budget_bytes;
        let mut t = empty_table();
        // SAFETY: valid config and table.
        check(unsafe { sys::swa_store_memory_create(&c, &mut t) })?;
        Ok(Store { table: t })
    }

    /// The built-in directory store: one file per key under `path`.
    pub fn directory(path: &std::path::Path, create: bool, sync: bool) -> Result<Store> {
        let p = path.to_str().ok_or_else(|| invalid(format!("path {} is not UTF-8", path.display())))?;
        let p = cstring("path", p)?;
        let mut c = unsafe { std::mem::zeroed::<sys::swa_store_directory_config_t>() };
        unsafe { sys::swa_store_directory_config_init(&mut c) };
        c.path = p.as_ptr();
        c.create = create as u32;
        c.sync = sync as u32;
        let mut t = empty_table();
        // SAFETY: the path outlives the call.
        check(unsafe { sys::swa_store_directory_create(&c, &mut t) })?;
        Ok(Store { table: t })
    }

    /// The built-in Redis store (experimental); `Unavailable` when the server
    /// cannot be reached, `Unauthenticated` for a wrong user or password or a
    /// server certificate that fails verification, `Unimplemented` in a build
    /// without hiredis.
    pub fn redis(config: &RedisConfig) -> Result<Store> {
        let host = cstring("host", &config.host)?;
        let password = config.password.as_deref().map(|p| cstring("password", p)).transpose()?;
        let security = config.security.strings()?;
        let mut c = unsafe { std::mem::zeroed::<sys::swa_store_redis_config_t>() };
        unsafe { sys::swa_store_redis_config_init(&mut c) };
        c.host = host.as_ptr();
        c.port = config.port;
        c.db = config.db;
        c.password = password.as_ref().map_or(std::ptr::null(), |p| p.as_ptr());
        c.ttl_seconds = config.ttl_seconds;
        c.timeout_ms = config.timeout_ms;
        c.max_connections = config.max_connections;
        c.apply(&config.security, &security);
        let mut t = empty_table();
        // SAFETY: the strings outlive the call (the library copies them).
        check(unsafe { sys::swa_store_redis_create(&c, &mut t) })?;
        Ok(Store { table: t })
    }

    /// Statistics of a built-in memory store that is not attached yet.
    pub fn memory_stats(&self) -> Result<MemoryStats> {
        let mut s = sized::<sys::swa_store_memory_stats_t>();
        // SAFETY: we own the table's user_data.
        check(unsafe { sys::swa_store_memory_stats(&self.table, &mut s) })?;
        Ok(MemoryStats {
            budget_bytes: s.budget_bytes,
            bytes: s.bytes,
            entries: s.entries,
            puts: s.puts,
            rejected_puts: s.rejected_puts,
            hits: s.hits,
            misses: s.misses,
            evictions: s.evictions,
            evicted_bytes: s.evicted_bytes,
        })
    }

    pub(crate) fn from_table(table: sys::swa_kv_store_t) -> Store {
        Store { table }
    }

    pub(crate) fn table(&self) -> sys::swa_kv_store_t {
        self.table
    }

    /// Ownership went to a cache.
    pub(crate) fn forget(self) {
        std::mem::forget(self)
    }
}

/// Statistics of the built-in memory store (`swa_store_memory_stats_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryStats {
    /// The configured budget.
    pub budget_bytes: u64,
    /// Bytes held now.
    pub bytes: u64,
    /// Blobs held now.
    pub entries: u64,
    /// Successful puts.
    pub puts: u64,
    /// Puts of a blob larger than the whole budget.
    pub rejected_puts: u64,
    /// Gets that found their key.
    pub hits: u64,
    /// Gets that did not.
    pub misses: u64,
    /// Blobs evicted.
    pub evictions: u64,
    /// Bytes those evictions freed.
    pub evicted_bytes: u64,
}

/// Configuration of the built-in Redis store (experimental).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisConfig {
    /// Server host name or address.
    pub host: String,
    /// TCP port.
    pub port: u32,
    /// Database number.
    pub db: u32,
    /// AUTH password.
    pub password: Option<String>,
    /// Expiry of each blob in seconds; 0 = none.
    pub ttl_seconds: u32,
    /// Connect and command timeout.
    pub timeout_ms: u32,
    /// Idle connections kept for reuse.
    pub max_connections: u32,
    /// ACL user and TLS.
    pub security: RedisSecurity,
}

impl Default for RedisConfig {
    fn default() -> RedisConfig {
        let mut c = unsafe { std::mem::zeroed::<sys::swa_store_redis_config_t>() };
        // SAFETY: c is writable; the default host is a static string.
        unsafe { sys::swa_store_redis_config_init(&mut c) };
        let host = if c.host.is_null() {
            "127.0.0.1".to_string()
        } else {
            unsafe { std::ffi::CStr::from_ptr(c.host) }.to_string_lossy().into_owned()
        };
        RedisConfig {
            host,
            port: c.port,
            db: c.db,
            password: None,
            ttl_seconds: c.ttl_seconds,
            timeout_ms: c.timeout_ms,
            max_connections: c.max_connections,
            security: RedisSecurity::default(),
        }
    }
}

// ---- Trampolines: C callbacks into the boxed trait object -------------------

/// Runs a store call, turning an `Err` or a panic into a status and a message.
fn guard(what: &str, message: *mut c_char, message_cap: usize, f: impl FnOnce() -> Result<()>) -> sys::swa_status_t {
    let err = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => return sys::SWA_OK,
        Ok(Err(e)) => e,
        Err(payload) => {
            let text = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-string panic payload".to_string());
            drop_payload(payload);
            Error::new(Code::Internal, format!("panic in KvStore::{what}: {text}"))
        }
    };
    write_message(&err.message, message, message_cap);
    err.code.raw()
}

/// Drops a caught panic payload without letting its `Drop` unwind into C: a
/// payload whose `Drop` panics would otherwise abort the process ("panic in a
/// function that cannot unwind"). That second panic's payload is leaked.
fn drop_payload(payload: Box<dyn Any + Send>) {
    if let Err(second) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        std::mem::forget(second);
    }
}

fn write_message(text: &str, message: *mut c_char, cap: usize) {
    if message.is_null() || cap == 0 {
        return;
    }
    let mut n = text.len().min(cap - 1);
    while !text.is_char_boundary(n) {
        n -= 1;
    }
    // SAFETY: the library lends `cap` writable bytes; we write n + 1 <= cap.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), message as *mut u8, n);
        *message.add(n) = 0;
    }
}

/// SAFETY: user_data is the `Box<Boxed>` made by `Store::new`, alive until release.
unsafe fn store<'a>(user_data: *mut c_void) -> &'a dyn KvStore {
    &**(user_data as *const Boxed)
}

unsafe fn key<'a>(key: *const u8, len: usize) -> &'a [u8] {
    if len == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(key, len)
    }
}

unsafe fn iovs<'a>(iov: *const sys::swa_iov_t, n: usize) -> &'a [sys::swa_iov_t] {
    if n == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(iov, n)
    }
}

unsafe extern "C" fn tramp_put(
    user_data: *mut c_void,
    k: *const u8,
    key_len: usize,
    iov: *const sys::swa_iov_t,
    n_iov: usize,
    message: *mut c_char,
    message_cap: usize,
) -> sys::swa_status_t {
    guard("put", message, message_cap, || {
        let blob = Blob { iov: iovs(iov, n_iov) };
        store(user_data).put(key(k, key_len), &blob)
    })
}

unsafe extern "C" fn tramp_get(
    user_data: *mut c_void,
    k: *const u8,
    key_len: usize,
    iov: *const sys::swa_iov_t,
    n_iov: usize,
    blob_size: *mut u64,
    message: *mut c_char,
    message_cap: usize,
) -> sys::swa_status_t {
    guard("get", message, message_cap, || {
        let mut sink = GetSink { iov: iovs(iov, n_iov), expected: *blob_size, actual: None };
        store(user_data).get(key(k, key_len), &mut sink)?;
        match sink.actual {
            Some(size) => {
                *blob_size = size;
                Ok(())
            }
            None => Err(Error::new(Code::Internal, "KvStore::get returned Ok without filling the sink")),
        }
    })
}

unsafe extern "C" fn tramp_exists(
    user_data: *mut c_void,
    k: *const u8,
    key_len: usize,
    exists: *mut u32,
    message: *mut c_char,
    message_cap: usize,
) -> sys::swa_status_t {
    guard("exists", message, message_cap, || {
        *exists = store(user_data).exists(key(k, key_len))? as u32;
        Ok(())
    })
}

unsafe extern "C" fn tramp_remove(
    user_data: *mut c_void,
    k: *const u8,
    key_len: usize,
    message: *mut c_char,
    message_cap: usize,
) -> sys::swa_status_t {
    guard("remove", message, message_cap, || store(user_data).remove(key(k, key_len)))
}

unsafe extern "C" fn tramp_release(user_data: *mut c_void) {
    // A panicking Drop must not unwind into C; it is swallowed (and reported by
    // the panic hook), and so is a panic in dropping its payload.
    if let Err(payload) = catch_unwind(AssertUnwindSafe(|| drop(Box::from_raw(user_data as *mut Boxed)))) {
        drop_payload(payload);
    }
}

const _: () = assert!(size_of::<*mut Boxed>() == size_of::<*mut c_void>());
