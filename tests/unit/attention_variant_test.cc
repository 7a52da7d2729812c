// Which attention tiles (docs/cuda_backend.md "Shared memory") the CUDA
// backend picks for every layer shape on the devices the sm_80 and sm_90a
// binaries run on, and the refusal when none fits. Host arithmetic only
// (kernels/attention/attention_shapes.h): runs in CI without CUDA.
#include <cstddef>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/attention/attention_shapes.h"
#include "kernels/attention/attention_variant.h"

namespace swa::kernels {
namespace {

constexpr size_t kDefault48 = 48 * 1024;   // without the opt-in (no real device class)
constexpr size_t kSm86Class = 99 * 1024;   // A10, L4, L40S, RTX 30/40, sm_120
constexpr size_t kSm80 = 163 * 1024;       // A100
constexpr size_t kSm90 = 227 * 1024;       // H100, H200
constexpr int kDims[] = {64, 128, 256, 512};

enum Ring { kFp32Ring, kBf16Ring, kMxfp8Ring };
// The tensor-core kernel never runs on an FP32 ring.
AttentionLayerShape ShapeOf(int d, bool shared, Ring ring) {
  return {d, shared, ring != kFp32Ring};
}

std::string Name(int d, bool shared, Ring ring, size_t limit) {
  static const char* kRing[] = {"fp32", "bf16", "mxfp8"};
  return "D " + std::to_string(d) + (shared ? " shared" : " separate") + " K/V, " +
         kRing[ring] + " ring, limit " + std::to_string(limit);
}

// What every device class gets, per head dim / K/V sharing / ring (the table
// of docs/cuda_backend.md).
struct Row {
  int d;
  bool shared;
  Ring ring;
  const char* at48;
  const char* at99;
  const char* at163;
  const char* at227;
};
constexpr const char* L = "large";
constexpr const char* S = "small";
constexpr const char* X = "refused";
constexpr Row kTable[] = {
    {64, true, kBf16Ring, L, L, L, L},     {64, true, kFp32Ring, L, L, L, L},
    {64, false, kBf16Ring, X, L, L, L},    {64, false, kFp32Ring, L, L, L, L},
    {128, true, kBf16Ring, X, L, L, L},    {128, true, kFp32Ring, L, L, L, L},
    {128, false, kBf16Ring, X, L, L, L},   {128, false, kFp32Ring, L, L, L, L},
    {256, true, kBf16Ring, X, L, L, L},    {256, true, kFp32Ring, L, L, L, L},
    {256, false, kBf16Ring, X, S, L, L},   {256, false, kFp32Ring, X, L, L, L},
    {512, true, kBf16Ring, X, S, L, L},    {512, true, kFp32Ring, S, L, L, L},
    {512, false, kBf16Ring, X, S, L, L},   {512, false, kFp32Ring, X, S, L, L},
};

const char* Outcome(const AttentionLayerShape& s, size_t limit) {
  const AttentionVariantChoice c = ChooseAttentionVariant(s, limit);
  if (!c.fits) return X;
  return c.variant == AttentionVariant::kLarge ? L : S;
}

TEST(AttentionVariant, TableForEveryDeviceLimit) {
  for (const Row& r : kTable) {
    // MXFP8 rings dequantise to the same bf16 tiles as BF16 rings.
    const std::vector<Ring> rings = r.ring == kFp32Ring ? std::vector<Ring>{kFp32Ring}
                                                        : std::vector<Ring>{kBf16Ring, kMxfp8Ring};
    for (Ring ring : rings) {
      const AttentionLayerShape s = ShapeOf(r.d, r.shared, ring);
      EXPECT_STREQ(Outcome(s, kDefault48), r.at48) << Name(r.d, r.shared, ring, kDefault48);
      EXPECT_STREQ(Outcome(s, kSm86Class), r.at99) << Name(r.d, r.shared, ring, kSm86Class);
      EXPECT_STREQ(Outcome(s, kSm80), r.at163) << Name(r.d, r.shared, ring, kSm80);
      EXPECT_STREQ(Outcome(s, kSm90), r.at227) << Name(r.d, r.shared, ring, kSm90);
    }
  }
}

// Every supported layer runs on every device class of the sm_80 / sm_90a
// binaries, and the chosen variant's kernels fit the limit.
TEST(AttentionVariant, EveryLayerRunsOnEveryDeviceClass) {
  for (size_t limit : {kSm86Class, kSm80, kSm90})
    for (int d : kDims)
      for (bool shared : {true, false})
        for (Ring ring : {kFp32Ring, kBf16Ring, kMxfp8Ring}) {
          const AttentionLayerShape s = ShapeOf(d, shared, ring);
          const AttentionVariantChoice c = ChooseAttentionVariant(s, limit);
          ASSERT_TRUE(c.fits) << Name(d, shared, ring, limit);
          EXPECT_LE(c.smem_bytes, limit) << Name(d, shared, ring, limit);
          EXPECT_EQ(c.smem_bytes, LayerSmemBytes(s, c.variant)) << Name(d, shared, ring, limit);
          // Large whenever it fits: the small tiles are only a fallback.
          EXPECT_EQ(c.variant == AttentionVariant::kLarge, LayerSmemBytes(s) <= limit)
              << Name(d, shared, ring, limit);
          const absl::StatusOr<AttentionVariant> v = AttentionVariantFor(s, limit);
          ASSERT_TRUE(v.ok()) << v.status();
          EXPECT_EQ(*v, c.variant);
        }
}

// The shapes the issue names cannot run their large tiles at 99 KiB; their
// small tiles can.
TEST(AttentionVariant, TheLargeTilesThatDoNotFit99KiB) {
  EXPECT_GT(AttentionSmemBytes(256, false, true), kSm86Class);  // ~126 KiB
  EXPECT_GT(AttentionSmemBytes(512, true, true), kSm86Class);   // ~157 KiB
  EXPECT_GT(AttentionSmemBytes(512, false, true), kSm86Class);  // ~145 KiB
  EXPECT_GT(AttentionSmemBytes(512, false, false), kSm86Class);  // precise, 128 KiB
  for (auto [d, shared, mma] : {std::tuple{256, false, true}, std::tuple{512, true, true},
                                std::tuple{512, false, true}, std::tuple{512, false, false}})
    EXPECT_LE(AttentionSmemBytes(d, shared, mma, AttentionVariant::kSmall), kSm86Class)
        << d << " " << shared << " " << mma;
}

// The small tiles keep 64 query rows per CTA where fewer keys suffice, and
// drop to 32 / 16 rows only at D 512; the precise kernel keeps 16 rows.
TEST(AttentionVariant, TileRowsOfEachVariant) {
  for (int d : kDims)
    for (bool shared : {true, false}) {
      EXPECT_EQ(AttentionTileRows(true, d, shared, AttentionVariant::kLarge), kMmaTileRows);
      EXPECT_EQ(AttentionTileRows(false, d, shared, AttentionVariant::kLarge), kPreciseTileRows);
      EXPECT_EQ(AttentionTileRows(false, d, shared, AttentionVariant::kSmall), kPreciseTileRows);
    }
  EXPECT_EQ(AttentionTileRows(true, 256, false, AttentionVariant::kSmall), 64);
  EXPECT_EQ(AttentionTileRows(true, 512, true, AttentionVariant::kSmall), 32);
  EXPECT_EQ(AttentionTileRows(true, 512, false, AttentionVariant::kSmall), 16);
  EXPECT_EQ((MmaSmall<256, false>::kKeys), 32);
  EXPECT_EQ(kPreciseSmallKeys<512>, 16);
  EXPECT_EQ(kPreciseSmallKeys<256>, 32);
}

TEST(AttentionVariant, RefusalNamesTheLimitAndTheNeed) {
  const AttentionLayerShape s = ShapeOf(512, false, kMxfp8Ring);
  const absl::StatusOr<AttentionVariant> v = AttentionVariantFor(s, kDefault48);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kUnimplemented);
  const std::string msg(v.status().message());
  EXPECT_NE(msg.find("allows 49152"), std::string::npos) << msg;
  EXPECT_NE(msg.find("head_dim = 512 with separate K/V"), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(LayerSmemBytes(s, AttentionVariant::kSmall))),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("cudaDevAttrMaxSharedMemoryPerBlockOptin"), std::string::npos) << msg;
}

TEST(AttentionVariant, UnknownHeadDimIsRefusedAndNamed) {
  EXPECT_EQ(LayerSmemBytes(ShapeOf(96, true, kBf16Ring)), 0u);
  EXPECT_FALSE(ChooseAttentionVariant(ShapeOf(96, true, kBf16Ring), kSm90).fits);
  const absl::StatusOr<AttentionVariant> v = AttentionVariantFor(ShapeOf(96, true, kBf16Ring), kSm90);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(v.status().message().find("head_dim = 96"), std::string::npos) << v.status();
}

// The choice is plain constexpr arithmetic (the backend calls it at set-up).
static_assert(ChooseAttentionVariant({512, false, true}, 99 * 1024).variant ==
              AttentionVariant::kSmall);
static_assert(!ChooseAttentionVariant({512, false, true}, 48 * 1024).fits);

}  // namespace
}  // namespace swa::kernels
