// Per-row kernels: the scalar reference against the independent oracle, and
// each SIMD set (AVX2, AVX-512) against the scalar one, byte for byte, on
// millions of blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "unit/codec_simd_sets.h"
#include "unit/codec_inputs.h"
#include "unit/mxfp8_oracle.h"
#include "test_random.h"

namespace swa::codec {
namespace {

constexpr uint8_t kPoison = 0xA5;

uint32_t CountBadBlocks(const float* x, uint32_t dim) {
  uint32_t bad = 0;
  for (uint32_t b = 0; b < dim / 32; ++b) {
    bool any = false;
    for (int i = 0; i < 32; ++i) any |= !std::isfinite(x[b * 32 + i]);
    bad += any;
  }
  return bad;
}

TEST(ScalarKernels, EncodeMatchesOracle) {
  const RowKernels& k = ScalarKernels();
  std::mt19937 rng(1);
  const uint32_t dim = 512;
  const size_t n = 600;
  const std::vector<float> x = test::RandomVectors(rng, n, dim);
  const std::vector<uint16_t> h = test::ToBf16Bits(x);
  std::vector<uint8_t> got(dim + dim / 32);
  for (bool ceil : {true, false}) {
    for (size_t v = 0; v < n; ++v) {
      const float* xv = &x[v * dim];
      std::memset(got.data(), kPoison, got.size());
      const uint32_t bad = k.mxfp8_encode_f32(xv, dim, ceil, got.data());
      ASSERT_EQ(got, test::EncodeVectorOracle(xv, dim, ceil)) << "vector " << v;
      ASSERT_EQ(bad, CountBadBlocks(xv, dim));
      // BF16 input: the oracle sees the widened values.
      std::vector<float> widened(dim);
      for (uint32_t i = 0; i < dim; ++i) widened[i] = test::FromBits(uint32_t{h[v * dim + i]} << 16);
      std::memset(got.data(), kPoison, got.size());
      k.mxfp8_encode_bf16(&h[v * dim], dim, ceil, got.data());
      ASSERT_EQ(got, test::EncodeVectorOracle(widened.data(), dim, ceil)) << "bf16 vector " << v;
    }
  }
}

TEST(ScalarKernels, EncodeGoldenBytes) {
  // 1.0 alone: ceil and floor both pick 2^-8 (byte 119); 1.0 * 2^8 = 256 = code 0x78.
  float x[32] = {};
  x[0] = 1.0f;
  x[1] = -0.0f;
  x[2] = 1.0f / 512;  // 2^-9 * 2^8 = 0.5 -> code 0x30
  uint8_t out[33];
  ScalarKernels().mxfp8_encode_f32(x, 32, true, out);
  EXPECT_EQ(out[0], 0x78);
  EXPECT_EQ(out[1], 0x80);
  EXPECT_EQ(out[2], 0x30);
  EXPECT_EQ(out[3], 0x00);
  EXPECT_EQ(out[32], 119);
  // 500 in floor mode: byte 127 + 8 - 8 = 127, 500 saturates to 448 (0x7E);
  // in ceil mode 500 > 448 needs byte 128: 250 -> nearest 256 (0x78)? 250 lies
  // between 240 and 256, nearer 256.
  x[0] = 500.0f;
  ScalarKernels().mxfp8_encode_f32(x, 32, false, out);
  EXPECT_EQ(out[32], 127);
  EXPECT_EQ(out[0], 0x7E);
  ScalarKernels().mxfp8_encode_f32(x, 32, true, out);
  EXPECT_EQ(out[32], 128);
  EXPECT_EQ(out[0], 0x78);
}

TEST(ScalarKernels, DecodeMatchesOracleForAnyBytes) {
  const RowKernels& k = ScalarKernels();
  std::mt19937 rng(2);
  const uint32_t dim = 256;
  std::vector<uint8_t> row(dim + dim / 32);
  std::vector<float> out(dim);
  std::vector<uint16_t> out16(dim);
  for (int r = 0; r < 2000; ++r) {
    for (auto& b : row) b = static_cast<uint8_t>(rng());
    std::memset(out.data(), kPoison, dim * 4);
    std::memset(out16.data(), kPoison, dim * 2);
    const uint32_t bad = k.mxfp8_decode_f32(row.data(), dim, out.data());
    k.mxfp8_decode_bf16(row.data(), dim, out16.data());
    uint32_t want_bad = 0;
    for (uint32_t b = 0; b < dim / 32; ++b) want_bad += row[dim + b] == 0xFF;
    ASSERT_EQ(bad, want_bad);
    for (uint32_t i = 0; i < dim; ++i) {
      const uint32_t want = test::DecodeOracleBits(row[i], row[dim + i / 32]);
      ASSERT_EQ(test::Bits(out[i]), want) << "row " << r << " element " << i;
      ASSERT_EQ(out16[i], test::Bf16Oracle(test::FromBits(want))) << "row " << r << " el " << i;
    }
  }
}

TEST(ScalarKernels, PlainFormatsMatchOracle) {
  const RowKernels& k = ScalarKernels();
  std::mt19937 rng(3);
  const uint32_t dim = 128;
  std::vector<float> x(dim), y(dim);
  std::vector<uint16_t> h(dim), h2(dim);
  for (int r = 0; r < 2000; ++r) {
    for (auto& v : x) v = test::FromBits(static_cast<uint32_t>(rng()));
    const uint32_t want_bad = CountBadBlocks(x.data(), dim);
    std::memset(h.data(), kPoison, dim * 2);
    ASSERT_EQ(k.f32_to_bf16(x.data(), dim, h.data()), want_bad);
    for (uint32_t i = 0; i < dim; ++i) ASSERT_EQ(h[i], test::Bf16Oracle(x[i]));
    std::memset(y.data(), kPoison, dim * 4);
    ASSERT_EQ(k.f32_to_f32(x.data(), dim, y.data()), want_bad);
    ASSERT_EQ(std::memcmp(x.data(), y.data(), dim * 4), 0);
    std::memset(y.data(), kPoison, dim * 4);
    const uint32_t bad16 = k.bf16_to_f32(h.data(), dim, y.data());
    for (uint32_t i = 0; i < dim; ++i) ASSERT_EQ(test::Bits(y[i]), uint32_t{h[i]} << 16);
    ASSERT_EQ(bad16, CountBadBlocks(y.data(), dim));
    std::memset(h2.data(), kPoison, dim * 2);
    ASSERT_EQ(k.bf16_to_bf16(h.data(), dim, h2.data()), bad16);
    ASSERT_EQ(h, h2);
  }
}

// ---- SIMD (AVX2, AVX-512) == scalar ----------------------------------------

using SimdKernels = test::SimdSetTest;

INSTANTIATE_TEST_SUITE_P(Sets, SimdKernels, test::AllSimdSets(), test::SimdSetName);

TEST_P(SimdKernels, EncodeIsBitIdenticalOnMillionsOfBlocks) {
  std::mt19937 rng(4);
  const uint32_t dim = 512;
  const size_t n = 4096;  // vectors per round
  std::vector<uint8_t> a(n * (dim + dim / 32)), b(a.size());
  const size_t vb = dim + dim / 32;
  size_t blocks = 0;
  for (int round = 0; round < 32; ++round) {  // 32 * 4096 * 16 = 2.1M blocks
    const std::vector<float> x = test::RandomVectors(rng, n, dim);
    const std::vector<uint16_t> h = test::ToBf16Bits(x);
    const bool ceil = round % 2 == 0;
    const bool bf16 = round % 4 >= 2;
    std::memset(a.data(), kPoison, a.size());
    std::memset(b.data(), 0x5A, b.size());
    for (size_t v = 0; v < n; ++v) {
      const auto [bad_a, bad_b] =
          EncodeBoth(x.data(), h.data(), v, dim, ceil, bf16, a.data(), b.data());
      ASSERT_EQ(bad_a, bad_b);
    }
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_EQ(a[i], b[i]) << "round " << round << " byte " << i << " (vector " << i / vb
                            << ", ceil " << ceil << ", bf16 " << bf16 << ")";
    blocks += n * dim / 32;
  }
  EXPECT_GE(blocks, 2000000u);
}

TEST_P(SimdKernels, DecodeIsBitIdentical) {
  std::mt19937 rng(5);
  const uint32_t dim = 512;
  const size_t vb = dim + dim / 32;
  const size_t n = 2048;
  std::vector<uint8_t> rows(n * vb);
  std::vector<float> fa(n * dim), fb(n * dim);
  std::vector<uint16_t> ha(n * dim), hb(n * dim);
  for (int round = 0; round < 12; ++round) {
    if (round % 2 == 0) {  // any bytes: NaN codes, NaN and huge scales included
      for (auto& byte : rows) byte = static_cast<uint8_t>(rng());
    } else {  // what the encoder writes
      const std::vector<float> x = test::RandomVectors(rng, n, dim);
      for (size_t v = 0; v < n; ++v)
        scalar_.mxfp8_encode_f32(&x[v * dim], dim, round % 4 == 1, &rows[v * vb]);
    }
    std::memset(fa.data(), kPoison, fa.size() * 4);
    std::memset(fb.data(), 0x5A, fb.size() * 4);
    std::memset(ha.data(), kPoison, ha.size() * 2);
    std::memset(hb.data(), 0x5A, hb.size() * 2);
    for (size_t v = 0; v < n; ++v) {
      ASSERT_EQ(scalar_.mxfp8_decode_f32(&rows[v * vb], dim, &fa[v * dim]),
                simd_->mxfp8_decode_f32(&rows[v * vb], dim, &fb[v * dim]));
      ASSERT_EQ(scalar_.mxfp8_decode_bf16(&rows[v * vb], dim, &ha[v * dim]),
                simd_->mxfp8_decode_bf16(&rows[v * vb], dim, &hb[v * dim]));
    }
    ASSERT_EQ(std::memcmp(fa.data(), fb.data(), fa.size() * 4), 0) << "round " << round;
    ASSERT_EQ(ha, hb) << "round " << round;
  }
}

// Dims that are not a multiple of 512 (partial groups of blocks) or span
// several groups, every MXFP8 kernel, both modes.
TEST_P(SimdKernels, Mxfp8IsBitIdenticalForOtherDims) {
  std::mt19937 rng(7);
  for (uint32_t dim : {32u, 64u, 96u, 480u, 544u, 1024u, 1056u, 16384u}) {
    const size_t vb = dim + dim / 32;
    const size_t n = dim >= 4096 ? 8 : 64;
    const std::vector<float> x = test::RandomVectors(rng, n, dim);
    const std::vector<uint16_t> h = test::ToBf16Bits(x);
    std::vector<uint8_t> a(vb), b(vb), rows(n * vb);
    for (auto& byte : rows) byte = static_cast<uint8_t>(rng());
    std::vector<float> fa(dim), fb(dim);
    std::vector<uint16_t> ha(dim), hb(dim);
    for (size_t v = 0; v < n; ++v) {
      for (bool ceil : {true, false}) {
        std::memset(a.data(), kPoison, vb);
        std::memset(b.data(), 0x5A, vb);
        ASSERT_EQ(scalar_.mxfp8_encode_f32(&x[v * dim], dim, ceil, a.data()),
                  simd_->mxfp8_encode_f32(&x[v * dim], dim, ceil, b.data()));
        ASSERT_EQ(a, b) << "f32 dim " << dim << " vector " << v << " ceil " << ceil;
        std::memset(a.data(), kPoison, vb);
        std::memset(b.data(), 0x5A, vb);
        ASSERT_EQ(scalar_.mxfp8_encode_bf16(&h[v * dim], dim, ceil, a.data()),
                  simd_->mxfp8_encode_bf16(&h[v * dim], dim, ceil, b.data()));
        ASSERT_EQ(a, b) << "bf16 dim " << dim << " vector " << v << " ceil " << ceil;
      }
      // Decode: arbitrary bytes on even vectors, the encoder's output on odd ones.
      const uint8_t* row = &rows[v * vb];
      if (v % 2) row = a.data();
      std::memset(fa.data(), kPoison, dim * 4);
      std::memset(fb.data(), 0x5A, dim * 4);
      ASSERT_EQ(scalar_.mxfp8_decode_f32(row, dim, fa.data()), simd_->mxfp8_decode_f32(row, dim, fb.data()));
      ASSERT_EQ(std::memcmp(fa.data(), fb.data(), dim * 4), 0) << "dim " << dim << " vector " << v;
      std::memset(ha.data(), kPoison, dim * 2);
      std::memset(hb.data(), 0x5A, dim * 2);
      ASSERT_EQ(scalar_.mxfp8_decode_bf16(row, dim, ha.data()), simd_->mxfp8_decode_bf16(row, dim, hb.data()));
      ASSERT_EQ(ha, hb) << "dim " << dim << " vector " << v;
    }
  }
}

// EncodeRowsWith / DecodeRowsWith with a SIMD set (which may hand the whole
// batch to the set's multi-row entries) == the scalar set row by row: strided
// sources, gaps between stored rows and between output vectors left alone,
// the same non-finite counts.
TEST_P(SimdKernels, BatchEntriesMatchTheScalarRows) {
  std::mt19937 rng(9);
  for (uint32_t dim : {32u, 512u, 544u, 1056u}) {
    const size_t n = 37, vb = dim + dim / 32, pitch = vb + 8, stride = dim + 16;
    const std::vector<float> x = test::RandomVectors(rng, n, stride);
    const std::vector<uint16_t> h = test::ToBf16Bits(x);
    std::vector<uint8_t> a(n * pitch), b(n * pitch);
    for (bool bf16 : {false, true}) {
      for (bool ceil : {true, false}) {
        const ConstVectors in = {bf16 ? static_cast<const void*>(h.data()) : static_cast<const void*>(x.data()),
                                 bf16 ? Dtype::kBf16 : Dtype::kFp32, stride};
        const ScaleMode mode = ceil ? ScaleMode::kCeil : ScaleMode::kFloor;
        std::memset(a.data(), kPoison, a.size());
        std::memset(b.data(), kPoison, b.size());
        ASSERT_EQ(EncodeRowsWith(scalar_, Format::kMxfp8, mode, dim, n, in, DstRows{a.data(), pitch}),
                  EncodeRowsWith(*simd_, Format::kMxfp8, mode, dim, n, in, DstRows{b.data(), pitch}));
        ASSERT_EQ(a, b) << "dim " << dim << " bf16 " << bf16 << " ceil " << ceil;
      }
    }
    // Decode the encoder's rows, then arbitrary bytes.
    for (int pass = 0; pass < 2; ++pass) {
      if (pass == 1)
        for (auto& byte : a) byte = static_cast<uint8_t>(rng());
      for (bool bf16 : {false, true}) {
        const size_t bytes = bf16 ? 2 : 4;
        std::vector<uint8_t> fa(n * stride * bytes, kPoison), fb(n * stride * bytes, kPoison);
        const Dtype t = bf16 ? Dtype::kBf16 : Dtype::kFp32;
        ASSERT_EQ(DecodeRowsWith(scalar_, Format::kMxfp8, dim, n, SrcRows{a.data(), pitch},
                                 MutableVectors{fa.data(), t, stride}),
                  DecodeRowsWith(*simd_, Format::kMxfp8, dim, n, SrcRows{a.data(), pitch},
                                 MutableVectors{fb.data(), t, stride}));
        ASSERT_EQ(fa, fb) << "dim " << dim << " bf16 " << bf16 << " pass " << pass;
      }
    }
  }
}

// The AVX2 integer paths take whole blocks (decode: groups of 16) whose
// scale byte and values sit in a range; walk every scale byte with values on
// both sides of each limit: the E4M3 normal threshold 2^(scale - 133), zeros
// of both signs, the top of the range, and one off-path block in a group.
TEST_P(SimdKernels, Mxfp8FastPathLimitsAreBitIdentical) {
  std::mt19937 rng(11);
  const uint32_t dim = 512;
  const size_t vb = dim + dim / 32;
  std::vector<uint8_t> row(vb), a(vb), b(vb);
  std::vector<float> fa(dim), fb(dim), x(dim);
  std::vector<uint16_t> ha(dim), hb(dim), h(dim);
  auto check_decode = [&](const char* what, int scale) {
    std::memset(fa.data(), kPoison, dim * 4);
    std::memset(fb.data(), 0x5A, dim * 4);
    ASSERT_EQ(scalar_.mxfp8_decode_f32(row.data(), dim, fa.data()),
              simd_->mxfp8_decode_f32(row.data(), dim, fb.data()));
    ASSERT_EQ(std::memcmp(fa.data(), fb.data(), dim * 4), 0) << what << " scale " << scale;
    std::memset(ha.data(), kPoison, dim * 2);
    std::memset(hb.data(), 0x5A, dim * 2);
    ASSERT_EQ(scalar_.mxfp8_decode_bf16(row.data(), dim, ha.data()),
              simd_->mxfp8_decode_bf16(row.data(), dim, hb.data()));
    ASSERT_EQ(ha, hb) << what << " scale " << scale;
  };
  for (int scale = 0; scale < 256; ++scale) {
    std::memset(row.data() + dim, scale, dim / 32);
    // Every normal code, both signs, in all 16 blocks.
    for (uint32_t i = 0; i < dim; ++i)
      row[i] = static_cast<uint8_t>((8 + (i * 7 + scale) % 119) | ((i / 3) % 2 ? 0x80 : 0));
    check_decode("normal codes", scale);
    // The same with one block holding a zero, a subnormal or a NaN code.
    const uint8_t odd[] = {0x00, 0x80, 0x01, 0x87, 0x7F, 0xFF};
    row[32 * (scale % 16) + scale % 32] = odd[scale % 6];
    check_decode("one off-path code", scale);
  }
  for (int s = 0; s < 255; ++s) {
    for (bool ceil : {true, false}) {
      // amax 1.5 * 2^(s - 119) gives scale byte s in both modes (0 below 8).
      const float amax = std::ldexp(1.5f, s - 119);
      const float limit = std::ldexp(1.0f, s - 133);  // smallest normal E4M3 * 2^(s - 127)
      for (uint32_t blk = 0; blk < dim / 32; ++blk) {
        float* v = &x[blk * 32];
        for (int i = 0; i < 32; ++i) {
          const float r = swa_test::UniformReal<float>(-1.0f, 1.0f)(rng);
          v[i] = amax * r;
        }
        v[0] = amax;
        v[1] = (blk % 2) ? -0.0f : 0.0f;
        if (blk % 4 == 1) v[2] = std::nextafter(limit, 0.0f);  // just below: off the path
        if (blk % 4 == 2) v[2] = -limit;                        // exactly the limit
        if (blk % 4 == 3) v[2] = std::nextafter(limit, 1.0f) * 1.5f;
        if (blk == 5) v[3] = std::ldexp(1.0f, s - 150);  // far below (rounds to 0)
      }
      h = test::ToBf16Bits(x);
      std::memset(a.data(), kPoison, vb);
      std::memset(b.data(), 0x5A, vb);
      ASSERT_EQ(scalar_.mxfp8_encode_f32(x.data(), dim, ceil, a.data()),
                simd_->mxfp8_encode_f32(x.data(), dim, ceil, b.data()));
      ASSERT_EQ(a, b) << "f32 scale " << s << " ceil " << ceil;
      std::memset(a.data(), kPoison, vb);
      std::memset(b.data(), 0x5A, vb);
      ASSERT_EQ(scalar_.mxfp8_encode_bf16(h.data(), dim, ceil, a.data()),
                simd_->mxfp8_encode_bf16(h.data(), dim, ceil, b.data()));
      ASSERT_EQ(a, b) << "bf16 scale " << s << " ceil " << ceil;
    }
  }
}

TEST_P(SimdKernels, PlainFormatsAreBitIdentical) {
  std::mt19937 rng(6);
  const uint32_t dim = 512;
  std::vector<float> x(dim), ya(dim), yb(dim);
  std::vector<uint16_t> h(dim), ha(dim), hb(dim);
  for (int r = 0; r < 4000; ++r) {
    for (auto& v : x) v = test::FromBits(static_cast<uint32_t>(rng()));
    if (r % 2) {  // mostly finite rows too, so that some blocks are clean
      for (auto& v : x) v = std::isfinite(v) ? v : 1.0f;
      x[rng() % dim] = test::FromBits(0x7F800000u | (rng() & 0x807FFFFFu));
    }
    for (auto& v : h) v = static_cast<uint16_t>(rng());
    ASSERT_EQ(scalar_.f32_to_f32(x.data(), dim, ya.data()), simd_->f32_to_f32(x.data(), dim, yb.data()));
    ASSERT_EQ(std::memcmp(ya.data(), yb.data(), dim * 4), 0);
    ASSERT_EQ(scalar_.f32_to_bf16(x.data(), dim, ha.data()), simd_->f32_to_bf16(x.data(), dim, hb.data()));
    ASSERT_EQ(ha, hb);
    ASSERT_EQ(scalar_.bf16_to_f32(h.data(), dim, ya.data()), simd_->bf16_to_f32(h.data(), dim, yb.data()));
    ASSERT_EQ(std::memcmp(ya.data(), yb.data(), dim * 4), 0);
    ASSERT_EQ(scalar_.bf16_to_bf16(h.data(), dim, ha.data()), simd_->bf16_to_bf16(h.data(), dim, hb.data()));
    ASSERT_EQ(ha, hb);
  }
}

TEST(ActiveKernels, PicksTheBestSetUnlessForced) {
  const RowKernels* best = Avx512Kernels() != nullptr ? Avx512Kernels()
                           : Avx2Kernels() != nullptr ? Avx2Kernels()
                                                      : &ScalarKernels();
  const RowKernels* avx2 = Avx2Kernels() != nullptr ? Avx2Kernels() : &ScalarKernels();
  EXPECT_EQ(&SelectKernels(nullptr), best);
  EXPECT_EQ(&SelectKernels(""), best);
  EXPECT_EQ(&SelectKernels("avx512"), best);
  EXPECT_EQ(&SelectKernels("bogus"), best);
  EXPECT_EQ(&SelectKernels("avx2"), avx2);
  EXPECT_EQ(&SelectKernels("scalar"), &ScalarKernels());
  EXPECT_EQ(&ActiveKernels(), &SelectKernels(std::getenv("SWACACHE_CODEC")));
}

}  // namespace
}  // namespace swa::codec
