//! The typed compressor (issue 31) through the safe API: entries against an
//! f64 reference built from the sequence's history through prefill and drafts
//! rejected at random depths (CSA with its indexer, HCA), the store runs, the
//! ring's view, and refusals that write nothing.
use swacache::{Backend, Cache, CompressArgs, CompressKind, Config, Format, Input, LayerDesc, Output, Segment, Seq};

const C: usize = 4;

/// A compressor's rows by position: (kv, gate).
type History = (Vec<Vec<f32>>, Vec<Vec<f32>>);

fn config() -> Config {
    let mut c =
        Config { window: 8, draft_tokens: 2, max_slots: 2, backend: Backend::Cpu, num_threads: 1, ..Config::default() };
    let base = LayerDesc { q_heads: 2, kv_heads: 1, head_dim: 32, kv_format: Format::Fp32, ..LayerDesc::default() };
    c.layers.push(LayerDesc {
        compress_kind: CompressKind::Csa,
        compress_ratio: C as u32,
        compress_head_dim: 16,
        index_head_dim: 8,
        ..base
    });
    c.layers.push(LayerDesc {
        compress_kind: CompressKind::Hca,
        compress_ratio: C as u32,
        compress_head_dim: 16,
        ..base
    });
    c
}

/// Entry w from rows kv[p], gate[p] (S wide each).
fn reference(
    csa: bool,
    d: usize,
    kv: &[Vec<f32>],
    gate: &[Vec<f32>],
    bias: &[f32],
    weight: &[f32],
    w: usize,
) -> Vec<f64> {
    let s = if csa { 2 * d } else { d };
    let mut x = vec![0f64; d];
    for (f, xf) in x.iter_mut().enumerate() {
        let mut slots: Vec<(f64, f64)> = Vec::new();
        let mut add = |p: i64, idx: usize, row: usize| {
            if p >= 0 {
                let p = p as usize;
                slots.push((kv[p][idx] as f64, gate[p][idx] as f64 + bias[row * s + idx] as f64));
            }
        };
        if csa {
            for j in 0..C {
                add((w as i64 - 1) * C as i64 + j as i64, f, j);
            }
            for j in 0..C {
                add((w * C + j) as i64, d + f, j);
            }
        } else {
            for j in 0..C {
                add((w * C + j) as i64, f, j);
            }
        }
        let m = slots.iter().map(|s| s.1).fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = slots.iter().map(|s| (s.1 - m).exp()).sum();
        *xf = slots.iter().map(|s| s.0 * (s.1 - m).exp() / sum).sum();
    }
    let r = 1.0 / (x.iter().map(|v| v * v).sum::<f64>() / d as f64 + 1e-6).sqrt();
    x.iter().zip(weight).map(|(v, w)| v * r * *w as f64).collect()
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    fn below(&mut self, n: usize) -> usize {
        ((self.next() + 1.0) * 0.5 * n as f32) as usize % n
    }
}

#[test]
fn entries_match_the_reference_through_rejected_drafts() {
    let cache = Cache::new(&config()).unwrap();
    let ll = cache.layer_layout(0).unwrap();
    assert_eq!(
        (ll.compress_kind, ll.compress_len, ll.index_head_dim, ll.compress_row_values),
        (Some(CompressKind::Csa), 2 * 4 + 2, 8, 32)
    );
    let slot = cache.alloc_slot().unwrap();
    let mut plan = cache.plan().unwrap();
    let mut rng = Rng(7);
    // (layer, compressor, csa, d, S)
    let comps = [(0u32, 0u32, true, 16usize, 32usize), (0, 1, true, 8, 16), (1, 0, false, 16, 16)];
    let mut hist: Vec<History> = vec![(Vec::new(), Vec::new()); 3];
    let weights: Vec<(Vec<f32>, Vec<f32>)> = comps
        .iter()
        .map(|c| ((0..C * c.4).map(|_| rng.next()).collect(), (0..c.3).map(|_| 1.0 + 0.2 * rng.next()).collect()))
        .collect();
    let (mut end, mut checked) = (0usize, 0usize);
    for step in 0..30 {
        let (start, n) = if step < 4 { (end, 1 + rng.below(7)) } else { (end - 2 + rng.below(3), 3) };
        plan.build(&[Seq { slot, seqlen_q: n as i32, seqlen_k: (start + n) as i32, valid_start: 0 }]).unwrap();
        end = start + n;
        for (ci, &(layer, k, csa, d, s)) in comps.iter().enumerate() {
            let kv: Vec<f32> = (0..n * s).map(|_| rng.next()).collect();
            let gate: Vec<f32> = (0..n * s).map(|_| 3.0 * rng.next()).collect();
            let h = &mut hist[ci];
            h.0.truncate(start);
            h.1.truncate(start);
            for i in 0..n {
                h.0.push(kv[i * s..(i + 1) * s].to_vec());
                h.1.push(gate[i * s..(i + 1) * s].to_vec());
            }
            let wins = plan.compress_windows(layer).unwrap();
            assert_eq!(wins.len(), (start + n) / C - start / C, "step {step}");
            let mut out = vec![f32::NAN; (wins.len() + 1) * d];
            let (bias, weight) = (&weights[ci].0, &weights[ci].1);
            cache
                .steps()
                .compress_step(
                    &mut plan,
                    CompressArgs {
                        layer,
                        compressor: k,
                        kv: Input::F32(&kv),
                        gate: Input::F32(&gate),
                        position_bias: bias,
                        norm_weight: weight,
                        norm_eps: 1e-6,
                        out: Output::F32(&mut out),
                    },
                )
                .unwrap();
            for (i, w) in wins.iter().enumerate() {
                assert_eq!((w.entry as usize, w.position, w.slot), (start / C + i, w.entry * C as i32, slot));
                let r = reference(csa, d, &h.0, &h.1, bias, weight, w.entry as usize);
                for f in 0..d {
                    let got = out[i * d + f] as f64;
                    assert!(
                        (got - r[f]).abs() <= 2e-5 * r[f].abs().max(1.0),
                        "step {step} layer {layer}/{k} entry {} f {f}: {got} vs {}",
                        w.entry,
                        r[f]
                    );
                }
                checked += 1;
            }
            assert!(out[wins.len() * d..].iter().all(|v| v.is_nan()), "a row past the windows was written");
        }
    }
    assert!(checked >= 40, "only {checked} entries");
}

#[test]
fn store_runs_ring_view_and_refusals() {
    let cache = Cache::new(&config()).unwrap();
    let slot = cache.alloc_slot().unwrap();
    let mut plan = cache.plan().unwrap();
    plan.build(&[Seq { slot, seqlen_q: 3, seqlen_k: 3, valid_start: 0 }]).unwrap();
    let l = 4 + 2;
    assert_eq!(
        plan.compress_store_segments(1).unwrap(),
        vec![Segment { dst_row: slot as i32 * l, src_row: 0, count: 3 }]
    );
    let kv: Vec<f32> = (0..3 * 16).map(|i| i as f32).collect();
    let (bias, weight) = (vec![0f32; C * 16], vec![1f32; 16]);
    let mut out = vec![0f32; 16];
    let mut steps = cache.steps();
    // Wrong widths: refused before the call, nothing stored.
    let e = steps
        .compress_step(
            &mut plan,
            CompressArgs {
                layer: 1,
                compressor: 0,
                kv: Input::F32(&kv[..24]),
                gate: Input::F32(&kv[..24]),
                position_bias: &bias,
                norm_weight: &weight,
                norm_eps: 1e-6,
                out: Output::F32(&mut out),
            },
        )
        .unwrap_err();
    assert!(e.to_string().contains("kv has 24 elements"), "{e}");
    let e = steps
        .compress_step(
            &mut plan,
            CompressArgs {
                layer: 1,
                compressor: 1,
                kv: Input::F32(&kv),
                gate: Input::F32(&kv),
                position_bias: &bias,
                norm_weight: &weight,
                norm_eps: 1e-6,
                out: Output::F32(&mut out),
            },
        )
        .unwrap_err();
    assert!(e.to_string().contains("no such compressor"), "{e}");
    let e = steps
        .compress_step(
            &mut plan,
            CompressArgs {
                layer: 1,
                compressor: 0,
                kv: Input::F32(&kv),
                gate: Input::F32(&kv),
                position_bias: &bias,
                norm_weight: &weight,
                norm_eps: 0.0,
                out: Output::F32(&mut out),
            },
        )
        .unwrap_err();
    assert!(e.to_string().contains("norm_eps"), "{e}");
    let v = cache.compress_view(1, 0).unwrap();
    assert_eq!((v.shape[1], v.shape[2], v.strides[3]), (l as i64, 2, 1));
    let row = |r: i64| -> Vec<f32> {
        // SAFETY: the view covers max_slots x L rows of 2 x 16 FP32 values of the live pool.
        let p = unsafe { v.data.offset((slot as i64 * v.strides[0] + r * v.strides[1]) as isize) } as *const f32;
        unsafe { std::slice::from_raw_parts(p, 32) }.to_vec()
    };
    let before = row(2);
    steps
        .compress_step(
            &mut plan,
            CompressArgs {
                layer: 1,
                compressor: 0,
                kv: Input::F32(&kv),
                gate: Input::F32(&kv),
                position_bias: &bias,
                norm_weight: &weight,
                norm_eps: 1e-6,
                out: Output::F32(&mut out),
            },
        )
        .unwrap();
    assert_ne!(before, row(2));
    assert_eq!(row(2)[..16], kv[32..48]);
    assert_eq!(row(2)[16..], kv[32..48]);
    assert!(cache.compress_view(1, 1).is_err());
    assert!(plan.compress_windows(7).is_err());
    cache.set_save_compression(false).unwrap();
}
