// Slot pool through the public API: alloc/free/reset/copy/info and concurrency.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/test_util.h"
#include "gtest/gtest.h"

namespace {

using swa_test::LastError;
using swa_test::Model;

class SlotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Model m(2, 1, 4);
    ASSERT_EQ(swa_cache_create(&m.config, &cache_), SWA_OK) << LastError();
    layout_.struct_size = sizeof layout_;
    ASSERT_EQ(swa_cache_layout(cache_, &layout_), SWA_OK);
    view_.struct_size = sizeof view_;
    ASSERT_EQ(swa_cache_layer_view(cache_, 0, &view_), SWA_OK);
  }
  void TearDown() override { swa_cache_destroy(cache_); }
  uint8_t* SlotBytes(uint32_t slot) {
    return static_cast<uint8_t*>(view_.data) + uint64_t{slot} * layout_.slot_bytes;
  }
  swa_slot_info_t Info(uint32_t slot) {
    swa_slot_info_t info;
    std::memset(&info, 0xCD, sizeof info);  // poison
    info.struct_size = sizeof info;
    EXPECT_EQ(swa_slot_info(cache_, slot, &info), SWA_OK) << LastError();
    return info;
  }
  swa_cache_t* cache_ = nullptr;
  swa_layout_t layout_;
  swa_tensor_view_t view_;
};

TEST_F(SlotTest, AllocUntilExhaustedThenFree) {
  std::set<uint32_t> got;
  for (int i = 0; i < 4; ++i) {
    uint32_t s = 99;
    ASSERT_EQ(swa_slot_alloc(cache_, &s), SWA_OK) << LastError();
    EXPECT_LT(s, 4u);
    EXPECT_TRUE(got.insert(s).second) << "slot " << s << " handed out twice";
    const swa_slot_info_t info = Info(s);
    EXPECT_EQ(info.slot, s);
    EXPECT_EQ(info.allocated, 1u);
    EXPECT_EQ(info.written_end, 0);
    EXPECT_EQ(info.valid_start, 0);
    EXPECT_EQ(info.byte_offset, uint64_t{s} * layout_.slot_bytes);
  }
  uint32_t s = 1234;
  EXPECT_EQ(swa_slot_alloc(cache_, &s), SWA_RESOURCE_EXHAUSTED);
  EXPECT_EQ(s, 1234u) << "out-parameter changed by a failed call";
  EXPECT_NE(LastError().find("all 4 slots"), std::string::npos) << LastError();
  ASSERT_EQ(swa_slot_free(cache_, 2), SWA_OK);
  EXPECT_EQ(Info(2).allocated, 0u);
  ASSERT_EQ(swa_slot_alloc(cache_, &s), SWA_OK);
  EXPECT_EQ(s, 2u);
}

TEST_F(SlotTest, Errors) {
  uint32_t a = 0;
  ASSERT_EQ(swa_slot_alloc(cache_, &a), SWA_OK);
  EXPECT_EQ(swa_slot_free(cache_, 7), SWA_OUT_OF_RANGE);
  EXPECT_NE(LastError().find("slot 7"), std::string::npos) << LastError();
  EXPECT_EQ(swa_slot_free(cache_, a + 1), SWA_FAILED_PRECONDITION);
  EXPECT_NE(LastError().find("double free"), std::string::npos) << LastError();
  ASSERT_EQ(swa_slot_free(cache_, a), SWA_OK);
  EXPECT_EQ(swa_slot_free(cache_, a), SWA_FAILED_PRECONDITION);  // double free
  EXPECT_NE(LastError().find("slot " + std::to_string(a)), std::string::npos) << LastError();
  EXPECT_EQ(swa_slot_reset(cache_, a), SWA_FAILED_PRECONDITION);
  EXPECT_EQ(swa_slot_reset(cache_, 4), SWA_OUT_OF_RANGE);
  EXPECT_EQ(swa_slot_copy(cache_, a, 1), SWA_FAILED_PRECONDITION);
  EXPECT_EQ(swa_slot_copy(cache_, 100, 0), SWA_OUT_OF_RANGE);
  swa_slot_info_t info;
  info.struct_size = sizeof info;
  EXPECT_EQ(swa_slot_info(cache_, 4, &info), SWA_OUT_OF_RANGE);
  info.struct_size = 0;
  EXPECT_EQ(swa_slot_info(cache_, 0, &info), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_slot_info(cache_, 0, nullptr), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_slot_alloc(cache_, nullptr), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_slot_alloc(nullptr, &a), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_slot_free(nullptr, 0), SWA_INVALID_ARGUMENT);
}

TEST_F(SlotTest, CopyForksBytesAndMetadata) {
  uint32_t a = 0, b = 0, c = 0;
  ASSERT_EQ(swa_slot_alloc(cache_, &a), SWA_OK);
  ASSERT_EQ(swa_slot_alloc(cache_, &b), SWA_OK);
  ASSERT_EQ(swa_slot_alloc(cache_, &c), SWA_OK);
  std::mt19937 rng(5);
  for (uint64_t i = 0; i < layout_.slot_bytes; ++i) {
    SlotBytes(a)[i] = static_cast<uint8_t>(rng());
    SlotBytes(b)[i] = static_cast<uint8_t>(rng());
    SlotBytes(c)[i] = 0x5A;
  }
  const std::vector<uint8_t> c_before(SlotBytes(c), SlotBytes(c) + layout_.slot_bytes);
  ASSERT_EQ(swa_slot_copy(cache_, a, b), SWA_OK) << LastError();
  EXPECT_EQ(std::memcmp(SlotBytes(a), SlotBytes(b), layout_.slot_bytes), 0);
  EXPECT_EQ(std::memcmp(SlotBytes(c), c_before.data(), layout_.slot_bytes), 0)
      << "a neighbouring slot was touched";
  ASSERT_EQ(swa_slot_copy(cache_, a, a), SWA_OK);  // no-op
  ASSERT_EQ(swa_slot_free(cache_, c), SWA_OK);
  ASSERT_EQ(swa_slot_copy(cache_, a, c), SWA_FAILED_PRECONDITION);  // dst not allocated
  EXPECT_NE(LastError().find("slot " + std::to_string(c)), std::string::npos);
}

TEST_F(SlotTest, ResetClearsMetadataOnly) {
  uint32_t a = 0;
  ASSERT_EQ(swa_slot_alloc(cache_, &a), SWA_OK);
  SlotBytes(a)[17] = 0x77;
  ASSERT_EQ(swa_slot_reset(cache_, a), SWA_OK);
  const swa_slot_info_t info = Info(a);
  EXPECT_EQ(info.allocated, 1u);
  EXPECT_EQ(info.written_end, 0);
  EXPECT_EQ(info.valid_start, 0);
  EXPECT_EQ(SlotBytes(a)[17], 0x77);
}

TEST(SlotConcurrency, FourThreadsNeverShareASlot) {
  Model m(1, 0, 16);
  swa_cache_t* cache = nullptr;
  ASSERT_EQ(swa_cache_create(&m.config, &cache), SWA_OK) << LastError();
  std::vector<std::atomic<int>> owner(16);
  for (auto& o : owner) o = -1;
  std::atomic<int> violations{0}, allocs{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<uint32_t> mine;
      for (int i = 0; i < 20000; ++i) {
        if (mine.size() < 4 && (mine.empty() || rng() % 2)) {
          uint32_t s;
          const swa_status_t st = swa_slot_alloc(cache, &s);
          if (st == SWA_RESOURCE_EXHAUSTED) continue;
          if (st != SWA_OK) { ++violations; continue; }
          int expected = -1;
          if (!owner[s].compare_exchange_strong(expected, t)) ++violations;
          mine.push_back(s);
          ++allocs;
        } else if (!mine.empty()) {
          const uint32_t s = mine.back();
          mine.pop_back();
          owner[s] = -1;  // release ownership before the slot returns to the pool
          if (swa_slot_free(cache, s) != SWA_OK) ++violations;
        }
      }
      for (uint32_t s : mine) {
        owner[s] = -1;
        swa_slot_free(cache, s);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(violations.load(), 0);
  EXPECT_GT(allocs.load(), 10000);
  for (uint32_t s = 0; s < 16; ++s) {  // everything came back
    swa_slot_info_t info;
    info.struct_size = sizeof info;
    ASSERT_EQ(swa_slot_info(cache, s, &info), SWA_OK);
    EXPECT_EQ(info.allocated, 0u) << s;
  }
  swa_cache_destroy(cache);
}

}  // namespace
