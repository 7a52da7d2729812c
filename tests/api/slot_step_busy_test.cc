// A slot that a swa_step is running on cannot be copied (nor freed, reset,
// saved or restored) by another thread: the call fails with
// FAILED_PRECONDITION naming the slot and changes nothing, instead of racing
// the step's reads and writes of the slot's rings (issue 29, item 6). One
// thread prefills slot s again and again; another copies s into t until it
// sees a refusal. Without the step holds no refusal ever comes (and the copy
// races the step: ThreadSanitizer, scripts/sanitize.sh tsan, reports it).
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "api/test_util.h"
#include "gtest/gtest.h"
#include "test_random.h"

namespace {

using swa_test::LastError;
using swa_test::Model;

constexpr int kWindow = 64;
constexpr int kQHeads = 8;
constexpr int kDim = 128;

TEST(SlotStepBusy, CopyFromASlotWhileItStepsIsRefusedCleanly) {
  Model m(1, 0, 4);
  m.config.window = kWindow;
  m.config.draft_tokens = 1;
  m.config.num_threads = 1;
  m.layers[0].q_heads = kQHeads;
  m.layers[0].head_dim = kDim;
  m.Sync();
  swa_cache_t* cache = nullptr;
  ASSERT_EQ(swa_cache_create(&m.config, &cache), SWA_OK) << LastError();
  swa_plan_t* plan = nullptr;
  ASSERT_EQ(swa_plan_create(cache, &plan), SWA_OK) << LastError();
  uint32_t s = 0, t = 0;
  ASSERT_EQ(swa_slot_alloc(cache, &s), SWA_OK);
  ASSERT_EQ(swa_slot_alloc(cache, &t), SWA_OK);
  swa_tensor_view_t view;
  view.struct_size = sizeof view;
  ASSERT_EQ(swa_cache_layer_view(cache, 0, &view), SWA_OK);
  swa_layout_t layout;
  layout.struct_size = sizeof layout;
  ASSERT_EQ(swa_cache_layout(cache, &layout), SWA_OK);

  std::mt19937 rng(29);
  swa_test::UniformReal<float> u(-1.0f, 1.0f);
  std::vector<float> q(size_t(kWindow) * kQHeads * kDim), k(size_t(kWindow) * kDim);
  for (float& x : q) x = u(rng);
  for (float& x : k) x = u(rng);
  std::vector<float> out(q.size());

  std::atomic<bool> stop{false};
  std::atomic<int> step_failures{0};
  std::string step_error;
  std::thread stepper([&] {
    while (!stop.load()) {
      const swa_seq_t seq{s, kWindow, kWindow, 0};
      swa_status_t r = swa_slot_reset(cache, s);
      if (r == SWA_OK) r = swa_plan_build(plan, &seq, 1);
      swa_step_args_t a;
      swa_step_args_init(&a);
      a.q = q.data();
      a.k_new = k.data();
      a.out = out.data();
      if (r == SWA_OK) r = swa_step(cache, plan, &a);
      if (r != SWA_OK && step_failures.fetch_add(1) == 0) step_error = LastError();
    }
  });

  const uint8_t* t_bytes = static_cast<const uint8_t*>(view.data) + t * layout.slot_bytes;
  const std::string want = "slot " + std::to_string(s) + " is in use by 1 running swa_step call";
  int refusals = 0, copies = 0;
  std::string unexpected;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (refusals < 20 && std::chrono::steady_clock::now() < deadline) {
    swa_slot_info_t before_info;
    before_info.struct_size = sizeof before_info;
    ASSERT_EQ(swa_slot_info(cache, t, &before_info), SWA_OK);
    const std::vector<uint8_t> before(t_bytes, t_bytes + layout.slot_bytes);
    const swa_status_t r = swa_slot_copy(cache, s, t);
    if (r == SWA_OK) {
      ++copies;
      continue;
    }
    const std::string e = LastError();
    if (r != SWA_FAILED_PRECONDITION || e.find(want) == std::string::npos ||
        e.find("before copying from it") == std::string::npos) {
      unexpected = e;
      break;
    }
    ++refusals;
    // The refused copy changed nothing in t (only this thread writes t).
    swa_slot_info_t after_info;
    after_info.struct_size = sizeof after_info;
    ASSERT_EQ(swa_slot_info(cache, t, &after_info), SWA_OK);
    EXPECT_EQ(after_info.written_end, before_info.written_end);
    EXPECT_EQ(after_info.valid_start, before_info.valid_start);
    EXPECT_EQ(std::memcmp(before.data(), t_bytes, layout.slot_bytes), 0);
  }
  stop.store(true);
  stepper.join();

  EXPECT_EQ(unexpected, "") << "an unexpected copy failure";
  EXPECT_GE(refusals, 20) << "no copy was refused in 60 s while slot " << s
                          << " stepped (copies that went through: " << copies << ")";
  EXPECT_EQ(step_failures.load(), 0) << step_error;
  // Once no step runs, copy, free and reset of s work again.
  EXPECT_EQ(swa_slot_copy(cache, s, t), SWA_OK) << LastError();
  EXPECT_EQ(swa_slot_reset(cache, s), SWA_OK) << LastError();
  EXPECT_EQ(swa_slot_free(cache, s), SWA_OK) << LastError();
  swa_plan_destroy(plan);
  swa_cache_destroy(cache);
}

}  // namespace
