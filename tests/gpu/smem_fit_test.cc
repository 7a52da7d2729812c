// Which layers the CUDA attention kernels can run on which devices: the
// shared memory each (head dim, K/V sharing) needs, against the per-block
// opt-in limits of the GPUs the sm_80 and sm_90a binaries run on. Host
// arithmetic only: runs without a device.
#include <gtest/gtest.h>

#include <cstddef>

#include "kernels/attention/attention_shapes.h"

namespace swa::kernels {
namespace {

constexpr size_t kSm86Class = 99 * 1024;  // A10, L4, L40S, RTX 30/40, sm_120
constexpr size_t kSm80 = 163 * 1024;      // A100
constexpr size_t kSm90 = 227 * 1024;      // H100, H200

bool Fits(int d, bool shared, size_t limit) { return LayerSmemBytes(d, shared) <= limit; }

TEST(SmemFit, EveryLayerFitsHopper) {
  for (int d : {64, 128, 256, 512})
    for (bool shared : {true, false}) EXPECT_TRUE(Fits(d, shared, kSm90)) << d << " " << shared;
}

TEST(SmemFit, AmpereA100RunsEveryLayer) {
  for (int d : {64, 128, 256, 512})
    for (bool shared : {true, false}) EXPECT_TRUE(Fits(d, shared, kSm80)) << d << " " << shared;
}

TEST(SmemFit, The99KiBDevicesRefuseTheLargeTiles) {
  EXPECT_TRUE(Fits(64, true, kSm86Class));
  EXPECT_TRUE(Fits(128, false, kSm86Class));
  EXPECT_TRUE(Fits(256, true, kSm86Class));
  // The MMA kernel at D 256 with separate K/V (~126 KiB) and at D 512 (~145 /
  // ~157 KiB), and the precise kernel at D 512 with separate K/V (128 KiB).
  EXPECT_FALSE(Fits(256, false, kSm86Class));
  EXPECT_FALSE(Fits(512, true, kSm86Class));
  EXPECT_FALSE(Fits(512, false, kSm86Class));
  EXPECT_GT(AttentionSmemBytes(512, false, false), kSm86Class);
}

TEST(SmemFit, UnknownHeadDimNeedsNothing) { EXPECT_EQ(LayerSmemBytes(96, true), 0u); }

}  // namespace
}  // namespace swa::kernels
