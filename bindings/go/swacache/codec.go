package swacache

// #include "capi.h"
import "C"

import (
	"runtime"
	"unsafe"
)

// FormatVectorBytes returns the bytes of one stored vector of dim values
// (swa_format_vector_bytes): MXFP8 dim + dim/32, BF16 2*dim, FP32 4*dim.
// Experimental in the C API. Thread-safe.
func FormatVectorBytes(f Format, dim uint32) (uint32, error) {
	var n C.uint32_t
	err := result(C.swago_format_vector_bytes(C.uint32_t(f), C.uint32_t(dim), &n))
	return uint32(n), err
}

// CodecCPUPath names the CPU codec path in use: "avx512", "avx2" or
// "scalar" (swa_codec_cpu_path). Experimental in the C API. Thread-safe.
func CodecCPUPath() string { return C.GoString(C.swa_codec_cpu_path()) }

// AttentionCPUPath names the CPU attention path Step takes for queries of
// qDtype (swa_attention_cpu_path): "amx_bf16", "avx512_bf16", "avx512_wide",
// "avx512", "avx2_fma" or "portable" (docs/cpu_attention.md, "Paths").
// Experimental in the C API. Thread-safe.
func AttentionCPUPath(qDtype Dtype) (string, error) {
	var name *C.char
	if err := result(C.swago_attention_cpu_path(C.uint32_t(qDtype), &name)); err != nil {
		return "", err
	}
	return C.GoString(name), nil
}

func bytesPtr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return emptyPtr()
	}
	return unsafe.Pointer(&b[0])
}

// codecSizes checks a codec call's lengths in Go and returns the vector count.
func codecSizes(f Format, values Tensor, dim uint32, stored []byte) (int, error) {
	if values.F32 != nil && values.BF16 != nil {
		return 0, errorf(CodeInvalidArgument, "values have both F32 and BF16 set")
	}
	vb, err := FormatVectorBytes(f, dim)
	if err != nil {
		return 0, err
	}
	if values.len()%int(dim) != 0 {
		return 0, errorf(CodeInvalidArgument, "%d values are not a multiple of dim = %d", values.len(), dim)
	}
	n := values.len() / int(dim)
	if len(stored) != n*int(vb) {
		return 0, errorf(CodeInvalidArgument, "%d stored bytes, want %d vectors * %d bytes = %d",
			len(stored), n, vb, n*int(vb))
	}
	return n, nil
}

// Encode encodes len(src)/dim vectors into their stored form in dst, exactly
// as the cache stores KV vectors (swa_codec_encode); dst must hold exactly
// that many vectors of FormatVectorBytes(f, dim). It returns the number of
// 32-value blocks that held a NaN or Inf. Experimental in the C API.
// Thread-safe; runs on the calling goroutine's thread.
func Encode(f Format, mode ScaleMode, src Tensor, dim uint32, dst []byte) (uint64, error) {
	n, err := codecSizes(f, src, dim, dst)
	if err != nil {
		return 0, err
	}
	var nf C.uint64_t
	err = result(C.swago_codec_encode(C.uint32_t(f), C.uint32_t(mode), src.ptr(), C.uint32_t(src.dtype()),
		C.size_t(n), C.uint32_t(dim), bytesPtr(dst), &nf))
	runtime.KeepAlive(src)
	runtime.KeepAlive(dst)
	return uint64(nf), err
}

// Decode decodes stored vectors of f into dst, len(dst)/dim vectors
// (swa_codec_decode); src must hold exactly that many. It returns the number
// of blocks that decode to NaN/Inf markers. Experimental in the C API.
// Thread-safe.
func Decode(f Format, src []byte, dim uint32, dst Tensor) (uint64, error) {
	n, err := codecSizes(f, dst, dim, src)
	if err != nil {
		return 0, err
	}
	var nf C.uint64_t
	err = result(C.swago_codec_decode(C.uint32_t(f), bytesPtr(src), C.size_t(n), C.uint32_t(dim),
		dst.ptr(), C.uint32_t(dst.dtype()), &nf))
	runtime.KeepAlive(src)
	runtime.KeepAlive(dst)
	return uint64(nf), err
}

// EncodeMXFP8 is the MXFP8 shorthand of Encode (swa_mxfp8_encode): the same
// bytes as Encode(FormatMXFP8, mode, src, dim, dst), with dst exactly
// len(src)/dim vectors of dim + dim/32 bytes (checked in Go). It returns the
// number of blocks that got the non-finite scale. Experimental in the C API.
// Thread-safe.
func EncodeMXFP8(mode ScaleMode, src Tensor, dim uint32, dst []byte) (uint64, error) {
	n, err := codecSizes(FormatMXFP8, src, dim, dst)
	if err != nil {
		return 0, err
	}
	var nf C.uint64_t
	err = result(C.swago_mxfp8_encode(src.ptr(), C.uint32_t(src.dtype()), C.size_t(n), C.uint32_t(dim),
		C.uint32_t(mode), bytesPtr(dst), &nf))
	runtime.KeepAlive(src)
	runtime.KeepAlive(dst)
	return uint64(nf), err
}

// DecodeMXFP8 is the MXFP8 shorthand of Decode (swa_mxfp8_decode): src must
// hold exactly len(dst)/dim vectors (checked in Go). It returns the number of
// blocks whose scale is the non-finite marker. Experimental in the C API.
// Thread-safe.
func DecodeMXFP8(src []byte, dim uint32, dst Tensor) (uint64, error) {
	n, err := codecSizes(FormatMXFP8, dst, dim, src)
	if err != nil {
		return 0, err
	}
	var nf C.uint64_t
	err = result(C.swago_mxfp8_decode(bytesPtr(src), C.size_t(n), C.uint32_t(dim), dst.ptr(),
		C.uint32_t(dst.dtype()), &nf))
	runtime.KeepAlive(src)
	runtime.KeepAlive(dst)
	return uint64(nf), err
}

// WeightLayout is how Project reads its weight matrix (swa_weight_layout_t).
type WeightLayout uint32

// Weight layouts.
const (
	WeightOutIn WeightLayout = 0 // weight[q_dim + kv_dim, hidden_dim] (torch.nn.Linear.weight).
	WeightInOut WeightLayout = 1 // weight[hidden_dim, q_dim + kv_dim].
)

// ProjectArgs are the tensors of Project (swa_project_args_t): BF16 inputs,
// FP32 or BF16 output, host memory, passed in place.
type ProjectArgs struct {
	Hidden       []uint16     // [NTokens, HiddenDim] BF16.
	Weight       []uint16     // BF16, shape per WeightLayout.
	WeightLayout WeightLayout // Layout of Weight.
	Out          Tensor       // [NTokens, QDim + KVDim]; fully written on success.
	NTokens      int32        // T >= 0; 0 is a no-op.
	HiddenDim    uint32       // K >= 1.
	QDim         uint32       // Query columns.
	KVDim        uint32       // KV columns; QDim + KVDim >= 1.
}

// Project runs the merged projection GEMM out = hidden x weight on the
// cache's backend (swa_project), after checking every length in Go.
// Experimental in the C API. Thread-safe; CPU caches only (host slices).
func (c *Cache) Project(a *ProjectArgs) error {
	cp, err := c.s.acquire()
	if err != nil {
		return err
	}
	defer c.s.release()
	if a == nil {
		return errorf(CodeInvalidArgument, "project args are nil")
	}
	if !c.s.host {
		return errorf(CodeUnimplemented, "Project passes host memory; this cache's pool is on a CUDA device")
	}
	// Malformed sizes (negative T, zero dims) are left to the library, which names them.
	if a.NTokens >= 0 && a.HiddenDim > 0 && uint64(a.QDim)+uint64(a.KVDim) > 0 {
		t, k, n := int64(a.NTokens), int64(a.HiddenDim), int64(a.QDim)+int64(a.KVDim)
		if a.Out.F32 != nil && a.Out.BF16 != nil {
			return errorf(CodeInvalidArgument, "Out has both F32 and BF16 set")
		}
		for _, x := range []struct {
			name      string
			got, want int64
		}{{"Hidden", int64(len(a.Hidden)), t * k}, {"Weight", int64(len(a.Weight)), k * n},
			{"Out", int64(a.Out.len()), t * n}} {
			if x.got != x.want {
				return errorf(CodeInvalidArgument, "%s has %d elements, want %d", x.name, x.got, x.want)
			}
		}
	}
	hidden, weight := unsafe.Pointer(nil), unsafe.Pointer(nil)
	if len(a.Hidden) > 0 {
		hidden = unsafe.Pointer(&a.Hidden[0])
	}
	if len(a.Weight) > 0 {
		weight = unsafe.Pointer(&a.Weight[0])
	}
	err = result(C.swago_project(cp, hidden, weight, C.uint32_t(a.WeightLayout), a.Out.ptr(),
		C.uint32_t(a.Out.dtype()), C.int32_t(a.NTokens), C.uint32_t(a.HiddenDim), C.uint32_t(a.QDim),
		C.uint32_t(a.KVDim)))
	runtime.KeepAlive(a)
	runtime.KeepAlive(c)
	return err
}
