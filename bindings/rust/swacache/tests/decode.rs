//! A decode loop (chunked prefill, decode, speculative steps with rejection) whose
//! outputs are checked against a dense FP64 reference written here.
mod common;
use common::*;
use swacache::{Bf16, Input, Output, Seq, StepArgs};

/// What one sequence has seen, for the reference: K and V per position and layer.
#[derive(Default, Clone)]
struct History {
    k: Vec<Vec<Vec<f32>>>, // [layer][pos] -> [Hkv * D]
    v: Vec<Vec<Vec<f32>>>,
}

/// Dense banded attention in f64 for one new token at `pos` (keys already appended).
#[allow(clippy::too_many_arguments)]
fn reference(
    q: &[f32],
    keys: &[Vec<f32>],
    vals: &[Vec<f32>],
    pos: usize,
    hq: usize,
    hkv: usize,
    sinks: Option<&[f32]>,
) -> Vec<f32> {
    let d = D as usize;
    let lo = (pos + 1).saturating_sub(W as usize);
    let scale = 1.0 / (d as f64).sqrt();
    let mut out = vec![0f32; hq * d];
    for h in 0..hq {
        let g = h / (hq / hkv);
        let qh = &q[h * d..(h + 1) * d];
        let z: Vec<f64> =
            (lo..=pos).map(|j| scale * (0..d).map(|x| qh[x] as f64 * keys[j][g * d + x] as f64).sum::<f64>()).collect();
        let mut m = z.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        if let Some(s) = sinks {
            m = m.max(s[h] as f64);
        }
        let mut denom: f64 = z.iter().map(|zj| (zj - m).exp()).sum();
        if let Some(s) = sinks {
            denom += (s[h] as f64 - m).exp();
        }
        for x in 0..d {
            let num: f64 = (lo..=pos).zip(&z).map(|(j, zj)| (zj - m).exp() * vals[j][g * d + x] as f64).sum();
            out[h * d + x] = (num / denom) as f32;
        }
    }
    out
}

#[test]
fn decode_loop_matches_dense_reference() {
    let cache = cache();
    let layers = cache.layers().to_vec();
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let sinks: Vec<f32> = rng.vec(4);
    let slots = [cache.alloc_slot().unwrap(), cache.alloc_slot().unwrap(), cache.alloc_slot().unwrap()];
    let mut hist = vec![History { k: vec![vec![]; 2], v: vec![vec![]; 2] }; slots.len()];
    let mut lens = [0i32; 3];
    let mut plan = cache.plan().unwrap();
    let mut steps = cache.steps();
    let d = D as usize;
    let mut checked = 0usize;

    // (new tokens per sequence, tokens rejected afterwards): chunked prefill of
    // 11 and 9 tokens (staged path), a sequence joining late, decodes, and
    // speculative steps of 1 + N tokens of which some are rejected.
    let schedule: &[([i32; 3], [i32; 3])] = &[
        ([6, 9, 0], [0, 0, 0]),
        ([5, 1, 0], [0, 0, 0]),
        ([1, 1, 4], [0, 0, 0]),
        ([3, 3, 1], [2, 0, 0]),
        ([3, 1, 3], [1, 0, 2]),
        ([1, 3, 1], [0, 2, 0]),
        ([1, 1, 1], [0, 0, 0]),
        ([3, 3, 3], [2, 1, 0]),
        ([1, 1, 1], [0, 0, 0]),
    ];
    for (step_no, (new, rejected)) in schedule.iter().enumerate() {
        let seqs: Vec<Seq> =
            (0..3).filter(|&i| new[i] > 0).map(|i| Seq::new(slots[i], new[i], lens[i] + new[i])).collect();
        plan.build(&seqs).unwrap();
        let t: usize = seqs.iter().map(|s| s.seqlen_q as usize).sum();
        for (l, layer) in layers.iter().enumerate() {
            let (hq, hkv) = (layer.q_heads as usize, layer.kv_heads as usize);
            let q = rng.vec(t * hq * d);
            let k = rng.vec(t * hkv * d);
            let v = rng.vec(t * hkv * d);
            let bf16_out = step_no % 2 == 1 && l == 1;
            let mut out = vec![f32::NAN; t * hq * d]; // poisoned
            let mut out_bf = vec![Bf16(0x7fc0); t * hq * d];
            let args = StepArgs {
                layer: l as u32,
                q: Input::F32(&q),
                k_new: Input::F32(&k),
                v_new: if layer.shared_kv { None } else { Some(Input::F32(&v)) },
                out: if bf16_out { Output::Bf16(&mut out_bf) } else { Output::F32(&mut out) },
                sinks: if layer.has_sinks { Some(&sinks) } else { None },
                softmax_scale: 0.0,
                lse: None,
                positions: None,
            };
            steps.step(&mut plan, args).unwrap();
            if bf16_out {
                out = out_bf.iter().map(|b| b.to_f32()).collect();
            }
            let mut tok = 0;
            for (i, s) in seqs.iter().enumerate() {
                let seq = (0..3).filter(|&j| new[j] > 0).nth(i).unwrap();
                let h = &mut hist[seq];
                let q_start = (s.seqlen_k - s.seqlen_q) as usize;
                h.k[l].truncate(q_start);
                h.v[l].truncate(q_start);
                for x in 0..s.seqlen_q as usize {
                    let r = tok + x;
                    let kv = k[r * hkv * d..(r + 1) * hkv * d].to_vec();
                    let vv = if layer.shared_kv { kv.clone() } else { v[r * hkv * d..(r + 1) * hkv * d].to_vec() };
                    h.k[l].push(kv);
                    h.v[l].push(vv);
                    let want = reference(
                        &q[r * hq * d..(r + 1) * hq * d],
                        &h.k[l],
                        &h.v[l],
                        q_start + x,
                        hq,
                        hkv,
                        if layer.has_sinks { Some(&sinks) } else { None },
                    );
                    let tol = if bf16_out { 1e-2 } else { 2e-5 };
                    for (e, (a, b)) in out[r * hq * d..(r + 1) * hq * d].iter().zip(&want).enumerate() {
                        assert!(
                            (a - b).abs() <= tol * (1.0 + b.abs()),
                            "step {step_no} layer {l} seq {seq} token {x} elem {e}: got {a}, want {b}"
                        );
                    }
                    checked += 1;
                }
                tok += s.seqlen_q as usize;
            }
        }
        for i in 0..3 {
            lens[i] += new[i] - rejected[i]; // the next step rewinds over rejected drafts
        }
    }
    assert!(checked > 100, "checked {checked} token outputs");
    let stats = cache.stats().unwrap();
    assert_eq!(stats.steps, 2 * schedule.len() as u64);
}
