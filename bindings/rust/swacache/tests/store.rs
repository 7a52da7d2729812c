//! The KvStore trait (good, failing, panicking, concurrent), drop order and the
//! built-in stores.
mod common;
use common::*;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use swacache::*;

#[derive(Default)]
struct MapStore {
    map: Mutex<HashMap<Vec<u8>, Vec<u8>>>,
    puts: AtomicUsize,
    drops: Option<Arc<AtomicUsize>>,
}

impl Drop for MapStore {
    fn drop(&mut self) {
        if let Some(d) = &self.drops {
            d.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl KvStore for MapStore {
    fn put(&self, key: &[u8], blob: &Blob<'_>) -> Result<()> {
        assert!(blob.parts().count() >= 1 && !blob.is_empty());
        self.map.lock().unwrap().insert(key.to_vec(), blob.to_vec());
        self.puts.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn get(&self, key: &[u8], sink: &mut GetSink<'_>) -> Result<()> {
        match self.map.lock().unwrap().get(key) {
            Some(b) => {
                let (a, c) = b.split_at(b.len() / 3);
                sink.fill_parts(&[a, c]);
                Ok(())
            }
            None => Err(Error::new(Code::NotFound, "no such key")),
        }
    }
    fn exists(&self, key: &[u8]) -> Result<bool> {
        Ok(self.map.lock().unwrap().contains_key(key))
    }
    fn remove(&self, key: &[u8]) -> Result<()> {
        match self.map.lock().unwrap().remove(key) {
            Some(_) => Ok(()),
            None => Err(Error::new(Code::NotFound, "nothing to remove")),
        }
    }
}

/// Puts and gets fail with a code and message of their own; no exists/remove.
struct FailingStore;
impl KvStore for FailingStore {
    fn put(&self, _: &[u8], _: &Blob<'_>) -> Result<()> {
        Err(Error::new(Code::Unavailable, "disk on fire"))
    }
    fn get(&self, _: &[u8], _: &mut GetSink<'_>) -> Result<()> {
        Err(Error::new(Code::PermissionDenied, "not yours"))
    }
}

struct PanickingStore;
impl KvStore for PanickingStore {
    fn put(&self, _: &[u8], _: &Blob<'_>) -> Result<()> {
        panic!("boom in put")
    }
    fn get(&self, _: &[u8], _: &mut GetSink<'_>) -> Result<()> {
        panic!("{}", String::from("boom in get"))
    }
    fn exists(&self, _: &[u8]) -> Result<bool> {
        panic!("boom in exists")
    }
}

/// Returns a truncated blob, and Ok without filling anything for one key.
struct TruncatingStore(Mutex<Vec<u8>>);
impl KvStore for TruncatingStore {
    fn put(&self, _: &[u8], blob: &Blob<'_>) -> Result<()> {
        *self.0.lock().unwrap() = blob.to_vec();
        Ok(())
    }
    fn get(&self, key: &[u8], sink: &mut GetSink<'_>) -> Result<()> {
        if key.ends_with(b"lazy") {
            return Ok(());
        }
        let b = self.0.lock().unwrap();
        // The first get reports the short size; the library then reads it whole.
        assert!(sink.expected_len() == b.len() || sink.expected_len() == b.len() - 7);
        sink.fill(&b[..b.len() - 7]);
        Ok(())
    }
}

#[test]
fn rust_store_round_trip_exists_remove() {
    let cache = cache();
    let (a, b) = (cache.alloc_slot().unwrap(), cache.alloc_slot().unwrap());
    fill(&cache, a, 7, 1);
    assert_eq!(cache.save(a, b"seq-1").unwrap_err().code, Code::FailedPrecondition); // no store
    cache.set_store(Store::new(MapStore::default())).unwrap();
    cache.save(a, b"seq-1").unwrap();
    assert!(cache.store_exists(b"seq-1").unwrap());
    assert!(!cache.store_exists(b"seq-2").unwrap());
    cache.restore(b, b"seq-1").unwrap();
    assert_eq!(cache.slot_info(b).unwrap().written_end, 7);
    assert_eq!(ring_bytes(&cache, a), ring_bytes(&cache, b));
    let e = cache.restore(b, b"seq-2").unwrap_err();
    assert_eq!(e.code, Code::NotFound);
    assert!(e.message.contains("no such key"), "{e}");
    cache.store_remove(b"seq-1").unwrap();
    assert_eq!(cache.store_remove(b"seq-1").unwrap_err().code, Code::NotFound);
    assert_eq!(cache.save(a, b"").unwrap_err().code, Code::InvalidArgument);
    assert_eq!(cache.save(a, &vec![b'k'; MAX_KEY_BYTES + 1]).unwrap_err().code, Code::InvalidArgument);
    assert_eq!(cache.save(99, b"k").unwrap_err().code, Code::OutOfRange);
    cache.save(a, &vec![b'k'; MAX_KEY_BYTES]).unwrap();
}

#[test]
fn failing_and_default_stores() {
    let cache = cache();
    let a = cache.alloc_slot().unwrap();
    cache.set_store(Store::new(FailingStore)).unwrap();
    let e = cache.save(a, b"x").unwrap_err();
    assert_eq!(e.code, Code::Unavailable);
    assert!(e.message.contains("disk on fire"), "{e}");
    let e = cache.restore(a, b"x").unwrap_err();
    assert_eq!(e.code, Code::PermissionDenied);
    assert!(e.message.contains("not yours"), "{e}");
    let e = cache.store_exists(b"x").unwrap_err();
    assert_eq!(e.code, Code::Unimplemented);
    assert!(e.message.contains("no exists"), "{e}");
    assert_eq!(cache.store_remove(b"x").unwrap_err().code, Code::Unimplemented);
}

#[test]
fn panicking_store_becomes_a_status() {
    let cache = cache();
    let a = cache.alloc_slot().unwrap();
    cache.set_store(Store::new(PanickingStore)).unwrap();
    let e = cache.save(a, b"x").unwrap_err();
    assert_eq!(e.code, Code::Internal);
    assert!(e.message.contains("boom in put"), "{e}");
    let e = cache.restore(a, b"x").unwrap_err();
    assert_eq!(e.code, Code::Internal);
    assert!(e.message.contains("boom in get"), "{e}");
    assert!(cache.store_exists(b"x").unwrap_err().message.contains("boom in exists"));
    // The cache is still usable afterwards.
    cache.free_slot(a).unwrap();
}

#[test]
fn truncated_and_unfilled_blobs_leave_the_slot_alone() {
    let cache = cache();
    let (a, b) = (cache.alloc_slot().unwrap(), cache.alloc_slot().unwrap());
    fill(&cache, a, 5, 2);
    fill(&cache, b, 3, 3);
    let before = ring_bytes(&cache, b);
    cache.set_store(Store::new(TruncatingStore(Mutex::new(Vec::new())))).unwrap();
    cache.save(a, b"k").unwrap();
    let e = cache.restore(b, b"k").unwrap_err();
    assert!(matches!(e.code, Code::DataLoss | Code::FailedPrecondition), "{e}");
    let e = cache.restore(b, b"lazy").unwrap_err();
    assert_eq!(e.code, Code::Internal);
    assert!(e.message.contains("without filling"), "{e}");
    assert_eq!(ring_bytes(&cache, b), before);
    assert_eq!(cache.slot_info(b).unwrap().written_end, 3);
}

#[test]
fn store_boxes_are_released_exactly_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let store =
        || Store::new(MapStore { map: Default::default(), puts: Default::default(), drops: Some(drops.clone()) });
    drop(store()); // never attached: dropped by Store
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    let cache = cache();
    cache.set_store(store()).unwrap();
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    cache.set_store(store()).unwrap(); // replaces: the first is released
    assert_eq!(drops.load(Ordering::SeqCst), 2);
    cache.detach_store().unwrap();
    assert_eq!(drops.load(Ordering::SeqCst), 3);
    cache.detach_store().unwrap(); // nothing attached: nothing released
    cache.set_store(store()).unwrap();
    {
        let plan = cache.plan().unwrap(); // plans drop before their cache
        drop(plan);
    }
    drop(cache); // the cache releases the last one
    assert_eq!(drops.load(Ordering::SeqCst), 4);
}

#[test]
fn store_driven_from_four_threads_while_a_scheduler_steps() {
    let cache = Arc::new(Cache::new(&Config { max_slots: 16, ..config() }).unwrap());
    cache.set_store(Store::new(MapStore::default())).unwrap();
    let busy = cache.alloc_slot().unwrap();
    let savers: Vec<_> = (0..4u64)
        .map(|i| {
            let cache = cache.clone();
            std::thread::spawn(move || {
                let slot = cache.alloc_slot().unwrap();
                let spare = cache.alloc_slot().unwrap();
                fill_without_steps(&cache, slot);
                for round in 0..25 {
                    let key = format!("thread-{i}-round-{round}");
                    cache.save(slot, key.as_bytes()).unwrap();
                    assert!(cache.store_exists(key.as_bytes()).unwrap());
                    cache.restore(spare, key.as_bytes()).unwrap();
                    assert_eq!(cache.slot_info(spare).unwrap().written_end, cache.slot_info(slot).unwrap().written_end);
                    if round % 2 == 0 {
                        cache.store_remove(key.as_bytes()).unwrap();
                    }
                }
                (slot, spare)
            })
        })
        .collect();
    // The scheduler keeps stepping its own slot meanwhile.
    for n in 1..=20 {
        let mut plan = cache.plan().unwrap();
        plan.build(&[Seq::new(busy, 1, n)]).unwrap();
        let mut steps = cache.steps();
        let (q, k, k2) = (vec![0.5f32; 4 * 32], vec![0.25f32; 32], vec![0.25f32; 64]);
        let mut out = vec![0f32; 4 * 32];
        let sinks = [0f32; 4];
        let mut a = StepArgs::new(0, &q, &k, &mut out);
        a.sinks = Some(&sinks);
        steps.step(&mut plan, a).unwrap();
        let mut a = StepArgs::new(1, &q, &k2, &mut out);
        a.v_new = Some(Input::F32(&k2));
        steps.step(&mut plan, a).unwrap();
    }
    for s in savers {
        s.join().unwrap();
    }
    assert_eq!(cache.slot_info(busy).unwrap().written_end, 20);
}

/// Gives a slot positions without running a step (begin_replay), so that the
/// savers do not need the step guard.
fn fill_without_steps(cache: &Cache, slot: u32) {
    cache.begin_replay(slot, 30).unwrap();
}

#[test]
fn builtin_memory_store() {
    assert_eq!(Store::memory(0).unwrap_err().code, Code::InvalidArgument);
    let store = Store::memory(1 << 20).unwrap();
    let stats = store.memory_stats().unwrap();
    assert_eq!((stats.budget_bytes, stats.entries), (1 << 20, 0));
    assert_eq!(Store::new(MapStore::default()).memory_stats().unwrap_err().code, Code::InvalidArgument);
    let cache = cache();
    let (a, b) = (cache.alloc_slot().unwrap(), cache.alloc_slot().unwrap());
    fill(&cache, a, 9, 4);
    cache.set_store(store).unwrap();
    cache.save(a, b"m").unwrap();
    cache.restore(b, b"m").unwrap();
    assert_eq!(ring_bytes(&cache, a), ring_bytes(&cache, b));
    assert!(cache.store_exists(b"m").unwrap());
    cache.store_remove(b"m").unwrap();
    assert_eq!(cache.restore(b, b"m").unwrap_err().code, Code::NotFound);
}

#[test]
fn builtin_directory_store() {
    let dir = std::env::temp_dir().join(format!("swacache-rust-dir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(Store::directory(&dir, false, false).unwrap_err().code, Code::NotFound);
    let cache = cache();
    let (a, b) = (cache.alloc_slot().unwrap(), cache.alloc_slot().unwrap());
    fill(&cache, a, 4, 5);
    cache.set_store(Store::directory(&dir, true, false).unwrap()).unwrap();
    cache.save(a, b"d").unwrap();
    // A second cache on the same directory finds the blob.
    let other = common::cache();
    other.set_store(Store::directory(&dir, false, true).unwrap()).unwrap();
    let c = other.alloc_slot().unwrap();
    other.restore(c, b"d").unwrap();
    assert_eq!(ring_bytes(&cache, a), ring_bytes(&other, c));
    cache.restore(b, b"d").unwrap();
    cache.store_remove(b"d").unwrap();
    assert!(!cache.store_exists(b"d").unwrap());
    let file = dir.join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    assert_eq!(Store::directory(&file, true, true).unwrap_err().code, Code::FailedPrecondition);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn builtin_redis_store_reports_an_unreachable_server() {
    let defaults = RedisConfig::default();
    assert_eq!((defaults.host.as_str(), defaults.port), ("127.0.0.1", 6379));
    let config = RedisConfig { port: 1, timeout_ms: 200, ..RedisConfig::default() };
    let e = Store::redis(&config).unwrap_err();
    assert!(matches!(e.code, Code::Unavailable | Code::Unimplemented), "{e}");
    let bad = RedisConfig { port: 0, ..RedisConfig::default() };
    assert!(matches!(Store::redis(&bad).unwrap_err().code, Code::InvalidArgument | Code::Unimplemented));
    let nul = RedisConfig { host: "a\0b".into(), ..RedisConfig::default() };
    assert_eq!(Store::redis(&nul).unwrap_err().code, Code::InvalidArgument);
}
