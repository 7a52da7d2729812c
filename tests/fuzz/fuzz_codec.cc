// Fuzz harness (4): the codec. Every SIMD kernel set this CPU has (AVX2,
// AVX-512) and the public swa_codec_encode/decode against the scalar
// kernels, which are the reference: identical bytes for every format, scale
// mode and dtype, on arbitrary bit patterns (NaN, Inf, subnormals included),
// and identical non-finite block counts (fp8_ds_mla's record kernels too).
// Odd sizes and bad enum values given
// to the C API must fail with INVALID_ARGUMENT and write nothing.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "codec/codec.h"
#include "fuzz/fuzz_input.h"
#include "swacache.h"

namespace {

using swa::codec::RowKernels;
using swa_fuzz::Check;
using swa_fuzz::Input;

void CompareKernels(const RowKernels& ref, const RowKernels& k, const std::vector<float>& f32,
                    const std::vector<uint16_t>& bf16, const std::vector<uint8_t>& mx,
                    uint32_t dim) {
  const uint32_t mx_bytes = dim + dim / 32;
  for (int ceil = 0; ceil < 2; ++ceil) {
    std::vector<uint8_t> a(mx_bytes, 0xEE), b(mx_bytes, 0xEE);
    Check(ref.mxfp8_encode_f32(f32.data(), dim, ceil, a.data()) ==
              k.mxfp8_encode_f32(f32.data(), dim, ceil, b.data()), "mxfp8 f32 count");
    Check(a == b, "mxfp8 encode f32 bytes");
    Check(ref.mxfp8_encode_bf16(bf16.data(), dim, ceil, a.data()) ==
              k.mxfp8_encode_bf16(bf16.data(), dim, ceil, b.data()), "mxfp8 bf16 count");
    Check(a == b, "mxfp8 encode bf16 bytes");
  }
  std::vector<float> fa(dim), fb(dim);
  std::vector<uint16_t> ha(dim), hb(dim);
  Check(ref.mxfp8_decode_f32(mx.data(), dim, fa.data()) == k.mxfp8_decode_f32(mx.data(), dim, fb.data()),
        "mxfp8 decode f32 count");
  Check(std::memcmp(fa.data(), fb.data(), 4 * dim) == 0, "mxfp8 decode f32 bytes");
  Check(ref.mxfp8_decode_bf16(mx.data(), dim, ha.data()) == k.mxfp8_decode_bf16(mx.data(), dim, hb.data()),
        "mxfp8 decode bf16 count");
  Check(ha == hb, "mxfp8 decode bf16 bytes");
  Check(ref.f32_to_bf16(f32.data(), dim, ha.data()) == k.f32_to_bf16(f32.data(), dim, hb.data()),
        "f32->bf16 count");
  Check(ha == hb, "f32->bf16 bytes");
  Check(ref.bf16_to_f32(bf16.data(), dim, fa.data()) == k.bf16_to_f32(bf16.data(), dim, fb.data()),
        "bf16->f32 count");
  Check(std::memcmp(fa.data(), fb.data(), 4 * dim) == 0, "bf16->f32 bytes");
  Check(ref.f32_to_f32(f32.data(), dim, fa.data()) == k.f32_to_f32(f32.data(), dim, fb.data()),
        "f32 copy count");
  Check(std::memcmp(fa.data(), fb.data(), 4 * dim) == 0, "f32 copy bytes");
  Check(ref.bf16_to_bf16(bf16.data(), dim, ha.data()) == k.bf16_to_bf16(bf16.data(), dim, hb.data()),
        "bf16 copy count");
  Check(ha == hb, "bf16 copy bytes");
}

// The public calls against the scalar kernels, vector by vector.
void CompareApi(const RowKernels& ref, const std::vector<float>& f32, const std::vector<uint8_t>& mx,
                uint32_t dim, uint32_t n, bool ceil) {
  const uint32_t mx_bytes = dim + dim / 32;
  std::vector<uint8_t> got(size_t{n} * mx_bytes, 0xEE), want(got.size());
  uint64_t blocks = 99, want_blocks = 0;
  const swa_scale_mode_t mode = ceil ? SWA_SCALE_CEIL : SWA_SCALE_FLOOR;
  Check(swa_codec_encode(SWA_FORMAT_MXFP8, mode, f32.data(), SWA_DTYPE_FP32, n, dim, got.data(),
                         &blocks) == SWA_OK, "api encode");
  for (uint32_t i = 0; i < n; ++i)
    want_blocks += ref.mxfp8_encode_f32(f32.data() + size_t{i} * dim, dim, ceil, want.data() + size_t{i} * mx_bytes);
  Check(got == want && blocks == want_blocks, "api encode vs scalar");
  std::vector<float> dec(size_t{n} * dim), want_dec(dec.size());
  Check(swa_codec_decode(SWA_FORMAT_MXFP8, mx.data(), n, dim, dec.data(), SWA_DTYPE_FP32, &blocks) ==
            SWA_OK, "api decode");
  want_blocks = 0;
  for (uint32_t i = 0; i < n; ++i)
    want_blocks += ref.mxfp8_decode_f32(mx.data() + size_t{i} * mx_bytes, dim, want_dec.data() + size_t{i} * dim);
  Check(std::memcmp(dec.data(), want_dec.data(), 4 * dec.size()) == 0 && blocks == want_blocks,
        "api decode vs scalar");
}

// fp8_ds_mla (512 dims): each SIMD set's record kernels (RowKernels::ds_mla_*,
// when it has them) against the scalar reference: bytes, values and counts,
// encode from FP32 and BF16 (raw bit patterns or scaled small values with
// NaN/Inf; a group's values share a random exponent, so the 2^-13 floor and
// scales above 245 are reached) and decode of arbitrary bytes.
void CompareDsMla(Input& in) {
  constexpr uint32_t kDim = swa::kDsMlaDim, kBytes = swa::kDsMlaBytes;
  std::vector<float> f32(kDim);
  std::vector<uint16_t> bf16(kDim);
  std::vector<uint8_t> rec(kBytes);
  const uint8_t style = in.Byte();
  for (uint32_t g = 0; g < kDim / 64; ++g) {
    const int e = in.Byte() % 300 - 150;
    for (uint32_t j = 0; j < 64; ++j) {
      float v = in.Float();
      if (style & 1) v = static_cast<float>(static_cast<int8_t>(in.Byte())) * std::ldexp(1.0f, e);
      f32[g * 64 + j] = v;
      bf16[g * 64 + j] = in.U16();
    }
  }
  for (uint8_t& b : rec) b = in.Byte();
  for (const RowKernels* k : {swa::codec::Avx2Kernels(), swa::codec::Avx512Kernels()}) {
    if (k == nullptr) continue;
    std::vector<uint8_t> a(kBytes, 0xEE), b(kBytes, 0xEE);
    if (k->ds_mla_encode_f32 != nullptr) {
      Check(swa::codec::DsMlaEncodeF32(f32.data(), a.data()) ==
                k->ds_mla_encode_f32(f32.data(), b.data()), "ds_mla encode f32 count");
      Check(a == b, "ds_mla encode f32 bytes");
    }
    if (k->ds_mla_encode_bf16 != nullptr) {
      Check(swa::codec::DsMlaEncodeBf16(bf16.data(), a.data()) ==
                k->ds_mla_encode_bf16(bf16.data(), b.data()), "ds_mla encode bf16 count");
      Check(a == b, "ds_mla encode bf16 bytes");
    }
    std::vector<float> fa(kDim), fb(kDim);
    std::vector<uint16_t> ha(kDim), hb(kDim);
    if (k->ds_mla_decode_f32 != nullptr) {
      Check(swa::codec::DsMlaDecodeF32(rec.data(), fa.data()) ==
                k->ds_mla_decode_f32(rec.data(), fb.data()), "ds_mla decode f32 count");
      Check(std::memcmp(fa.data(), fb.data(), 4 * kDim) == 0, "ds_mla decode f32 bytes");
    }
    if (k->ds_mla_decode_bf16 != nullptr) {
      Check(swa::codec::DsMlaDecodeBf16(rec.data(), ha.data()) ==
                k->ds_mla_decode_bf16(rec.data(), hb.data()), "ds_mla decode bf16 count");
      Check(ha == hb, "ds_mla decode bf16 bytes");
    }
  }
}

// Arguments the C API must refuse, with nothing written.
void OddArguments(Input& in) {
  const uint32_t dim = in.U16() % 20000;
  int format = static_cast<int>(in.Byte() % 5) - 1;
  if (format == 3) format = 4;  // FP8_DS_MLA (3) is valid at dim 512: test 4, not a format
  const int dtype = static_cast<int>(in.Byte() % 4) - 1;
  const int mode = static_cast<int>(in.Byte() % 4) - 1;
  const size_t n = in.Byte() % 3;
  const bool valid = dim > 0 && dim % 32 == 0 && dim <= 16384 && format >= 0 && format <= 2 &&
                     dtype >= 0 && dtype <= 1 && mode >= 0 && mode <= 1;
  if (valid || n == 0) return;  // valid calls are covered above; n = 0 is a no-op
  std::vector<uint8_t> src(64, 0x3C), dst(64, 0xEE);
  uint64_t blocks = 77;
  const swa_status_t s = swa_codec_encode(static_cast<swa_format_t>(format),
                                          static_cast<swa_scale_mode_t>(mode), src.data(),
                                          static_cast<swa_dtype_t>(dtype), n, dim, dst.data(), &blocks);
  Check(s == SWA_INVALID_ARGUMENT && swa_last_error()[0] != '\0', "odd encode refused");
  Check(blocks == 77 && dst == std::vector<uint8_t>(64, 0xEE), "odd encode wrote");
  // Decoding takes no scale mode: it is refused only for the other fields.
  if (dim > 0 && dim % 32 == 0 && dim <= 16384 && format >= 0 && format <= 2 && dtype >= 0 &&
      dtype <= 1)
    return;
  const swa_status_t d = swa_codec_decode(static_cast<swa_format_t>(format), src.data(), n, dim,
                                          dst.data(), static_cast<swa_dtype_t>(dtype), &blocks);
  Check(d == SWA_INVALID_ARGUMENT && swa_last_error()[0] != '\0', "odd decode refused");
  Check(blocks == 77 && dst == std::vector<uint8_t>(64, 0xEE), "odd decode wrote");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  const uint32_t dim = 32 * (1 + in.Byte() % 8);
  const uint32_t n = 1 + in.Byte() % 3;
  const bool ceil = in.Bool();
  std::vector<float> f32(size_t{n} * dim);
  std::vector<uint16_t> bf16(f32.size());
  std::vector<uint8_t> mx(size_t{n} * (dim + dim / 32));
  // Raw bits, or scaled small values with NaN/Inf sprinkled in.
  const uint8_t style = in.Byte();
  for (size_t i = 0; i < f32.size(); ++i) {
    float v = in.Float();
    if (style & 1) v = static_cast<float>(static_cast<int8_t>(in.Byte())) * std::ldexp(1.0f, in.Byte() % 40 - 20);
    f32[i] = v;
    bf16[i] = in.U16();
  }
  for (uint8_t& b : mx) b = in.Byte();
  const RowKernels& ref = swa::codec::ScalarKernels();
  for (const RowKernels* k : {swa::codec::Avx2Kernels(), swa::codec::Avx512Kernels()})
    if (k != nullptr)
      for (uint32_t i = 0; i < n; ++i)
        CompareKernels(ref, *k, std::vector<float>(f32.begin() + i * dim, f32.begin() + (i + 1) * dim),
                       std::vector<uint16_t>(bf16.begin() + i * dim, bf16.begin() + (i + 1) * dim),
                       std::vector<uint8_t>(mx.begin() + i * (dim + dim / 32), mx.begin() + (i + 1) * (dim + dim / 32)),
                       dim);
  CompareApi(ref, f32, mx, dim, n, ceil);
  CompareDsMla(in);
  OddArguments(in);
  return 0;
}
