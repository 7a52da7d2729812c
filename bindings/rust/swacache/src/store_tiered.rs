//! The built-in tiered and Redis Cluster stores (experimental in the C API).
use std::mem::size_of;

use swacache_sys as sys;

use crate::error::{check, Result};
use crate::layout::sized;
use crate::store::{cstring, empty_table, Store};
use crate::store_redis_tls::{ApplySecurity, RedisSecurity};

/// Configuration of the built-in Redis Cluster store
/// (`swa_store_redis_cluster_config_t`, experimental).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisClusterConfig {
    /// Seed nodes, `"host:port,host:port"` (`"[v6]:port"` for IPv6); one live
    /// seed is enough to load the slot map.
    pub nodes: String,
    /// AUTH password of every node.
    pub password: Option<String>,
    /// Expiry of each blob in seconds; 0 = none.
    pub ttl_seconds: u32,
    /// Deadline of one store call, redirects and retries included.
    pub timeout_ms: u32,
    /// Idle connections kept per node.
    pub connections_per_node: u32,
    /// Gets and exists read a replica of the slot (the master when that fails).
    pub read_from_replicas: bool,
    /// Tries per call (redirects, reconnects, back-offs).
    pub max_attempts: u32,
    /// ACL user and TLS, for every node (redirect targets included).
    pub security: RedisSecurity,
}

impl Default for RedisClusterConfig {
    fn default() -> RedisClusterConfig {
        let mut c = sized::<sys::swa_store_redis_cluster_config_t>();
        // SAFETY: c is writable; the default seed is a static string.
        unsafe { sys::swa_store_redis_cluster_config_init(&mut c) };
        let nodes = if c.nodes.is_null() {
            "127.0.0.1:7000".to_string()
        } else {
            unsafe { std::ffi::CStr::from_ptr(c.nodes) }.to_string_lossy().into_owned()
        };
        RedisClusterConfig {
            nodes,
            password: None,
            ttl_seconds: c.ttl_seconds,
            timeout_ms: c.timeout_ms,
            connections_per_node: c.connections_per_node,
            read_from_replicas: c.read_from_replicas != 0,
            max_attempts: c.max_attempts,
            security: RedisSecurity::default(),
        }
    }
}

/// Statistics of one tier of a tiered store (`swa_store_tier_stats_t`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TierStats {
    /// Gets this tier answered.
    pub hits: u64,
    /// Gets this tier did not have the key for.
    pub misses: u64,
    /// Calls of this tier that failed otherwise.
    pub errors: u64,
    /// Blob bytes of the hits.
    pub bytes_read: u64,
    /// Successful puts into this tier, promotions included.
    pub puts: u64,
    /// Blob bytes of those puts.
    pub bytes_written: u64,
    /// Puts that copied a hit up from a slower tier.
    pub promotions: u64,
}

impl Store {
    /// The built-in Redis Cluster store (experimental): routed by hash slot
    /// over the map loaded from a seed. `InvalidArgument` for malformed seeds,
    /// `Unavailable` when no seed answers, `Unimplemented` in a build without
    /// hiredis.
    pub fn redis_cluster(config: &RedisClusterConfig) -> Result<Store> {
        let nodes = cstring("nodes", &config.nodes)?;
        let password = config.password.as_deref().map(|p| cstring("password", p)).transpose()?;
        let security = config.security.strings()?;
        let mut c = sized::<sys::swa_store_redis_cluster_config_t>();
        // SAFETY: c is writable.
        unsafe { sys::swa_store_redis_cluster_config_init(&mut c) };
        c.nodes = nodes.as_ptr();
        c.password = password.as_ref().map_or(std::ptr::null(), |p| p.as_ptr());
        c.ttl_seconds = config.ttl_seconds;
        c.timeout_ms = config.timeout_ms;
        c.connections_per_node = config.connections_per_node;
        c.read_from_replicas = config.read_from_replicas as u32;
        c.max_attempts = config.max_attempts;
        c.apply(&config.security, &security);
        let mut t = empty_table();
        // SAFETY: the strings outlive the call (the library copies them).
        check(unsafe { sys::swa_store_redis_cluster_create(&c, &mut t) })?;
        Ok(Store::from_table(t))
    }

    /// The built-in tiered store over `tiers`, fastest first (experimental):
    /// a get asks each tier in order and copies a hit into the faster ones; a
    /// put writes the slowest tier first, so a failed put is never visible.
    /// On success the tiered store owns every tier (each is released once,
    /// with it); on failure the tiers are dropped here. `InvalidArgument` for
    /// no tiers or more than 16.
    pub fn tiered(tiers: Vec<Store>) -> Result<Store> {
        let tables: Vec<sys::swa_kv_store_t> = tiers.iter().map(Store::table).collect();
        let mut c = sized::<sys::swa_store_tiered_config_t>();
        // SAFETY: c is writable.
        unsafe { sys::swa_store_tiered_config_init(&mut c) };
        c.tiers = if tables.is_empty() { std::ptr::null() } else { tables.as_ptr() };
        c.n_tiers = tables.len();
        let mut t = empty_table();
        // SAFETY: the tables are valid and owned by `tiers`; the library copies them.
        check(unsafe { sys::swa_store_tiered_create(&c, &mut t) })?;
        // The tiered store owns them now.
        tiers.into_iter().for_each(Store::forget);
        Ok(Store::from_table(t))
    }

    /// Statistics of tier `tier` (0 = fastest) of a tiered store that is not
    /// attached yet: `InvalidArgument` for another kind of store, `OutOfRange`
    /// past the last tier.
    pub fn tier_stats(&self, tier: u32) -> Result<TierStats> {
        let mut s = sized::<sys::swa_store_tier_stats_t>();
        debug_assert_eq!(s.struct_size, size_of::<sys::swa_store_tier_stats_t>());
        // SAFETY: we own the table's user_data.
        check(unsafe { sys::swa_store_tiered_stats(&self.table(), tier, &mut s) })?;
        Ok(TierStats {
            hits: s.hits,
            misses: s.misses,
            errors: s.errors,
            bytes_read: s.bytes_read,
            puts: s.puts,
            bytes_written: s.bytes_written,
            promotions: s.promotions,
        })
    }
}
