//! Ordinary code that must not abort the process or race (issue 29, items 5
//! and 6): a store whose panic payload panics again when dropped, and slot
//! calls through `&Cache` while another thread steps that slot.
mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Rng, D};
use swacache::{Blob, Code, GetSink, Input, KvStore, Result, Seq, StepArgs, Store};

/// A panic payload whose own `Drop` panics.
struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        panic!("the payload's Drop panics too");
    }
}

struct BombStore;

impl KvStore for BombStore {
    fn put(&self, _key: &[u8], _blob: &Blob<'_>) -> Result<()> {
        std::panic::panic_any(Bomb)
    }
    fn get(&self, _key: &[u8], _sink: &mut GetSink<'_>) -> Result<()> {
        std::panic::panic_any(Bomb)
    }
}

#[test]
fn a_panic_payload_whose_drop_panics_does_not_abort() {
    let cache = common::cache();
    let s = cache.alloc_slot().unwrap();
    common::fill(&cache, s, 3, 5);
    cache.set_store(Store::new(BombStore)).unwrap();
    for e in [cache.save(s, b"k").unwrap_err(), cache.restore(s, b"k").unwrap_err()] {
        assert_eq!(e.code, Code::Internal, "{e}");
        assert!(e.message.contains("panic in KvStore::"), "{e}");
        assert!(e.message.contains("non-string panic payload"), "{e}");
    }
    // The cache is intact and still works.
    assert_eq!(cache.slot_info(s).unwrap().written_end, 3);
    cache.free_slot(s).unwrap();
}

#[test]
fn slot_calls_while_another_thread_steps_the_slot_fail_cleanly() {
    let cache = Arc::new(common::cache());
    let s = cache.alloc_slot().unwrap();
    let t = cache.alloc_slot().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stepper = {
        let (cache, stop) = (Arc::clone(&cache), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut rng = Rng(11);
            let n = common::W as usize; // a full-window prefill, again and again
            let d = D as usize;
            let sinks = rng.vec(4);
            let (q, k, k2, v2) = (rng.vec(n * 4 * d), rng.vec(n * d), rng.vec(n * 2 * d), rng.vec(n * 2 * d));
            let mut out = vec![0f32; n * 4 * d];
            let mut plan = cache.plan().unwrap();
            let mut steps = cache.steps();
            let mut failures = 0;
            while !stop.load(Ordering::Relaxed) {
                cache.reset_slot(s).unwrap();
                plan.build(&[Seq::new(s, n as i32, n as i32)]).unwrap();
                let mut a = StepArgs::new(0, &q, &k, &mut out);
                a.sinks = Some(&sinks);
                failures += steps.step(&mut plan, a).is_err() as u32;
                let mut a = StepArgs::new(1, &q, &k2, &mut out);
                a.v_new = Some(Input::F32(&v2));
                failures += steps.step(&mut plan, a).is_err() as u32;
            }
            failures
        })
    };
    let want = format!("slot {s} is in use by 1 running swa_step call");
    let (mut refused, mut copied) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    while refused < 20 && Instant::now() < deadline {
        match cache.copy_slot(s, t) {
            Ok(()) => copied += 1,
            Err(e) => {
                assert_eq!(e.code, Code::FailedPrecondition, "{e}");
                assert!(e.message.contains(&want), "{e}");
                refused += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    assert_eq!(stepper.join().unwrap(), 0, "a step failed");
    assert!(refused >= 20, "no copy was refused in 60 s ({copied} went through between steps)");
    // Once no step runs, the slot copies, and t then holds s's bytes.
    cache.copy_slot(s, t).unwrap();
    assert_eq!(common::ring_bytes(&cache, t), common::ring_bytes(&cache, s));
    cache.free_slot(s).unwrap();
}
