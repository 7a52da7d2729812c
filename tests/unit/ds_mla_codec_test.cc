// The fp8_ds_mla record (docs/codec.md, "fp8_ds_mla"): the scale rule at its
// boundaries, exact round trips of representable vectors, the byte positions
// of every part, non-finite groups, the device block encoder against the CPU
// codec, and the layout's refusals. Golden bytes from an independent numpy +
// ml_dtypes oracle: tests/python/test_fp8_ds_mla_oracle.py.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "common/ds_mla_math.h"
#include "gtest/gtest.h"
#include "kernels/step/ds_mla_block.h"
#include "layout/layout.h"

namespace swa {
namespace {

using codec::DsMlaScaleForAmax;

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float Float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// 2^ceil(log2(max(amax / 448, 1e-4))) as a UE8M0 byte, computed in double
// from the formula as FlashMLA's quantizer writes it.
int FormulaScale(float amax) {
  const double s = std::max(double(amax) / 448.0, double(1e-4f));
  return 127 + int(std::ceil(std::log2(s)));
}

TEST(DsMlaScale, Boundaries) {
  EXPECT_EQ(DsMlaScaleForAmax(Bits(448.0f)), 127);                     // exactly 448: 2^0
  EXPECT_EQ(DsMlaScaleForAmax(Bits(std::nextafter(448.0f, 1e9f))), 128);
  EXPECT_EQ(DsMlaScaleForAmax(Bits(224.0f)), 126);
  EXPECT_EQ(DsMlaScaleForAmax(Bits(std::nextafter(224.0f, 1e9f))), 127);
  EXPECT_EQ(DsMlaScaleForAmax(Bits(1.0f)), 127 - 8);                   // 1/448 -> 2^-8
  EXPECT_EQ(DsMlaScaleForAmax(0), 114);                                // 1e-4 -> 2^-13
  EXPECT_EQ(DsMlaScaleForAmax(1), 114);                                // subnormal
  EXPECT_EQ(DsMlaScaleForAmax(Bits(448.0f * 0x1p-13f)), 114);
  EXPECT_EQ(DsMlaScaleForAmax(Bits(std::nextafter(448.0f * 0x1p-13f, 1.0f))), 115);
  EXPECT_EQ(DsMlaScaleForAmax(Bits(std::numeric_limits<float>::max())), 247);
  EXPECT_EQ(DsMlaScaleForAmax(Bits(-3.0f)), DsMlaScaleForAmax(Bits(3.0f)));  // sign ignored
  EXPECT_EQ(DsMlaScaleForAmax(0x7F800000u), 0xFF);
  EXPECT_EQ(DsMlaScaleForAmax(0x7FC00000u), 0xFF);
  // Against the formula over random magnitudes spanning the exponent range.
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const float a = Float(rng() % 0x7F800000u);
    ASSERT_EQ(DsMlaScaleForAmax(Bits(a)), FormulaScale(a)) << a;
  }
}

// A vector of values the record holds exactly: every NoPE group's values are
// E4M3 values times 2^c, one of them in (224, 448] * 2^c so that the rule
// picks c again; RoPE dims are BF16 values.
std::vector<float> Representable(std::mt19937& rng, std::vector<int>* scales) {
  std::vector<float> x(kDsMlaDim);
  scales->clear();
  for (uint32_t g = 0; g < kDsMlaGroups; ++g) {
    const int c = -13 + int(rng() % 60);
    scales->push_back(127 + c);
    for (uint32_t j = 0; j < kDsMlaGroup; ++j) {
      uint8_t code = uint8_t(rng() & 0xFF);
      if ((code & 0x7F) == 0x7F) code ^= 1;  // no NaN codes
      if (j == g % kDsMlaGroup) code = uint8_t((code & 0x80) | (0x78 + rng() % 7));  // 256..448
      x[g * kDsMlaGroup + j] = codec::E4m3ToFloat(code) * std::ldexp(1.0f, c);
    }
  }
  for (uint32_t d = 0; d < kDsMlaRopeDims; ++d) {
    uint16_t h = uint16_t(rng());
    if ((h & 0x7F80) == 0x7F80) h &= 0xBFFF;  // finite
    x[kDsMlaNopeDims + d] = codec::Bf16ToFloat(h);
  }
  return x;
}

TEST(DsMlaCodec, RoundTripOfRepresentableVectorsIsExact) {
  std::mt19937 rng(11);
  for (int it = 0; it < 500; ++it) {
    std::vector<int> scales;
    const std::vector<float> x = Representable(rng, &scales);
    std::vector<uint8_t> rec(kDsMlaBytes, 0xAB);  // poison
    ASSERT_EQ(codec::DsMlaEncodeF32(x.data(), rec.data()), 0u);
    for (uint32_t g = 0; g < kDsMlaGroups; ++g)
      ASSERT_EQ(rec[kDsMlaScaleOffset + g], scales[g]) << "group " << g;
    ASSERT_EQ(rec[kDsMlaBytes - 1], 0);
    std::vector<float> back(kDsMlaDim, -1.0f);
    ASSERT_EQ(codec::DsMlaDecodeF32(rec.data(), back.data()), 0u);
    for (uint32_t d = 0; d < kDsMlaDim; ++d)
      ASSERT_EQ(Bits(back[d]), Bits(x[d])) << "dim " << d << " iteration " << it;
    // Encoding the decoded vector again gives the same bytes; so does the
    // BF16 entry (every value is a BF16 value).
    std::vector<uint8_t> again(kDsMlaBytes, 0x11), from16(kDsMlaBytes, 0x22);
    codec::DsMlaEncodeF32(back.data(), again.data());
    std::vector<uint16_t> x16(kDsMlaDim);
    for (uint32_t d = 0; d < kDsMlaDim; ++d) x16[d] = codec::Bf16FromFloat(x[d]);
    codec::DsMlaEncodeBf16(x16.data(), from16.data());
    ASSERT_EQ(again, rec);
    ASSERT_EQ(from16, rec);
    std::vector<uint16_t> back16(kDsMlaDim);
    codec::DsMlaDecodeBf16(rec.data(), back16.data());
    ASSERT_EQ(back16, x16);
  }
}

TEST(DsMlaCodec, BytePositions) {
  // Group g holds 2^g * (g + 1) / 8 at dim 64g + 1, zeros elsewhere; RoPE
  // dim d is d + 1. Hand-computed bytes.
  std::vector<float> x(kDsMlaDim, 0.0f);
  for (uint32_t g = 0; g < kDsMlaGroups; ++g) x[g * 64 + 1] = std::ldexp(float(g + 1), int(g)) / 8;
  for (uint32_t d = 0; d < kDsMlaRopeDims; ++d) x[kDsMlaNopeDims + d] = float(d + 1);
  std::vector<uint8_t> rec(kDsMlaBytes, 0xAB);
  codec::DsMlaEncodeF32(x.data(), rec.data());
  // Group 0: amax 1/8 -> 2^-11 (1/8 / 448 = 2^-11.8); 1/8 / 2^-11 = 256 = E4M3 0x78.
  EXPECT_EQ(rec[576], 127 - 11);
  EXPECT_EQ(rec[1], 0x78);
  EXPECT_EQ(rec[0], 0x00);
  // Group 1: amax 2 * 2/8 = 0.5 -> 2^-9; 0.5 / 2^-9 = 256.
  EXPECT_EQ(rec[577], 127 - 9);
  EXPECT_EQ(rec[65], 0x78);
  // Group 6: 2^6 * 7/8 = 56 -> 56/448 = 1/8 -> 2^-3; 56 / 2^-3 = 448 = 0x7E.
  EXPECT_EQ(rec[582], 127 - 3);
  EXPECT_EQ(rec[6 * 64 + 1], 0x7E);
  EXPECT_EQ(rec[583], 0);
  // RoPE dim 0 = 1.0 = BF16 0x3F80, little-endian at 448; dim 63 = 64.0 = 0x4280.
  EXPECT_EQ(rec[448], 0x80);
  EXPECT_EQ(rec[449], 0x3F);
  EXPECT_EQ(rec[574], 0x80);
  EXPECT_EQ(rec[575], 0x42);
}

TEST(DsMlaCodec, NonFiniteGroupsAndHalves) {
  std::vector<float> x(kDsMlaDim, 1.0f);
  x[70] = std::numeric_limits<float>::quiet_NaN();   // group 1
  x[6 * 64 + 3] = -std::numeric_limits<float>::infinity();  // group 6
  x[kDsMlaNopeDims + 40] = std::numeric_limits<float>::infinity();  // RoPE half 1
  std::vector<uint8_t> rec(kDsMlaBytes);
  EXPECT_EQ(codec::DsMlaEncodeF32(x.data(), rec.data()), 3u);
  EXPECT_EQ(rec[577], 0xFF);
  EXPECT_EQ(rec[582], 0xFF);
  EXPECT_EQ(rec[576], 127 - 8);
  for (int j = 64; j < 128; ++j) EXPECT_EQ(rec[j] & 0x7F, 0x7F);
  std::vector<float> back(kDsMlaDim);
  EXPECT_EQ(codec::DsMlaDecodeF32(rec.data(), back.data()), 3u);
  EXPECT_TRUE(std::isnan(back[64]));
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_TRUE(std::isinf(back[kDsMlaNopeDims + 40]));
}

// Every kernel set gives the scalar bytes (the format has one implementation,
// but the dispatch of each set must reach it), and the CUDA encoder's block
// function, run on the host, gives them too.
TEST(DsMlaCodec, KernelSetsAndDeviceBlockEncoderAgree) {
  std::mt19937 rng(5);
  const int n = 64;
  std::vector<float> x(size_t(n) * kDsMlaDim);
  for (size_t i = 0; i < x.size(); ++i) {
    const int e = int(rng() % 40) - 20;
    x[i] = std::ldexp(float(int(rng() % 2001) - 1000) / 1000.0f, e);
  }
  x[5 * kDsMlaDim + 100] = std::numeric_limits<float>::quiet_NaN();
  std::vector<uint8_t> want(size_t(n) * kDsMlaBytes);
  for (int i = 0; i < n; ++i)
    codec::DsMlaEncodeF32(x.data() + size_t(i) * kDsMlaDim, want.data() + size_t(i) * kDsMlaBytes);
  for (const codec::RowKernels* k :
       {&codec::ScalarKernels(), codec::Avx2Kernels(), codec::Avx512Kernels()}) {
    if (k == nullptr) continue;
    std::vector<uint8_t> got(want.size(), 0xCD);
    codec::EncodeRowsWith(*k, Format::kFp8DsMla, ScaleMode::kFloor, kDsMlaDim, n,
                          {x.data(), Dtype::kFp32, kDsMlaDim}, {got.data(), kDsMlaBytes});
    EXPECT_EQ(got, want) << k->name;
  }
  std::vector<uint8_t> dev(want.size(), 0xCD);
  uint64_t bad = 0;
  for (int i = 0; i < n; ++i) {
    const float* v = x.data() + size_t(i) * kDsMlaDim;
    for (int b = 0; b < 16; ++b) {
      uint32_t bits[32];
      for (int j = 0; j < 32; ++j) bits[j] = Bits(v[b * 32 + j]);
      bad += kernels::EncodeDsMlaBlock(b, bits, false, dev.data() + size_t(i) * kDsMlaBytes,
                                       [&](uint32_t* out) {
                                         for (int j = 0; j < 32; ++j)
                                           out[j] = Bits(v[(b ^ 1) * 32 + j]);
                                       });
    }
  }
  EXPECT_EQ(dev, want);
  EXPECT_EQ(bad, 1u);
}

// Encode: every kernel set writes the scalar reference's bytes and counts,
// from FP32 and from BF16, on vectors whose groups span every case: ordinary
// spreads, groups below the 2^-13 floor, all-zero and -0.0 groups, FP32
// subnormals, magnitudes near the FP32 maximum (scale bytes above 245), NaN
// and Inf in NoPE groups and in the RoPE dims, ties between grid points.
TEST(DsMlaCodec, KernelSetsEncodeLikeTheScalarReference) {
  std::mt19937 rng(17);
  const int n = 160;
  std::vector<float> x(size_t(n) * kDsMlaDim);
  for (int i = 0; i < n; ++i) {
    float* v = x.data() + size_t(i) * kDsMlaDim;
    for (uint32_t g = 0; g < kDsMlaDim / 64; ++g) {
      const int kind = int(rng() % 9);
      for (uint32_t j = 0; j < 64; ++j) {
        float& y = v[g * 64 + j];
        const float r = float(int(rng() % 2001) - 1000) / 1000.0f;
        switch (kind) {
          case 0: y = std::ldexp(r, int(rng() % 50) - 25); break;     // wide spread
          case 1: y = std::ldexp(r, -30 - int(rng() % 8)); break;     // below the floor
          case 2: y = (rng() % 2) ? 0.0f : -0.0f; break;              // zeros
          case 3: y = Float(uint32_t(rng() % 0x7FFFFF) | (rng() % 2 ? 0x80000000u : 0)); break;
          case 4: y = std::ldexp(r, 127 - int(rng() % 3)); break;     // near FLT_MAX
          case 5: y = std::ldexp(float(int(rng() % 33) - 16) / 16.0f, int(rng() % 6)); break;  // ties
          default: y = std::ldexp(r, int(rng() % 8) - 4); break;
        }
      }
    }
    if (i % 7 == 3) v[rng() % kDsMlaDim] = std::numeric_limits<float>::quiet_NaN();
    if (i % 11 == 5) v[kDsMlaNopeDims + rng() % 64] = -std::numeric_limits<float>::infinity();
  }
  std::vector<uint16_t> xb(x.size());
  for (size_t i = 0; i < x.size(); ++i) xb[i] = uint16_t(Bits(x[i]) >> 16);
  std::vector<uint8_t> want(size_t(n) * kDsMlaBytes), want_b(want.size());
  uint64_t bad = 0, bad_b = 0;
  for (int i = 0; i < n; ++i) {
    bad += codec::DsMlaEncodeF32(x.data() + size_t(i) * kDsMlaDim,
                                 want.data() + size_t(i) * kDsMlaBytes);
    bad_b += codec::DsMlaEncodeBf16(xb.data() + size_t(i) * kDsMlaDim,
                                    want_b.data() + size_t(i) * kDsMlaBytes);
  }
  EXPECT_GT(bad, 0u);
  int sets_with_kernel = 0;
  for (const codec::RowKernels* k :
       {&codec::ScalarKernels(), codec::Avx2Kernels(), codec::Avx512Kernels()}) {
    if (k == nullptr) continue;
    sets_with_kernel += k->ds_mla_encode_f32 != nullptr ? 1 : 0;
    std::vector<uint8_t> got(want.size(), 0xCD), got_b(want.size(), 0xCD);
    EXPECT_EQ(codec::EncodeRowsWith(*k, Format::kFp8DsMla, ScaleMode::kCeil, kDsMlaDim, n,
                                    {x.data(), Dtype::kFp32, kDsMlaDim}, {got.data(), kDsMlaBytes}),
              bad)
        << k->name;
    EXPECT_EQ(codec::EncodeRowsWith(*k, Format::kFp8DsMla, ScaleMode::kCeil, kDsMlaDim, n,
                                    {xb.data(), Dtype::kBf16, kDsMlaDim},
                                    {got_b.data(), kDsMlaBytes}),
              bad_b)
        << k->name;
    for (int i = 0; i < n; ++i) {
      const size_t o = size_t(i) * kDsMlaBytes;
      EXPECT_TRUE(std::equal(got.begin() + o, got.begin() + o + kDsMlaBytes, want.begin() + o))
          << k->name << " FP32 record " << i;
      EXPECT_TRUE(std::equal(got_b.begin() + o, got_b.begin() + o + kDsMlaBytes, want_b.begin() + o))
          << k->name << " BF16 record " << i;
    }
  }
  RecordProperty("sets_with_simd_encode", sets_with_kernel);
}

// Decode: every kernel set gives the scalar reference's values, bit for bit,
// and its counts, to FP32 and to BF16, on encoded records and on records of
// random bytes (every scale byte, NaN and subnormal codes, NaN/Inf RoPE
// values), one row at a time and in a batch with a row stride.
TEST(DsMlaCodec, KernelSetsDecodeLikeTheScalarReference) {
  std::mt19937 rng(11);
  const int n = 96;
  std::vector<uint8_t> rec(size_t(n) * kDsMlaBytes);
  for (int i = 0; i < n; ++i) {
    uint8_t* r = rec.data() + size_t(i) * kDsMlaBytes;
    if (i % 3 == 0) {
      for (uint32_t b = 0; b < kDsMlaBytes; ++b) r[b] = uint8_t(rng());  // any bytes
    } else {
      std::vector<float> x(kDsMlaDim);
      const int e = int(rng() % 60) - 30;  // small vectors reach the 2^-13 floor
      for (float& v : x) v = std::ldexp(float(int(rng() % 2001) - 1000) / 1000.0f, e);
      if (i % 3 == 2) x[rng() % kDsMlaDim] = std::numeric_limits<float>::quiet_NaN();
      codec::DsMlaEncodeF32(x.data(), r);
    }
  }
  std::vector<float> want32(size_t(n) * kDsMlaDim);
  std::vector<uint16_t> want16(size_t(n) * kDsMlaDim);
  uint64_t want_bad32 = 0, want_bad16 = 0;
  for (int i = 0; i < n; ++i) {
    want_bad32 += codec::DsMlaDecodeF32(rec.data() + size_t(i) * kDsMlaBytes,
                                        want32.data() + size_t(i) * kDsMlaDim);
    want_bad16 += codec::DsMlaDecodeBf16(rec.data() + size_t(i) * kDsMlaBytes,
                                         want16.data() + size_t(i) * kDsMlaDim);
  }
  EXPECT_GT(want_bad32, 0u);
  EXPECT_EQ(want_bad16, want_bad32);
  auto bits32 = [](const std::vector<float>& v) {
    std::vector<uint32_t> b(v.size());
    std::memcpy(b.data(), v.data(), 4 * v.size());
    return b;
  };
  int sets = 0;
  for (const codec::RowKernels* k :
       {&codec::ScalarKernels(), codec::Avx2Kernels(), codec::Avx512Kernels()}) {
    if (k == nullptr) continue;
    ++sets;
    // Rows `stride` apart in the output (poisoned between them).
    const size_t stride = kDsMlaDim + 32;
    std::vector<float> got32(size_t(n) * stride, -7.0f);
    std::vector<uint16_t> got16(size_t(n) * stride, 0xDEAD);
    const uint64_t bad32 = codec::DecodeRowsWith(*k, Format::kFp8DsMla, kDsMlaDim, n,
                                                 {rec.data(), kDsMlaBytes},
                                                 {got32.data(), Dtype::kFp32, stride});
    const uint64_t bad16 = codec::DecodeRowsWith(*k, Format::kFp8DsMla, kDsMlaDim, n,
                                                 {rec.data(), kDsMlaBytes},
                                                 {got16.data(), Dtype::kBf16, stride});
    EXPECT_EQ(bad32, want_bad32) << k->name;
    EXPECT_EQ(bad16, want_bad16) << k->name;
    std::vector<float> rows32;
    std::vector<uint16_t> rows16;
    for (int i = 0; i < n; ++i) {
      const size_t o = size_t(i) * stride;
      rows32.insert(rows32.end(), got32.begin() + o, got32.begin() + o + kDsMlaDim);
      rows16.insert(rows16.end(), got16.begin() + o, got16.begin() + o + kDsMlaDim);
      EXPECT_EQ(got32[o + kDsMlaDim], -7.0f) << k->name << " wrote past row " << i;
      EXPECT_EQ(got16[o + kDsMlaDim], 0xDEAD) << k->name << " wrote past row " << i;
    }
    EXPECT_EQ(bits32(rows32), bits32(want32)) << k->name;
    EXPECT_EQ(rows16, want16) << k->name;
    if (k->ds_mla_decode_f32 != nullptr) {  // the row kernels themselves
      std::vector<float> one(kDsMlaDim);
      std::vector<uint16_t> one16(kDsMlaDim);
      for (int i = 0; i < n; ++i) {
        const uint8_t* r = rec.data() + size_t(i) * kDsMlaBytes;
        EXPECT_EQ(k->ds_mla_decode_f32(r, one.data()), codec::DsMlaDecodeF32(r, one.data()));
        ASSERT_NE(k->ds_mla_decode_bf16, nullptr);
        k->ds_mla_decode_bf16(r, one16.data());
        EXPECT_TRUE(std::equal(one16.begin(), one16.end(), want16.begin() + size_t(i) * kDsMlaDim))
            << k->name << " row " << i;
      }
    }
  }
  RecordProperty("kernel_sets", sets);
}

LayerSpec DsMlaLayer() {
  LayerSpec l;
  l.q_heads = 16;
  l.kv_heads = 1;
  l.head_dim = 512;
  l.shared_kv = true;
  l.format = Format::kFp8DsMla;
  return l;
}

TEST(DsMlaLayout, RecordSizeAndRefusals) {
  ModelSpec m;
  m.window = 64;
  m.max_slots = 2;
  m.layers = {DsMlaLayer()};
  LayerSpec sep = DsMlaLayer();
  sep.shared_kv = false;
  sep.kv_heads = 2;
  m.layers.push_back(sep);
  absl::StatusOr<Layout> lay = Layout::Create(m);
  ASSERT_TRUE(lay.ok()) << lay.status();
  EXPECT_EQ(lay->layer(0).vec_bytes, 584u);
  EXPECT_EQ(lay->layer(0).bytes_per_token, 584u);
  EXPECT_EQ(lay->layer(1).bytes_per_token, 4u * 584u);

  for (uint32_t d : {64u, 256u, 576u, 1024u}) {
    ModelSpec bad = m;
    bad.layers[1].head_dim = d;
    absl::StatusOr<Layout> r = Layout::Create(bad);
    ASSERT_FALSE(r.ok()) << d;
    EXPECT_NE(std::string(r.status().message()).find("layers[1].head_dim = " + std::to_string(d)),
              std::string::npos)
        << r.status();
    EXPECT_NE(std::string(r.status().message()).find("FP8_DS_MLA"), std::string::npos);
  }
  // A rotary slice other than dims 448..511 is refused; exactly that one is fine.
  ModelSpec rope = m;
  rope.layers[0].rope.style = RopeStyle::kNeox;
  rope.layers[0].rope.first_dim = 448;
  rope.layers[0].rope.dims = 64;
  EXPECT_TRUE(Layout::Create(rope).ok());
  for (auto [first, dims] : {std::pair{0u, 64u}, {448u, 32u}, {384u, 128u}}) {
    ModelSpec bad = rope;
    bad.layers[0].rope.first_dim = first;
    bad.layers[0].rope.dims = dims;
    absl::StatusOr<Layout> r = Layout::Create(bad);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(std::string(r.status().message()).find("rope_first_dim = " + std::to_string(first)),
              std::string::npos)
        << r.status();
  }
  // The fingerprint tells the format apart from MXFP8 at the same shape.
  ModelSpec mx = m;
  for (LayerSpec& l : mx.layers) l.format = Format::kMxfp8;
  EXPECT_NE(Layout::Create(mx)->fingerprint(), lay->fingerprint());
}

}  // namespace
}  // namespace swa
