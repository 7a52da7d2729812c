//! Every call of the safe API, and its error paths.
mod common;
use common::*;
use swacache::*;

fn code<T: std::fmt::Debug>(r: Result<T>) -> Code {
    r.expect_err("expected an error").code
}

#[test]
fn version_and_codes() {
    assert_eq!(version_number(), HEADER_VERSION, "header/library mismatch");
    assert_eq!(version_string().split('.').count(), 3);
    for (i, c) in Code::ALL.iter().enumerate() {
        assert_eq!(c.raw() as usize, i + 1);
        assert_eq!(Code::from_raw(c.raw()), Some(*c));
        assert!(!c.name().is_empty() && c.name() != "UNRECOGNIZED_STATUS");
    }
    assert_eq!(Code::from_raw(0), None);
    assert_eq!(Code::from_raw(99), Some(Code::Unknown));
    assert_eq!(Code::InvalidArgument.name(), "INVALID_ARGUMENT");
    let e = Error::new(Code::NotFound, "no key");
    assert_eq!(e.to_string(), "NOT_FOUND: no key");
    let boxed: Box<dyn std::error::Error> = Box::new(e);
    assert!(boxed.to_string().contains("no key"));
}

#[test]
fn config_layout_and_create_errors() {
    let c = config();
    let layout = Layout::compute(&c).unwrap();
    assert_eq!((layout.window, layout.draft_tokens, layout.ring_len), (W, N, W + N + 1));
    assert_eq!(layout.pool_bytes, layout.slot_bytes * 8);
    let mut bad = config();
    bad.layers[0].head_dim = 100;
    bad.layers[0].kv_format = Format::Mxfp8;
    let e = Layout::compute(&bad).unwrap_err();
    assert_eq!(e.code, Code::InvalidArgument);
    assert!(e.message.contains("head_dim"), "{}", e.message);
    assert_eq!(Cache::new(&bad).unwrap_err().code, Code::InvalidArgument);
    let mut cuda = config();
    cuda.backend = Backend::Cuda;
    if let Err(e) = Cache::new(&cuda) {
        assert!(matches!(e.code, Code::Unimplemented | Code::Unavailable), "{e}");
    }
    let cache = cache();
    assert_eq!(cache.backend(), Backend::Cpu);
    assert_eq!(cache.layout().unwrap(), layout);
    assert_eq!(cache.layers().len(), 2);
    let ll = cache.layer_layout(1).unwrap();
    assert_eq!(ll.heads_per_token, 4); // 2 KV heads, K and V separate
    assert_eq!(ll.vec_bytes, 4 * D);
    assert_eq!(code(cache.layer_layout(2)), Code::OutOfRange);
    let v = cache.layer_view(0).unwrap();
    assert_eq!((v.ndim, v.shape[0], v.backend), (4, 8, Some(Backend::Cpu)));
    assert!(!v.data.is_null());
    assert_eq!(code(cache.layer_view(9)), Code::OutOfRange);
    let s = cache.stats().unwrap();
    assert_eq!((s.steps, s.slots_in_use, s.max_slots), (0, 0, 8));
    assert!(format!("{cache:?}").contains("Cpu"));
}

#[test]
fn slots() {
    let cache = cache();
    let a = cache.alloc_slot().unwrap();
    let b = cache.alloc_slot().unwrap();
    assert_ne!(a, b);
    let info = cache.slot_info(a).unwrap();
    assert!(info.allocated && info.written_end == 0 && info.valid_start == 0);
    assert_eq!(code(cache.slot_info(99)), Code::OutOfRange);
    cache.set_valid_start(a, 3).unwrap();
    assert_eq!(code(cache.set_valid_start(a, 1)), Code::FailedPrecondition);
    assert_eq!(code(cache.set_valid_start(a, -1)), Code::InvalidArgument);
    cache.reset_slot(a).unwrap();
    assert_eq!(cache.begin_replay(a, 20).unwrap(), (20 - W as i32, W as i32));
    assert_eq!(cache.slot_info(a).unwrap().written_end, 12);
    assert_eq!(code(cache.begin_replay(a, -1)), Code::InvalidArgument);
    cache.copy_slot(a, b).unwrap();
    assert_eq!(cache.slot_info(b).unwrap().written_end, 12);
    cache.free_slot(b).unwrap();
    assert_eq!(code(cache.free_slot(b)), Code::FailedPrecondition);
    assert_eq!(code(cache.free_slot(1000)), Code::OutOfRange);
    assert_eq!(code(cache.reset_slot(b)), Code::FailedPrecondition);
    assert_eq!(code(cache.copy_slot(a, b)), Code::FailedPrecondition);
    while cache.alloc_slot().is_ok() {}
    assert_eq!(code(cache.alloc_slot()), Code::ResourceExhausted);
    assert_eq!(cache.stats().unwrap().slots_in_use, 8);
}

#[test]
fn plans_build_cancel_and_exports() {
    let cache = cache();
    let s0 = cache.alloc_slot().unwrap();
    let s1 = cache.alloc_slot().unwrap();
    let mut plan = cache.plan().unwrap();
    assert_eq!(plan.info().unwrap().path, PlanPath::None);
    assert_eq!(plan.n_tokens(), None);
    assert_eq!(code(plan.cancel()), Code::FailedPrecondition);
    assert_eq!(code(plan.store_rows(&mut [])), Code::FailedPrecondition);
    // Errors change nothing.
    assert_eq!(code(plan.build(&[Seq::new(s0, 2, 1)])), Code::InvalidArgument);
    assert_eq!(code(plan.build(&[Seq::new(99, 1, 1)])), Code::OutOfRange);
    assert_eq!(code(plan.build(&[Seq::new(5, 1, 1)])), Code::FailedPrecondition);
    assert_eq!(code(plan.build(&[Seq::new(s0, 1, 3)])), Code::FailedPrecondition); // gap
    assert_eq!(code(plan.build(&[Seq::new(s0, 1, 1), Seq::new(s0, 1, 1)])), Code::InvalidArgument);
    assert_eq!(cache.slot_info(s0).unwrap().written_end, 0);

    // Ring-only decode plan.
    plan.build(&[Seq::new(s0, 2, 2), Seq::new(s1, 1, 1)]).unwrap();
    let info = plan.info().unwrap();
    assert_eq!((info.path, info.n_seqs, info.n_tokens, info.executed), (PlanPath::Ring, 2, 3, false));
    assert_eq!(info.decode_index_elems, 3 * W as u64);
    let mut ol = vec![0; 6];
    let mut ix = vec![0; 3 * W as usize];
    plan.decode_index(Some(&mut ol), Some(&mut ix)).unwrap();
    assert_eq!(&ol[..2], &[s0 as i32 * 11, 1]); // first token of s0: its own row, 1 key
    assert_eq!(ix[W as usize + 2], -1); // s0 token 1 sees 2 keys, then padding
    assert_eq!(code(plan.decode_index(Some(&mut ol[..5]), None)), Code::InvalidArgument);
    assert_eq!(code(plan.decode_index(None, None)), Code::InvalidArgument);
    let mut rows = vec![0; 3];
    plan.store_rows(&mut rows).unwrap();
    assert_eq!(rows, vec![s0 as i32 * 11, s0 as i32 * 11 + 1, s1 as i32 * 11]);
    assert_eq!(code(plan.store_rows(&mut [0; 2])), Code::InvalidArgument);
    let segs = plan.store_segments().unwrap();
    assert_eq!(segs.len(), info.n_store_segments as usize);
    assert_eq!(segs[0], Segment { dst_row: s0 as i32 * 11, src_row: 0, count: 2 });
    assert_eq!(code(plan.load_segments()), Code::FailedPrecondition);
    assert_eq!(code(plan.pivots(&mut [0; 12])), Code::FailedPrecondition);
    let (mut cu, mut qs, mut vs) = (vec![0; 3], vec![0; 2], vec![0; 2]);
    plan.seq_offsets(Some(&mut cu), Some(&mut qs), Some(&mut vs)).unwrap();
    assert_eq!((cu, qs, vs), (vec![0, 2, 3], vec![0, 0], vec![0, 0]));
    assert_eq!(code(plan.seq_offsets(Some(&mut [0; 2]), None, None)), Code::InvalidArgument);
    assert_eq!(cache.slot_info(s0).unwrap().written_end, 2);
    plan.cancel().unwrap();
    assert_eq!(cache.slot_info(s0).unwrap().written_end, 0);
    assert_eq!(plan.n_tokens(), None);

    // Staged prefill plan: more than R - W + 1 new tokens.
    let mut staged =
        cache.plan_with_options(&PlanOptions { index_pad: IndexPad::LastRow, materialize_index: false }).unwrap();
    staged.build(&[Seq::new(s0, 12, 12)]).unwrap();
    let info = staged.info().unwrap();
    assert_eq!((info.path, info.history_rows, info.staging_rows), (PlanPath::Staged, W as i32, W as i32 + 12));
    let load = staged.load_segments().unwrap();
    assert_eq!(load.len(), info.n_load_segments as usize);
    assert_eq!(load.iter().map(|s| s.count).sum::<i32>(), W as i32);
    let mut piv = vec![0; 48];
    staged.pivots(&mut piv).unwrap();
    assert_eq!(code(staged.pivots(&mut piv[..47])), Code::InvalidArgument);
    let mut rows = vec![0; 12];
    staged.store_rows(&mut rows).unwrap();
    assert_eq!(rows[0], -1); // only the last R = 11 tokens are stored
    assert_eq!(code(staged.decode_index(Some(&mut [0; 24]), None)), Code::FailedPrecondition);
    assert!(format!("{staged:?}").contains("12"));
    assert_eq!(PlanOptions::default(), PlanOptions { index_pad: IndexPad::Neg1, materialize_index: true });

    // Rewinds past the ring are refused; a freed slot invalidates the plan.
    assert_eq!(code(plan.build(&[Seq::new(s0, 1, 1)])), Code::FailedPrecondition);
    cache.free_slot(s0).unwrap();
    assert_eq!(code(staged.cancel()), Code::FailedPrecondition);
}

#[test]
fn step_argument_checks() {
    let cache = cache();
    let other = common::cache();
    let s = cache.alloc_slot().unwrap();
    let d = D as usize;
    let mut plan = cache.plan().unwrap();
    let mut foreign = other.plan().unwrap();
    let sinks = vec![0f32; 4];
    let q = vec![0.1f32; 2 * 4 * d];
    let k = vec![0.2f32; 2 * d];
    let k2 = vec![0.2f32; 2 * 2 * d];
    let mut out = vec![0f32; 2 * 4 * d];
    let mut steps = cache.steps();
    // Not built.
    let e = steps.step(&mut plan, StepArgs::new(0, &q, &k, &mut out)).unwrap_err();
    assert_eq!(e.code, Code::FailedPrecondition);
    assert_eq!(code(steps.step(&mut foreign, StepArgs::new(0, &q, &k, &mut out))), Code::FailedPrecondition);
    plan.build(&[Seq::new(s, 2, 2)]).unwrap();
    // Wrong lengths, missing or unexpected v_new and sinks, bad layer: all before the C call.
    let mut args = StepArgs::new(0, &q[..q.len() - 1], &k, &mut out);
    args.sinks = Some(&sinks);
    assert_eq!(code(steps.step(&mut plan, args)), Code::InvalidArgument);
    let mut args = StepArgs::new(0, &q, &k, &mut out[..8]);
    args.sinks = Some(&sinks);
    assert_eq!(code(steps.step(&mut plan, args)), Code::InvalidArgument);
    assert_eq!(code(steps.step(&mut plan, StepArgs::new(0, &q, &k, &mut out))), Code::InvalidArgument);
    let mut args = StepArgs::new(0, &q, &k, &mut out);
    args.sinks = Some(&sinks[..3]);
    assert_eq!(code(steps.step(&mut plan, args)), Code::InvalidArgument);
    assert_eq!(code(steps.step(&mut plan, StepArgs::new(1, &q, &k2, &mut out))), Code::InvalidArgument);
    let mut args = StepArgs::new(1, &q, &k2, &mut out);
    args.v_new = Some(Input::F32(&k2));
    args.sinks = Some(&sinks);
    assert_eq!(code(steps.step(&mut plan, args)), Code::InvalidArgument);
    let kb: Vec<Bf16> = k2.iter().map(|&x| Bf16::from_f32(x)).collect();
    let mut args = StepArgs::new(1, &q, &k2, &mut out);
    args.v_new = Some(Input::Bf16(&kb));
    assert_eq!(code(steps.step(&mut plan, args)), Code::InvalidArgument);
    let e = steps.step(&mut plan, StepArgs::new(7, &q, &k, &mut out)).unwrap_err();
    assert_eq!(e.code, Code::OutOfRange);
    // The library's own checks: a negative scale.
    let mut args = StepArgs::new(0, &q, &k, &mut out);
    args.sinks = Some(&sinks);
    args.softmax_scale = -1.0;
    assert_eq!(code(steps.step(&mut plan, args)), Code::InvalidArgument);
    assert!(!plan.info().unwrap().executed);
    // A good step; then the plan cannot be cancelled.
    let mut args = StepArgs::new(0, &q, &k, &mut out);
    args.sinks = Some(&sinks);
    steps.step(&mut plan, args).unwrap();
    let qb: Vec<Bf16> = q.iter().map(|&x| Bf16::from_f32(x)).collect();
    let mut outb = vec![Bf16(0); q.len()];
    let mut args = StepArgs::new(1, &qb, &kb, &mut outb);
    args.v_new = Some(Input::Bf16(&kb));
    steps.step(&mut plan, args).unwrap();
    assert!((outb[0].to_f32() - 0.2).abs() < 2e-3);
    assert!(plan.info().unwrap().executed);
    assert_eq!(code(plan.cancel()), Code::FailedPrecondition);
    // A slot freed since the build.
    cache.free_slot(s).unwrap();
    let mut args = StepArgs::new(0, &q, &k, &mut out);
    args.sinks = Some(&sinks);
    assert_eq!(code(steps.step(&mut plan, args)), Code::FailedPrecondition);
    // One stepper at a time.
    assert!(cache.try_steps().is_none());
    drop(steps);
    assert!(cache.try_steps().is_some());
    assert_eq!(cache.stats().unwrap().steps, 2);
}

#[test]
fn bf16_rounding() {
    assert_eq!(Bf16::from_f32(1.0).0, 0x3f80);
    assert_eq!(Bf16::from_f32(1.0 + 1.0 / 256.0).0, 0x3f80); // tie to even
    assert_eq!(Bf16::from_f32(1.0 + 3.0 / 256.0).0, 0x3f82);
    assert!(Bf16::from_f32(f32::NAN).to_f32().is_nan());
    assert_eq!(Bf16::from_f32(-2.5).to_f32(), -2.5);
}

#[test]
fn codec() {
    assert_eq!(codec::vector_bytes(Format::Mxfp8, 64).unwrap(), 66);
    assert_eq!(codec::vector_bytes(Format::Bf16, 64).unwrap(), 128);
    assert_eq!(code(codec::vector_bytes(Format::Fp32, 33)), Code::InvalidArgument);
    let mut rng = Rng(7);
    let x = rng.vec(64);
    let mut enc = vec![0u8; 66];
    assert_eq!(codec::encode(Format::Mxfp8, ScaleMode::Ceil, Input::F32(&x), 32, &mut enc).unwrap(), 0);
    let mut y = vec![0f32; 64];
    codec::decode(Format::Mxfp8, &enc, 32, Output::F32(&mut y)).unwrap();
    for (a, b) in x.iter().zip(&y) {
        assert!((a - b).abs() <= 0.07 * a.abs().max(1.0 / 64.0), "{a} vs {b}");
    }
    let mut enc2 = vec![0u8; 66];
    codec::mxfp8_encode(&x, 32, ScaleMode::Ceil, &mut enc2).unwrap();
    assert_eq!(enc, enc2);
    let mut y2 = vec![0f32; 64];
    codec::mxfp8_decode(&enc2, 32, &mut y2).unwrap();
    assert_eq!(y, y2);
    let mut bad = x.clone();
    bad[3] = f32::INFINITY;
    assert_eq!(codec::mxfp8_encode(&bad, 32, ScaleMode::Floor, &mut enc2).unwrap(), 1);
    assert_eq!(codec::mxfp8_decode(&enc2, 32, &mut y2).unwrap(), 1);
    let xb: Vec<Bf16> = x.iter().map(|&v| Bf16::from_f32(v)).collect();
    let mut bf = vec![0u8; 128];
    codec::encode(Format::Bf16, ScaleMode::Ceil, Input::Bf16(&xb), 64, &mut bf).unwrap();
    let mut back = vec![Bf16(0); 64];
    codec::decode(Format::Bf16, &bf, 64, Output::Bf16(&mut back)).unwrap();
    assert_eq!(back, xb);
    assert_eq!(
        code(codec::encode(Format::Mxfp8, ScaleMode::Ceil, Input::F32(&x), 32, &mut enc[..65])),
        Code::InvalidArgument
    );
    assert_eq!(code(codec::decode(Format::Mxfp8, &enc[..65], 32, Output::F32(&mut y))), Code::InvalidArgument);
    assert_eq!(code(codec::mxfp8_encode(&x[..63], 32, ScaleMode::Ceil, &mut enc)), Code::InvalidArgument);
    assert_eq!(code(codec::mxfp8_decode(&enc, 0, &mut y)), Code::InvalidArgument);
    assert!(["avx512", "avx2", "scalar"].contains(&codec::cpu_path()));
    let fp32 = codec::attention_cpu_path(Dtype::Fp32).unwrap();
    assert!(["avx512_wide", "avx512", "avx2_fma", "portable"].contains(&fp32), "{fp32}");
    let bf16 = codec::attention_cpu_path(Dtype::Bf16).unwrap();
    assert!(bf16 == "amx_bf16" || bf16 == "avx512_bf16" || bf16 == fp32, "{bf16}");
}

#[test]
fn project() {
    let cache = cache();
    let dims = ProjectDims { hidden_dim: 4, q_dim: 2, kv_dim: 1 };
    let hidden: Vec<Bf16> = [1.0, 2.0, 3.0, 4.0, 0.5, 0.5, 0.5, 0.5].iter().map(|&v| Bf16::from_f32(v)).collect();
    // OutIn: weight[3, 4]; row j of the output is dot(hidden, weight[j]).
    let weight: Vec<Bf16> =
        [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0].iter().map(|&v| Bf16::from_f32(v)).collect();
    let mut out = vec![0f32; 6];
    cache.project(&hidden, &weight, WeightLayout::OutIn, dims, Output::F32(&mut out)).unwrap();
    assert_eq!(out, vec![1.0, 2.0, 10.0, 0.5, 0.5, 2.0]);
    let mut out_b = vec![Bf16(0); 6];
    cache
        .project(
            &hidden,
            &weight,
            WeightLayout::InOut,
            ProjectDims { hidden_dim: 4, q_dim: 3, kv_dim: 0 },
            Output::Bf16(&mut out_b),
        )
        .unwrap();
    assert_eq!(
        code(cache.project(&hidden[..7], &weight, WeightLayout::OutIn, dims, Output::F32(&mut out))),
        Code::InvalidArgument
    );
    assert_eq!(
        code(cache.project(&hidden, &weight[..11], WeightLayout::OutIn, dims, Output::F32(&mut out))),
        Code::InvalidArgument
    );
    assert_eq!(
        code(cache.project(&hidden, &weight, WeightLayout::OutIn, dims, Output::F32(&mut out[..5]))),
        Code::InvalidArgument
    );
    let zero = ProjectDims { hidden_dim: 4, q_dim: 0, kv_dim: 0 };
    assert_eq!(
        code(cache.project(&hidden, &[], WeightLayout::OutIn, zero, Output::F32(&mut []))),
        Code::InvalidArgument
    );
}

#[test]
fn cache_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Cache>();
    check::<Plan<'static>>();
    fn send<T: Send>() {}
    send::<Store>();
}

#[test]
fn raw_step_and_handles() {
    let cache = cache();
    let s = cache.alloc_slot().unwrap();
    let mut plan = cache.plan().unwrap();
    assert!(std::ptr::eq(plan.cache(), &cache));
    assert!(!cache.as_ptr().is_null() && !plan.as_ptr().is_null());
    plan.build(&[Seq::new(s, 1, 1)]).unwrap();
    assert_eq!(plan.n_tokens(), Some(1));
    let d = D as usize;
    let (q, k, sinks) = (vec![0.3f32; 4 * d], vec![0.7f32; d], vec![0f32; 4]);
    let mut out = vec![0f32; 4 * d];
    let args = sys::swa_step_args_t {
        struct_size: std::mem::size_of::<sys::swa_step_args_t>(),
        layer: 0,
        q: q.as_ptr().cast(),
        q_dtype: Dtype::Fp32.raw(),
        k_new: k.as_ptr().cast(),
        v_new: std::ptr::null(),
        kv_dtype: Dtype::Fp32.raw(),
        out: out.as_mut_ptr().cast(),
        out_dtype: Dtype::Fp32.raw(),
        sinks: sinks.as_ptr(),
        softmax_scale: 0.0,
        stream: std::ptr::null_mut(),
        lse: std::ptr::null_mut(),
        positions: std::ptr::null(),
    };
    let mut steps = cache.steps();
    assert!(format!("{steps:?}").contains("StepGuard"));
    // SAFETY: host buffers sized for T = 1 on layer 0.
    unsafe { steps.step_raw(&mut plan, &args) }.unwrap();
    // With a sink of logit 0 and one key: o = e^z k / (e^z + 1).
    let z = 0.3f64 * 0.7 * d as f64 / (d as f64).sqrt();
    let want = (z.exp() * 0.7 / (z.exp() + 1.0)) as f32;
    assert!((out[0] - want).abs() < 1e-5, "{} vs {want}", out[0]);
    let mut bad = args;
    bad.struct_size = 3;
    assert_eq!(unsafe { steps.step_raw(&mut plan, &bad) }.unwrap_err().code, Code::InvalidArgument);
    let other = common::cache();
    let mut foreign = other.plan().unwrap();
    assert_eq!(unsafe { steps.step_raw(&mut foreign, &args) }.unwrap_err().code, Code::FailedPrecondition);
    assert_eq!(Dtype::from_raw(99), None);
    assert_eq!(Format::from_raw(Format::Bf16.raw()), Some(Format::Bf16));
    assert_eq!(LayerRole::from_raw(1), Some(LayerRole::Dropped));
    assert_eq!(ScaleMode::from_raw(1), Some(ScaleMode::Floor));
}
