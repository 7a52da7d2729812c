package swacache

// #include "capi.h"
import "C"

import (
	"runtime"
	"unsafe"
)

// MergeArgs are the tensors of AttentionMerge (swa_merge_args_t): two partial
// attentions over disjoint key sets of the same query rows, each with its
// per-row LSE as Step writes it. Rows is len(LSEA). Host memory, read or
// written in place during the call and not kept afterwards.
type MergeArgs struct {
	HeadDim uint32    // Values per row, >= 1.
	OutA    Tensor    // [Rows, HeadDim]: attention over key set A.
	LSEA    []float32 // [Rows]: its LSE; -Inf for a row that saw no key in A.
	OutB    Tensor    // [Rows, HeadDim]: attention over key set B; same dtype as OutA.
	LSEB    []float32 // [Rows]: its LSE.
	Out     Tensor    // [Rows, HeadDim]: the merged attention; may be OutA or OutB itself.
	LSE     []float32 // [Rows] merged LSE, or nil; may be LSEA or LSEB itself.
}

// span is the byte range of a tensor argument, for the overlap checks.
type span struct {
	name       string
	start, end uintptr
}

func spanOf(name string, p unsafe.Pointer, bytes int) span {
	return span{name, uintptr(p), uintptr(p) + uintptr(bytes)}
}

func (t Tensor) bytes() int {
	if t.BF16 != nil {
		return 2 * len(t.BF16)
	}
	return 4 * len(t.F32)
}

func f32Ptr(s []float32) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(&s[0])
}

// checkMerge checks every length, the dtypes and the aliasing rules in Go, so
// that the library never reads or writes past a slice.
func checkMerge(a *MergeArgs) (rows int, err error) {
	if a.HeadDim == 0 {
		return 0, errorf(CodeInvalidArgument, "HeadDim = 0; must be >= 1")
	}
	rows = len(a.LSEA)
	if rows > 0 && int64(rows) > (int64(1)<<60)/int64(a.HeadDim) {
		return 0, errorf(CodeInvalidArgument, "rows = %d times HeadDim = %d overflows", rows, a.HeadDim)
	}
	want := rows * int(a.HeadDim)
	for _, x := range []struct {
		name string
		t    Tensor
	}{{"OutA", a.OutA}, {"OutB", a.OutB}, {"Out", a.Out}} {
		if x.t.F32 != nil && x.t.BF16 != nil {
			return 0, errorf(CodeInvalidArgument, "%s has both F32 and BF16 set", x.name)
		}
		if x.t.len() != want {
			return 0, errorf(CodeInvalidArgument, "%s has %d elements, want rows (len(LSEA) = %d) * HeadDim (%d) = %d",
				x.name, x.t.len(), rows, a.HeadDim, want)
		}
		if rows > 0 && x.t.dtype() != a.OutA.dtype() {
			return 0, errorf(CodeInvalidArgument, "%s is %v, OutA is %v: one dtype for all three", x.name,
				x.t.dtype(), a.OutA.dtype())
		}
	}
	if len(a.LSEB) != rows {
		return 0, errorf(CodeInvalidArgument, "LSEB has %d elements, LSEA %d", len(a.LSEB), rows)
	}
	if a.LSE != nil && len(a.LSE) != rows {
		return 0, errorf(CodeInvalidArgument, "LSE has %d elements, want %d (or nil)", len(a.LSE), rows)
	}
	if rows == 0 {
		return 0, nil
	}
	// An output may be exactly one of its inputs, never a partial overlap.
	out := spanOf("Out", a.Out.ptr(), a.Out.bytes())
	lse := spanOf("LSE", f32Ptr(a.LSE), 4*len(a.LSE))
	inA := spanOf("OutA", a.OutA.ptr(), a.OutA.bytes())
	inB := spanOf("OutB", a.OutB.ptr(), a.OutB.bytes())
	lA := spanOf("LSEA", f32Ptr(a.LSEA), 4*rows)
	lB := spanOf("LSEB", f32Ptr(a.LSEB), 4*rows)
	type pair struct {
		o, i  span
		exact bool // Exact aliasing allowed.
	}
	pairs := []pair{{out, inA, true}, {out, inB, true}, {out, lA, false}, {out, lB, false}}
	if a.LSE != nil {
		pairs = append(pairs, pair{lse, lA, true}, pair{lse, lB, true}, pair{lse, inA, false},
			pair{lse, inB, false}, pair{lse, out, false})
	}
	for _, p := range pairs {
		if p.o.start < p.i.end && p.i.start < p.o.end && !(p.exact && p.o == span{p.o.name, p.i.start, p.i.end}) {
			return 0, errorf(CodeInvalidArgument, "%s overlaps %s without being it", p.o.name, p.i.name)
		}
	}
	return rows, nil
}

// AttentionMerge combines two partial attentions over disjoint key sets into
// the attention over their union (swa_attention_merge): per row, with
// m = max(LSEA, LSEB), out = (e^(LSEA-m) OutA + e^(LSEB-m) OutB) /
// (e^(LSEA-m) + e^(LSEB-m)) and LSE = m + ln(e^(LSEA-m) + e^(LSEB-m)),
// computed in FP32 (the header lists the rules for -Inf, +Inf and NaN LSEs).
// Every length, the dtypes and the aliasing are checked in Go first.
// Thread-safe; CPU caches only (host slices), UNIMPLEMENTED on a CUDA cache.
func (c *Cache) AttentionMerge(a *MergeArgs) error {
	cp, err := c.s.acquire()
	if err != nil {
		return err
	}
	defer c.s.release()
	if a == nil {
		return errorf(CodeInvalidArgument, "merge args are nil")
	}
	if !c.s.host {
		return errorf(CodeUnimplemented, "AttentionMerge passes host memory; this cache's pool is on a CUDA device")
	}
	rows, err := checkMerge(a)
	if err != nil || rows == 0 {
		return err
	}
	err = result(C.swago_attention_merge(cp, C.int64_t(rows), C.uint32_t(a.HeadDim), C.uint32_t(a.OutA.dtype()),
		a.OutA.ptr(), (*C.float)(f32Ptr(a.LSEA)), a.OutB.ptr(), (*C.float)(f32Ptr(a.LSEB)), a.Out.ptr(),
		(*C.float)(f32Ptr(a.LSE))))
	runtime.KeepAlive(a)
	runtime.KeepAlive(c)
	return err
}

// AttentionMerge is Cache.AttentionMerge without a cache (swa_attention_merge
// with cache NULL, device -1): host slices, merged on the calling goroutine's
// thread; the same bits as with a CPU cache. Thread-safe.
func AttentionMerge(a *MergeArgs) error {
	if a == nil {
		return errorf(CodeInvalidArgument, "merge args are nil")
	}
	rows, err := checkMerge(a)
	if err != nil || rows == 0 {
		return err
	}
	err = result(C.swago_attention_merge(nil, C.int64_t(rows), C.uint32_t(a.HeadDim), C.uint32_t(a.OutA.dtype()),
		a.OutA.ptr(), (*C.float)(f32Ptr(a.LSEA)), a.OutB.ptr(), (*C.float)(f32Ptr(a.LSEB)), a.Out.ptr(),
		(*C.float)(f32Ptr(a.LSE))))
	runtime.KeepAlive(a)
	return err
}
