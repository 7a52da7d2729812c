//! The tiered store over built-in and Rust tiers, and the Redis Cluster
//! store's configuration checks (no cluster needed).
mod common;
use common::*;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use swacache::*;

/// A Rust tier whose map the test inspects, counting its drops.
#[derive(Clone, Default)]
struct Shared {
    map: Arc<Mutex<HashMap<Vec<u8>, Vec<u8>>>>,
    drops: Arc<AtomicUsize>,
}
struct SharedStore(Shared);
impl Drop for SharedStore {
    fn drop(&mut self) {
        self.0.drops.fetch_add(1, Ordering::SeqCst);
    }
}
impl KvStore for SharedStore {
    fn put(&self, key: &[u8], blob: &Blob<'_>) -> Result<()> {
        self.0.map.lock().unwrap().insert(key.to_vec(), blob.to_vec());
        Ok(())
    }
    fn get(&self, key: &[u8], sink: &mut GetSink<'_>) -> Result<()> {
        match self.0.map.lock().unwrap().get(key) {
            Some(b) => {
                sink.fill(b);
                Ok(())
            }
            None => Err(Error::new(Code::NotFound, "no such key")),
        }
    }
    fn exists(&self, key: &[u8]) -> Result<bool> {
        Ok(self.0.map.lock().unwrap().contains_key(key))
    }
    fn remove(&self, key: &[u8]) -> Result<()> {
        self.0.map.lock().unwrap().remove(key).map(|_| ()).ok_or_else(|| Error::new(Code::NotFound, "no such key"))
    }
}

#[test]
fn tiered_store_writes_through_and_reads_from_a_slower_tier() {
    let shared = Shared::default();
    let dir = std::env::temp_dir().join(format!("swacache-rs-tiered-{}", std::process::id()));
    let tiered = Store::tiered(vec![
        Store::memory(1 << 20).unwrap(),
        Store::directory(&dir, true, false).unwrap(),
        Store::new(SharedStore(shared.clone())),
    ])
    .unwrap();
    assert_eq!(tiered.tier_stats(0).unwrap(), TierStats::default());
    assert_eq!(tiered.tier_stats(3).unwrap_err().code, Code::OutOfRange);
    assert_eq!(Store::memory(1 << 10).unwrap().tier_stats(0).unwrap_err().code, Code::InvalidArgument);

    let cache = cache();
    let a = cache.alloc_slot().unwrap();
    fill(&cache, a, 5, 7);
    cache.set_store(tiered).unwrap();
    cache.save(a, b"seq").unwrap();
    // The slowest tier holds the blob under the fingerprinted key.
    let blob = {
        let map = shared.map.lock().unwrap();
        assert_eq!(map.len(), 1);
        let (k, v) = map.iter().next().unwrap();
        assert!(k.ends_with(b":seq"), "key {:?}", String::from_utf8_lossy(k));
        v.clone()
    };
    let b = cache.alloc_slot().unwrap();
    cache.restore(b, b"seq").unwrap();
    assert_eq!(ring_bytes(&cache, b), ring_bytes(&cache, a));
    assert!(cache.store_exists(b"seq").unwrap());

    // A second cache over a fresh tiered store finds the blob only in the
    // shared slow tier, and restores the same bytes.
    let cache2 = Cache::new(&config()).unwrap();
    cache2
        .set_store(
            Store::tiered(vec![Store::memory(1 << 20).unwrap(), Store::new(SharedStore(shared.clone()))]).unwrap(),
        )
        .unwrap();
    let c = cache2.alloc_slot().unwrap();
    cache2.restore(c, b"seq").unwrap();
    assert_eq!(ring_bytes(&cache2, c), ring_bytes(&cache, a));
    cache2.store_remove(b"seq").unwrap();
    assert!(shared.map.lock().unwrap().is_empty(), "remove left the slowest tier's blob");
    assert!(!blob.is_empty());

    assert_eq!(shared.drops.load(Ordering::SeqCst), 0);
    drop(cache2);
    assert_eq!(shared.drops.load(Ordering::SeqCst), 1, "the tier of cache2 is released with it");
    drop(cache);
    assert_eq!(shared.drops.load(Ordering::SeqCst), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tiered_store_refusals_release_every_tier_once() {
    let shared = Shared::default();
    assert_eq!(Store::tiered(Vec::new()).unwrap_err().code, Code::InvalidArgument);
    let tiers: Vec<Store> = (0..17).map(|_| Store::new(SharedStore(shared.clone()))).collect();
    assert_eq!(Store::tiered(tiers).unwrap_err().code, Code::InvalidArgument);
    assert_eq!(shared.drops.load(Ordering::SeqCst), 17, "a refused tiered store drops its tiers once each");
    // An unattached tiered store drops its tiers once, when it is dropped.
    let t = Store::tiered(vec![Store::new(SharedStore(shared.clone())), Store::memory(1 << 10).unwrap()]).unwrap();
    assert_eq!(shared.drops.load(Ordering::SeqCst), 17);
    drop(t);
    assert_eq!(shared.drops.load(Ordering::SeqCst), 18);
}

#[test]
fn redis_cluster_config_is_checked() {
    let d = RedisClusterConfig::default();
    assert_eq!(d.nodes, "127.0.0.1:7000");
    assert!(d.timeout_ms > 0 && d.max_attempts > 0 && !d.read_from_replicas);
    let with =
        |nodes: &str| RedisClusterConfig { nodes: nodes.to_string(), timeout_ms: 200, max_attempts: 1, ..d.clone() };
    assert_eq!(Store::redis_cluster(&with("127.0.0.1:1\0x")).unwrap_err().code, Code::InvalidArgument);
    let e = Store::redis_cluster(&with("127.0.0.1:1")).unwrap_err();
    if e.code == Code::Unimplemented {
        eprintln!("no Redis Cluster store in this build: {}", e.message);
        return;
    }
    assert_eq!(e.code, Code::Unavailable, "{}", e.message);
    for bad in ["no-port", "127.0.0.1:", "127.0.0.1:99999", ","] {
        assert_eq!(Store::redis_cluster(&with(bad)).unwrap_err().code, Code::InvalidArgument, "nodes {bad:?}");
    }
    let zero = RedisClusterConfig { timeout_ms: 0, ..with("127.0.0.1:1") };
    assert_eq!(Store::redis_cluster(&zero).unwrap_err().code, Code::InvalidArgument);
}
