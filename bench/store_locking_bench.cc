// Save/restore next to plan building, through the public C API: three threads
// save and restore their own slots through the built-in memory store while a
// fourth builds (and cancels) decode plans on other slots. Prints plan builds
// per second with and without the store traffic, and the save/restore
// throughput, so that a slot-table lock held during payload copies shows up as
// a drop in plan builds/s.
//
//   store_locking_bench [--seconds=S]   (default 3 s per phase)
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "swacache.h"

namespace {

constexpr int kStoreThreads = 3;
constexpr uint32_t kPlanSeqs = 8;
constexpr int32_t kPrefix = 200;

void Check(swa_status_t s, const char* what) {
  if (s == SWA_OK) return;
  std::fprintf(stderr, "%s failed: %s: %s\n", what, swa_status_string(s), swa_last_error());
  std::exit(1);
}

// W = 128, N = 5, 20 stored + 20 dropped MQA layers (as bench/store_bench).
swa_cache_t* MakeCache() {
  std::vector<swa_layer_desc_t> layers(40);
  for (int i = 0; i < 40; ++i) {
    swa_layer_desc_init(&layers[i]);
    layers[i].role = i < 20 ? SWA_LAYER_STORED : SWA_LAYER_DROPPED;
  }
  swa_config_t config;
  swa_config_init(&config);
  config.window = 128;
  config.draft_tokens = 5;
  config.max_slots = 2 * kStoreThreads + kPlanSeqs;
  config.backend = SWA_BACKEND_CPU;
  config.num_layers = static_cast<uint32_t>(layers.size());
  config.layers = layers.data();
  swa_cache_t* cache = nullptr;
  Check(swa_cache_create(&config, &cache), "swa_cache_create");
  return cache;
}

void AttachMemoryStore(swa_cache_t* cache) {
  swa_store_memory_config_t mc;
  swa_store_memory_config_init(&mc);
  swa_kv_store_t store;
  swa_kv_store_init(&store);
  Check(swa_store_memory_create(&mc, &store), "swa_store_memory_create");
  Check(swa_cache_set_store(cache, &store), "swa_cache_set_store");
}

// Latencies of build + cancel in power-of-two nanosecond buckets.
struct Latency {
  uint64_t bucket[40] = {};
  uint64_t max_ns = 0;
  void Add(uint64_t ns) {
    int b = 0;
    while (b < 39 && (uint64_t{1} << (b + 1)) <= ns) ++b;
    ++bucket[b];
    if (ns > max_ns) max_ns = ns;
  }
  // Upper bound of the bucket that holds quantile `q`.
  double QuantileUs(double q) const {
    uint64_t total = 0, seen = 0;
    for (uint64_t c : bucket) total += c;
    for (int b = 0; b < 40; ++b) {
      seen += bucket[b];
      if (seen >= q * total) return double(uint64_t{1} << (b + 1)) / 1e3;
    }
    return double(max_ns) / 1e3;
  }
};

struct Counts {
  uint64_t plan_builds = 0;
  uint64_t saves = 0;
  uint64_t restores = 0;
  Latency plan_latency;
};

// Builds and cancels one decode step over `slots` until `stop`.
uint64_t PlanLoop(swa_cache_t* cache, const std::vector<uint32_t>& slots,
                  const std::atomic<bool>& stop, Latency* latency) {
  swa_plan_t* plan = nullptr;
  Check(swa_plan_create(cache, &plan), "swa_plan_create");
  std::vector<swa_seq_t> decode;
  for (uint32_t s : slots) decode.push_back({s, 1, kPrefix + 1, 0});
  uint64_t builds = 0;
  while (!stop.load(std::memory_order_relaxed)) {
    const auto start = std::chrono::steady_clock::now();
    Check(swa_plan_build(plan, decode.data(), static_cast<uint32_t>(decode.size())),
          "swa_plan_build");
    Check(swa_plan_cancel(plan), "swa_plan_cancel");
    latency->Add(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                           std::chrono::steady_clock::now() - start)
                                           .count()));
    ++builds;
  }
  swa_plan_destroy(plan);
  return builds;
}

// Saves slot `a` and restores it into slot `b` until `stop`.
void StoreLoop(swa_cache_t* cache, int t, uint32_t a, uint32_t b, const std::atomic<bool>& stop,
               std::atomic<uint64_t>* saves, std::atomic<uint64_t>* restores) {
  const std::string key = "bench-seq-" + std::to_string(t);
  const auto* k = reinterpret_cast<const uint8_t*>(key.data());
  while (!stop.load(std::memory_order_relaxed)) {
    Check(swa_slot_save(cache, a, k, key.size()), "swa_slot_save");
    saves->fetch_add(1, std::memory_order_relaxed);
    Check(swa_slot_restore(cache, b, k, key.size()), "swa_slot_restore");
    restores->fetch_add(1, std::memory_order_relaxed);
  }
}

Counts RunPhase(swa_cache_t* cache, const std::vector<uint32_t>& plan_slots,
                const std::vector<uint32_t>& store_slots, bool with_store, double seconds) {
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> saves{0}, restores{0};
  std::vector<std::thread> workers;
  if (with_store)
    for (int t = 0; t < kStoreThreads; ++t)
      workers.emplace_back(StoreLoop, cache, t, store_slots[2 * t], store_slots[2 * t + 1],
                           std::cref(stop), &saves, &restores);
  Counts counts;
  std::thread planner(
      [&] { counts.plan_builds = PlanLoop(cache, plan_slots, stop, &counts.plan_latency); });
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  planner.join();
  for (std::thread& w : workers) w.join();
  counts.saves = saves.load();
  counts.restores = restores.load();
  return counts;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 3.0;
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--seconds=", 10) == 0) seconds = std::atof(argv[i] + 10);

  swa_cache_t* cache = MakeCache();
  AttachMemoryStore(cache);
  swa_layout_t layout;
  layout.struct_size = sizeof layout;
  Check(swa_cache_layout(cache, &layout), "swa_cache_layout");

  std::vector<uint32_t> store_slots(2 * kStoreThreads), plan_slots(kPlanSeqs);
  for (uint32_t& s : store_slots) Check(swa_slot_alloc(cache, &s), "swa_slot_alloc");
  for (uint32_t& s : plan_slots) Check(swa_slot_alloc(cache, &s), "swa_slot_alloc");
  // Give the store slots random bytes and the plan slots a 200-token prefix.
  swa_tensor_view_t view;
  view.struct_size = sizeof view;
  Check(swa_cache_layer_view(cache, 0, &view), "swa_cache_layer_view");
  auto* pool = static_cast<uint8_t*>(view.data);
  uint64_t x = 88172645463325252ull;
  for (uint32_t s = 0; s < layout.max_slots; ++s)  // layer 0 starts the stored region
    for (uint64_t i = 0; i < layout.stored_bytes; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      pool[s * layout.slot_bytes + i] = static_cast<uint8_t>(x);
    }
  swa_plan_t* prefill = nullptr;
  Check(swa_plan_create(cache, &prefill), "swa_plan_create");
  std::vector<swa_seq_t> seqs;
  for (uint32_t s : plan_slots) seqs.push_back({s, kPrefix, kPrefix, 0});
  for (uint32_t s : store_slots) seqs.push_back({s, kPrefix, kPrefix, 0});
  Check(swa_plan_build(prefill, seqs.data(), static_cast<uint32_t>(seqs.size())), "prefill");
  swa_plan_destroy(prefill);

  const Counts alone = RunPhase(cache, plan_slots, store_slots, false, seconds);
  const Counts mixed = RunPhase(cache, plan_slots, store_slots, true, seconds);
  const double mb = static_cast<double>(layout.stored_bytes) / 1e6;
  std::printf("store_locking_bench: %.1f s per phase, %u-seq decode plans, %d save/restore "
              "threads, stored region %.2f MB, %u hardware threads\n",
              seconds, kPlanSeqs, kStoreThreads, mb, std::thread::hardware_concurrency());
  std::printf("plan builds/s, planner alone          %10.0f\n", alone.plan_builds / seconds);
  std::printf("plan builds/s, with 3 store threads   %10.0f  (%.2fx alone)\n",
              mixed.plan_builds / seconds,
              alone.plan_builds ? double(mixed.plan_builds) / double(alone.plan_builds) : 0.0);
  for (const Counts* c : {&alone, &mixed})
    std::printf("build+cancel latency %-8s p50 <= %.1f us, p99 <= %.1f us, p99.9 <= %.1f us, "
                "max %.1f us\n",
                c == &alone ? "alone:" : "mixed:", c->plan_latency.QuantileUs(0.5),
                c->plan_latency.QuantileUs(0.99), c->plan_latency.QuantileUs(0.999),
                double(c->plan_latency.max_ns) / 1e3);
  std::printf("saves/s    %8.0f  = %6.2f GB/s\n", mixed.saves / seconds,
              mixed.saves * mb / 1e3 / seconds);
  std::printf("restores/s %8.0f  = %6.2f GB/s\n", mixed.restores / seconds,
              mixed.restores * mb / 1e3 / seconds);
  swa_cache_destroy(cache);
  return 0;
}
