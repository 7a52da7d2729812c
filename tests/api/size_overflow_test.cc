// Sizes computed from the caller's numbers never wrap: every product (and
// sum) of caller values in the C API that sizes a tensor is checked, and a
// size that overflows 64 bits or passes the limit returns SWA_INVALID_ARGUMENT
// naming the values, before any memory is touched. The first cases are the
// reproducers of issue 27 (each wrapped an unchecked product and crashed);
// then one case per product the C API computes.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "api/merge_util.h"
#include "gtest/gtest.h"
#include "swacache.h"

namespace {

constexpr uint64_t kLimit = uint64_t{1}
                            << 60;  // elements of one tensor (swa_attention_merge, swa_project)

// Refused with a message holding every `needles` entry.
void ExpectRefused(swa_status_t st, std::initializer_list<const char*> needles) {
  EXPECT_EQ(st, SWA_INVALID_ARGUMENT);
  const std::string msg = swa_last_error();
  for (const char* n : needles)
    EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
}

class SizeOverflow : public ::testing::Test {
 protected:
  void SetUp() override { cache_ = swa_test::MergeCache(2); }
  void TearDown() override { swa_cache_destroy(cache_); }

  // A merge of small real buffers that claims `rows` x `head_dim`.
  swa_status_t Merge(int64_t rows, uint32_t head_dim) {
    return swa_test::RunMerge(cache_, rows, head_dim, SWA_DTYPE_FP32, a_.data(), la_.data(),
                              b_.data(), lb_.data(), out_.data(), lse_.data());
  }

  swa_status_t Project(int32_t n_tokens, uint32_t hidden_dim, uint32_t q_dim, uint32_t kv_dim) {
    swa_project_args_t p;
    swa_project_args_init(&p);
    p.hidden = h16_.data(), p.weight = h16_.data(), p.out = out_.data();
    p.n_tokens = n_tokens, p.hidden_dim = hidden_dim, p.q_dim = q_dim, p.kv_dim = kv_dim;
    return swa_project(cache_, &p);
  }

  void ExpectUntouched() {
    for (float x : out_) ASSERT_EQ(x, 7.0f);
    for (float x : lse_) ASSERT_EQ(x, 7.0f);
  }

  swa_cache_t* cache_ = nullptr;
  std::vector<float> a_ = std::vector<float>(64, 1.0f), b_ = a_, la_ = std::vector<float>(64, 0.0f),
                     lb_ = la_, out_ = std::vector<float>(64, 7.0f),
                     lse_ = std::vector<float>(64, 7.0f);
  std::vector<uint16_t> h16_ = std::vector<uint16_t>(64, 0x3F80);
};

// rows * head_dim = 2^70 wrapped to 64 (it passed the check, then MergeRows crashed).
TEST_F(SizeOverflow, MergeRowsTimesHeadDimWrapsTo64) {
  ExpectRefused(Merge(int64_t{1} << 40, 1u << 30),
                {"rows = 1099511627776", "head_dim = 1073741824", "overflows"});
  ExpectUntouched();
}

// 2^34 * 2^30 = 2^64 wrapped to 0.
TEST_F(SizeOverflow, MergeRowsTimesHeadDimWrapsToZero) {
  ExpectRefused(Merge(int64_t{1} << 34, 1u << 30),
                {"rows = 17179869184", "head_dim = 1073741824", "overflows"});
  ExpectUntouched();
}

// No wrap, but past the limit; and the largest values of both fields.
TEST_F(SizeOverflow, MergePastTheLimitAndAtTheExtremes) {
  ExpectRefused(Merge(int64_t{1} << 31, 1u << 30), {"rows = 2147483648", "exceeds the limit"});
  ExpectRefused(Merge(INT64_MAX, UINT32_MAX),
                {"rows = 9223372036854775807", "head_dim = 4294967295"});
  ExpectRefused(Merge(int64_t(kLimit) + 1, 1), {"exceeds the limit"});
  ExpectUntouched();
}

// hidden_dim * (q_dim + kv_dim) = 2863311531 * 6442450944 wrapped to 2^31 (it
// crashed in PackB).
TEST_F(SizeOverflow, ProjectWeightWraps) {
  ExpectRefused(
      Project(1, 2863311531u, 0xFFFFFFFFu, 0x80000001u),
      {"weight", "hidden_dim = 2863311531", "(q_dim + kv_dim) = 6442450944", "overflows"});
  ExpectUntouched();
}

// hidden: n_tokens * hidden_dim = (2^31 - 1) * (2^32 - 1), past the limit.
TEST_F(SizeOverflow, ProjectHiddenPastTheLimit) {
  ExpectRefused(Project(INT32_MAX, UINT32_MAX, 1, 1),
                {"hidden", "n_tokens = 2147483647", "hidden_dim = 4294967295"});
  ExpectUntouched();
}

// out: n_tokens * (q_dim + kv_dim) = (2^31 - 1) * (2^33 - 2) while hidden and weight fit.
TEST_F(SizeOverflow, ProjectOutPastTheLimit) {
  ExpectRefused(Project(INT32_MAX, 1, UINT32_MAX, UINT32_MAX),
                {"out", "n_tokens = 2147483647", "(q_dim + kv_dim) = 8589934590"});
  ExpectUntouched();
}

// weight past the limit without wrapping: 2^29 * 2^32.
TEST_F(SizeOverflow, ProjectWeightPastTheLimit) {
  ExpectRefused(Project(1, 1u << 29, 1u << 31, 1u << 31), {"weight", "exceeds the limit"});
  ExpectUntouched();
}

// The codec: n_vectors * bytes per vector, for the source and the destination,
// wrapping or past PTRDIFF_MAX; and a buffer whose end wraps the address space.
TEST(SizeOverflowCodec, VectorCountTimesVectorBytes) {
  std::vector<float> x(64, 1.0f);
  std::vector<uint8_t> dst(256, 0x5A);
  uint64_t bad = 99;
  // FP32 source, 32 dims: 128 bytes a vector; 2^57 vectors = 2^64 bytes (wraps).
  ExpectRefused(swa_codec_encode(SWA_FORMAT_BF16, SWA_SCALE_CEIL, x.data(), SWA_DTYPE_FP32,
                                 size_t{1} << 57, 32, dst.data(), &bad),
                {"src", "n_vectors = 144115188075855872", "bytes per vector = 128", "wraps"});
  // 2^56 vectors = 2^63 bytes: no wrap, past PTRDIFF_MAX.
  ExpectRefused(swa_codec_encode(SWA_FORMAT_BF16, SWA_SCALE_CEIL, x.data(), SWA_DTYPE_FP32,
                                 size_t{1} << 56, 32, dst.data(), &bad),
                {"src", "exceeds the limit"});
  // Decode MXFP8 (33 bytes a vector: the source fits) into FP32: the destination wraps.
  ExpectRefused(swa_codec_decode(SWA_FORMAT_MXFP8, dst.data(), size_t{1} << 57, 32, x.data(),
                                 SWA_DTYPE_FP32, &bad),
                {"dst", "n_vectors = 144115188075855872", "bytes per vector = 128", "wraps"});
  for (uint8_t v : dst) ASSERT_EQ(v, 0x5A);
  for (float v : x) ASSERT_EQ(v, 1.0f);
  EXPECT_EQ(bad, 99u);
}

TEST(SizeOverflowCodec, BufferEndWrapsTheAddressSpace) {
  std::vector<uint8_t> dst(256, 0x5A);
  const void* top = reinterpret_cast<const void*>(~uintptr_t{63});  // 64 bytes below 2^64, aligned
  uint64_t bad = 99;
  // One FP32 vector of 32 dims is 128 bytes: [top, top + 128) wraps.
  ExpectRefused(swa_codec_encode(SWA_FORMAT_BF16, SWA_SCALE_CEIL, top, SWA_DTYPE_FP32, 1, 32,
                                 dst.data(), &bad),
                {"src", "address = 18446744073709551552", "bytes = 128", "wraps"});
  for (uint8_t v : dst) ASSERT_EQ(v, 0x5A);
  EXPECT_EQ(bad, 99u);
}

}  // namespace
