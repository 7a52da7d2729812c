// Prefix reuse through a store (issue 32): the longest-prefix probe and the
// checkpoint save/restore, through the public C API, for the memory store and
// a Redis server started by this program on loopback (no persistence), in one
// run. Each figure stands next to its baseline measured in the same run:
//  - probe: swa_cache_store_probe over N candidate keys (longest first) with
//    the first present key at depth d, against the loop an engine writes
//    without it (swa_cache_store_exists key by key, stopping at the first hit);
//  - save_at / restore of a checkpoint of one DeepSeek-V4-like sequence (W =
//    128, N = 5, 20 stored + 20 dropped MQA layers of 134 x 528 bytes:
//    1,415,040 stored bytes), against memcpy of the same bytes.
// Prints Markdown tables (docs/perf/prefix-store-*.md). Redis is skipped with a
// printed reason when redis-server is not on PATH or the build has no Redis store.
//   build-dev/bench/prefix_store_bench
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "swacache.h"
#include "tests/api/redis_server.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kLayers = 40, kStoredLayers = 20;
constexpr int32_t kEnd = 1000;  // the sequence's written_end
constexpr int32_t kCheckpoint = 996;  // c: a checkpoint lagging it by 4
constexpr int kCandidates = 32;  // e.g. a 131,072-token prompt at K = 4096

void Check(swa_status_t s, const char* what) {
  if (s != SWA_OK) {
    std::fprintf(stderr, "prefix_store_bench: %s: %s\n", what, swa_last_error());
    std::exit(1);
  }
}

std::string CpuName() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

// Median seconds per call of `ours` and of `base`, measured in alternating
// batches (of at least ~2 ms each) for about `seconds`, so that both see the
// same load on a shared machine.
std::pair<double, double> PerCall(const std::function<void()>& ours,
                                  const std::function<void()>& base, double seconds = 0.6) {
  auto batch_of = [](const std::function<void()>& op) {
    op();  // warm up
    int n = 1;
    for (;;) {
      const auto t0 = Clock::now();
      for (int i = 0; i < n; ++i) op();
      if (std::chrono::duration<double>(Clock::now() - t0).count() > 2e-3 || n >= (1 << 20)) return n;
      n *= 2;
    }
  };
  const int na = batch_of(ours), nb = batch_of(base);
  auto time = [](const std::function<void()>& op, int n) {
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) op();
    return std::chrono::duration<double>(Clock::now() - t0).count() / n;
  };
  std::vector<double> a, b;
  const auto start = Clock::now();
  while (a.size() < 7 || std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
    a.push_back(time(ours, na));
    b.push_back(time(base, nb));
    if (a.size() >= 1000) break;
  }
  auto median = [](std::vector<double>& t) {
    std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
    return t[t.size() / 2];
  };
  return {median(a), median(b)};
}

struct Rig {
  swa_layer_desc_t d[kLayers];
  swa_cache_t* cache = nullptr;
  uint64_t stored_bytes = 0;
  uint32_t src = 0, dst = 0;

  Rig() {
    for (uint32_t l = 0; l < kLayers; ++l) {
      swa_layer_desc_init(&d[l]);  // MQA, one 512-wide MXFP8 vector (K = V): 528 B per token
      d[l].q_heads = 1;  // the query heads do not change what is stored
      d[l].role = l < kStoredLayers ? SWA_LAYER_STORED : SWA_LAYER_DROPPED;
    }
    swa_config_t cfg;
    swa_config_init(&cfg);
    cfg.window = 128;
    cfg.draft_tokens = 5;  // R = 134
    cfg.max_slots = 2;
    cfg.backend = SWA_BACKEND_CPU;
    cfg.num_threads = 1;
    cfg.num_layers = kLayers;
    cfg.layers = d;
    Check(swa_cache_create(&cfg, &cache), "swa_cache_create");
    Check(swa_slot_alloc(cache, &src), "swa_slot_alloc");
    Check(swa_slot_alloc(cache, &dst), "swa_slot_alloc");
    swa_layout_t lay;
    lay.struct_size = sizeof lay;
    Check(swa_cache_layout(cache, &lay), "swa_cache_layout");
    stored_bytes = lay.stored_bytes;
    // Prefill 0 ... kEnd - 1 with random K/V, in chunks of 100.
    swa_plan_t* plan = nullptr;
    Check(swa_plan_create(cache, &plan), "swa_plan_create");
    std::mt19937 rng(32);
    std::uniform_real_distribution<float> u(-2, 2);
    constexpr int32_t kChunk = 100;
    std::vector<float> q(kChunk * 512), k(kChunk * 512), out(kChunk * 512);
    for (int32_t p = 0; p < kEnd; p += kChunk) {
      swa_seq_t s = {src, kChunk, p + kChunk, 0};
      Check(swa_plan_build(plan, &s, 1), "swa_plan_build");
      for (uint32_t l = 0; l < kLayers; ++l) {
        for (float& x : q) x = u(rng);
        for (float& x : k) x = u(rng);
        swa_step_args_t a;
        swa_step_args_init(&a);
        a.layer = l;
        a.q = q.data();
        a.k_new = k.data();
        a.out = out.data();
        Check(swa_step(cache, plan, &a), "swa_step");
      }
    }
    swa_plan_destroy(plan);
  }
  ~Rig() { swa_cache_destroy(cache); }
};

struct Row {
  std::string store, what, ours, base, ratio;
};

std::string Us(double s) {
  char b[64];
  std::snprintf(b, sizeof b, "%.1f us", s * 1e6);
  return b;
}

std::string GBs(double bytes, double s) {
  char b[64];
  std::snprintf(b, sizeof b, "%.2f GB/s (%.1f us)", bytes / s / 1e9, s * 1e6);
  return b;
}

// baseline time / our time: above 1, ours is faster.
std::string Ratio(double x) {
  char b[64];
  std::snprintf(b, sizeof b, "%.2fx", x);
  return b;
}

const uint8_t* U8(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }

// Measures one store attached to the rig's cache; appends rows.
void Measure(Rig& rig, const std::string& name, std::vector<Row>& rows) {
  const std::string tag = name + ":";
  // Present checkpoints: hit:0 ... hit:N-1 (the same blob bytes under N keys).
  std::vector<std::string> hit(kCandidates), miss(kCandidates);
  for (int i = 0; i < kCandidates; ++i) {
    hit[i] = tag + "hit:" + std::to_string(i);
    miss[i] = tag + "miss:" + std::to_string(i);
    Check(swa_slot_save_at(rig.cache, rig.src, kCheckpoint, U8(hit[i]), hit[i].size()),
          "swa_slot_save_at");
    (void)swa_cache_store_remove(rig.cache, U8(miss[i]), miss[i].size());
  }
  // Probe: depth d = index of the first present key (N = none present).
  for (int depth : {0, 1, 8, 16, kCandidates - 1, kCandidates}) {
    std::vector<std::string> keys;
    for (int i = 0; i < kCandidates; ++i) keys.push_back(i < depth ? miss[i] : hit[i]);
    std::vector<const uint8_t*> ptr;
    std::vector<size_t> len;
    for (const std::string& k : keys) {
      ptr.push_back(U8(k));
      len.push_back(k.size());
    }
    const int32_t want = depth < kCandidates ? depth : -1;
    const auto [probe, loop] = PerCall([&] {
      int32_t found = -2;
      Check(swa_cache_store_probe(rig.cache, ptr.data(), len.data(), kCandidates, &found),
            "swa_cache_store_probe");
      if (found != want) {
        std::fprintf(stderr, "probe: found %d, expected %d\n", found, want);
        std::exit(1);
      }
    }, [&] {
      int32_t found = -1;
      for (int i = 0; i < kCandidates; ++i) {
        uint32_t e = 0;
        Check(swa_cache_store_exists(rig.cache, ptr[i], len[i], &e), "swa_cache_store_exists");
        if (e) {
          found = i;
          break;
        }
      }
      if (found != want) std::exit(1);
    });
    const std::string what = "probe, " + std::to_string(kCandidates) + " keys, " +
                             (depth < kCandidates ? "hit at index " + std::to_string(depth)
                                                  : std::string("no hit"));
    rows.push_back({name, what, Us(probe), Us(loop) + " (exists key by key)",
                    Ratio(loop / probe)});
  }
  // Checkpoint save_at / restore against memcpy of the stored bytes.
  std::vector<uint8_t> a(rig.stored_bytes), b(rig.stored_bytes);
  std::mt19937_64 rng(7);
  for (auto& x : a) x = static_cast<uint8_t>(rng());
  const auto copy_op = [&] {
    std::memcpy(b.data(), a.data(), a.size());
    asm volatile("" : : "r"(b.data()) : "memory");
  };
  const std::string key = tag + "ckpt";
  const auto [save, copy_s] = PerCall([&] {
    Check(swa_slot_save_at(rig.cache, rig.src, kCheckpoint, U8(key), key.size()), "swa_slot_save_at");
  }, copy_op);
  const auto [restore, copy_r] = PerCall([&] {
    Check(swa_slot_restore(rig.cache, rig.dst, U8(key), key.size()), "swa_slot_restore");
  }, copy_op);
  swa_slot_info_t info;
  info.struct_size = sizeof info;
  Check(swa_slot_info(rig.cache, rig.dst, &info), "swa_slot_info");
  if (info.written_end != kCheckpoint) {
    std::fprintf(stderr, "restore: written_end %d, expected %d\n", info.written_end, kCheckpoint);
    std::exit(1);
  }
  const double n = double(rig.stored_bytes);
  rows.push_back({name, "checkpoint save_at (c = E - 4)", GBs(n, save), GBs(n, copy_s) + " memcpy",
                  Ratio(copy_s / save)});
  rows.push_back({name, "checkpoint restore", GBs(n, restore), GBs(n, copy_r) + " memcpy",
                  Ratio(copy_r / restore)});
  for (int i = 0; i < kCandidates; ++i) (void)swa_cache_store_remove(rig.cache, U8(hit[i]), hit[i].size());
  (void)swa_cache_store_remove(rig.cache, U8(key), key.size());
}

}  // namespace

int main() {
  Rig rig;
  std::printf("prefix_store_bench: %s; DeepSeek-V4-like layout, %llu stored bytes per checkpoint "
              "(20 layers x 134 x 528), written_end %d, checkpoint c = %d\n\n",
              CpuName().c_str(), static_cast<unsigned long long>(rig.stored_bytes), kEnd, kCheckpoint);
  std::vector<Row> rows;
  {
    swa_store_memory_config_t mc;
    swa_store_memory_config_init(&mc);
    swa_kv_store_t t;
    swa_kv_store_init(&t);
    Check(swa_store_memory_create(&mc, &t), "swa_store_memory_create");
    Check(swa_cache_set_store(rig.cache, &t), "swa_cache_set_store");
    Measure(rig, "memory", rows);
  }
  std::string redis_note;
  if (!swa_test::BuildHasRedisStore()) {
    redis_note = "Redis skipped: this build has no Redis store (hiredis not found at configure time)";
  } else if (!swa_test::RedisServerOnPath()) {
    redis_note = "Redis skipped: redis-server is not on PATH";
  } else {
    swa_test::RedisServer server;
    if (server.port() < 0) {
      redis_note = "Redis skipped: redis-server did not start";
    } else {
      swa_store_redis_config_t rc;
      swa_store_redis_config_init(&rc);
      rc.port = uint32_t(server.port());
      swa_kv_store_t t;
      swa_kv_store_init(&t);
      Check(swa_store_redis_create(&rc, &t), "swa_store_redis_create");
      Check(swa_cache_set_store(rig.cache, &t), "swa_cache_set_store");
      Measure(rig, "redis (loopback)", rows);
      Check(swa_cache_set_store(rig.cache, nullptr), "swa_cache_set_store");
    }
  }
  std::printf("| store | operation | ours | baseline | baseline time / ours |\n|---|---|---|---|---|\n");
  for (const Row& r : rows)
    std::printf("| %s | %s | %s | %s | %s |\n", r.store.c_str(), r.what.c_str(), r.ours.c_str(),
                r.base.c_str(), r.ratio.c_str());
  if (!redis_note.empty()) std::printf("\n%s\n", redis_note.c_str());
  return 0;
}
