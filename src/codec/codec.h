// Row-wise encode/decode of KV vectors in any storage format (MXFP8, BF16,
// FP32) — the interface the step backends use. docs/codec.md has the rules.
//
// A "vector" is `dim` values (dim a positive multiple of 32; 512 for FP8_DS_MLA). Encoding reads
// vectors from a typed source with an element stride and writes one stored
// row per vector (VectorBytes(format, dim) bytes) wherever the destination
// addressing says; decoding does the reverse into FP32 or BF16 tiles.
// Both return the number of 32-element blocks that were non-finite (a NaN or
// Inf in the source on encode; on decode, MXFP8 blocks whose scale is 0xFF and
// BF16/FP32 blocks that contain a NaN or Inf). They never fail: arguments are
// the caller's responsibility (the C API validates them).
//
// Thread-safe: no shared mutable state; callers split rows across threads.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/records.h"

namespace swa::codec {

// Where row i of a batch lives: base + i * stride.
template <typename Byte>
struct RowAddressing {
  Byte* base = nullptr;
  size_t stride = 0;  // bytes between rows

  Byte* Row(size_t i) const { return base + i * stride; }
};
using DstRows = RowAddressing<uint8_t>;
using SrcRows = RowAddressing<const uint8_t>;

// Typed vectors: vector i starts at element i * stride (stride >= dim).
struct ConstVectors {
  const void* data = nullptr;
  Dtype dtype = Dtype::kFp32;
  size_t stride = 0;  // elements
};
struct MutableVectors {
  void* data = nullptr;
  Dtype dtype = Dtype::kFp32;
  size_t stride = 0;  // elements
};

// Encode n vectors into stored rows. Returns non-finite blocks seen.
uint64_t EncodeRows(Format format, ScaleMode mode, uint32_t dim, size_t n,
                    const ConstVectors& src, const DstRows& dst);

// Decode n stored rows into vectors. Returns non-finite blocks seen.
uint64_t DecodeRows(Format format, uint32_t dim, size_t n, const SrcRows& src,
                    const MutableVectors& dst);

// ---- Per-row kernels, for the dispatch above and for tests/benchmarks ----

// One vector; each returns its non-finite block count. `dim` % 32 == 0.
struct RowKernels {
  const char* name;
  // MXFP8: `ceil` selects the scale mode.
  uint32_t (*mxfp8_encode_f32)(const float* src, uint32_t dim, bool ceil, uint8_t* dst);
  uint32_t (*mxfp8_encode_bf16)(const uint16_t* src, uint32_t dim, bool ceil, uint8_t* dst);
  uint32_t (*mxfp8_decode_f32)(const uint8_t* src, uint32_t dim, float* dst);
  uint32_t (*mxfp8_decode_bf16)(const uint8_t* src, uint32_t dim, uint16_t* dst);
  // Plain formats: FP32 <-> BF16 (round to nearest even) and copies.
  uint32_t (*f32_to_f32)(const float* src, uint32_t dim, float* dst);
  uint32_t (*f32_to_bf16)(const float* src, uint32_t dim, uint16_t* dst);
  uint32_t (*bf16_to_f32)(const uint16_t* src, uint32_t dim, float* dst);
  uint32_t (*bf16_to_bf16)(const uint16_t* src, uint32_t dim, uint16_t* dst);
  // Optional (nullptr: EncodeRowsWith/DecodeRowsWith call the row kernels
  // above row by row): MXFP8 for n rows at once, the same bytes as n calls
  // of the row kernel. Row i is at src + i * src_stride and dst + i *
  // dst_stride (elements for FP32/BF16 vectors, bytes for stored rows). One
  // call keeps the row kernel's setup and constants out of the per-row cost.
  uint64_t (*mxfp8_encode_f32_rows)(const float* src, size_t src_stride, uint32_t dim, size_t n,
                                    bool ceil, uint8_t* dst, size_t dst_stride);
  uint64_t (*mxfp8_encode_bf16_rows)(const uint16_t* src, size_t src_stride, uint32_t dim, size_t n,
                                     bool ceil, uint8_t* dst, size_t dst_stride);
  uint64_t (*mxfp8_decode_f32_rows)(const uint8_t* src, size_t src_stride, uint32_t dim, size_t n,
                                    float* dst, size_t dst_stride);
  uint64_t (*mxfp8_decode_bf16_rows)(const uint8_t* src, size_t src_stride, uint32_t dim, size_t n,
                                     uint16_t* dst, size_t dst_stride);
  // Optional (nullptr: the scalar DsMlaDecodeF32/DsMlaDecodeBf16 below):
  // decode of one fp8_ds_mla record, the same values and count as those.
  uint32_t (*ds_mla_decode_f32)(const uint8_t* src, float* dst);
  uint32_t (*ds_mla_decode_bf16)(const uint8_t* src, uint16_t* dst);
  // Optional (nullptr: DsMlaEncodeF32/DsMlaEncodeBf16): encode of one
  // fp8_ds_mla record, the same bytes and count as those.
  uint32_t (*ds_mla_encode_f32)(const float* src, uint8_t* dst);
  uint32_t (*ds_mla_encode_bf16)(const uint16_t* src, uint8_t* dst);
};

const RowKernels& ScalarKernels();
// nullptr when the CPU lacks AVX2+FMA+F16C (or the build is not x86-64).
const RowKernels* Avx2Kernels();
// nullptr when the CPU lacks AVX-512 F/BW/VL/VBMI or the AVX2 set (its
// decode to FP32 and plain-format entries are the AVX2 kernels).
const RowKernels* Avx512Kernels();
// What EncodeRows/DecodeRows use: the best set available (avx512, avx2,
// scalar). The environment variable SWACACHE_CODEC, read at first use,
// forces one: "scalar", "avx2" or "avx512" (a forced set the CPU lacks falls
// back to the next one down; other values are ignored).
const RowKernels& ActiveKernels();
// The choice ActiveKernels makes for a given SWACACHE_CODEC value (nullptr =
// unset), exposed for tests.
const RowKernels& SelectKernels(const char* env);

// Out-of-line scalar encode of one block (32 FP32 bit patterns) and decode
// of one block (32 codes under one scale), for the SIMD paths' rare blocks
// (NaN/Inf, NaN codes, huge scales). Return 1 for a non-finite block.
uint32_t EncodeBlockScalar(const uint32_t* fp32_bits, bool ceil, uint8_t* codes, uint8_t* scale);
uint32_t DecodeBlockScalarF32(const uint8_t* codes, uint8_t scale, float* dst);
uint32_t DecodeBlockScalarBf16(const uint8_t* codes, uint8_t scale, uint16_t* dst);

// fp8_ds_mla (dim 512 only; common/ds_mla_math.h): one vector. Encode counts
// NoPE groups holding a NaN/Inf and 32-dim RoPE halves holding one; decode
// counts groups with scale 0xFF and non-finite RoPE halves. These are the
// reference and the scalar set's kernels; the AVX2 set (and the AVX-512 set,
// which takes them from it) has its own (RowKernels::ds_mla_*), the same
// bytes, values and counts.
uint32_t DsMlaEncodeF32(const float* src, uint8_t* dst);
uint32_t DsMlaEncodeBf16(const uint16_t* src, uint8_t* dst);
uint32_t DsMlaDecodeF32(const uint8_t* src, float* dst);
uint32_t DsMlaDecodeBf16(const uint8_t* src, uint16_t* dst);

// Same as EncodeRows/DecodeRows with an explicit kernel set.
uint64_t EncodeRowsWith(const RowKernels& k, Format format, ScaleMode mode, uint32_t dim,
                        size_t n, const ConstVectors& src, const DstRows& dst);
uint64_t DecodeRowsWith(const RowKernels& k, Format format, uint32_t dim, size_t n,
                        const SrcRows& src, const MutableVectors& dst);

}  // namespace swa::codec
