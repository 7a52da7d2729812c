//! A toy engine loop: three sequences through chunked prefill and speculative
//! decode with rejection; one is preempted to a Rust `HashMap` store, its slot is
//! given to nobody, and it is later restored into another slot and finishes.
//!
//! Run: `cargo run --offline --example engine`
use std::collections::HashMap;
use std::sync::Mutex;

use swacache::{Blob, Cache, Code, Config, Error, Format, GetSink, KvStore, LayerDesc, Plan, Result, Seq, StepArgs};

/// The engine's own store: blobs in a HashMap.
#[derive(Default)]
struct HashMapStore(Mutex<HashMap<Vec<u8>, Vec<u8>>>);

impl KvStore for HashMapStore {
    fn put(&self, key: &[u8], blob: &Blob<'_>) -> Result<()> {
        self.0.lock().unwrap().insert(key.to_vec(), blob.to_vec());
        Ok(())
    }
    fn get(&self, key: &[u8], sink: &mut GetSink<'_>) -> Result<()> {
        let map = self.0.lock().unwrap();
        let blob = map.get(key).ok_or_else(|| Error::new(Code::NotFound, "not in the map"))?;
        sink.fill(blob);
        Ok(())
    }
    fn exists(&self, key: &[u8]) -> Result<bool> {
        Ok(self.0.lock().unwrap().contains_key(key))
    }
}

struct Sequence {
    name: &'static str,
    slot: Option<u32>,
    prompt: i32,
    len: i32, // tokens committed so far
    target: i32,
}

const D: usize = 64;
const HQ: usize = 8;
const DRAFT: i32 = 2; // N speculative tokens per decode step
const CHUNK: i32 = 16; // prefill chunk

/// Runs every layer of a built plan with made-up activations.
fn run_layers(cache: &Cache, plan: &mut Plan<'_>, t: usize, seed: f32) -> Result<f32> {
    let mut steps = cache.steps();
    let mut checksum = 0.0;
    for layer in 0..cache.layers().len() as u32 {
        let q: Vec<f32> = (0..t * HQ * D).map(|i| ((i as f32 * 0.37 + seed).sin()) * 0.5).collect();
        let k: Vec<f32> = (0..t * D).map(|i| ((i as f32 * 0.11 + seed).cos()) * 0.5).collect();
        let mut out = vec![0f32; t * HQ * D];
        steps.step(plan, StepArgs::new(layer, &q, &k, &mut out))?;
        checksum += out.iter().sum::<f32>();
    }
    Ok(checksum)
}

fn main() -> Result<()> {
    let mut config = Config { window: 32, draft_tokens: DRAFT as u32, max_slots: 4, ..Config::default() };
    for _ in 0..2 {
        config.layers.push(LayerDesc {
            q_heads: HQ as u32,
            kv_heads: 1,
            head_dim: D as u32,
            kv_format: Format::Mxfp8,
            ..LayerDesc::default()
        });
    }
    let cache = Cache::new(&config)?;
    cache.set_store(swacache::Store::new(HashMapStore::default()))?;
    println!(
        "libswacache {} on {:?}, slot {} bytes",
        swacache::version_string(),
        cache.backend(),
        cache.layout()?.slot_bytes
    );

    let mut seqs = vec![
        Sequence { name: "a", slot: None, prompt: 40, len: 0, target: 60 },
        Sequence { name: "b", slot: None, prompt: 21, len: 0, target: 45 },
        Sequence { name: "c", slot: None, prompt: 7, len: 0, target: 30 },
    ];
    for s in &mut seqs {
        s.slot = Some(cache.alloc_slot()?);
    }
    let mut plan = cache.plan()?;
    let mut step_no = 0;
    let mut preempted_at = None;
    while seqs.iter().any(|s| s.len < s.target) {
        step_no += 1;
        // Preempt "b" at step 4: save it, free its slot; bring it back at step 8.
        if step_no == 4 {
            let b = &mut seqs[1];
            let slot = b.slot.take().unwrap();
            cache.save(slot, b.name.as_bytes())?;
            cache.free_slot(slot)?;
            preempted_at = Some(b.len);
            println!("step {step_no}: preempted b at {} tokens (slot {slot} freed)", b.len);
        }
        if step_no == 8 {
            let filler = cache.alloc_slot()?; // someone else takes a slot first
            let b = &mut seqs[1];
            let slot = cache.alloc_slot()?;
            cache.restore(slot, b.name.as_bytes())?;
            // The blob holds what the last step wrote, rejected drafts included;
            // the next build rewinds to the committed length.
            let written_end = cache.slot_info(slot)?.written_end;
            assert!(written_end >= preempted_at.unwrap());
            b.slot = Some(slot);
            cache.free_slot(filler)?;
            println!("step {step_no}: restored b into slot {slot}: written_end {written_end}, committed {}", b.len);
        }

        // Each running sequence: a prefill chunk, or 1 + DRAFT speculative tokens.
        let batch: Vec<(usize, Seq)> = seqs
            .iter()
            .enumerate()
            .filter(|(_, s)| s.slot.is_some() && s.len < s.target)
            .map(|(i, s)| {
                let q = if s.len < s.prompt { CHUNK.min(s.prompt - s.len) } else { 1 + DRAFT };
                (i, Seq::new(s.slot.unwrap(), q, s.len + q))
            })
            .collect();
        let batch_seqs: Vec<Seq> = batch.iter().map(|(_, s)| *s).collect();
        plan.build(&batch_seqs)?;
        let t: usize = batch_seqs.iter().map(|s| s.seqlen_q as usize).sum();
        let checksum = run_layers(&cache, &mut plan, t, step_no as f32)?;

        // Accept the prefill; accept 1 + (step mod 3) of the speculative tokens,
        // so the rejected drafts are rewound by the next build.
        let mut line = format!("step {step_no:2} {:?} T={t:2}:", plan.info()?.path);
        for (i, s) in &batch {
            let seq = &mut seqs[*i];
            let accepted = if seq.len < seq.prompt { s.seqlen_q } else { 1 + (step_no % 3).min(DRAFT) };
            seq.len = (seq.len + accepted).min(seq.target);
            line += &format!(" {}+{accepted}/{}", seq.name, s.seqlen_q);
            if seq.len >= seq.target {
                cache.free_slot(seq.slot.take().unwrap())?;
                line += " (done)";
            }
        }
        println!("{line}  checksum {checksum:.3}");
    }
    println!("all done after {step_no} steps; the store holds b: {}", cache.store_exists(b"b")?);
    println!("stats: {:?}", cache.stats()?);
    Ok(())
}
