// Host time per layer of a many-layer decode step through the public API.
//
// A decode step of B sequences runs the same plan through L layers. The
// kernels of each layer are kept tiny (one query head, D = 32, one token per
// sequence, a window of 4 keys) so that what is measured is the per-layer host work around them:
// argument checks, plan views, and whatever a backend derives from the plan.
// The first layer after a build pays the once-per-build preparation; every
// later layer should pay only for its kernels.
//
// Baseline in the same run: swa_plan_build of the same batch (the host work
// that is, by design, done once per step). Uses the public API only, so the
// same source also builds against an older libswacache for a before/after:
//   g++ -O2 -std=c++17 bench/step_layers_bench.cc -Iinclude -Lbuild -lswacache
//
// Usage: step_layers_bench [--layers 48] [--seqs 256] [--steps 200] [--threads 1] [--window 4]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "swacache.h"

namespace {

using Clock = std::chrono::steady_clock;

#define CHECK_OK(expr)                                                         \
  do {                                                                         \
    if ((expr) != SWA_OK) {                                                    \
      std::fprintf(stderr, "%s failed: %s\n", #expr, swa_last_error());        \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Arg(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int layers = Arg(argc, argv, "--layers", 48);
  const int seqs = Arg(argc, argv, "--seqs", 256);
  const int steps = Arg(argc, argv, "--steps", 200);
  const int threads = Arg(argc, argv, "--threads", 1);
  const int window = Arg(argc, argv, "--window", 4);
  const int d = 32, hq = 1;

  std::vector<swa_layer_desc_t> descs(layers);
  for (swa_layer_desc_t& l : descs) {
    swa_layer_desc_init(&l);
    l.q_heads = hq;
    l.kv_heads = 1;
    l.head_dim = d;
  }
  swa_config_t config;
  swa_config_init(&config);
  config.window = static_cast<uint32_t>(window);
  config.draft_tokens = 0;
  config.max_slots = static_cast<uint32_t>(seqs);
  config.backend = SWA_BACKEND_CPU;
  config.num_threads = static_cast<uint32_t>(threads);
  config.num_layers = static_cast<uint32_t>(layers);
  config.layers = descs.data();
  swa_cache_t* cache = nullptr;
  CHECK_OK(swa_cache_create(&config, &cache));
  std::vector<swa_seq_t> batch(seqs);
  for (int i = 0; i < seqs; ++i) {
    uint32_t slot = 0;
    CHECK_OK(swa_slot_alloc(cache, &slot));
    batch[i] = swa_seq_t{slot, 1, 0, 0};
  }
  swa_plan_t* plan = nullptr;
  CHECK_OK(swa_plan_create(cache, &plan));

  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> q(size_t(seqs) * hq * d), k(size_t(seqs) * d), out(q.size());
  for (float& x : q) x = u(rng);
  for (float& x : k) x = u(rng);
  swa_step_args_t args;
  swa_step_args_init(&args);
  args.q = q.data();
  args.k_new = k.data();
  args.out = out.data();

  std::vector<double> build_us, first_us, other_us;
  for (int s = 0; s < steps; ++s) {
    for (swa_seq_t& x : batch) x.seqlen_k += 1;  // one new token per sequence
    const auto t0 = Clock::now();
    CHECK_OK(swa_plan_build(plan, batch.data(), static_cast<uint32_t>(seqs)));
    const auto t1 = Clock::now();
    build_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    auto prev = t1;
    for (int l = 0; l < layers; ++l) {
      args.layer = static_cast<uint32_t>(l);
      CHECK_OK(swa_step(cache, plan, &args));
      const auto now = Clock::now();
      const double us = std::chrono::duration<double, std::micro>(now - prev).count();
      (l == 0 ? first_us : other_us).push_back(us);
      prev = now;
    }
  }
  for (float x : out)
    if (!std::isfinite(x)) return std::fprintf(stderr, "non-finite output\n"), 1;

  const double build = Median(build_us), first = Median(first_us), other = Median(other_us);
  std::printf("library %s, %d layers x %d sequences (1 token, Hq 1, D %d, W %d), %d thread(s), "
              "median of %d steps\n",
              swa_version_string(), layers, seqs, d, window, threads, steps);
  std::printf("  baseline: swa_plan_build            %9.2f us per step\n", build);
  std::printf("  swa_step, first layer of a step     %9.2f us\n", first);
  std::printf("  swa_step, each later layer          %9.2f us  (%.2fx the plan build)\n", other,
              other / build);
  std::printf("  whole step: build + %d layers       %9.2f us\n", layers,
              build + first + other * (layers - 1));
  swa_plan_destroy(plan);
  swa_cache_destroy(cache);
  return 0;
}
