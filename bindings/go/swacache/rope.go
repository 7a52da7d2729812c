package swacache

// #include "capi.h"
import "C"

import (
	"runtime"
	"unsafe"
)

// RopeInfo is a layer's RoPE as the step applies it (swa_rope_info_t).
type RopeInfo struct {
	Style           RopeStyle // The layer's style (RopeNone: no table).
	FirstDim        uint32    // First rotary dim of each head.
	Dims            uint32    // Rotary dims n; the table has n/2 frequencies.
	AttentionFactor float32   // What multiplies cos and sin of q and k (YaRN's default resolved).
	DerotateOutput  bool      // The step rotates its output back.
}

// RopeTable returns the layer's FP32 frequencies inv_freq[RopeDims/2] (empty
// without RoPE), the table every cache with this layer rotates with, and its
// RopeInfo (swa_rope_table). The layer is validated as a cache validates it.
// Thread-safe.
func RopeTable(l LayerDesc) ([]float32, RopeInfo, error) {
	var d C.swa_layer_desc_t
	l.toC(&d)
	var info C.swa_rope_info_t
	if err := result(C.swago_rope_table(&d, nil, 0, &info)); err != nil {
		return nil, RopeInfo{}, err
	}
	freq := make([]float32, int(info.dims)/2)
	if len(freq) > 0 {
		if err := result(C.swago_rope_table(&d, (*C.float)(unsafe.Pointer(&freq[0])), C.uint32_t(len(freq)),
			&info)); err != nil {
			return nil, RopeInfo{}, err
		}
	}
	return freq, RopeInfo{
		Style:           RopeStyle(info.style),
		FirstDim:        uint32(info.first_dim),
		Dims:            uint32(info.dims),
		AttentionFactor: float32(info.attention_factor),
		DerotateOutput:  info.derotate_output != 0,
	}, nil
}

// RopeApply rotates x ([len(positions), heads, HeadDim] host memory, FP32 or
// BF16) in place with the layer's RoPE at positions (each >= 0), bit for bit
// as the CPU step rotates (swa_rope_apply): forward with the attention factor
// (as the step rotates q and k), or inverse (minus the position, no factor,
// as the step de-rotates its output). Thread-safe.
func RopeApply(l LayerDesc, x Tensor, heads uint32, positions []int32, inverse bool) error {
	if x.F32 != nil && x.BF16 != nil {
		return errorf(CodeInvalidArgument, "x has both F32 and BF16 set")
	}
	want := int64(len(positions)) * int64(heads) * int64(l.HeadDim)
	if int64(x.len()) != want {
		return errorf(CodeInvalidArgument, "x has %d elements, want %d (len(positions) = %d x heads = %d x HeadDim = %d)",
			x.len(), want, len(positions), heads, l.HeadDim)
	}
	var d C.swa_layer_desc_t
	l.toC(&d)
	var pos *C.int32_t
	if len(positions) > 0 {
		pos = (*C.int32_t)(unsafe.Pointer(&positions[0]))
	}
	err := result(C.swago_rope_apply(&d, x.ptr(), C.uint32_t(x.dtype()), C.uint32_t(heads),
		C.int64_t(len(positions)), pos, C.uint32_t(cbool(inverse))))
	runtime.KeepAlive(x)
	runtime.KeepAlive(positions)
	return err
}
