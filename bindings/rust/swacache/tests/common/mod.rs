//! Shared helpers of the integration tests.
#![allow(dead_code)]
use swacache::{Backend, Cache, Config, Format, Input, LayerDesc, Seq, StepArgs};

/// xorshift64*: fresh, reproducible inputs without crates.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in [-1, 1).
    pub fn f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
    pub fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.f32()).collect()
    }
}

pub const W: u32 = 8;
pub const N: u32 = 2;
pub const D: u32 = 32;

/// Layer 0: shared K/V (MQA), 4 query heads, sinks. Layer 1: separate K/V, GQA 4/2.
pub fn config() -> Config {
    let mut c =
        Config { window: W, draft_tokens: N, max_slots: 8, backend: Backend::Cpu, num_threads: 2, ..Config::default() };
    c.layers.push(LayerDesc {
        q_heads: 4,
        kv_heads: 1,
        head_dim: D,
        kv_format: Format::Fp32,
        has_sinks: true,
        ..LayerDesc::default()
    });
    c.layers.push(LayerDesc {
        q_heads: 4,
        kv_heads: 2,
        head_dim: D,
        shared_kv: false,
        kv_format: Format::Fp32,
        ..LayerDesc::default()
    });
    c
}

pub fn cache() -> Cache {
    Cache::new(&config()).expect("cache")
}

/// Writes a few tokens into a slot so that it has content to save.
pub fn fill(cache: &Cache, slot: u32, tokens: i32, seed: u64) {
    let mut rng = Rng(seed);
    let mut plan = cache.plan().unwrap();
    plan.build(&[Seq::new(slot, tokens, tokens)]).unwrap();
    let t = tokens as usize;
    let d = D as usize;
    let mut steps = cache.steps();
    let sinks = rng.vec(4);
    let (q, k, k2, v2) = (rng.vec(t * 4 * d), rng.vec(t * d), rng.vec(t * 2 * d), rng.vec(t * 2 * d));
    let mut out = vec![0f32; t * 4 * d];
    let mut a = StepArgs::new(0, &q, &k, &mut out);
    a.sinks = Some(&sinks);
    steps.step(&mut plan, a).unwrap();
    let mut a = StepArgs::new(1, &q, &k2, &mut out);
    a.v_new = Some(Input::F32(&v2));
    steps.step(&mut plan, a).unwrap();
}

/// The stored bytes of a slot (layer 0's ring, read through the view).
pub fn ring_bytes(cache: &Cache, slot: u32) -> Vec<u8> {
    let v = cache.layer_view(0).unwrap();
    let n = (v.shape[1] * v.strides[1]) as usize;
    // SAFETY: host pool, the view covers every slot; no step runs meanwhile.
    unsafe { std::slice::from_raw_parts(v.data.add(slot as usize * v.strides[0] as usize), n) }.to_vec()
}
