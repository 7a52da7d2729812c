// The SIMD codec kernel sets as a test parameter: a fixture that holds the set
// under test (skipped, with the reason, when this CPU or build lacks it) and
// the scalar reference, for the tests that compare the two bit for bit.
#pragma once

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <utility>

#include "codec/codec.h"

namespace swa::test {

struct SimdSet {
  const char* name;
  const codec::RowKernels* (*get)();
  friend void PrintTo(const SimdSet& set, std::ostream* os) { *os << set.name; }
};

class SimdSetTest : public ::testing::TestWithParam<SimdSet> {
 protected:
  void SetUp() override {
    simd_ = GetParam().get();
    if (simd_ == nullptr)
      GTEST_SKIP() << "this CPU (or build) has no " << GetParam().name << " kernel set";
    ASSERT_STREQ(simd_->name, GetParam().name);
  }
  // Encodes vector v (FP32 x, or its BF16 bits h when bf16) of `dim` values
  // with the scalar reference into a and with the set under test into b (vb
  // bytes per stored row); returns both non-finite block counts.
  std::pair<uint32_t, uint32_t> EncodeBoth(const float* x, const uint16_t* h, size_t v,
                                           uint32_t dim, bool ceil, bool bf16, uint8_t* a,
                                           uint8_t* b) const {
    const size_t vb = dim + dim / 32;
    if (bf16)
      return {scalar_.mxfp8_encode_bf16(h + v * dim, dim, ceil, a + v * vb),
              simd_->mxfp8_encode_bf16(h + v * dim, dim, ceil, b + v * vb)};
    return {scalar_.mxfp8_encode_f32(x + v * dim, dim, ceil, a + v * vb),
            simd_->mxfp8_encode_f32(x + v * dim, dim, ceil, b + v * vb)};
  }
  const codec::RowKernels* simd_ = nullptr;
  const codec::RowKernels& scalar_ = codec::ScalarKernels();
};

inline auto AllSimdSets() {
  return ::testing::Values(SimdSet{"avx2", &codec::Avx2Kernels},
                           SimdSet{"avx512", &codec::Avx512Kernels});
}

inline std::string SimdSetName(const ::testing::TestParamInfo<SimdSet>& info) {
  return info.param.name;
}

}  // namespace swa::test
