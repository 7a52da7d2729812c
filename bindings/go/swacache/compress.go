package swacache

// #include "capi.h"
import "C"

import (
	"runtime"
	"unsafe"
)

// CompressWindow is one compressed entry that closes in a built plan
// (swa_compress_window_t, docs/semantics.md "Compression state"). Its S slots
// (c for HCA, 2c for CSA) at source positions FirstPosition ... split, in
// order, into NMissing slots without a row, NRing slots read from the ring
// (rows (RingRow + j) mod compress_len of Slot, before the step's store) and
// NNew slots from the step's batch rows NewRow + j.
type CompressWindow struct {
	Seq           uint32 // Index of the sequence in the plan's batch.
	Slot          uint32 // Its state slot.
	Entry         int32  // w, the entry's absolute index: write it there (overwriting a rewound one).
	Position      int32  // RoPE position of the entry, w * c.
	FirstPosition int32  // Source position of slot 0: w*c (HCA), (w-1)*c (CSA).
	NMissing      int32
	NRing         int32
	RingRow       int32
	NNew          int32
	NewRow        int32
}

// CompressWindows lists the windows of layer's compressor that close in this
// built plan, in batch order then by entry: the rows of CompressStep's output
// (swa_plan_compress_windows). The layer's indexer closes the same windows.
func (p *Plan) CompressWindows(layer uint32) ([]CompressWindow, error) {
	_, pp, err := p.lock()
	if err != nil {
		return nil, err
	}
	defer p.unlock()
	var n C.size_t
	if err := result(C.swago_plan_compress_windows(pp, C.uint32_t(layer), nil, 0, &n)); err != nil {
		return nil, err
	}
	out := make([]CompressWindow, int(n))
	if n == 0 {
		return out, nil
	}
	if err := result(C.swago_plan_compress_windows(pp, C.uint32_t(layer),
		(*C.swa_compress_window_t)(unsafe.Pointer(&out[0])), n, &n)); err != nil {
		return nil, err
	}
	return out[:int(n)], nil
}

// CompressStoreSegments exports where the plan stores layer's new source rows
// in its compressor ring (swa_plan_compress_store_segments): DstRow is the
// flat ring row slot * compress_len + p mod compress_len.
func (p *Plan) CompressStoreSegments(layer uint32) ([]Segment, error) {
	return p.segments(func(pp *C.swa_plan_t, out *C.swa_segment_t, n C.size_t, count *C.size_t) C.swago_ret {
		return C.swago_plan_compress_store_segments(pp, C.uint32_t(layer), out, n, count)
	})
}

// CompressArgs are one compressor of one layer of a planned step
// (swa_compress_args_t). Host memory, read or written in place during the call.
type CompressArgs struct {
	Layer        uint32
	Compressor   uint32    // 0 = the layer's compressor, 1 = its Lightning Indexer's.
	KV           Tensor    // New source rows [T, S], S = d (HCA) or 2d (CSA).
	Gate         Tensor    // Gate rows [T, S] (same dtype as KV), without the position bias.
	RowWidth     uint32    // S.
	PositionBias []float32 // [c, S].
	NormWeight   []float32 // [d], the entries' RMSNorm weight.
	NormEps      float32   // RMSNorm epsilon; 0 = 1e-6.
	Out          Tensor    // [rows >= windows, d]: row k = window k of CompressWindows.
	EntryDim     uint32    // d (sizes Out's rows: len(Out) / d).
}

// CompressStep runs one compressor of one layer of the plan (swa_compress_step)
// on the CPU backend: the entries of the closing windows into Out, then the
// new rows into the ring. The library checks the shapes (RowWidth, T, Out's
// rows) and names what is wrong; EntryDim, PositionBias and NormWeight are
// checked here against the layer's compressor (the library cannot see Go
// slice lengths). Nothing is written on failure.
func (p *Plan) CompressStep(a *CompressArgs) error {
	// The layer's widths, read before the plan's lock; an untyped layer or a
	// bad id is left to the library, which names it before reading anything.
	var want *LayerLayout
	if a != nil && p != nil && p.c != nil {
		if ll, err := p.c.LayerLayout(a.Layer); err == nil && ll.CompressKind != CompressOpaque {
			want = &ll
		}
	}
	cp, pp, err := p.lock()
	if err != nil {
		return err
	}
	defer p.unlock()
	if a == nil {
		return errorf(CodeInvalidArgument, "compress args are nil")
	}
	if !p.c.s.host {
		return errorf(CodeUnimplemented, "CompressStep passes host memory; this cache's pool is on a CUDA device")
	}
	if a.KV.present() && a.Gate.present() && a.KV.dtype() != a.Gate.dtype() {
		return errorf(CodeInvalidArgument, "KV is %v and Gate is %v: they share one dtype", a.KV.dtype(), a.Gate.dtype())
	}
	if a.EntryDim == 0 {
		return errorf(CodeInvalidArgument, "EntryDim = 0: give d, the compressor's entry width")
	}
	if want != nil && a.Compressor <= 1 {
		d, s := want.CompressHeadDim, want.CompressRowValues
		if a.Compressor == 1 {
			d, s = want.IndexHeadDim, 2*want.IndexHeadDim
		}
		if d != 0 {
			if a.EntryDim != d {
				return errorf(CodeInvalidArgument, "EntryDim = %d: layer %d's compressor %d has entries of d = %d",
					a.EntryDim, a.Layer, a.Compressor, d)
			}
			if uint64(len(a.PositionBias)) != uint64(want.CompressRatio)*uint64(s) {
				return errorf(CodeInvalidArgument, "PositionBias has %d values, want c x S = %d x %d",
					len(a.PositionBias), want.CompressRatio, s)
			}
			if uint64(len(a.NormWeight)) != uint64(d) {
				return errorf(CodeInvalidArgument, "NormWeight has %d values, want d = %d", len(a.NormWeight), d)
			}
		}
	}
	if p.s.built && a.RowWidth > 0 && (int64(a.KV.len()) != p.s.nTokens*int64(a.RowWidth) ||
		int64(a.Gate.len()) != p.s.nTokens*int64(a.RowWidth)) {
		return errorf(CodeInvalidArgument, "layer %d: KV has %d and Gate %d elements, want T x S = %d x %d",
			a.Layer, a.KV.len(), a.Gate.len(), p.s.nTokens, a.RowWidth)
	}
	eps := a.NormEps
	if eps == 0 {
		eps = 1e-6
	}
	var bias, weight *C.float
	if len(a.PositionBias) > 0 {
		bias = (*C.float)(unsafe.Pointer(&a.PositionBias[0]))
	}
	if len(a.NormWeight) > 0 {
		weight = (*C.float)(unsafe.Pointer(&a.NormWeight[0]))
	}
	outRows := uint64(a.Out.len()) / uint64(a.EntryDim)
	err = result(C.swago_compress_step(cp, pp, C.uint32_t(a.Layer), C.uint32_t(a.Compressor),
		a.KV.ptr(), a.Gate.ptr(), C.uint32_t(a.KV.dtype()), C.uint32_t(a.RowWidth), C.int64_t(p.s.nTokens),
		bias, weight, C.float(eps), a.Out.ptr(), C.uint32_t(a.Out.dtype()), C.uint64_t(outRows)))
	runtime.KeepAlive(a)
	return err
}

// CompressView returns the view of one layer's compressor ring over all slots
// (swa_cache_compress_view): uint8 [max_slots, compress_len, 2, half_bytes],
// per row the kv values then the gate values. compressor 1 is the indexer's.
// The address stays valid until Close. Thread-safe.
func (c *Cache) CompressView(layer, compressor uint32) (TensorView, error) {
	p, err := c.s.acquire()
	if err != nil {
		return TensorView{}, err
	}
	defer c.s.release()
	var o C.swa_tensor_view_t
	o.struct_size = C.sizeof_swa_tensor_view_t
	err = result(C.swago_cache_compress_view(p, C.uint32_t(layer), C.uint32_t(compressor), &o))
	runtime.KeepAlive(c)
	if err != nil {
		return TensorView{}, err
	}
	v := TensorView{Data: uintptr(o.data), Backend: Backend(o.backend), Device: int32(o.device),
		NDim: uint32(o.ndim)}
	for i := 0; i < 4; i++ {
		v.Shape[i] = int64(o.shape[i])
		v.Strides[i] = int64(o.strides[i])
	}
	return v, nil
}

// SetSaveCompression makes Save and SaveAt carry the typed compressor rings in
// the blob (swa_cache_set_save_compression). Thread-safe.
func (c *Cache) SetSaveCompression(enable bool) error {
	p, err := c.s.acquire()
	if err != nil {
		return err
	}
	defer c.s.release()
	e := C.uint32_t(0)
	if enable {
		e = 1
	}
	err = result(C.swago_cache_set_save_compression(p, e))
	runtime.KeepAlive(c)
	return err
}
