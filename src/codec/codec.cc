// Batch loops over the per-row kernels, and the run-time kernel choice.
#include "codec/codec.h"

#include <cstdlib>
#include <cstring>
#include <string>

namespace swa::codec {

const RowKernels& SelectKernels(const char* env) {
  const std::string want = env != nullptr ? env : "";
  if (want == "scalar") return ScalarKernels();
  if (want != "avx2") {
    if (const RowKernels* avx512 = Avx512Kernels()) return *avx512;
  }
  const RowKernels* avx2 = Avx2Kernels();
  return avx2 != nullptr ? *avx2 : ScalarKernels();
}

const RowKernels& ActiveKernels() {
  static const RowKernels& active = SelectKernels(std::getenv("SWACACHE_CODEC"));
  return active;
}

uint64_t EncodeRowsWith(const RowKernels& k, Format format, ScaleMode mode, uint32_t dim,
                        size_t n, const ConstVectors& src, const DstRows& dst) {
  uint64_t bad = 0;
  const bool ceil = mode == ScaleMode::kCeil;
  const bool bf16_in = src.dtype == Dtype::kBf16;
  if (format == Format::kFp8DsMla) {
    const auto f32 = k.ds_mla_encode_f32 != nullptr ? k.ds_mla_encode_f32 : DsMlaEncodeF32;
    const auto bf16 = k.ds_mla_encode_bf16 != nullptr ? k.ds_mla_encode_bf16 : DsMlaEncodeBf16;
    for (size_t i = 0; i < n; ++i)
      bad += bf16_in ? bf16(static_cast<const uint16_t*>(src.data) + i * src.stride, dst.Row(i))
                     : f32(static_cast<const float*>(src.data) + i * src.stride, dst.Row(i));
    return bad;
  }
  if (format == Format::kMxfp8) {
    if (bf16_in && k.mxfp8_encode_bf16_rows != nullptr)
      return k.mxfp8_encode_bf16_rows(static_cast<const uint16_t*>(src.data), src.stride, dim, n, ceil,
                                      dst.base, dst.stride);
    if (!bf16_in && k.mxfp8_encode_f32_rows != nullptr)
      return k.mxfp8_encode_f32_rows(static_cast<const float*>(src.data), src.stride, dim, n, ceil,
                                     dst.base, dst.stride);
  }
  for (size_t i = 0; i < n; ++i) {
    uint8_t* out = dst.Row(i);
    if (bf16_in) {
      const uint16_t* in = static_cast<const uint16_t*>(src.data) + i * src.stride;
      switch (format) {
        case Format::kMxfp8: bad += k.mxfp8_encode_bf16(in, dim, ceil, out); break;
        case Format::kBf16: bad += k.bf16_to_bf16(in, dim, reinterpret_cast<uint16_t*>(out)); break;
        case Format::kFp32: bad += k.bf16_to_f32(in, dim, reinterpret_cast<float*>(out)); break;
        case Format::kFp8DsMla: break;  // handled above
      }
    } else {
      const float* in = static_cast<const float*>(src.data) + i * src.stride;
      switch (format) {
        case Format::kMxfp8: bad += k.mxfp8_encode_f32(in, dim, ceil, out); break;
        case Format::kBf16: bad += k.f32_to_bf16(in, dim, reinterpret_cast<uint16_t*>(out)); break;
        case Format::kFp32: bad += k.f32_to_f32(in, dim, reinterpret_cast<float*>(out)); break;
        case Format::kFp8DsMla: break;  // handled above
      }
    }
  }
  return bad;
}

uint64_t DecodeRowsWith(const RowKernels& k, Format format, uint32_t dim, size_t n,
                        const SrcRows& src, const MutableVectors& dst) {
  uint64_t bad = 0;
  const bool bf16_out = dst.dtype == Dtype::kBf16;
  if (format == Format::kFp8DsMla) {
    const auto f32 = k.ds_mla_decode_f32 != nullptr ? k.ds_mla_decode_f32 : DsMlaDecodeF32;
    const auto bf16 = k.ds_mla_decode_bf16 != nullptr ? k.ds_mla_decode_bf16 : DsMlaDecodeBf16;
    for (size_t i = 0; i < n; ++i)
      bad += bf16_out ? bf16(src.Row(i), static_cast<uint16_t*>(dst.data) + i * dst.stride)
                      : f32(src.Row(i), static_cast<float*>(dst.data) + i * dst.stride);
    return bad;
  }
  if (format == Format::kMxfp8) {
    if (bf16_out && k.mxfp8_decode_bf16_rows != nullptr)
      return k.mxfp8_decode_bf16_rows(src.base, src.stride, dim, n, static_cast<uint16_t*>(dst.data),
                                      dst.stride);
    if (!bf16_out && k.mxfp8_decode_f32_rows != nullptr)
      return k.mxfp8_decode_f32_rows(src.base, src.stride, dim, n, static_cast<float*>(dst.data),
                                     dst.stride);
  }
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* in = src.Row(i);
    if (bf16_out) {
      uint16_t* out = static_cast<uint16_t*>(dst.data) + i * dst.stride;
      switch (format) {
        case Format::kMxfp8: bad += k.mxfp8_decode_bf16(in, dim, out); break;
        case Format::kBf16:
          bad += k.bf16_to_bf16(reinterpret_cast<const uint16_t*>(in), dim, out);
          break;
        case Format::kFp32:
          bad += k.f32_to_bf16(reinterpret_cast<const float*>(in), dim, out);
          break;
        case Format::kFp8DsMla: break;  // handled above
      }
    } else {
      float* out = static_cast<float*>(dst.data) + i * dst.stride;
      switch (format) {
        case Format::kMxfp8: bad += k.mxfp8_decode_f32(in, dim, out); break;
        case Format::kBf16:
          bad += k.bf16_to_f32(reinterpret_cast<const uint16_t*>(in), dim, out);
          break;
        case Format::kFp32:
          bad += k.f32_to_f32(reinterpret_cast<const float*>(in), dim, out);
          break;
        case Format::kFp8DsMla: break;  // handled above
      }
    }
  }
  return bad;
}

uint64_t EncodeRows(Format format, ScaleMode mode, uint32_t dim, size_t n,
                    const ConstVectors& src, const DstRows& dst) {
  return EncodeRowsWith(ActiveKernels(), format, mode, dim, n, src, dst);
}

uint64_t DecodeRows(Format format, uint32_t dim, size_t n, const SrcRows& src,
                    const MutableVectors& dst) {
  return DecodeRowsWith(ActiveKernels(), format, dim, n, src, dst);
}

}  // namespace swa::codec
