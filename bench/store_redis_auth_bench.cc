// Restores of one DeepSeek-V4-like checkpoint (1,415,040 stored bytes) from
// a redis-server on loopback started here, with and without a store secret
// (docs/store.md "Authenticated blobs"), timed in alternating batches in one
// process (medians of 15 batches of 20; wall and process CPU time):
//   - memcpy of the stored bytes;
//   - the GET alone, through hiredis's reply object and a copy out (the
//     receive path before 2026-12-03 evening) and straight from the socket
//     into the buffer (RedisConnection::ReadBulkInto, today's);
//   - the untagged restore;
//   - the tagged restore (chunked tag, 64 KiB chunks) with the chunks hashed
//     after the whole blob is in (the store seen through a wrapper that has
//     only Get) and while it arrives (the Redis store's GetStreaming), on 1
//     and 2 hash threads; and the single-pass tag.
// Target: tagged restore >= 0.70x untagged. Skips with a reason without
// redis-server or a Redis store.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cache/cache.h"
#include "cache/slot_io.h"
#include "store/blob_store.h"
#include "store/kv_store.h"
#include "tests/api/redis_server.h"
#if defined(SWACACHE_HAVE_REDIS)
#include <hiredis/hiredis.h>

#include "store/redis_pool.h"
#include "store/redis_store.h"
#endif

namespace {

#if defined(SWACACHE_HAVE_REDIS)
// A view of a store that has only Get (the default GetStreaming: the blob is
// reported once whole, so the tag is hashed after it is in).
class GetOnly final : public swa::KvStore {
 public:
  explicit GetOnly(swa::KvStore* s) : s_(s) {}
  absl::Status Put(std::string_view k, absl::Span<const swa::ConstByteSpan> p) override {
    return s_->Put(k, p);
  }
  absl::StatusOr<uint64_t> Get(std::string_view k, absl::Span<const swa::ByteSpan> p) override {
    return s_->Get(k, p);
  }
  absl::StatusOr<bool> Exists(std::string_view k) override { return s_->Exists(k); }
  absl::Status Remove(std::string_view k) override { return s_->Remove(k); }

 private:
  swa::KvStore* s_;
};

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

std::unique_ptr<swa::RedisStore> Connect(int port) {
  swa::RedisStoreOptions o;
  o.host = "127.0.0.1";
  o.port = static_cast<uint32_t>(port);
  absl::StatusOr<std::unique_ptr<swa::RedisStore>> s = swa::RedisStore::Connect(o);
  if (!s.ok()) {
    std::fprintf(stderr, "redis store: %s\n", std::string(s.status().message()).c_str());
    std::exit(1);
  }
  return std::move(*s);
}
#endif

}  // namespace

int main() {
#if !defined(SWACACHE_HAVE_REDIS)
  std::printf("skipped: this build has no Redis store (hiredis not found at configure time)\n");
  return 0;
#else
  if (!swa_test::RedisServerOnPath()) {
    std::printf("skipped: redis-server is not on PATH\n");
    return 0;
  }
  swa_test::RedisServer server;
  if (server.port() < 0) {
    std::printf("skipped: redis-server did not start\n");
    return 0;
  }
  swa::ModelSpec spec;
  spec.window = 128;
  spec.draft_tokens = 5;
  spec.max_slots = 4;
  for (int i = 0; i < 40; ++i) {
    swa::LayerSpec l;  // MQA, 1 x 512-wide MXFP8 vector = 528 bytes per token
    l.role = i < 20 ? swa::Role::kStored : swa::Role::kDropped;
    spec.layers.push_back(l);
  }
  std::unique_ptr<swa::Cache> cache = std::move(*swa::Cache::Create(spec, swa::CacheOptions{}));
  const uint32_t src = *cache->slots().Alloc(), dst = *cache->slots().Alloc();
  std::mt19937_64 rng(1);
  for (uint64_t i = 0; i < cache->layout().pool_bytes(); ++i) cache->pool()[i] = uint8_t(rng());
  (void)cache->slots().Set(src, {true, 100000, 99872});
  const uint64_t stored = cache->layout().stored_bytes();
  const uint64_t fp = cache->layout().fingerprint();

  // One Redis store per contender (each its own pool), all on one server.
  std::vector<std::unique_ptr<swa::RedisStore>> kept;
  auto blob_store = [&](int chunk_log2, int threads, bool streaming) {
    kept.push_back(Connect(server.port()));
    swa::BlobStoreSecurity sec;
    if (chunk_log2 >= 0) {
      sec.secret = *swa::BlobSecret::Create(std::vector<uint8_t>(32, 0x5A), "secret");
      sec.tag_chunk_log2 = static_cast<uint8_t>(chunk_log2);
      sec.tag_threads = static_cast<size_t>(threads);
      sec.name_space = "c" + std::to_string(chunk_log2);  // tagged and untagged blobs apart
    }
    std::unique_ptr<swa::KvStore> kv;
    if (streaming) {
      kv = std::move(kept.back());
      kept.pop_back();
    } else {
      kv = std::make_unique<GetOnly>(kept.back().get());
    }
    auto s = std::make_shared<swa::BlobStore>(std::move(kv), fp, sec);
    if (!swa::SaveSlot(cache->slot_io(), *s, src, "bench-seq").ok()) std::abort();
    return s;
  };
  auto plain = blob_store(-1, 0, true);
  auto after_1 = blob_store(16, 1, false), after_2 = blob_store(16, 2, false);
  auto stream_1 = blob_store(16, 1, true), stream_2 = blob_store(16, 2, true);
  auto single = blob_store(0, 1, true);

  // The GET alone: hiredis's reply object then a copy out, and straight in.
  const std::string full = plain->FullKey("bench-seq");
  const uint64_t blob_bytes = plain->BlobBytes(stored);
  std::vector<uint8_t> staging(blob_bytes), copy_dst(stored);
  swa::RedisConnectionPool pool(swa::RedisPoolOptions{
      .host = "127.0.0.1", .port = uint32_t(server.port()), .name = "bench", .max_idle = 1});
  std::unique_ptr<swa::RedisStore> direct = Connect(server.port());
  const swa::ByteSpan whole[1] = {swa::ByteSpan(staging.data(), staging.size())};

  struct Probe {
    const char* name;
    std::function<void()> run;
    int base;  // index of the probe it is compared with
  };
  auto restore = [&](std::shared_ptr<swa::BlobStore> s) {
    return [&cache, dst, s] {
      if (!swa::RestoreSlot(cache->slot_io(), *s, dst, "bench-seq").ok()) std::abort();
    };
  };
  const std::vector<Probe> probes = {
      {"memcpy", [&] { std::memcpy(copy_dst.data(), cache->slot_base(src), stored); }, 0},
      {"GET via hiredis reply + copy (before)",
       [&] {
         const swa::RedisReplyLimits bulk{blob_bytes + 64, 0, 0};  // the blob and its framing
         absl::StatusOr<swa::RedisReply> r = pool.Run({"GET", full}, absl::Seconds(5), bulk);
         if (!r.ok() || (*r)->len != blob_bytes) std::abort();
         swa::ScatterFrom(reinterpret_cast<const uint8_t*>((*r)->str), whole);
       },
       1},
      {"GET straight into the buffer (now)",
       [&] {
         if (*direct->Get(full, whole) != blob_bytes) std::abort();
       },
       1},
      {"restore, untagged", restore(plain), 3},
      {"restore, HMAC single-pass (v3)", restore(single), 3},
      {"restore, chunked, hashed after, 1 thread", restore(after_1), 3},
      {"restore, chunked, hashed after, 2 threads", restore(after_2), 3},
      {"restore, chunked, hashed while arriving, 1", restore(stream_1), 3},
      {"restore, chunked, hashed while arriving, 2", restore(stream_2), 3},
  };
  std::vector<std::vector<double>> wall(probes.size()), cpu(probes.size());
  for (const Probe& p : probes) p.run();  // warm
  for (int round = 0; round < 15; ++round)
    for (size_t i = 0; i < probes.size(); ++i) {
      const double c0 = ProcessCpuSeconds();
      const auto t0 = std::chrono::steady_clock::now();
      for (int k = 0; k < 20; ++k) probes[i].run();
      wall[i].push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 20);
      cpu[i].push_back((ProcessCpuSeconds() - c0) / 20);
    }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  double load[3] = {0, 0, 0};
  (void)getloadavg(load, 3);
  std::printf("checkpoint %llu stored bytes, blob %llu bytes; load average %.2f; alternating "
              "batches of 20, medians of 15; CPU = process CPU time per call (all threads, "
              "not redis-server's)\n",
              static_cast<unsigned long long>(stored), static_cast<unsigned long long>(blob_bytes),
              load[0]);
  std::vector<double> w(probes.size());
  for (size_t i = 0; i < probes.size(); ++i) w[i] = median(wall[i]);
  for (size_t i = 0; i < probes.size(); ++i)
    std::printf("%-46s %8.1f us  CPU %8.1f us  %6.2f GB/s  %5.2fx %s%s\n", probes[i].name,
                w[i] * 1e6, median(cpu[i]) * 1e6, double(stored) / w[i] / 1e9,
                w[probes[i].base] / w[i], probes[probes[i].base].name,
                i >= 4 ? " (target >= 0.70x)" : "");
  return 0;
#endif
}
