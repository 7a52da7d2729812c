// swa_codec_* / swa_mxfp8_* through the shared library: argument checks (a
// failed call writes nothing), golden bytes computed by hand, and round trips.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "swacache.h"

namespace {

constexpr uint8_t kPoison = 0xA5;

TEST(CodecApi, VectorBytes) {
  uint32_t out = 0;
  ASSERT_EQ(swa_format_vector_bytes(SWA_FORMAT_MXFP8, 512, &out), SWA_OK);
  EXPECT_EQ(out, 528u);
  ASSERT_EQ(swa_format_vector_bytes(SWA_FORMAT_BF16, 64, &out), SWA_OK);
  EXPECT_EQ(out, 128u);
  ASSERT_EQ(swa_format_vector_bytes(SWA_FORMAT_FP32, 32, &out), SWA_OK);
  EXPECT_EQ(out, 128u);
  out = 7;
  EXPECT_EQ(swa_format_vector_bytes(SWA_FORMAT_MXFP8, 48, &out), SWA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(swa_last_error()).find("dim = 48"), std::string::npos);
  EXPECT_EQ(swa_format_vector_bytes(static_cast<swa_format_t>(9), 32, &out), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_format_vector_bytes(SWA_FORMAT_MXFP8, 32, nullptr), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(out, 7u);
}

TEST(CodecApi, GoldenMxfp8Block) {
  // Block 0: 1.0 -> scale 2^-8 (byte 119), code 0x78 (256); -0.0 -> 0x80;
  // 2^-9 -> 0.5 -> 0x30; 3 * 2^-17 -> 3 * 2^-9 -> subnormal code 0x03.
  // Block 1: NaN somewhere -> scale 0xFF, codes 0x7F.
  float x[64] = {};
  x[0] = 1.0f;
  x[1] = -0.0f;
  x[2] = std::ldexp(1.0f, -9);
  x[3] = std::ldexp(3.0f, -17);
  for (int i = 32; i < 64; ++i) x[i] = 2.0f;
  x[40] = NAN;
  uint8_t out[66];
  std::memset(out, kPoison, sizeof out);
  uint64_t bad = 99;
  ASSERT_EQ(swa_mxfp8_encode(x, SWA_DTYPE_FP32, 1, 64, SWA_SCALE_CEIL, out, &bad), SWA_OK);
  EXPECT_EQ(out[0], 0x78);
  EXPECT_EQ(out[1], 0x80);
  EXPECT_EQ(out[2], 0x30);
  EXPECT_EQ(out[3], 0x03);
  for (int i = 4; i < 32; ++i) EXPECT_EQ(out[i], 0x00) << i;
  for (int i = 32; i < 64; ++i) EXPECT_EQ(out[i], 0x7F) << i;
  EXPECT_EQ(out[64], 119);
  EXPECT_EQ(out[65], 0xFF);
  EXPECT_EQ(bad, 1u);

  float back[64];
  std::memset(back, kPoison, sizeof back);
  bad = 99;
  ASSERT_EQ(swa_mxfp8_decode(out, 1, 64, back, SWA_DTYPE_FP32, &bad), SWA_OK);
  EXPECT_EQ(bad, 1u);
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_TRUE(std::signbit(back[1]) && back[1] == 0.0f);
  EXPECT_EQ(back[2], x[2]);
  EXPECT_EQ(back[3], x[3]);
  for (int i = 32; i < 64; ++i) EXPECT_TRUE(std::isnan(back[i])) << i;
}

TEST(CodecApi, ScaleByteZeroDecodesSubnormals) {
  // Scale byte 0 = 2^-127; code 0x01 = 2^-9 -> 2^-136, an FP32 subnormal.
  uint8_t row[33] = {};
  row[0] = 0x01;
  row[1] = 0x7E;  // 448 * 2^-127
  row[32] = 0;
  float out[32];
  ASSERT_EQ(swa_mxfp8_decode(row, 1, 32, out, SWA_DTYPE_FP32, nullptr), SWA_OK);
  EXPECT_EQ(out[0], std::ldexp(1.0f, -136));
  EXPECT_EQ(out[1], std::ldexp(448.0f, -127));
}

TEST(CodecApi, RoundTripAllFormatsBothDtypes) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  const uint32_t dim = 256;
  const size_t n = 33;
  std::vector<float> x(n * dim);
  for (auto& v : x) v = normal(rng);
  for (swa_format_t f : {SWA_FORMAT_MXFP8, SWA_FORMAT_BF16, SWA_FORMAT_FP32}) {
    uint32_t vb = 0;
    ASSERT_EQ(swa_format_vector_bytes(f, dim, &vb), SWA_OK);
    std::vector<uint8_t> stored(n * vb, kPoison);
    ASSERT_EQ(swa_codec_encode(f, SWA_SCALE_FLOOR, x.data(), SWA_DTYPE_FP32, n, dim, stored.data(),
                               nullptr),
              SWA_OK);
    std::vector<float> y(n * dim);
    ASSERT_EQ(swa_codec_decode(f, stored.data(), n, dim, y.data(), SWA_DTYPE_FP32, nullptr), SWA_OK);
    const double tol = f == SWA_FORMAT_MXFP8 ? 0.07 : f == SWA_FORMAT_BF16 ? 0.004 : 0.0;
    double err = 0, ref = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      err += (y[i] - x[i]) * (y[i] - x[i]);
      ref += x[i] * x[i];
    }
    EXPECT_LE(std::sqrt(err / ref), tol) << "format " << f;
    // BF16 out of the same rows.
    std::vector<uint16_t> h(n * dim);
    ASSERT_EQ(swa_codec_decode(f, stored.data(), n, dim, h.data(), SWA_DTYPE_BF16, nullptr), SWA_OK);
    for (size_t i = 0; i < x.size(); i += 17) {
      uint32_t u;
      std::memcpy(&u, &y[i], 4);
      EXPECT_LE(std::fabs(static_cast<int>(h[i]) - static_cast<int>(u >> 16)), 1) << i;
    }
  }
}

// Every bad argument: INVALID_ARGUMENT, a message naming it, nothing written.
TEST(CodecApi, RejectsBadArgumentsAndWritesNothing) {
  std::vector<float> x(4 * 64, 1.5f);
  std::vector<uint8_t> dst(4 * 66 + 8, kPoison);
  uint64_t bad = 1234;
  auto expect_fail = [&](swa_status_t st, const char* needle) {
    EXPECT_EQ(st, SWA_INVALID_ARGUMENT) << needle;
    EXPECT_NE(std::string(swa_last_error()).find(needle), std::string::npos)
        << "message: " << swa_last_error() << " (wanted " << needle << ")";
    for (uint8_t b : dst) ASSERT_EQ(b, kPoison);
    EXPECT_EQ(bad, 1234u);
  };
  expect_fail(swa_mxfp8_encode(x.data(), SWA_DTYPE_FP32, 4, 40, SWA_SCALE_CEIL, dst.data(), &bad), "dim = 40");
  expect_fail(swa_mxfp8_encode(x.data(), SWA_DTYPE_FP32, 4, 0, SWA_SCALE_CEIL, dst.data(), &bad), "dim = 0");
  expect_fail(swa_mxfp8_encode(x.data(), SWA_DTYPE_FP32, 4, 32768, SWA_SCALE_CEIL, dst.data(), &bad),
              "dim = 32768");
  expect_fail(swa_mxfp8_encode(x.data(), static_cast<swa_dtype_t>(5), 4, 64, SWA_SCALE_CEIL, dst.data(), &bad),
              "src_dtype = 5");
  expect_fail(swa_mxfp8_encode(x.data(), SWA_DTYPE_FP32, 4, 64, static_cast<swa_scale_mode_t>(2), dst.data(), &bad),
              "mode = 2");
  expect_fail(swa_mxfp8_encode(nullptr, SWA_DTYPE_FP32, 4, 64, SWA_SCALE_CEIL, dst.data(), &bad), "src");
  expect_fail(swa_mxfp8_encode(x.data(), SWA_DTYPE_FP32, 4, 64, SWA_SCALE_CEIL, nullptr, &bad), "dst");
  expect_fail(swa_mxfp8_encode(reinterpret_cast<uint8_t*>(x.data()) + 1, SWA_DTYPE_FP32, 1, 32,
                               SWA_SCALE_CEIL, dst.data(), &bad),
              "not aligned");
  expect_fail(swa_mxfp8_encode(x.data(), SWA_DTYPE_FP32, SIZE_MAX / 8, 64, SWA_SCALE_CEIL, dst.data(), &bad),
              "overflows");
  expect_fail(swa_codec_encode(static_cast<swa_format_t>(4), SWA_SCALE_CEIL, x.data(), SWA_DTYPE_FP32, 4,
                               64, dst.data(), &bad),
              "format = 4");
  // FP32 storage must be 4-aligned.
  expect_fail(swa_codec_encode(SWA_FORMAT_FP32, SWA_SCALE_CEIL, x.data(), SWA_DTYPE_FP32, 1, 32,
                               dst.data() + 2, &bad),
              "not aligned");
  // Overlap: encode in place.
  std::vector<float> inplace(64, 1.0f);
  const std::vector<float> before = inplace;
  EXPECT_EQ(swa_mxfp8_encode(inplace.data(), SWA_DTYPE_FP32, 1, 64, SWA_SCALE_CEIL,
                             reinterpret_cast<uint8_t*>(inplace.data()) + 4, &bad),
            SWA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(swa_last_error()).find("overlap"), std::string::npos);
  EXPECT_EQ(inplace, before);
  // Decode side.
  std::vector<float> y(64, 3.0f);
  EXPECT_EQ(swa_mxfp8_decode(dst.data(), 1, 64, y.data(), static_cast<swa_dtype_t>(7), &bad),
            SWA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(swa_last_error()).find("dst_dtype = 7"), std::string::npos);
  EXPECT_EQ(swa_mxfp8_decode(dst.data(), 1, 64, nullptr, SWA_DTYPE_FP32, &bad), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_codec_decode(SWA_FORMAT_MXFP8, dst.data(), 1, 64,
                             reinterpret_cast<uint8_t*>(y.data()) + 1, SWA_DTYPE_BF16, &bad),
            SWA_INVALID_ARGUMENT);
  for (float v : y) EXPECT_EQ(v, 3.0f);
  EXPECT_EQ(bad, 1234u);
}

TEST(CodecApi, ZeroVectorsIsANoOp) {
  uint64_t bad = 5;
  EXPECT_EQ(swa_mxfp8_encode(nullptr, SWA_DTYPE_BF16, 0, 512, SWA_SCALE_CEIL, nullptr, &bad), SWA_OK);
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(swa_mxfp8_decode(nullptr, 0, 512, nullptr, SWA_DTYPE_FP32, nullptr), SWA_OK);
  // Still validated.
  EXPECT_EQ(swa_mxfp8_decode(nullptr, 0, 500, nullptr, SWA_DTYPE_FP32, nullptr), SWA_INVALID_ARGUMENT);
}

TEST(CodecApi, CpuPathIsNamed) {
  const std::string path = swa_codec_cpu_path();
  EXPECT_TRUE(path == "avx512" || path == "avx2" || path == "scalar") << path;
}

}  // namespace
