// Save and restore throughput of DeepSeek-V4-like sequences (W = 128, N = 5,
// 20 stored + 20 dropped MQA layers of 134 x 528 bytes: 1,415,040 stored
// bytes) from 1, 4 and 16 threads, each on its own slots and key, against one
// Redis server and a 3-master Redis Cluster started by this program on
// loopback (no persistence, no replicas), each without and with the memory
// store as a tier in front; the memory store alone is the ceiling. Prints a
// Markdown table (docs/perf/store-cluster-*.md).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cache/cache.h"
#include "store/blob_store.h"
#include "store/memory_store.h"
#include "cache/slot_io.h"
#include "store/tiered_store.h"

#if defined(SWACACHE_HAVE_REDIS)
#include "store/redis_cluster_store.h"
#include "store/redis_store.h"
#include "tests/unit/redis_cluster_harness.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kMaxThreads = 16;
constexpr double kSeconds = 0.8;  // per measurement

std::unique_ptr<swa::Cache> MakeCache() {
  swa::ModelSpec spec;
  spec.window = 128;
  spec.draft_tokens = 5;  // R = 134
  spec.max_slots = 2 * kMaxThreads;
  for (int i = 0; i < 40; ++i) {
    swa::LayerSpec l;  // MQA, 1 x 512-wide MXFP8 vector = 528 bytes per token
    l.role = i < 20 ? swa::Role::kStored : swa::Role::kDropped;
    spec.layers.push_back(l);
  }
  auto cache = std::move(*swa::Cache::Create(spec, swa::CacheOptions{}));
  std::mt19937_64 rng(1);
  for (uint64_t i = 0; i < cache->layout().pool_bytes(); ++i) cache->pool()[i] = static_cast<uint8_t>(rng());
  for (int i = 0; i < 2 * kMaxThreads; ++i) (void)*cache->slots().Alloc();
  for (int t = 0; t < kMaxThreads; ++t) (void)cache->slots().Set(2 * t, {true, 100000, 99872});
  return cache;
}

// Runs `op(thread)` on `threads` threads for kSeconds; returns calls/s.
double Rate(int threads, const std::function<bool(int)>& op) {
  std::atomic<bool> stop{false}, failed{false};
  std::atomic<int64_t> calls{0};
  std::vector<std::thread> pool;
  const auto t0 = Clock::now();
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      while (!stop) {
        if (!op(t)) failed = true;
        ++calls;
      }
    });
  std::this_thread::sleep_for(std::chrono::duration<double>(kSeconds));
  stop = true;
  for (auto& th : pool) th.join();
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (failed) std::fprintf(stderr, "some calls failed\n");
  return calls / s;
}

void Row(swa::Cache& cache, const char* target, const char* front,
         const std::function<std::unique_ptr<swa::KvStore>()>& make) {
  const uint64_t bytes = cache.layout().stored_bytes();
  for (int threads : {1, 4, 16}) {
    auto blob = std::make_shared<swa::BlobStore>(make(), cache.layout().fingerprint());
    const swa::SlotIo io = cache.slot_io();
    auto key = [](int t) { return "bench-seq-" + std::to_string(t); };
    const double saves = Rate(threads, [&](int t) { return swa::SaveSlot(io, *blob, 2 * t, key(t)).ok(); });
    const double restores =
        Rate(threads, [&](int t) { return swa::RestoreSlot(io, *blob, 2 * t + 1, key(t)).ok(); });
    std::printf("| %-14s | %-6s | %2d | %8.0f | %6.2f | %8.0f | %6.2f |\n", target, front, threads, saves,
                saves * bytes / 1e9, restores, restores * bytes / 1e9);
    std::fflush(stdout);
  }
}

std::unique_ptr<swa::KvStore> Front(std::unique_ptr<swa::KvStore> back) {
  std::vector<std::unique_ptr<swa::KvStore>> tiers;
  tiers.push_back(std::make_unique<swa::MemoryStore>(uint64_t{1} << 30));
  tiers.push_back(std::move(back));
  return std::move(*swa::TieredStore::Create(std::move(tiers)));
}

}  // namespace

int main() {
  using swa::testing::ClusterSpec;
  using swa::testing::RedisClusterProcess;
  auto cache = MakeCache();
  // One plain server (not cluster mode), nothing persisted.
  const int port = swa::testing::FreeClusterPort();
  const pid_t single = swa::testing::SpawnQuiet({"redis-server", "--port", std::to_string(port), "--bind",
                                                 "127.0.0.1", "--save", "", "--appendonly", "no",
                                                 "--dir", "/tmp"});
  for (int i = 0; i < 200 && swa::testing::Admin(port, {"PING"}).str != "PONG"; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  RedisClusterProcess cluster(ClusterSpec{3, 0, "", 2000});
  if (!cluster.ok()) {
    std::fprintf(stderr, "cluster: %s\n", cluster.error().c_str());
    kill(single, SIGKILL);
    waitpid(single, nullptr, 0);
    return 1;
  }
  std::printf("stored bytes per sequence: %llu; %.1f s per cell; %u hardware threads\n\n",
              (unsigned long long)cache->layout().stored_bytes(), kSeconds, std::thread::hardware_concurrency());
  std::printf("| target         | front  | th | saves/s  | GB/s   | restores/s | GB/s |\n");
  std::printf("|----------------|--------|----|----------|--------|----------|--------|\n");
  auto redis = [&] {
    swa::RedisStoreOptions o;
    o.port = port;
    o.max_connections = kMaxThreads;
    return std::unique_ptr<swa::KvStore>(std::move(*swa::RedisStore::Connect(o)));
  };
  auto clustered = [&] {
    swa::RedisClusterOptions o;
    o.seeds = *swa::ParseClusterNodes(cluster.Seeds());
    o.connections_per_node = kMaxThreads;
    return std::unique_ptr<swa::KvStore>(std::move(*swa::RedisClusterStore::Connect(o)));
  };
  Row(*cache, "memory only", "-", [] { return std::make_unique<swa::MemoryStore>(uint64_t{1} << 30); });
  Row(*cache, "redis (1)", "none", redis);
  Row(*cache, "redis (1)", "memory", [&] { return Front(redis()); });
  Row(*cache, "cluster (3)", "none", clustered);
  Row(*cache, "cluster (3)", "memory", [&] { return Front(clustered()); });
  kill(single, SIGKILL);
  waitpid(single, nullptr, 0);
  return 0;
}

#else
int main() {
  std::printf("store_cluster_bench: this build has no Redis store (hiredis not found)\n");
  return 0;
}
#endif
