// swa_attention_cpu_path: names the CPU attention path per query dtype, as the
// step chooses it (docs/cpu_attention.md, "Paths"); refuses bad arguments
// without writing.
#include <cstdlib>
#include <cstring>
#include <string>

#include "gtest/gtest.h"
#include "swacache.h"

namespace {

std::string PathOf(swa_dtype_t dtype) {
  const char* name = nullptr;
  EXPECT_EQ(swa_attention_cpu_path(dtype, &name), SWA_OK) << swa_last_error();
  return name != nullptr ? name : "(null)";
}

bool IsFp32Path(const std::string& p) {
  return p == "avx512_wide" || p == "avx512" || p == "avx2_fma" || p == "portable";
}

TEST(AttentionPathApi, NamesThePathOfEachQueryDtype) {
  const std::string fp32 = PathOf(SWA_DTYPE_FP32), bf16 = PathOf(SWA_DTYPE_BF16);
  EXPECT_TRUE(IsFp32Path(fp32)) << fp32;
  // BF16 queries take a BF16 path or the FP32 one (widened), never another FP32 set.
  EXPECT_TRUE(bf16 == "amx_bf16" || bf16 == "avx512_bf16" || bf16 == fp32) << bf16;
  std::printf("FP32 queries: %s; BF16 queries: %s\n", fp32.c_str(), bf16.c_str());
  const char* forced = std::getenv("SWACACHE_ATTENTION");
  if (forced != nullptr && std::string(forced) == "avx512") EXPECT_EQ(bf16, fp32);
  if (forced != nullptr && std::string(forced) == "portable") EXPECT_EQ(fp32, "portable");
}

TEST(AttentionPathApi, RefusesBadArgumentsWithoutWriting) {
  const char* name = "untouched";
  EXPECT_EQ(swa_attention_cpu_path(static_cast<swa_dtype_t>(77), &name), SWA_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(swa_last_error(), "q_dtype"), nullptr) << swa_last_error();
  EXPECT_NE(std::strstr(swa_last_error(), "77"), nullptr) << swa_last_error();
  EXPECT_STREQ(name, "untouched");
  EXPECT_EQ(swa_attention_cpu_path(SWA_DTYPE_FP32, nullptr), SWA_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(swa_last_error(), "name"), nullptr) << swa_last_error();
}

}  // namespace
