//! Cache::attention_merge and attention_merge_into against the merge formula
//! computed here in f64, and the binding's length and dtype checks.
mod common;
use common::*;
use swacache::*;

/// out = (e^(la-m) a + e^(lb-m) b) / (e^(la-m) + e^(lb-m)), lse = m + ln(sum);
/// an empty part (LSE -inf) weighs nothing; both empty give 0 and -inf.
fn reference(a: &[f64], b: &[f64], la: f64, lb: f64) -> (Vec<f64>, f64) {
    if la == f64::NEG_INFINITY && lb == f64::NEG_INFINITY {
        return (vec![0.0; a.len()], f64::NEG_INFINITY);
    }
    let m = la.max(lb);
    let (wa, wb) = ((la - m).exp(), (lb - m).exp());
    let out = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| {
            let s = if wa > 0.0 { wa * x } else { 0.0 } + if wb > 0.0 { wb * y } else { 0.0 };
            s / (wa + wb)
        })
        .collect();
    (out, m + (wa + wb).ln())
}

const ROWS: usize = 29;
const HD: usize = 64;

fn inputs() -> (Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut rng = Rng(0x5eed_1234);
    let (mut a, b) = (rng.vec(ROWS * HD), rng.vec(ROWS * HD));
    let mut la: Vec<f32> = (0..ROWS).map(|_| rng.f32() * 12.0).collect();
    let mut lb: Vec<f32> = (0..ROWS).map(|_| rng.f32() * 12.0).collect();
    la[2] = f32::NEG_INFINITY; // A empty: its output is never read.
    a[2 * HD..3 * HD].iter_mut().for_each(|x| *x = f32::NAN);
    lb[4] = f32::NEG_INFINITY;
    la[6] = f32::NEG_INFINITY;
    lb[6] = f32::NEG_INFINITY;
    la[8] = 90.0; // Far apart: no overflow.
    lb[8] = -90.0;
    (a, b, la, lb)
}

fn close(got: f32, want: f64, rel: f64) -> bool {
    (got as f64 - want).abs() <= rel * want.abs().max(1.0)
}

#[test]
fn merge_matches_the_formula_fp32() {
    let cache = cache();
    let (a, b, la, lb) = inputs();
    let mut out = vec![f32::NAN; ROWS * HD];
    let mut lse = vec![f32::NAN; ROWS];
    cache
        .attention_merge(MergeArgs {
            head_dim: HD as u32,
            out_a: Input::F32(&a),
            lse_a: &la,
            out_b: Input::F32(&b),
            lse_b: &lb,
            out: Output::F32(&mut out),
            lse: Some(&mut lse),
        })
        .unwrap();
    for r in 0..ROWS {
        let fa: Vec<f64> = a[r * HD..(r + 1) * HD].iter().map(|&x| x as f64).collect();
        let fb: Vec<f64> = b[r * HD..(r + 1) * HD].iter().map(|&x| x as f64).collect();
        let (want, wl) = reference(&fa, &fb, la[r] as f64, lb[r] as f64);
        if wl == f64::NEG_INFINITY {
            assert_eq!(lse[r], f32::NEG_INFINITY, "row {r}");
        } else {
            assert!(close(lse[r], wl, 1e-5), "row {r}: lse {} want {wl}", lse[r]);
        }
        for i in 0..HD {
            assert!(close(out[r * HD + i], want[i], 1e-5), "row {r}[{i}]: {} want {}", out[r * HD + i], want[i]);
        }
    }
}

#[test]
fn merge_into_accumulates_in_place_bf16() {
    let cache = cache();
    let (a, b, la, lb) = inputs();
    let mut acc: Vec<Bf16> = a.iter().map(|&x| Bf16::from_f32(x)).collect();
    let other: Vec<Bf16> = b.iter().map(|&x| Bf16::from_f32(x)).collect();
    let want: Vec<(Vec<f64>, f64)> = (0..ROWS)
        .map(|r| {
            let fa: Vec<f64> = acc[r * HD..(r + 1) * HD].iter().map(|x| x.to_f32() as f64).collect();
            let fb: Vec<f64> = other[r * HD..(r + 1) * HD].iter().map(|x| x.to_f32() as f64).collect();
            reference(&fa, &fb, la[r] as f64, lb[r] as f64)
        })
        .collect();
    let mut acc_lse = la.clone();
    cache.attention_merge_into(HD as u32, Output::Bf16(&mut acc), &mut acc_lse, Input::Bf16(&other), &lb).unwrap();
    for (r, (w, wl)) in want.iter().enumerate() {
        if *wl != f64::NEG_INFINITY {
            assert!(close(acc_lse[r], *wl, 1e-5), "row {r}: lse {} want {wl}", acc_lse[r]);
        }
        for i in 0..HD {
            // One BF16 rounding of the FP32 result: 2^-8 relative.
            assert!(close(acc[r * HD + i].to_f32(), w[i], 1.0 / 128.0), "row {r}[{i}]");
        }
    }
}

#[test]
fn merge_checks_lengths_and_dtypes_first() {
    let cache = cache();
    let (a, b, la, lb) = inputs();
    let bb: Vec<Bf16> = b.iter().map(|&x| Bf16::from_f32(x)).collect();
    let mut out = vec![0f32; ROWS * HD];
    let mut lse = [0f32; ROWS];
    let run = |hd: u32, oa: &[f32], ob: Input<'_>, lbb: &[f32], out: &mut [f32], lse: Option<&mut [f32]>| {
        cache
            .attention_merge(MergeArgs {
                head_dim: hd,
                out_a: Input::F32(oa),
                lse_a: &la,
                out_b: ob,
                lse_b: lbb,
                out: Output::F32(out),
                lse,
            })
            .unwrap_err()
            .code
    };
    assert_eq!(run(HD as u32, &a[1..], Input::F32(&b), &lb, &mut out, None), Code::InvalidArgument);
    assert_eq!(run(HD as u32, &a, Input::F32(&b[HD..]), &lb, &mut out, None), Code::InvalidArgument);
    assert_eq!(run(HD as u32, &a, Input::F32(&b), &lb[1..], &mut out, None), Code::InvalidArgument);
    assert_eq!(run(HD as u32, &a, Input::F32(&b), &lb, &mut out[..HD], None), Code::InvalidArgument);
    assert_eq!(run(HD as u32, &a, Input::F32(&b), &lb, &mut out, Some(&mut lse[1..])), Code::InvalidArgument);
    assert_eq!(run(HD as u32, &a, Input::Bf16(&bb), &lb, &mut out, None), Code::InvalidArgument);
    assert_eq!(run(0, &a, Input::F32(&b), &lb, &mut out, None), Code::InvalidArgument);
    let mut acc = a.clone();
    let mut acc_lse = la.clone();
    let e = cache.attention_merge_into(HD as u32, Output::F32(&mut acc), &mut acc_lse[1..], Input::F32(&b), &lb);
    assert_eq!(e.unwrap_err().code, Code::InvalidArgument);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert!(bits(&acc) == bits(&a), "a refused merge wrote its output");
    // No rows: nothing to do.
    cache
        .attention_merge(MergeArgs {
            head_dim: 8,
            out_a: Input::F32(&[]),
            lse_a: &[],
            out_b: Input::F32(&[]),
            lse_b: &[],
            out: Output::F32(&mut []),
            lse: None,
        })
        .unwrap();
}
