//! RoPE as a service and per-token positions from Rust: rope_apply's inverse
//! of its forward rotation equals a de-rotating layer's step output over one
//! key (that key, stored rotated, rotated back: the step's own rotations),
//! bit for bit; explicit cache positions equal none; the table and refusals;
//! and attention_merge without a cache equals the cached merge.
mod common;
use common::*;
use swacache::*;

const POS: [i32; 5] = [0, 3, 4095, 65537, 2147483647];

fn rope_layer() -> LayerDesc {
    LayerDesc {
        q_heads: 2,
        kv_heads: 2,
        head_dim: 64,
        kv_format: Format::Fp32,
        rope_style: RopeStyle::Gptj,
        rope_first_dim: 32,
        rope_dims: 32,
        rope_theta: 150000.0,
        rope_yarn_factor: 8.0,
        ..LayerDesc::default()
    }
}

#[test]
fn inverse_of_forward_equals_the_steps_derotated_output() {
    let layer = LayerDesc { rope_derotate_output: true, ..rope_layer() };
    let n = POS.len();
    let mut rng = Rng(7);
    let k = rng.vec(n * 2 * 64);
    let q = rng.vec(n * 2 * 64);
    let config =
        Config { window: 4, max_slots: n as u32, backend: Backend::Cpu, layers: vec![layer], ..Config::default() };
    let cache = Cache::new(&config).unwrap();
    let seqs: Vec<Seq> = (0..n).map(|_| Seq::new(cache.alloc_slot().unwrap(), 1, 1)).collect();
    let mut plan = cache.plan().unwrap();
    plan.build(&seqs).unwrap();
    let mut out = vec![f32::NAN; n * 2 * 64];
    let mut args = StepArgs::new(0, &q[..], &k[..], &mut out[..]);
    args.positions = Some(&POS);
    cache.steps().step(&mut plan, args).unwrap();
    let mut mine = k.clone();
    rope_apply(&layer, Output::F32(&mut mine), 2, &POS, false).unwrap();
    assert_ne!(mine, k);
    rope_apply(&layer, Output::F32(&mut mine), 2, &POS, true).unwrap();
    let (same, total) = (mine.iter().zip(&out).filter(|(a, b)| a.to_bits() == b.to_bits()).count(), out.len());
    assert_eq!(same, total, "rope_apply differs from the step's rotation");
}

#[test]
fn explicit_cache_positions_equal_none_and_negative_is_refused() {
    let layer = LayerDesc { shared_kv: false, ..rope_layer() };
    let mut rng = Rng(8);
    let (q, k, v) = (rng.vec(4 * 2 * 64), rng.vec(4 * 2 * 64), rng.vec(4 * 2 * 64));
    let run = |pos: Option<&[i32]>| -> Result<Vec<f32>> {
        let config =
            Config { window: 8, max_slots: 1, backend: Backend::Cpu, layers: vec![layer], ..Config::default() };
        let cache = Cache::new(&config).unwrap();
        let slot = cache.alloc_slot().unwrap();
        let mut plan = cache.plan().unwrap();
        plan.build(&[Seq::new(slot, 4, 4)]).unwrap();
        let mut out = vec![0f32; 4 * 2 * 64];
        let mut args = StepArgs::new(0, &q[..], &k[..], &mut out[..]);
        args.v_new = Some(Input::F32(&v));
        args.positions = pos;
        cache.steps().step(&mut plan, args)?;
        Ok(out)
    };
    let none = run(None).unwrap();
    let given = run(Some(&[0, 1, 2, 3])).unwrap();
    assert!(none.iter().zip(&given).all(|(a, b)| a.to_bits() == b.to_bits()));
    let err = run(Some(&[0, 1, -2, 3])).unwrap_err();
    assert_eq!(err.code, Code::InvalidArgument);
    assert!(err.message.contains("positions[2] = -2"), "{}", err.message);
    assert_eq!(run(Some(&[0, 1])).unwrap_err().code, Code::InvalidArgument);
}

#[test]
fn table_and_refusals() {
    let (freq, info) = rope_table(&rope_layer()).unwrap();
    assert_eq!(freq.len(), 16);
    assert_eq!((info.style, info.first_dim, info.dims, info.derotate_output), (RopeStyle::Gptj, 32, 32, false));
    assert!((info.attention_factor - (0.1 * 8f32.ln() + 1.0)).abs() < 1e-6);
    let (none, info) = rope_table(&LayerDesc::default()).unwrap();
    assert!(none.is_empty() && info.style == RopeStyle::None);
    let bad = LayerDesc { rope_dims: 7, ..rope_layer() };
    assert!(rope_table(&bad).unwrap_err().message.contains("rope_dims = 7"));
    let mut x = vec![1f32; 2 * 64];
    assert_eq!(
        rope_apply(&rope_layer(), Output::F32(&mut x), 2, &[0, 1], false).unwrap_err().code,
        Code::InvalidArgument
    );
    let err = rope_apply(&rope_layer(), Output::F32(&mut x), 1, &[0, -1], false).unwrap_err();
    assert!(err.message.contains("positions[1] = -1"), "{}", err.message);
    assert!(x.iter().all(|&v| v == 1.0));
}

#[test]
fn merge_without_a_cache_equals_the_cached_merge() {
    let mut rng = Rng(9);
    let (a, b) = (rng.vec(6 * 32), rng.vec(6 * 32));
    let (la, lb) = (rng.vec(6), rng.vec(6));
    let (mut o1, mut o2) = (vec![0f32; 6 * 32], vec![0f32; 6 * 32]);
    let (mut l1, mut l2) = (vec![0f32; 6], vec![0f32; 6]);
    attention_merge(MergeArgs {
        head_dim: 32,
        out_a: Input::F32(&a),
        lse_a: &la,
        out_b: Input::F32(&b),
        lse_b: &lb,
        out: Output::F32(&mut o1),
        lse: Some(&mut l1),
    })
    .unwrap();
    cache()
        .attention_merge(MergeArgs {
            head_dim: 32,
            out_a: Input::F32(&a),
            lse_a: &la,
            out_b: Input::F32(&b),
            lse_b: &lb,
            out: Output::F32(&mut o2),
            lse: Some(&mut l2),
        })
        .unwrap();
    assert_eq!(o1, o2);
    assert_eq!(l1, l2);
    let m = la[0].max(lb[0]) as f64;
    let (wa, wb) = (((la[0] as f64) - m).exp(), ((lb[0] as f64) - m).exp());
    let want = (wa * a[0] as f64 + wb * b[0] as f64) / (wa + wb);
    assert!((o1[0] as f64 - want).abs() < 1e-6);
}
