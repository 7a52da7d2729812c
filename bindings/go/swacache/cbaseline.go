package swacache

// The C baseline of the binding's benchmarks (bench_test.go): the same
// library calls made in a C loop, so that the benchmarks can report what the
// binding itself costs. Test files cannot use cgo, hence this unexported
// code in the package.

/*
#include "capi.h"

static swago_ret swago_loop_plan_build(swa_plan_t* p, const swa_seq_t* seqs, uint32_t n,
                                       int64_t iters) {
  for (int64_t i = 0; i < iters; ++i) {
    swa_status_t st = swa_plan_build(p, seqs, n);
    if (st != SWA_OK) return swago_r(st);
  }
  return swago_r(SWA_OK);
}

static swago_ret swago_loop_step(swa_cache_t* c, swa_plan_t* p, uint32_t layer, const void* q,
                                 uint32_t q_dtype, const void* k, const void* v, uint32_t kv_dtype,
                                 void* out, uint32_t out_dtype, int64_t iters) {
  swa_step_args_t a;
  swa_step_args_init(&a);
  a.layer = layer;
  a.q = q;
  a.q_dtype = (swa_dtype_t)q_dtype;
  a.k_new = k;
  a.v_new = v;
  a.kv_dtype = (swa_dtype_t)kv_dtype;
  a.out = out;
  a.out_dtype = (swa_dtype_t)out_dtype;
  for (int64_t i = 0; i < iters; ++i) {
    swa_status_t st = swa_step(c, p, &a);
    if (st != SWA_OK) return swago_r(st);
  }
  return swago_r(SWA_OK);
}
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// cLoopPlanBuild calls swa_plan_build iters times from C.
func cLoopPlanBuild(p *Plan, seqs []Seq, iters int) error {
	_, pp, err := p.lock()
	if err != nil {
		return err
	}
	defer p.unlock()
	err = result(C.swago_loop_plan_build(pp, (*C.swa_seq_t)(unsafe.Pointer(&seqs[0])),
		C.uint32_t(len(seqs)), C.int64_t(iters)))
	runtime.KeepAlive(seqs)
	return err
}

// cLoopStep calls swa_step iters times from C with a's tensors (no sinks).
func cLoopStep(p *Plan, a *StepArgs, iters int) error {
	cp, pp, err := p.lock()
	if err != nil {
		return err
	}
	defer p.unlock()
	err = result(C.swago_loop_step(cp, pp, C.uint32_t(a.Layer), a.Q.ptr(), C.uint32_t(a.Q.dtype()),
		a.K.ptr(), a.V.ptr(), C.uint32_t(a.K.dtype()), a.Out.ptr(), C.uint32_t(a.Out.dtype()),
		C.int64_t(iters)))
	runtime.KeepAlive(a)
	return err
}
