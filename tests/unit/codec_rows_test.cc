// EncodeRows/DecodeRows: every format, both dtypes, the three row addressing
// forms, strided sources and tiles, non-finite counts, and round-trip error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "codec/codec.h"
#include "codec/ring_address.h"
#include "unit/codec_inputs.h"
#include "unit/mxfp8_oracle.h"

namespace swa::codec {
namespace {

constexpr uint8_t kPoison = 0xA5;

// Stored bytes of one vector, from the oracle.
std::vector<uint8_t> OracleRow(Format f, bool ceil, const float* x, uint32_t dim) {
  if (f == Format::kMxfp8) return test::EncodeVectorOracle(x, dim, ceil);
  std::vector<uint8_t> out;
  for (uint32_t i = 0; i < dim; ++i) {
    if (f == Format::kBf16) {
      const uint16_t h = test::Bf16Oracle(x[i]);
      out.insert(out.end(), {static_cast<uint8_t>(h), static_cast<uint8_t>(h >> 8)});
    } else {
      const uint32_t u = test::Bits(x[i]);
      for (int s = 0; s < 32; s += 8) out.push_back(static_cast<uint8_t>(u >> s));
    }
  }
  return out;
}

struct Case {
  Format format;
  Dtype dtype;
  int addressing;  // 0 stride, 1 offsets, 2 pointers
};

class RowsTest : public ::testing::TestWithParam<Case> {};

TEST_P(RowsTest, EncodeThenDecodeThroughEveryAddressing) {
  const Case c = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(c.format) * 7 + static_cast<uint32_t>(c.dtype) * 3 +
                   c.addressing);
  const uint32_t dim = 96;
  const size_t n = 200, src_stride = dim + 8;
  const size_t vb = StoredBytes(c.format, dim);
  const size_t row_pitch = vb + 24;  // rows are not packed: bytes between must survive
  // Source: n vectors with padding; BF16 inputs are the truncated values.
  const std::vector<float> values = test::RandomVectors(rng, n, dim);
  std::vector<float> src_f(n * src_stride, 7.0f);
  std::vector<uint16_t> src_h(n * src_stride, 0x4000);
  std::vector<float> exact(n * dim);  // what the encoder sees
  for (size_t v = 0; v < n; ++v)
    for (uint32_t i = 0; i < dim; ++i) {
      const float x = values[v * dim + i];
      const uint16_t h = static_cast<uint16_t>(test::Bits(x) >> 16);
      src_f[v * src_stride + i] = x;
      src_h[v * src_stride + i] = h;
      exact[v * dim + i] = c.dtype == Dtype::kBf16 ? test::FromBits(uint32_t{h} << 16) : x;
    }
  // Destination rows in a shuffled order.
  std::vector<size_t> where(n);
  std::iota(where.begin(), where.end(), 0);
  std::shuffle(where.begin(), where.end(), rng);
  if (c.addressing == 0) std::iota(where.begin(), where.end(), 0);
  std::vector<uint8_t> pool(n * row_pitch + 64, kPoison);
  uint8_t* base = pool.data() + 16;
  std::vector<int64_t> offsets(n);
  std::vector<uint8_t*> ptrs(n);
  std::vector<const uint8_t*> cptrs(n);
  for (size_t v = 0; v < n; ++v) {
    offsets[v] = static_cast<int64_t>(where[v] * row_pitch);
    ptrs[v] = base + offsets[v];
    cptrs[v] = ptrs[v];
  }
  DstRows dst;
  SrcRows src_rows;
  if (c.addressing == 0) {
    dst.base = base, dst.stride = row_pitch;
    src_rows.base = base, src_rows.stride = row_pitch;
  } else if (c.addressing == 1) {
    dst.base = base, dst.offsets = offsets.data();
    src_rows.base = base, src_rows.offsets = offsets.data();
  } else {
    dst.ptrs = ptrs.data();
    src_rows.ptrs = cptrs.data();
  }
  for (bool ceil : {true, false}) {
    std::fill(pool.begin(), pool.end(), kPoison);
    const ConstVectors in = {c.dtype == Dtype::kBf16 ? static_cast<const void*>(src_h.data())
                                                     : static_cast<const void*>(src_f.data()),
                             c.dtype, src_stride};
    const uint64_t bad =
        EncodeRows(c.format, ceil ? ScaleMode::kCeil : ScaleMode::kFloor, dim, n, in, dst);
    uint64_t want_bad = 0;
    for (size_t b = 0; b < n * dim / 32; ++b)
      want_bad += std::any_of(&exact[b * 32], &exact[b * 32 + 32],
                              [](float x) { return !std::isfinite(x); });
    EXPECT_EQ(bad, want_bad);
    for (size_t v = 0; v < n; ++v) {
      const uint8_t* row = base + offsets[v];
      const std::vector<uint8_t> want = OracleRow(c.format, ceil, &exact[v * dim], dim);
      ASSERT_EQ(std::vector<uint8_t>(row, row + vb), want) << "vector " << v;
      for (size_t i = vb; i < row_pitch; ++i) ASSERT_EQ(row[i], kPoison) << "gap after " << v;
    }
    ASSERT_TRUE(std::all_of(pool.begin(), pool.begin() + 16, [](uint8_t b) { return b == kPoison; }));

    // Decode into a padded FP32 tile and a padded BF16 tile.
    const size_t tile_stride = dim + 4;
    std::vector<float> tile(n * tile_stride);
    std::vector<uint16_t> tile16(n * tile_stride);
    std::memset(tile.data(), kPoison, tile.size() * 4);
    std::memset(tile16.data(), kPoison, tile16.size() * 2);
    const uint64_t bad_f = DecodeRows(c.format, dim, n, src_rows, {tile.data(), Dtype::kFp32, tile_stride});
    const uint64_t bad_h =
        DecodeRows(c.format, dim, n, src_rows, {tile16.data(), Dtype::kBf16, tile_stride});
    EXPECT_EQ(bad_f, bad_h);
    uint64_t want_decode_bad = 0;
    for (size_t v = 0; v < n; ++v) {
      const uint8_t* row = base + offsets[v];
      for (uint32_t i = 0; i < dim; ++i) {
        uint32_t want;
        if (c.format == Format::kMxfp8) {
          want = test::DecodeOracleBits(row[i], row[dim + i / 32]);
        } else if (c.format == Format::kBf16) {
          want = uint32_t{static_cast<uint16_t>(row[2 * i] | row[2 * i + 1] << 8)} << 16;
        } else {
          std::memcpy(&want, row + 4 * i, 4);
        }
        ASSERT_EQ(test::Bits(tile[v * tile_stride + i]), want) << v << "," << i;
        ASSERT_EQ(tile16[v * tile_stride + i], test::Bf16Oracle(test::FromBits(want))) << v << "," << i;
      }
      for (uint32_t b = 0; b < dim / 32; ++b) {
        if (c.format == Format::kMxfp8) {
          want_decode_bad += row[dim + b] == 0xFF;
        } else {
          want_decode_bad += std::any_of(&tile[v * tile_stride + 32 * b],
                                         &tile[v * tile_stride + 32 * b + 32],
                                         [](float x) { return !std::isfinite(x); });
        }
      }
      for (size_t i = dim; i < tile_stride; ++i) {
        uint32_t u;
        std::memcpy(&u, &tile[v * tile_stride + i], 4);
        ASSERT_EQ(u, 0xA5A5A5A5u);
        ASSERT_EQ(tile16[v * tile_stride + i], 0xA5A5u);
      }
    }
    EXPECT_EQ(bad_f, want_decode_bad);
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllFormats, RowsTest,
    ::testing::Values(Case{Format::kMxfp8, Dtype::kFp32, 0}, Case{Format::kMxfp8, Dtype::kBf16, 1},
                      Case{Format::kMxfp8, Dtype::kFp32, 2}, Case{Format::kBf16, Dtype::kFp32, 0},
                      Case{Format::kBf16, Dtype::kBf16, 1}, Case{Format::kFp32, Dtype::kFp32, 2},
                      Case{Format::kFp32, Dtype::kBf16, 0}));

TEST(RoundTrip, ErrorWithinE4m3Bounds) {
  // Per element, with s = 2^(scale - 127): |y| = |x| / s in the normal E4M3
  // range -> relative error <= 2^-4; below 2^-6 -> absolute error <= 2^-10 s;
  // floor mode above 448 -> exactly +-448 s.
  std::mt19937 rng(9);
  std::normal_distribution<float> normal;
  const uint32_t dim = 512;
  std::vector<float> x(dim), y(dim);
  std::vector<uint8_t> row(dim + dim / 32);
  size_t checked = 0;
  for (int r = 0; r < 3000; ++r) {
    const int mag = std::uniform_int_distribution<int>(-130, 120)(rng);
    for (auto& v : x) v = std::ldexp(normal(rng), mag + std::uniform_int_distribution<int>(-12, 0)(rng));
    const bool ceil = r % 2 == 0;
    const uint64_t bad = EncodeRows(Format::kMxfp8, ceil ? ScaleMode::kCeil : ScaleMode::kFloor,
                                    dim, 1, {x.data(), Dtype::kFp32, dim}, {row.data()});
    ASSERT_EQ(bad, 0u);
    DecodeRows(Format::kMxfp8, dim, 1, {row.data()}, {y.data(), Dtype::kFp32, dim});
    for (uint32_t i = 0; i < dim; ++i) {
      const double s = std::ldexp(1.0, row[dim + i / 32] - 127);
      const double scaled = std::fabs(x[i]) / s;
      const double err = std::fabs(static_cast<double>(y[i]) - x[i]);
      if (scaled > 448) {
        ASSERT_FALSE(ceil) << "ceil mode never clips";
        ASSERT_EQ(static_cast<double>(y[i]), std::copysign(448.0 * s, x[i]));
      } else if (scaled >= std::ldexp(1.0, -6)) {
        ASSERT_LE(err, std::ldexp(std::fabs(x[i]), -4)) << x[i] << " -> " << y[i];
      } else {
        ASSERT_LE(err, std::ldexp(s, -10)) << x[i] << " -> " << y[i];
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 3000u * dim);
}

TEST(RingAddress, MatchesSpecFormula) {
  // docs/semantics.md, "Slot layout": row r at (r / R) * slot_bytes + (r mod R) * bytes_per_token;
  // heads follow each other every vec_bytes; negative rows are padding.
  const int32_t rows[] = {0, 13, 14, 27, -1, 140, 7};
  RowAddress a;
  a.rows = rows, a.vecs_per_row = 3, a.ring_len = 14, a.slot_bytes = 100000;
  a.row_bytes = 3 * 528, a.vec_bytes = 528;
  for (int64_t i = 0; i < 7 * 3; ++i) {
    const int64_t r = rows[i / 3], head = i % 3;
    const int64_t want = r < 0 ? -1 : (r / 14) * 100000 + (r % 14) * 1584 + head * 528;
    EXPECT_EQ(VectorOffset(a, i), want) << i;
  }
  a.rows = nullptr;  // packed tokens
  EXPECT_EQ(VectorOffset(a, 7), 2 * 1584 + 528);
}

}  // namespace
}  // namespace swa::codec
