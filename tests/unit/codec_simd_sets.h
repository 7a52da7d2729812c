// The SIMD codec kernel sets as a test parameter: a fixture that holds the set
// under test (skipped, with the reason, when this CPU or build lacks it) and
// the scalar reference, for the tests that compare the two bit for bit.
#pragma once

#include <gtest/gtest.h>

#include <ostream>
#include <string>

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
