// The world of fuzz_capi.cc: one small cache with two plans, a store that
// misbehaves as the input tells it, and snapshots of everything a caller can
// observe.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "swacache.h"

namespace swa_fuzz {

constexpr uint32_t kSlots = 4;  // the cache's max_slots

// Any sign, up to 2^16 (or near INT32_MIN): big steps, not gigabyte ones.
inline int32_t Raw(Input& in) {
  const uint32_t u = in.U32();
  const int32_t v = static_cast<int32_t>(u & 0xFFFF);
  return (u & 0x80000000u) ? -v - (u & 0x10000 ? 0x7FFF0000 : 0) : v;
}

struct Snapshot {
  std::vector<swa_slot_info_t> slots;
  std::vector<swa_plan_info_t> plans;
  std::vector<uint8_t> pool;
  const swa_decode_graph_t* graph = nullptr;
  swa_graph_error_t record{};  // the graph's error record (zeros without a graph)
  bool operator==(const Snapshot& o) const {
    return graph == o.graph && std::memcmp(&record, &o.record, sizeof record) == 0 &&
           slots.size() == o.slots.size() &&
           std::memcmp(slots.data(), o.slots.data(), slots.size() * sizeof slots[0]) == 0 &&
           std::memcmp(plans.data(), o.plans.data(), plans.size() * sizeof plans[0]) == 0 &&
           pool == o.pool;
  }
};

// A store over a map whose get can truncate, extend, corrupt, skip filling,
// claim another size, or fail with any int as status; put can fail too.
struct LyingStore {
  std::map<std::string, std::vector<uint8_t>> blobs;
  uint8_t faults = 0, arg = 0;

  static swa_kv_store_t Table(LyingStore* ls) {
    swa_kv_store_t t;
    swa_kv_store_init(&t);
    t.user_data = ls;
    t.put = [](void* u, const uint8_t* k, size_t kl, const swa_iov_t* iov, size_t n, char* msg,
               size_t cap) {
      auto* s = static_cast<LyingStore*>(u);
      if (s->faults & 64) {
        std::snprintf(msg, cap, "put refused by the fuzzer");
        return static_cast<swa_status_t>(s->arg % 20);  // 0: OK without storing
      }
      std::vector<uint8_t>& b = s->blobs[std::string(reinterpret_cast<const char*>(k), kl)];
      b.clear();
      for (size_t i = 0; i < n; ++i) {
        const uint8_t* p = static_cast<const uint8_t*>(iov[i].data);
        b.insert(b.end(), p, p + iov[i].size);
      }
      return SWA_OK;
    };
    t.get = [](void* u, const uint8_t* k, size_t kl, const swa_iov_t* iov, size_t n,
               uint64_t* size, char* msg, size_t cap) {
      auto* s = static_cast<LyingStore*>(u);
      auto it = s->blobs.find(std::string(reinterpret_cast<const char*>(k), kl));
      if (s->faults & 16) {
        std::snprintf(msg, cap, "get failed by the fuzzer");
        return static_cast<swa_status_t>(1 + s->arg % 40);  // past 16: not a status at all
      }
      if (it == s->blobs.end()) return SWA_NOT_FOUND;
      std::vector<uint8_t> b = it->second;
      if ((s->faults & 1) && !b.empty()) b.resize(b.size() - 1 - s->arg % b.size());
      if (s->faults & 2) b.insert(b.end(), s->arg % 9 + 1, 0xA5);
      if ((s->faults & 4) && !b.empty()) b[(s->arg * 37u) % b.size()] ^= 1u << (s->arg % 8);
      if (s->faults & 32) {  // a size the blob does not have, OK, nothing filled
        *size = (s->arg & 1) ? (uint64_t{1} << 40) : *size + 1 + s->arg;
        return SWA_OK;
      }
      if (*size == b.size() && !(s->faults & 8)) {  // 8: claims success, fills nothing
        size_t off = 0;
        for (size_t i = 0; i < n; ++i) {
          std::memcpy(iov[i].data, b.data() + off, iov[i].size);
          off += iov[i].size;
        }
      }
      *size = b.size();
      return SWA_OK;
    };
    t.exists = [](void* u, const uint8_t* k, size_t kl, uint32_t* e, char*, size_t) {
      auto* s = static_cast<LyingStore*>(u);
      *e = s->blobs.count(std::string(reinterpret_cast<const char*>(k), kl)) ? 1 : 0;
      return SWA_OK;
    };
    t.release = [](void* u) { delete static_cast<LyingStore*>(u); };
    return t;
  }
};

// Step tensors for `t` tokens of a fuzz cache layer (2 query heads, 1 KV head,
// D 32; values from the input, NaN/+-Inf included) and the swa_step_args_t
// that points at them: the layer (2 is past the last), dtypes as raw ints
// (5 is not a dtype), missing K, V given to the wrong layer, sinks with a NaN,
// lse, a bad scale. Outputs and LSEs start as 7 (plus one guard element).
struct FuzzStep {
  std::vector<float> q, k, v, out, sinks, lse;
  swa_step_args_t a;
  FuzzStep(Input& in, size_t t)
      : q(t * 64 + 1), k(t * 32 + 1), v(t * 32 + 1), out(t * 64 + 1, 7.f), sinks(2),
        lse(t * 2 + 1, 7.f) {
    swa_step_args_init(&a);
    a.layer = in.Byte() % 3;
    const uint8_t f = in.Byte();
    a.q_dtype = static_cast<swa_dtype_t>((f & 1) ? ((f & 64) ? 5 : 1) : 0);
    a.kv_dtype = static_cast<swa_dtype_t>((f >> 1) & 1);
    a.out_dtype = static_cast<swa_dtype_t>((f >> 2) & 1);
    for (auto* vec : {&q, &k, &v})
      for (float& x : *vec) {
        const uint8_t c = in.Byte();
        x = c == 255 ? NAN : c == 254 ? INFINITY : c == 253 ? -INFINITY : (c - 128) / 16.f;
      }
    sinks = {in.Byte() / 8.f, (in.Byte() == 0) ? NAN : 0.5f};
    a.q = q.data();
    a.k_new = (f & 8) ? nullptr : k.data();
    a.v_new = ((f & 16) != 0) == (a.layer == 1) ? v.data() : nullptr;  // sometimes the wrong way
    a.sinks = (f & 32) ? sinks.data() : nullptr;
    a.out = out.data();
    a.lse = (f & 128) ? lse.data() : nullptr;
    a.softmax_scale = in.Byte() == 1 ? -1.f : 0.f;
  }
};

struct State {
  swa_layer_desc_t layers[2];
  swa_cache_t* cache = nullptr;
  swa_plan_t* plans[2] = {nullptr, nullptr};
  swa_layout_t layout{};
  uint8_t* pool = nullptr;
  // The graph decode (fuzz_capi_graph.h) and what the harness knows of it:
  // slots imported and not yet reported by set_lengths (freed and reset
  // slots leave it), slots the graph holds with their valid_start then, and
  // the sequences of the last plan that are surely padding or refused.
  swa_decode_graph_t* graph = nullptr;
  uint32_t graph_seqs = 0, graph_tokens = 0;
  bool adv[kSlots] = {}, imported[kSlots] = {}, planned = false;
  int32_t imp_valid_start[kSlots] = {};
  std::vector<bool> plan_dead;
  std::vector<uint32_t> plan_slots[2];  // the slots of each plan's last build

  State() {
    for (int i = 0; i < 2; ++i) {
      swa_layer_desc_init(&layers[i]);
      layers[i].q_heads = 2;
      layers[i].kv_heads = 1;
      layers[i].head_dim = 32;
    }
    layers[1].role = SWA_LAYER_DROPPED;
    layers[1].kv_format = SWA_FORMAT_BF16;
    layers[1].shared_kv = 0;
    layers[1].has_sinks = 1;
    swa_config_t c;
    swa_config_init(&c);
    c.window = 4;
    c.draft_tokens = 1;
    c.max_slots = 4;
    c.backend = SWA_BACKEND_CPU;
    c.num_threads = 1;
    c.num_layers = 2;
    c.layers = layers;
    Check(swa_cache_create(&c, &cache) == SWA_OK, "create");
    Check(c.max_slots == kSlots, "kSlots");
    layout.struct_size = sizeof layout;
    Check(swa_cache_layout(cache, &layout) == SWA_OK, "layout");
    swa_layer_layout_t ll{sizeof ll};
    swa_tensor_view_t v{sizeof v};
    Check(swa_cache_layer_layout(cache, 0, &ll) == SWA_OK && swa_cache_layer_view(cache, 0, &v) == SWA_OK,
          "view");
    pool = static_cast<uint8_t*>(v.data) - ll.ring_offset;
    std::memset(pool, 0x11, layout.pool_bytes);
    swa_plan_options_t o;
    swa_plan_options_init(&o);
    Check(swa_plan_create(cache, &plans[0]) == SWA_OK, "plan");
    o.index_pad = SWA_INDEX_PAD_LAST_ROW;
    o.materialize_index = 0;
    Check(swa_plan_create_with_options(cache, &o, &plans[1]) == SWA_OK, "plan");
    for (int i = 0; i < 2; ++i) {
      uint32_t s;
      Check(swa_slot_alloc(cache, &s) == SWA_OK, "alloc");
    }
  }
  ~State() {
    swa_decode_graph_destroy(graph);
    swa_plan_destroy(plans[0]);
    swa_plan_destroy(plans[1]);
    swa_cache_destroy(cache);
  }

  Snapshot Take() const {
    Snapshot s;
    for (uint32_t i = 0; i < layout.max_slots; ++i) {
      swa_slot_info_t info{sizeof info};
      Check(swa_slot_info(cache, i, &info) == SWA_OK, "slot info");
      s.slots.push_back(info);
    }
    for (swa_plan_t* p : plans) {
      swa_plan_info_t pi{sizeof pi};
      Check(swa_plan_info(p, &pi) == SWA_OK, "plan info");
      s.plans.push_back(pi);
    }
    s.pool.assign(pool, pool + layout.pool_bytes);
    s.graph = graph;
    if (graph != nullptr) s.record = *swa_decode_graph_error_record(graph);
    return s;
  }

  // Destroys the graph (a slot stays device-advanced) and takes `g`, if any.
  void SetGraph(swa_decode_graph_t* g, uint32_t max_seqs, uint32_t tokens) {
    swa_decode_graph_destroy(graph);
    graph = g;
    graph_seqs = max_seqs;
    graph_tokens = tokens;
    std::fill(imported, imported + kSlots, false);
    planned = false;
    plan_dead.clear();
  }

  // Detach, attach a memory store, or attach a lying store.
  swa_status_t SetStore(Input& in) {
    const uint8_t mode = in.Byte() % 4;
    if (mode == 0) return swa_cache_set_store(cache, nullptr);
    if (mode == 1) {
      swa_store_memory_config_t mc;
      swa_store_memory_config_init(&mc);
      mc.budget_bytes = 1 + in.U16() * 8;  // small budgets evict and refuse
      swa_kv_store_t t;
      swa_kv_store_init(&t);
      Check(swa_store_memory_create(&mc, &t) == SWA_OK, "memory store");
      return swa_cache_set_store(cache, &t);
    }
    auto* ls = new LyingStore;
    ls->faults = mode == 2 ? 0 : in.Byte();
    ls->arg = in.Byte();
    const swa_kv_store_t t = LyingStore::Table(ls);
    const swa_status_t st = swa_cache_set_store(cache, &t);
    if (st != SWA_OK) delete ls;
    return st;
  }
};

}  // namespace swa_fuzz
