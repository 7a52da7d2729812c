//! Prefix reuse (issue 32): checkpoints (`save_at`, `checkpoint_range`), the
//! longest-prefix probe (`store_probe`) and the exact replay span
//! (`begin_replay_exact`).
mod common;
use common::*;
use swacache::*;

#[test]
fn checkpoint_and_probe() {
    let cache = cache();
    cache.set_store(Store::memory(1 << 20).unwrap()).unwrap();
    let a = cache.alloc_slot().unwrap();
    fill(&cache, a, 12, 32);
    // R = W + N + 1 = 11: a checkpoint may lag written_end 12 by R - W + 1 = 4.
    assert_eq!(cache.checkpoint_range(a).unwrap(), (8, 12));
    cache.save_at(a, 10, b"ck-10").unwrap();
    let err = cache.save_at(a, 7, b"ck-7").unwrap_err();
    assert_eq!(err.code, Code::OutOfRange);
    assert!(err.message.contains("8 ... 12"), "{}", err.message);
    assert!(!cache.store_exists(b"ck-7").unwrap());
    let b = cache.alloc_slot().unwrap();
    cache.restore(b, b"ck-10").unwrap();
    assert_eq!(cache.slot_info(b).unwrap().written_end, 10);
    assert_eq!(cache.store_probe(&[&b"ck-12"[..], b"ck-10", b"ck-5"]).unwrap(), Some(1));
    assert_eq!(cache.store_probe(&["ck-10"]).unwrap(), Some(0));
    assert_eq!(cache.store_probe(&["x", "y"]).unwrap(), None);
    assert_eq!(cache.store_probe::<&[u8]>(&[]).unwrap(), None);
    let err = cache.store_probe(&["a", ""]).unwrap_err();
    assert_eq!(err.code, Code::InvalidArgument);
    assert!(err.message.contains("keys[1]"), "{}", err.message);
}

#[test]
fn begin_replay_exact_span() {
    let cache = cache();
    let s = cache.alloc_slot().unwrap();
    let w = W as i32;
    for (layers, last, want) in [
        (0, false, (30 - 2 * (w - 1), 2 * (w - 1))), // the cache's 2 layers
        (0, true, (30 - 2 * (w - 1) - 1, 2 * (w - 1) + 1)),
        (3, false, (30 - 3 * (w - 1), 3 * (w - 1))),
        (5, true, (0, 30)),
    ] {
        cache.reset_slot(s).unwrap();
        assert_eq!(cache.begin_replay_exact(s, 30, layers, last).unwrap(), want, "{layers} {last}");
        assert_eq!(cache.slot_info(s).unwrap().valid_start, want.0);
    }
    assert_eq!(cache.begin_replay_exact(s, -1, 0, false).unwrap_err().code, Code::InvalidArgument);
}
