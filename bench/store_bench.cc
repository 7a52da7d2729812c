// Save and restore throughput of one DeepSeek-V4-like sequence (W = 128,
// N = 5, 20 stored + 20 dropped MQA layers of 134 x 528 bytes) through the
// built-in memory store, next to memcpy of the same stored bytes measured in
// the same run. Targets: save >= 0.5x memcpy, restore >= 0.4x memcpy (a
// restore copies twice and verifies a CRC32C in between, by design). The same
// with authenticated blobs (a 32-byte store secret: HMAC-SHA-256 over every
// blob, docs/store.md "Threat model"): target tagged restore >= 0.7x untagged.
// Tagged benchmarks take two arguments: the tag chunk exponent (0: the
// single-pass tag of versions 3 and 4) and the hash threads. main() then
// times memcpy, the untagged restore and the tagged ones in alternating
// batches (medians of 15), which is what the ratios it prints are from.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <cstring>
#include <functional>
#include <utility>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cache/cache.h"
#include "store/crc32c.h"
#include "store/hash_workers.h"
#include "store/blob_store.h"
#include "store/memory_store.h"
#include "cache/slot_io.h"

namespace {

struct Fixture {
  std::unique_ptr<swa::Cache> cache;
  std::shared_ptr<swa::BlobStore> store;  // the built-in memory store, called directly
  // Others with a store secret, by (tag chunk exponent, hash threads).
  std::map<std::pair<int, int>, std::shared_ptr<swa::BlobStore>> tagged;
  uint32_t src = 0, dst = 0;
  uint64_t stored_bytes = 0;
  std::vector<uint8_t> copy_dst;

  Fixture() {
    swa::ModelSpec spec;
    spec.window = 128;
    spec.draft_tokens = 5;  // R = 134
    spec.max_slots = 4;
    for (int i = 0; i < 40; ++i) {
      swa::LayerSpec l;  // MQA, 1 x 512-wide MXFP8 vector = 528 bytes per token
      l.role = i < 20 ? swa::Role::kStored : swa::Role::kDropped;
      spec.layers.push_back(l);
    }
    cache = std::move(*swa::Cache::Create(spec, swa::CacheOptions{}));
    src = *cache->slots().Alloc();
    dst = *cache->slots().Alloc();
    stored_bytes = cache->layout().stored_bytes();
    std::mt19937_64 rng(1);
    for (uint64_t i = 0; i < cache->layout().pool_bytes(); ++i)
      cache->pool()[i] = static_cast<uint8_t>(rng());
    (void)cache->slots().Set(src, {true, 100000, 99872});
    store = std::make_shared<swa::BlobStore>(std::make_unique<swa::MemoryStore>(uint64_t{1} << 30),
                                             cache->layout().fingerprint());
    cache->SetStore(store);
    copy_dst.resize(stored_bytes, 1);
    if (!swa::SaveSlot(cache->slot_io(), *store, src, "bench-seq").ok()) std::abort();
  }

  // The store with a secret saving with chunk exponent `c` and `threads`
  // hash threads, with the sequence saved in it.
  swa::BlobStore& Tagged(int c, int threads) {
    std::shared_ptr<swa::BlobStore>& s = tagged[{c, threads}];
    if (s == nullptr) {
      const std::vector<uint8_t> secret(32, 0x5A);
      swa::BlobStoreSecurity security;
      security.secret = *swa::BlobSecret::Create(secret, "secret");
      security.tag_chunk_log2 = static_cast<uint8_t>(c);
      security.tag_threads = static_cast<size_t>(threads);
      s = std::make_shared<swa::BlobStore>(std::make_unique<swa::MemoryStore>(uint64_t{1} << 30),
                                           cache->layout().fingerprint(), security);
      if (!swa::SaveSlot(cache->slot_io(), *s, src, "bench-seq").ok()) std::abort();
    }
    return *s;
  }
};

Fixture& F() {
  static Fixture f;
  return f;
}

void BM_Memcpy(benchmark::State& state) {
  Fixture& f = F();
  for (auto _ : state) {
    std::memcpy(f.copy_dst.data(), f.cache->slot_base(f.src), f.stored_bytes);
    benchmark::DoNotOptimize(f.copy_dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(f.stored_bytes));
}

void BM_Save(benchmark::State& state) {
  Fixture& f = F();
  for (auto _ : state) {
    if (!swa::SaveSlot(f.cache->slot_io(), *f.store, f.src, "bench-seq").ok()) state.SkipWithError("save failed");
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(f.stored_bytes));
}

void BM_Restore(benchmark::State& state) {
  Fixture& f = F();
  for (auto _ : state) {
    if (!swa::RestoreSlot(f.cache->slot_io(), *f.store, f.dst, "bench-seq").ok()) state.SkipWithError("restore failed");
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(f.stored_bytes));
}

void BM_SaveTagged(benchmark::State& state) {
  Fixture& f = F();
  swa::BlobStore& tagged = f.Tagged(int(state.range(0)), int(state.range(1)));
  for (auto _ : state) {
    if (!swa::SaveSlot(f.cache->slot_io(), tagged, f.src, "bench-seq").ok()) state.SkipWithError("save failed");
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(f.stored_bytes));
}

void BM_RestoreTagged(benchmark::State& state) {
  Fixture& f = F();
  swa::BlobStore& tagged = f.Tagged(int(state.range(0)), int(state.range(1)));
  for (auto _ : state) {
    if (!swa::RestoreSlot(f.cache->slot_io(), tagged, f.dst, "bench-seq").ok()) state.SkipWithError("restore failed");
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(f.stored_bytes));
}

void BM_Crc32c(benchmark::State& state) {
  Fixture& f = F();
  const auto impl = static_cast<swa::Crc32cImpl>(state.range(0));
  if (!swa::Crc32cSupported(impl)) {
    state.SkipWithError("not supported on this CPU");
    return;
  }
  state.SetLabel(swa::Crc32cImplName(impl));
  for (auto _ : state)
    benchmark::DoNotOptimize(swa::Crc32cWith(impl, 0, f.cache->slot_base(f.src), f.stored_bytes));
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(f.stored_bytes));
}

BENCHMARK(BM_Memcpy)->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(BM_Save)->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(BM_Restore)->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(BM_SaveTagged)->Args({0, 1})->Args({16, 1})->Args({16, 2})
    ->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(BM_RestoreTagged)->Args({0, 1})
    ->Args({14, 1})->Args({14, 2})->Args({16, 1})->Args({16, 2})->Args({18, 1})->Args({18, 2})
    ->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(BM_Crc32c)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond)->MinTime(0.2);

// Records bytes/s per benchmark so that main() can print the ratios.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      auto it = r.counters.find("bytes_per_second");
      const std::string name = r.benchmark_name().substr(0, r.benchmark_name().find('/'));
      if (it != r.counters.end() && !r.error_occurred && !rate_.contains(name))
        rate_[name] = it->second.value;
    }
    ConsoleReporter::ReportRuns(runs);
  }
  double rate(const std::string& name) const {
    auto it = rate_.find(name);
    return it == rate_.end() ? 0.0 : it->second;
  }

 private:
  std::map<std::string, double> rate_;
};

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Wall and process CPU seconds per call of each of `probes`, timed in
// alternating batches of `batch` calls, 15 rounds: the medians.
std::vector<std::pair<double, double>> Interleaved(
    const std::vector<std::function<void()>>& probes, int batch) {
  std::vector<std::vector<double>> wall(probes.size()), cpu(probes.size());
  for (const auto& p : probes) p();  // warm
  for (int round = 0; round < 15; ++round)
    for (size_t i = 0; i < probes.size(); ++i) {
      const double c0 = ProcessCpuSeconds();
      const auto t0 = std::chrono::steady_clock::now();
      for (int k = 0; k < batch; ++k) probes[i]();
      wall[i].push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / batch);
      cpu[i].push_back((ProcessCpuSeconds() - c0) / batch);
    }
  std::vector<std::pair<double, double>> med;
  for (size_t i = 0; i < probes.size(); ++i) {
    std::sort(wall[i].begin(), wall[i].end());
    std::sort(cpu[i].begin(), cpu[i].end());
    med.emplace_back(wall[i][wall[i].size() / 2], cpu[i][cpu[i].size() / 2]);
  }
  return med;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  const double copy = reporter.rate("BM_Memcpy");
  const double save = reporter.rate("BM_Save");
  const double restore = reporter.rate("BM_Restore");
  std::printf("\nstored region: %llu bytes (20 layers x 134 x 528), checksum: %s, hash threads "
              "by default: %zu\n",
              static_cast<unsigned long long>(F().stored_bytes),
              swa::Crc32cImplName(swa::Crc32cBestImpl()), swa::DefaultHashThreads());
  if (copy > 0) {
    std::printf("memcpy   %8.2f GB/s\n", copy / 1e9);
    std::printf("save     %8.2f GB/s  = %.2fx memcpy (target >= 0.50x)\n", save / 1e9, save / copy);
    std::printf("restore  %8.2f GB/s  = %.2fx memcpy (target >= 0.40x)\n", restore / 1e9,
                restore / copy);
  }
  // Tagged against untagged, in alternating batches (both in the same seconds).
  Fixture& f = F();
  struct Probe {
    const char* name;
    std::function<void()> run;
  };
  auto restore_from = [&f](swa::BlobStore* s) {
    return [&f, s] {
      if (!swa::RestoreSlot(f.cache->slot_io(), *s, f.dst, "bench-seq").ok()) std::abort();
    };
  };
  auto save_to = [&f](swa::BlobStore* s) {
    return [&f, s] {
      if (!swa::SaveSlot(f.cache->slot_io(), *s, f.src, "bench-seq").ok()) std::abort();
    };
  };
  const std::vector<Probe> probes = {
      {"memcpy", [&f] {
         std::memcpy(f.copy_dst.data(), f.cache->slot_base(f.src), f.stored_bytes);
         benchmark::DoNotOptimize(f.copy_dst.data());
         benchmark::ClobberMemory();
       }},
      {"restore", restore_from(f.store.get())},
      {"restore, HMAC single-pass (v3)", restore_from(&f.Tagged(0, 1))},
      {"restore, HMAC chunked 64 KiB, 1 thread", restore_from(&f.Tagged(16, 1))},
      {"restore, HMAC chunked 64 KiB, 2 threads", restore_from(&f.Tagged(16, 2))},
      {"restore, HMAC chunked 256 KiB, 2 threads", restore_from(&f.Tagged(18, 2))},
      {"restore, HMAC chunked 16 KiB, 2 threads", restore_from(&f.Tagged(14, 2))},
      {"save", save_to(f.store.get())},
      {"save, HMAC single-pass (v3)", save_to(&f.Tagged(0, 1))},
      {"save, HMAC chunked 64 KiB, 2 threads", save_to(&f.Tagged(16, 2))},
  };
  std::vector<std::function<void()>> runs;
  for (const Probe& p : probes) runs.push_back(p.run);
  const std::vector<std::pair<double, double>> med = Interleaved(runs, 20);
  double load[3] = {0, 0, 0};
  (void)getloadavg(load, 3);
  std::printf("\nalternating batches of 20, medians of 15, load average %.2f (x: restore or "
              "save of the same kind without a secret; CPU: process CPU time per call, all "
              "threads):\n",
              load[0]);
  for (size_t i = 0; i < probes.size(); ++i) {
    const bool is_save = std::strncmp(probes[i].name, "save", 4) == 0;
    const double sec = med[i].first;
    const double base = i == 0 ? sec : is_save ? med[7].first : med[1].first;
    std::printf("%-42s %8.1f us  CPU %8.1f us  %6.2f GB/s  %5.2fx%s\n", probes[i].name,
                sec * 1e6, med[i].second * 1e6, double(f.stored_bytes) / sec / 1e9, base / sec,
                !is_save && i >= 2 ? "  (target >= 0.70x)" : "");
  }
  benchmark::Shutdown();
  return 0;
}
