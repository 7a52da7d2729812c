// The Codec section: swa_codec_*, swa_mxfp8_*, swa_format_vector_bytes:
// argument checks, then the row codec of src/codec/.
#include <cstdint>

#include "capi/enums.h"
#include "capi/error.h"
#include "codec/codec.h"
#include "common/byte_overlap.h"
#include "common/checked_math.h"
#include "common/status_macros.h"
#include "layout/model_spec.h"

namespace {

using swa::Format;
using swa::Dtype;

absl::Status CheckDim(uint32_t dim, Format format) {
  if (dim == 0 || dim % swa::kMxfp8Block != 0 || dim > swa::kMaxHeadDim)
    return absl::InvalidArgumentError(absl::StrFormat(
        "dim = %u must be a positive multiple of 32 and at most %u", dim, swa::kMaxHeadDim));
  if (format == Format::kFp8DsMla && dim != swa::kDsMlaDim)
    return absl::InvalidArgumentError(absl::StrFormat(
        "dim = %u: SWA_FORMAT_FP8_DS_MLA holds %u-dim vectors only (448 NoPE + 64 RoPE dims)",
        dim, swa::kDsMlaDim));
  return absl::OkStatus();
}

size_t ElemBytes(Dtype dtype) { return dtype == Dtype::kBf16 ? 2 : 4; }
size_t FormatAlign(Format format) {
  return format == Format::kFp32 ? 4 : format == Format::kBf16 ? 2 : 1;
}

// One buffer of a call: where it is, how long, how aligned it must be.
struct Buffer {
  const char* name;
  uintptr_t addr;
  uint64_t bytes;
  size_t align;
};

// Bytes of a buffer of n vectors; at most PTRDIFF_MAX, so that every offset
// into it is a valid pointer difference.
absl::StatusOr<uint64_t> TotalBytes(size_t n, uint64_t per_vector, const char* name) {
  return swa::CheckedProduct(name, {{"n_vectors", n}, {"bytes per vector", per_vector}},
                             static_cast<uint64_t>(PTRDIFF_MAX));
}

absl::Status CheckBuffers(const Buffer& a, const Buffer& b) {
  for (const Buffer* buf : {&a, &b}) {
    if (buf->addr == 0) return swa::capi::NullArg(buf->name);
    if (buf->addr % buf->align != 0)
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s = %p is not aligned to %u bytes", buf->name, reinterpret_cast<void*>(buf->addr),
          buf->align));
    SWA_RETURN_IF_ERROR(swa::CheckedSum(buf->name, {{"address", buf->addr}, {"bytes", buf->bytes}},
                                        UINTPTR_MAX)
                            .status());  // the buffer would wrap the address space
  }
  return swa::CheckApart({b.name, b.addr, b.bytes}, {a.name, a.addr, a.bytes});
}

// Enum arguments by reference: copying one by value loads it as the enum type,
// undefined for an out-of-range int; enums.h reads the raw int instead.
absl::Status Encode(const swa_format_t& format, const swa_scale_mode_t& mode, const void* src,
                    const swa_dtype_t& src_dtype, size_t n, uint32_t dim, void* dst,
                    uint64_t* nonfinite_blocks) {
  SWA_ASSIGN_OR_RETURN(const Format fmt, swa::capi::ConvertFormat(format, "format"));
  SWA_ASSIGN_OR_RETURN(const swa::ScaleMode scale_mode, swa::capi::ConvertScaleMode(mode, "mode"));
  SWA_ASSIGN_OR_RETURN(const Dtype dtype, swa::capi::ConvertDtype(src_dtype, "src_dtype"));
  SWA_RETURN_IF_ERROR(CheckDim(dim, fmt));
  SWA_ASSIGN_OR_RETURN(const uint64_t src_bytes, TotalBytes(n, dim * ElemBytes(dtype), "src"));
  SWA_ASSIGN_OR_RETURN(const uint64_t dst_bytes,
                       TotalBytes(n, swa::VectorBytes(fmt, dim), "dst"));
  if (n != 0) {
    SWA_RETURN_IF_ERROR(
        CheckBuffers({"src", reinterpret_cast<uintptr_t>(src), src_bytes, ElemBytes(dtype)},
                     {"dst", reinterpret_cast<uintptr_t>(dst), dst_bytes, FormatAlign(fmt)}));
  }
  uint64_t bad = 0;
  if (n != 0) {
    swa::codec::DstRows rows;
    rows.base = static_cast<uint8_t*>(dst);
    rows.stride = swa::VectorBytes(fmt, dim);
    bad = swa::codec::EncodeRows(fmt, scale_mode, dim, n,
                                 {src, dtype, dim}, rows);
  }
  if (nonfinite_blocks != nullptr) *nonfinite_blocks = bad;
  return absl::OkStatus();
}

absl::Status Decode(const swa_format_t& format, const void* src, size_t n, uint32_t dim, void* dst,
                    const swa_dtype_t& dst_dtype, uint64_t* nonfinite_blocks) {
  SWA_ASSIGN_OR_RETURN(const Format fmt, swa::capi::ConvertFormat(format, "format"));
  SWA_ASSIGN_OR_RETURN(const Dtype dtype, swa::capi::ConvertDtype(dst_dtype, "dst_dtype"));
  SWA_RETURN_IF_ERROR(CheckDim(dim, fmt));
  SWA_ASSIGN_OR_RETURN(const uint64_t src_bytes,
                       TotalBytes(n, swa::VectorBytes(fmt, dim), "src"));
  SWA_ASSIGN_OR_RETURN(const uint64_t dst_bytes, TotalBytes(n, dim * ElemBytes(dtype), "dst"));
  if (n != 0) {
    SWA_RETURN_IF_ERROR(
        CheckBuffers({"src", reinterpret_cast<uintptr_t>(src), src_bytes, FormatAlign(fmt)},
                     {"dst", reinterpret_cast<uintptr_t>(dst), dst_bytes, ElemBytes(dtype)}));
  }
  uint64_t bad = 0;
  if (n != 0) {
    swa::codec::SrcRows rows;
    rows.base = static_cast<const uint8_t*>(src);
    rows.stride = swa::VectorBytes(fmt, dim);
    bad = swa::codec::DecodeRows(fmt, dim, n, rows, {dst, dtype, dim});
  }
  if (nonfinite_blocks != nullptr) *nonfinite_blocks = bad;
  return absl::OkStatus();
}

}  // namespace

extern "C" {

SWA_API swa_status_t swa_format_vector_bytes(swa_format_t format, uint32_t dim, uint32_t* out) {
  return swa::capi::Guard([&]() -> absl::Status {
    SWA_ASSIGN_OR_RETURN(const Format fmt, swa::capi::ConvertFormat(format, "format"));
    SWA_RETURN_IF_ERROR(CheckDim(dim, fmt));
    SWA_CHECK_NOT_NULL(out);
    *out = swa::VectorBytes(fmt, dim);
    return absl::OkStatus();
  });
}

SWA_API swa_status_t swa_codec_encode(swa_format_t format, swa_scale_mode_t mode,
                                      const void* src, swa_dtype_t src_dtype, size_t n_vectors,
                                      uint32_t dim, void* dst, uint64_t* nonfinite_blocks) {
  return swa::capi::Guard([&] {
    return Encode(format, mode, src, src_dtype, n_vectors, dim, dst, nonfinite_blocks);
  });
}

SWA_API swa_status_t swa_codec_decode(swa_format_t format, const void* src, size_t n_vectors,
                                      uint32_t dim, void* dst, swa_dtype_t dst_dtype,
                                      uint64_t* nonfinite_blocks) {
  return swa::capi::Guard([&] {
    return Decode(format, src, n_vectors, dim, dst, dst_dtype, nonfinite_blocks);
  });
}

SWA_API swa_status_t swa_mxfp8_encode(const void* src, swa_dtype_t src_dtype, size_t n_vectors,
                                      uint32_t dim, swa_scale_mode_t mode, uint8_t* dst,
                                      uint64_t* nonfinite_blocks) {
  return swa::capi::Guard([&] {
    return Encode(SWA_FORMAT_MXFP8, mode, src, src_dtype, n_vectors, dim, dst, nonfinite_blocks);
  });
}

SWA_API swa_status_t swa_mxfp8_decode(const uint8_t* src, size_t n_vectors, uint32_t dim,
                                      void* dst, swa_dtype_t dst_dtype,
                                      uint64_t* nonfinite_blocks) {
  return swa::capi::Guard([&] {
    return Decode(SWA_FORMAT_MXFP8, src, n_vectors, dim, dst, dst_dtype, nonfinite_blocks);
  });
}

SWA_API const char* swa_codec_cpu_path(void) { return swa::codec::ActiveKernels().name; }

}  // extern "C"
