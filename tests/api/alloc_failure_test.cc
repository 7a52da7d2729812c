// Host allocation failures injected into the library: this program replaces
// the global operator new (the shared library's calls bind to it too) with one
// that throws std::bad_alloc at the N-th allocation once armed. For every N
// until a call runs out of allocations to fail, the call must either succeed
// or return RESOURCE_EXHAUSTED with a message, and change nothing a caller
// can observe (slot infos, the plan, the pool bytes). Covered: the first plan
// build, the first step after a build, save and restore through the memory
// store, and attaching a store. Only allocations of kMinInjected bytes or more
// fail: the library's buffers (plan arrays, staging, step scratch, stores).
// Smaller ones are mostly message strings built by absl::StrFormat, and the
// system Abseil cannot unwind a bad_alloc out of its formatter (the process
// terminates, inside absl); malloc inside hiredis and the C runtime is not
// injected either. docs/reliability.md has the details.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "api/store_fault_util.h"
#include "gtest/gtest.h"

namespace {
std::atomic<long> g_countdown{-1};  // -1: disarmed
std::atomic<long> g_injected{0};
constexpr size_t kMinInjected = 512;

bool Inject(size_t n) {
  if (n < kMinInjected || g_countdown.load(std::memory_order_relaxed) < 0) return false;
  if (g_countdown.fetch_sub(1) != 0) return false;
  ++g_injected;
  return true;
}
void* Allocate(size_t n, size_t align) {
  if (Inject(n)) return nullptr;
  if (n == 0) n = 1;
  if (align <= alignof(std::max_align_t)) return std::malloc(n);
  return std::aligned_alloc(align, (n + align - 1) / align * align);
}
void* AllocateOrThrow(size_t n, size_t align) {
  void* p = Allocate(n, align);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(size_t n) { return AllocateOrThrow(n, 0); }
void* operator new[](size_t n) { return AllocateOrThrow(n, 0); }
void* operator new(size_t n, std::align_val_t a) { return AllocateOrThrow(n, size_t(a)); }
void* operator new[](size_t n, std::align_val_t a) { return AllocateOrThrow(n, size_t(a)); }
void* operator new(size_t n, const std::nothrow_t&) noexcept { return Allocate(n, 0); }
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return Allocate(n, 0); }
void* operator new(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return Allocate(n, size_t(a));
}
void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return Allocate(n, size_t(a));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { std::free(p); }

namespace {

using swa_test::SlotFixture;

struct Observed {
  std::vector<swa_test::SlotImage> slots;
  swa_plan_info_t plan{};
  bool operator==(const Observed& o) const {
    return slots == o.slots && std::memcmp(&plan, &o.plan, sizeof plan) == 0;
  }
};

Observed Observe(const SlotFixture& f, const swa_plan_t* plan) {
  Observed o;
  for (uint32_t s = 0; s < f.layout.max_slots; ++s) o.slots.push_back(f.Image(s));
  o.plan.struct_size = sizeof o.plan;
  if (plan != nullptr) EXPECT_EQ(swa_plan_info(plan, &o.plan), SWA_OK);
  return o;
}

// Runs `call` with the N-th allocation failing, for N = 0, 1, ... until a run
// injects nothing; `reset` restores the starting point between runs. Returns
// how many allocation points were failed.
template <typename Call, typename Reset>
int FailEachAllocation(const SlotFixture& f, const swa_plan_t* plan, Call call, Reset reset) {
  for (long n = 0; n < 10000; ++n) {
    reset();
    const Observed before = Observe(f, plan);
    const long injected = g_injected.load();
    g_countdown = n;
    const swa_status_t s = call();
    g_countdown = -1;
    if (g_injected.load() == injected) {
      EXPECT_EQ(s, SWA_OK) << swa_last_error();
      return static_cast<int>(n);
    }
    if (s == SWA_OK) continue;  // the failed allocation had a fallback
    EXPECT_EQ(s, SWA_RESOURCE_EXHAUSTED) << "allocation " << n << ": " << swa_last_error();
    EXPECT_NE(swa_last_error()[0], '\0');
    EXPECT_TRUE(Observe(f, plan) == before) << "allocation " << n << " failed and changed state";
  }
  ADD_FAILURE() << "never ran out of allocations to fail";
  return -1;
}

swa_kv_store_t MemoryStore() {
  swa_store_memory_config_t mc;
  swa_store_memory_config_init(&mc);
  swa_kv_store_t t;
  swa_kv_store_init(&t);
  EXPECT_EQ(swa_store_memory_create(&mc, &t), SWA_OK);
  return t;
}

TEST(AllocationFailure, PlanBuild) {
  SlotFixture f;
  swa_plan_t* plan = nullptr;
  const swa_seq_t seqs[2] = {{f.a, 3, 3, 0}, {f.b, 40, 40, 0}};  // ring-only and staged
  const int points = FailEachAllocation(
      f, nullptr,
      [&] { return swa_plan_build(plan, seqs, 2); },
      [&] {
        swa_plan_destroy(plan);
        ASSERT_EQ(swa_plan_create(f.cache, &plan), SWA_OK);
        ASSERT_EQ(swa_slot_reset(f.cache, f.a), SWA_OK);
        ASSERT_EQ(swa_slot_reset(f.cache, f.b), SWA_OK);
      });
  RecordProperty("allocation_points", points);
  EXPECT_GT(points, 0);
  swa_plan_destroy(plan);
}

// Regression: a bad_alloc in the CPU attention's thread-local workspace left
// it claiming capacity with no memory; the next step on the thread crashed.
TEST(AllocationFailure, Step) {
  SlotFixture f;
  swa_plan_t* plan = nullptr;
  ASSERT_EQ(swa_plan_create(f.cache, &plan), SWA_OK);
  const int t = 4;
  std::vector<float> q(t * 2 * 64, 0.25f), k(t * 64, -0.5f), out(t * 2 * 64);
  swa_step_args_t a;
  swa_step_args_init(&a);
  a.q = q.data();
  a.k_new = k.data();
  a.out = out.data();
  int32_t end = 0;
  const int points = FailEachAllocation(
      f, plan,
      [&] { return swa_step(f.cache, plan, &a); },
      [&] {
        const swa_seq_t seq = {f.a, t, end += t, 0};  // a fresh build: the first step prepares it
        ASSERT_EQ(swa_plan_build(plan, &seq, 1), SWA_OK) << swa_last_error();
      });
  RecordProperty("allocation_points", points);
  EXPECT_GT(points, 0);
  swa_plan_destroy(plan);
}

TEST(AllocationFailure, SaveRestoreAndSetStore) {
  SlotFixture f;
  const swa_kv_store_t first = MemoryStore();
  ASSERT_EQ(swa_cache_set_store(f.cache, &first), SWA_OK);
  f.Fill(f.a, 5);
  int key = 0;
  FailEachAllocation(f, nullptr, [&] { return f.Save(f.a, "k" + std::to_string(key)); },
                     [&] { ++key; });
  ASSERT_EQ(f.Save(f.a, "kept"), SWA_OK);
  f.Fill(f.b, 6);
  FailEachAllocation(f, nullptr, [&] { return f.Restore(f.b, "kept"); },
                     [&] { ASSERT_EQ(swa_slot_reset(f.cache, f.b), SWA_OK); f.Fill(f.b, 6); });
  EXPECT_TRUE(f.Holds(f.b, 5));
  // Attaching: on failure the caller still owns the table and must release it.
  swa_kv_store_t t{};
  FailEachAllocation(f, nullptr,
                     [&] {
                       const swa_status_t s = swa_cache_set_store(f.cache, &t);
                       if (s != SWA_OK) t.release(t.user_data);
                       return s;
                     },
                     [&] { t = MemoryStore(); });
}

}  // namespace
