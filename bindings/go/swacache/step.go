package swacache

// #include "capi.h"
import "C"

import (
	"runtime"
	"unsafe"
)

// Tensor is a dense row-major host tensor: exactly one of F32 or BF16 is
// non-nil (BF16 holds bfloat16 bits). Build one with F32 or BF16.
type Tensor struct {
	F32  []float32 // FP32 elements.
	BF16 []uint16  // bfloat16 elements, as their bits.
}

// F32 wraps a []float32 as a Tensor (no copy).
func F32(s []float32) Tensor { return Tensor{F32: s} }

// BF16 wraps a []uint16 of bfloat16 bits as a Tensor (no copy).
func BF16(s []uint16) Tensor { return Tensor{BF16: s} }

func (t Tensor) present() bool { return t.F32 != nil || t.BF16 != nil }

func (t Tensor) len() int {
	if t.F32 != nil {
		return len(t.F32)
	}
	return len(t.BF16)
}

func (t Tensor) dtype() Dtype {
	if t.BF16 != nil {
		return DtypeBF16
	}
	return DtypeFP32
}

// ptr is the address of the first element, emptyPtr for a present but
// empty tensor, nil for an absent one. The caller keeps t alive across the C
// call (runtime.KeepAlive).
func (t Tensor) ptr() unsafe.Pointer {
	switch {
	case len(t.F32) > 0:
		return unsafe.Pointer(&t.F32[0])
	case len(t.BF16) > 0:
		return unsafe.Pointer(&t.BF16[0])
	case t.present():
		return emptyPtr()
	}
	return nil
}

// StepArgs are the tensors of one layer of a planned step (swa_step_args_t),
// in batch order of the plan's new tokens. All are host memory, read or
// written in place during the call and not kept afterwards.
type StepArgs struct {
	Layer uint32 // Layer id.
	Q     Tensor // Queries [T, Hq, D].
	K     Tensor // New keys [T, Hkv, D] (the shared vector for shared K/V).
	V     Tensor // New values [T, Hkv, D]; absent for shared K/V layers. Same dtype as K.
	Out   Tensor // Output [T, Hq, D]; fully written on success.
	// Sinks are the [Hq] sink logits: required for layers with sinks, else nil.
	Sinks []float32
	// SoftmaxScale is the score scale; 0 = 1/sqrt(D).
	SoftmaxScale float32
	// LSE, when not nil, receives [T, Hq] FP32: ln of each row's softmax
	// denominator (sink included), for merging with other attention.
	LSE []float32
	// Positions, when not nil, are the [T] RoPE positions (each >= 0): RoPE
	// rotates by them instead of the cache positions; ring rows, window and
	// mask keep cache positions.
	Positions []int32
}

// Step runs one layer of the planned step (swa_step) on the CPU backend:
// encode and store the new K/V, attend, write Out. Every tensor length is
// checked in Go against the plan's T and the layer's shape before C sees
// it; a mismatch is INVALID_ARGUMENT and nothing runs. The slices are passed
// to C without a copy and not retained. Run every layer once per built plan.
//
// Threading: not thread-safe with other calls that use the same plan
// (serialised here) or the same slots; steps of different plans on distinct
// slots may run from different goroutines.
func (p *Plan) Step(a *StepArgs) error {
	cp, pp, err := p.lock()
	if err != nil {
		return err
	}
	defer p.unlock()
	if err := p.checkStep(a); err != nil {
		return err
	}
	if !p.c.s.host {
		return errorf(CodeUnimplemented, "Step passes host memory; this cache's pool is on a CUDA device")
	}
	var sinks *C.float
	if a.Sinks != nil {
		if len(a.Sinks) > 0 {
			sinks = (*C.float)(unsafe.Pointer(&a.Sinks[0]))
		} else {
			sinks = (*C.float)(emptyPtr())
		}
	}
	var lse *C.float
	if len(a.LSE) > 0 {
		lse = (*C.float)(unsafe.Pointer(&a.LSE[0]))
	}
	var positions *C.int32_t
	if len(a.Positions) > 0 {
		positions = (*C.int32_t)(unsafe.Pointer(&a.Positions[0]))
	}
	err = result(C.swago_step(cp, pp, C.uint32_t(a.Layer),
		a.Q.ptr(), C.uint32_t(a.Q.dtype()), a.K.ptr(), a.V.ptr(), C.uint32_t(a.K.dtype()),
		a.Out.ptr(), C.uint32_t(a.Out.dtype()), sinks, C.float(a.SoftmaxScale), lse, positions))
	runtime.KeepAlive(a)
	return err
}

func (p *Plan) checkStep(a *StepArgs) error {
	if a == nil {
		return errorf(CodeInvalidArgument, "step args are nil")
	}
	for _, t := range []struct {
		name string
		t    Tensor
	}{{"Q", a.Q}, {"K", a.K}, {"V", a.V}, {"Out", a.Out}} {
		if t.t.F32 != nil && t.t.BF16 != nil {
			return errorf(CodeInvalidArgument, "%s has both F32 and BF16 set", t.name)
		}
	}
	if a.V.present() && a.K.present() && a.V.dtype() != a.K.dtype() {
		return errorf(CodeInvalidArgument, "K is %v and V is %v: they share kv_dtype", a.K.dtype(), a.V.dtype())
	}
	layers := p.c.s.layers
	if uint64(a.Layer) >= uint64(len(layers)) || !p.s.built {
		// The library names these (OUT_OF_RANGE, FAILED_PRECONDITION)
		// without reading any tensor.
		return nil
	}
	l := &layers[a.Layer]
	t := p.s.nTokens
	if a.LSE != nil && int64(len(a.LSE)) != t*int64(l.QHeads) {
		return errorf(CodeInvalidArgument, "layer %d: LSE has %d elements, want %d (T x Hq)",
			a.Layer, len(a.LSE), t*int64(l.QHeads))
	}
	if a.Positions != nil && int64(len(a.Positions)) != t {
		return errorf(CodeInvalidArgument, "layer %d: Positions has %d elements, want T = %d",
			a.Layer, len(a.Positions), t)
	}
	qn := t * int64(l.QHeads) * int64(l.HeadDim)
	kn := t * int64(l.KVHeads) * int64(l.HeadDim)
	check := func(name string, x Tensor, want int64) error {
		if !x.present() {
			return errorf(CodeInvalidArgument, "layer %d: %s is missing (want %d elements)", a.Layer, name, want)
		}
		if int64(x.len()) != want {
			return errorf(CodeInvalidArgument, "layer %d: %s has %d elements, want %d (T = %d)",
				a.Layer, name, x.len(), want, t)
		}
		return nil
	}
	if err := check("Q", a.Q, qn); err != nil {
		return err
	}
	if err := check("K", a.K, kn); err != nil {
		return err
	}
	if err := check("Out", a.Out, qn); err != nil {
		return err
	}
	if l.SharedKV {
		if a.V.present() {
			return errorf(CodeInvalidArgument, "layer %d shares K/V: V must be absent", a.Layer)
		}
	} else if err := check("V", a.V, kn); err != nil {
		return err
	}
	if l.HasSinks != (a.Sinks != nil) {
		return errorf(CodeInvalidArgument, "layer %d: has_sinks = %v but Sinks given = %v",
			a.Layer, l.HasSinks, a.Sinks != nil)
	}
	if a.Sinks != nil && len(a.Sinks) != int(l.QHeads) {
		return errorf(CodeInvalidArgument, "layer %d: Sinks has %d elements, want Hq = %d",
			a.Layer, len(a.Sinks), l.QHeads)
	}
	return checkStepOverlaps(a)
}

// checkStepOverlaps refuses outputs that share memory with another argument:
// the library writes earlier output rows before it reads later input rows, so
// a shifted Out returned nil with wrong values. Out may be exactly Q (in place).
func checkStepOverlaps(a *StepArgs) error {
	out := spanOf("Out", a.Out.ptr(), a.Out.bytes())
	lse := spanOf("LSE", f32Ptr(a.LSE), 4*len(a.LSE))
	q := spanOf("Q", a.Q.ptr(), a.Q.bytes())
	ins := []span{q, spanOf("K", a.K.ptr(), a.K.bytes()), spanOf("V", a.V.ptr(), a.V.bytes()),
		spanOf("Sinks", f32Ptr(a.Sinks), 4*len(a.Sinks)),
		spanOf("Positions", unsafe.Pointer(i32ptr(a.Positions)), 4*len(a.Positions))}
	for _, o := range []span{out, lse} {
		others := ins
		if o.name == "LSE" {
			others = append([]span{out}, ins...)
		}
		for _, i := range others {
			if o.start == o.end || i.start == i.end || o.start >= i.end || i.start >= o.end {
				continue
			}
			if o.name == "Out" && i.name == "Q" && o.start == i.start && o.end == i.end {
				continue
			}
			return errorf(CodeInvalidArgument, "%s overlaps %s (an output may not share memory "+
				"with another argument; Out may be exactly Q)", o.name, i.name)
		}
	}
	return nil
}

// String names the dtype.
func (d Dtype) String() string {
	switch d {
	case DtypeFP32:
		return "FP32"
	case DtypeBF16:
		return "BF16"
	}
	return "Dtype(?)"
}
