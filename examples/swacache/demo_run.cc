#include "demo_run.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "common/dense_reference.h"
#include "layout_report.h"
#include "presets.h"
#include "swacache.h"

namespace swacache_cli {
namespace {

using Clock = std::chrono::steady_clock;

#define DEMO_CHECK(call)                                                               \
  do {                                                                                 \
    const swa_status_t st_ = (call);                                                   \
    if (st_ != SWA_OK) {                                                               \
      std::fprintf(stderr, "swacache demo: %s failed: %s: %s\n", #call,               \
                   swa_status_string(st_), swa_last_error());                          \
      return 1;                                                                        \
    }                                                                                  \
  } while (0)

struct Seq {
  uint32_t slot;
  int32_t prompt;
  int32_t accepted = 0;  // next position to (re)write
  uint32_t decode_left;
  bool restored = false;
};

// The cache, store, plan and FP64 reference of one demo run.
struct Demo {
  const DemoOptions& opt;
  std::vector<swa_layer_desc_t> layers;
  std::vector<std::vector<float>> sinks;  // per layer, empty without sinks
  swa_cache_t* cache = nullptr;
  swa_plan_t* plan = nullptr;
  swa_kv_store_t store;
  swa_layout_t lay;
  std::mt19937_64 rng;
  std::unique_ptr<swa_reference::ReferenceModel> model;
  std::vector<Seq> seqs;
  double worst = 0, lib_seconds = 0;
  uint64_t tokens = 0, steps = 0, staged_steps = 0;

  explicit Demo(const DemoOptions& o) : opt(o), rng(o.seed) {}
  ~Demo() {
    swa_plan_destroy(plan);
    swa_cache_destroy(cache);
  }
  double Uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); }
  int Pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

  int Create(const Preset& preset);
  int Step(const std::vector<swa_seq_t>& batch, const std::vector<int>& who);
  int RunLayer(size_t l, const std::vector<swa_seq_t>& batch, const std::vector<int>& who, int T);
  int Advance(const std::vector<swa_seq_t>& batch, const std::vector<int>& who);
  int Summary(const Preset& preset);
};

// A slice of the preset's layers (stored ones first, then dropped ones), the
// cache on the CPU backend with a memory store, a plan, and the reference.
int Demo::Create(const Preset& preset) {
  std::vector<swa_layer_desc_t> stored, dropped;
  for (const swa_layer_desc_t& l : preset.layers)
    (l.role == SWA_LAYER_STORED ? stored : dropped).push_back(l);
  for (uint32_t i = 0; layers.size() < opt.layers && i < preset.layers.size(); ++i) {
    if (i < stored.size()) layers.push_back(stored[i]);
    if (layers.size() < opt.layers && i < dropped.size()) layers.push_back(dropped[i]);
  }
  swa_config_t config = preset.config;
  config.num_layers = uint32_t(layers.size());
  config.layers = layers.data();
  config.max_slots = opt.sequences + 1;  // one spare for the restore
  DEMO_CHECK(swa_cache_create(&config, &cache));
  swa_tensor_view_t view;
  view.struct_size = sizeof view;
  DEMO_CHECK(swa_cache_layer_view(cache, 0, &view));
  if (view.backend != SWA_BACKEND_CPU) {
    // The demo feeds host tensors and verifies on the host; the CUDA backend
    // takes device pointers and is exercised by tests/gpu instead.
    std::printf("note: a GPU is present; the demo runs on the CPU backend\n\n");
    swa_cache_destroy(cache);
    cache = nullptr;
    config.backend = SWA_BACKEND_CPU;
    DEMO_CHECK(swa_cache_create(&config, &cache));
  }
  swa_store_memory_config_t mcfg;
  swa_store_memory_config_init(&mcfg);
  swa_kv_store_init(&store);
  DEMO_CHECK(swa_store_memory_create(&mcfg, &store));
  DEMO_CHECK(swa_cache_set_store(cache, &store));
  DEMO_CHECK(swa_plan_create(cache, &plan));
  lay.struct_size = sizeof lay;
  DEMO_CHECK(swa_cache_layout(cache, &lay));

  std::vector<swa_reference::ReferenceModel::Layer> ref_layers;
  sinks.resize(layers.size());
  for (size_t l = 0; l < layers.size(); ++l) {
    const swa_layer_desc_t& d = layers[l];
    if (d.has_sinks) {
      sinks[l].resize(d.q_heads);
      for (float& x : sinks[l]) x = float(Uniform(-1, 1));
    }
    ref_layers.push_back({d.kv_format, int(d.q_heads), int(d.kv_heads), int(d.head_dim),
                          d.shared_kv != 0, sinks[l]});
  }
  model = std::make_unique<swa_reference::ReferenceModel>(int(lay.window), ref_layers);
  seqs.resize(opt.sequences);
  for (Seq& s : seqs) {
    DEMO_CHECK(swa_slot_alloc(cache, &s.slot));
    s.prompt = Pick(int(opt.max_prompt / 2), int(std::max<uint32_t>(opt.max_prompt, 1)));
    s.decode_left = opt.decode_steps;
  }
  return 0;
}

// One layer of the step: fresh random inputs, swa_step, and every output
// checked against the dense reference (on two threads).
int Demo::RunLayer(size_t l, const std::vector<swa_seq_t>& batch, const std::vector<int>& who,
                   int T) {
  const swa_layer_desc_t& d = layers[l];
  const size_t qtok = size_t(d.q_heads) * d.head_dim, ktok = size_t(d.kv_heads) * d.head_dim;
  std::vector<float> q(T * qtok), k(T * ktok), v(T * ktok), out(T * qtok, -1e30f);
  for (float& x : q) x = float(Uniform(-1, 1));
  for (float& x : k) x = float(Uniform(-2, 2));
  for (float& x : v) x = float(Uniform(-2, 2));
  swa_step_args_t a;
  swa_step_args_init(&a);
  a.layer = uint32_t(l);
  a.q = q.data();
  a.k_new = k.data();
  a.v_new = d.shared_kv ? nullptr : v.data();
  a.out = out.data();
  a.sinks = d.has_sinks ? sinks[l].data() : nullptr;
  const Clock::time_point t0 = Clock::now();
  DEMO_CHECK(swa_step(cache, plan, &a));
  lib_seconds += std::chrono::duration<double>(Clock::now() - t0).count();

  std::vector<double> ref(T * qtok);
  std::vector<std::pair<int, int>> jobs;  // (token index, sequence)
  std::vector<int> pos(T);
  int t = 0;
  for (size_t b = 0; b < batch.size(); ++b) {
    const int q_start = batch[b].seqlen_k - batch[b].seqlen_q;
    model->Write(who[b], int(l), q_start, batch[b].seqlen_q, k.data() + t * ktok,
                 v.data() + t * ktok);
    for (int j = 0; j < batch[b].seqlen_q; ++j) {
      jobs.push_back({t + j, who[b]});
      pos[t + j] = q_start + j;
    }
    t += batch[b].seqlen_q;
  }
  auto work = [&](size_t first, size_t step) {
    for (size_t i = first; i < jobs.size(); i += step)
      model->Expected(jobs[i].second, int(l), pos[jobs[i].first], 0,
                      q.data() + jobs[i].first * qtok, ref.data() + jobs[i].first * qtok);
  };
  std::thread helper(work, 1, 2);
  work(0, 2);
  helper.join();
  worst = std::max(worst, swa_reference::RelativeL2(out.data(), ref.data(), out.size()));
  return 0;
}

int Demo::Step(const std::vector<swa_seq_t>& batch, const std::vector<int>& who) {
  int T = 0;
  for (const swa_seq_t& b : batch) T += b.seqlen_q;
  const Clock::time_point t_plan = Clock::now();
  DEMO_CHECK(swa_plan_build(plan, batch.data(), uint32_t(batch.size())));
  lib_seconds += std::chrono::duration<double>(Clock::now() - t_plan).count();
  swa_plan_info_t info;
  info.struct_size = sizeof info;
  DEMO_CHECK(swa_plan_info(plan, &info));
  staged_steps += info.path == SWA_PLAN_PATH_STAGED;
  for (size_t l = 0; l < layers.size(); ++l)
    if (const int rc = RunLayer(l, batch, who, T); rc != 0) return rc;
  tokens += uint64_t(T);
  ++steps;
  return Advance(batch, who);
}

// Accepts tokens (prefill chunks whole, decode a random number of drafts).
int Demo::Advance(const std::vector<swa_seq_t>& batch, const std::vector<int>& who) {
  const int n = int(lay.draft_tokens) + 1;
  for (size_t b = 0; b < batch.size(); ++b) {
    Seq& s = seqs[who[b]];
    if (s.accepted < s.prompt) {
      s.accepted = batch[b].seqlen_k;
    } else {
      s.accepted += Pick(1, n);  // verified token + accepted drafts
      --s.decode_left;
    }
    // Sequence 0 loses its slot state once, right after its prefill, and gets
    // it back from the store: save, reset (written_end = valid_start = 0),
    // restore. It restores into its own slot because the dropped layers' rings
    // are never persisted (an engine restoring elsewhere rebuilds them).
    if (who[b] == 0 && !s.restored && s.accepted >= s.prompt) {
      const uint8_t key[] = "demo-seq-0";
      DEMO_CHECK(swa_slot_save(cache, s.slot, key, sizeof key));
      DEMO_CHECK(swa_slot_reset(cache, s.slot));
      DEMO_CHECK(swa_slot_restore(cache, s.slot, key, sizeof key));
      s.restored = true;
    }
  }
  return 0;
}

int Demo::Summary(const Preset& preset) {
  swa_store_memory_stats_t ms;
  ms.struct_size = sizeof ms;
  DEMO_CHECK(swa_store_memory_stats(&store, &ms));
  std::printf("libswacache %s demo — preset %s, %u of its layers, %u sequences\n\n",
              swa_version_string(), preset.name.c_str(), unsigned(layers.size()), opt.sequences);
  std::printf("%-34s %14s\n", "quantity", "value");
  std::printf("%-34s %14llu\n", "steps (plans built)", (unsigned long long)steps);
  std::printf("%-34s %14llu\n", "  of which staged (prefill/mixed)", (unsigned long long)staged_steps);
  std::printf("%-34s %14llu\n", "new tokens (all sequences)", (unsigned long long)tokens);
  std::printf("%-34s %14.1f\n", "tokens/s (plan + all layers)", tokens / std::max(lib_seconds, 1e-9));
  std::printf("%-34s %14llu\n", "KV bytes per sequence (slot)", (unsigned long long)lay.slot_bytes);
  std::printf("%-34s %14llu\n", "  persisted part (stored rings)", (unsigned long long)lay.stored_bytes);
  int32_t longest = 0;
  for (const Seq& s : seqs) longest = std::max(longest, s.accepted);
  uint64_t per_token = 0;
  for (uint32_t l = 0; l < lay.num_layers; ++l) {
    swa_layer_layout_t ll;
    ll.struct_size = sizeof ll;
    DEMO_CHECK(swa_cache_layer_layout(cache, l, &ll));
    per_token += ll.bytes_per_token;
  }
  std::printf("%-34s %14llu\n", "full cache at the longest sequence",
              (unsigned long long)(per_token * uint64_t(longest)));
  std::printf("%-34s %14llu\n", "store blobs saved / restored", (unsigned long long)ms.puts);
  std::printf("%-34s %14.3g\n", "largest relative error vs FP64", worst);
  const bool ok = worst <= 1e-5;
  std::printf("\n%s: every output %s the dense band-mask reference (bound 1e-5)\n",
              ok ? "PASS" : "FAIL", ok ? "matches" : "does NOT match");
  std::printf("\nslot layout of this cache:\n");
  PrintLayoutReport(cache);
  return ok ? 0 : 1;
}

}  // namespace

int RunDemo(const DemoOptions& opt) {
  Preset preset;
  if (!MakePreset(opt.preset, std::max<uint32_t>(opt.sequences, 1), &preset)) {
    std::fprintf(stderr, "swacache demo: unknown preset '%s'\n", opt.preset.c_str());
    return 2;
  }
  if (opt.layers == 0 || opt.layers > preset.layers.size()) {
    std::fprintf(stderr, "swacache demo: --layers = %u is out of range [1, %zu] (preset %s)\n",
                 opt.layers, preset.layers.size(), opt.preset.c_str());
    return 2;
  }
  Demo demo(opt);
  if (const int rc = demo.Create(preset); rc != 0) return rc;
  const int n = int(demo.lay.draft_tokens) + 1;
  while (demo.worst <= 1e-5) {
    std::vector<swa_seq_t> batch;
    std::vector<int> who;
    for (size_t i = 0; i < demo.seqs.size(); ++i) {
      const Seq& s = demo.seqs[i];
      int32_t q = 0;
      if (s.accepted < s.prompt)
        q = std::min<int32_t>(int32_t(opt.chunk), s.prompt - s.accepted);
      else if (s.decode_left > 0)
        q = n;
      if (q == 0) continue;
      batch.push_back({s.slot, q, s.accepted + q, 0});
      who.push_back(int(i));
    }
    if (batch.empty()) break;
    if (const int rc = demo.Step(batch, who); rc != 0) return rc;
  }
  return demo.Summary(preset);
}

}  // namespace swacache_cli
