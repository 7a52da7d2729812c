// The graph decode ops of fuzz_capi.cc: create (valid and invalid sizes),
// import and release of fuzzed slot lists, plans with fuzzed slots and
// seqlen_k, one layer's step with small tensors, check, reset_error,
// swa_slot_set_lengths and destroy on State's one graph. Besides the harness's
// promises for every call, each op checks what the graph itself promises:
//  - rows of padding (-1) and surely refused sequences (out of range, a repeat,
//    not imported, q_start below 0 or the imported valid_start) are zeros in
//    out and lse after a step, and a plan with one of them sets a clear record;
//  - check() returns OK iff the record's reason is 0 and copies the record;
//  - a slot imported and not yet reported by set_lengths (State::adv, freed
//    and reset slots leave it) refuses save, restore and plan builds with
//    FAILED_PRECONDITION (the save/restore/build ops of fuzz_capi.cc check it).
// Gap and rewind refusals depend on the graph's copy of ring_high, which no
// call shows, so they are not modelled; they only make more rows zero.
#pragma once

#include <cmath>

#include <cstdint>
#include <vector>

#include "fuzz/fuzz_capi_state.h"

namespace swa_fuzz {

// Slot ids for import, release and set_lengths: mostly in range, sometimes
// past the pool or huge, repeats allowed.
inline std::vector<uint32_t> SlotList(Input& in) {
  std::vector<uint32_t> v(in.Byte() % 4);
  for (uint32_t& s : v) {
    const uint8_t b = in.Byte();
    s = b == 255 ? 0xFFFFFFFFu : b % 6;
  }
  return v;
}

inline swa_status_t GraphCreate(State& s, Input& in) {
  static constexpr uint32_t kHuge[] = {0, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFFu, 1u << 29};
  const uint8_t a = in.Byte(), b = in.Byte();
  const uint32_t max_seqs = a < 240 ? a % 6 : kHuge[a % 5];
  const uint32_t tokens = b < 240 ? b % 4 : kHuge[b % 5];
  swa_decode_graph_t* g = reinterpret_cast<swa_decode_graph_t*>(&s);  // a sentinel
  const swa_status_t st = swa_decode_graph_create(s.cache, max_seqs, tokens, &g);
  if (st != SWA_OK) {
    Check(g == reinterpret_cast<swa_decode_graph_t*>(&s), "graph create wrote on failure");
    return st;
  }
  Check(g != nullptr && max_seqs >= 1 && max_seqs <= 5 && tokens >= 1 && tokens <= 3,
        "graph create accepted bad sizes");
  const swa_graph_error_t* rec = swa_decode_graph_error_record(g);
  Check(rec != nullptr && rec->reason == SWA_GRAPH_OK, "a new graph's record is not clear");
  s.SetGraph(g, max_seqs, tokens);
  return st;
}

inline swa_status_t GraphImport(State& s, Input& in) {
  const std::vector<uint32_t> v = SlotList(in);
  const bool null_list = in.Byte() == 7;
  if (s.graph == nullptr) return swa_decode_graph_import(nullptr, v.data(), v.size(), nullptr);
  const swa_status_t st =
      swa_decode_graph_import(s.graph, null_list ? nullptr : v.data(), v.size(), nullptr);
  if (st != SWA_OK) return st;
  for (uint32_t x : v) {
    Check(x < kSlots && !s.adv[x], "import accepted a bad or device-advanced slot");
    swa_slot_info_t i{sizeof i};
    Check(swa_slot_info(s.cache, x, &i) == SWA_OK && i.allocated, "import of a free slot");
    s.adv[x] = true;
    s.imported[x] = true;
    s.imp_valid_start[x] = i.valid_start;
  }
  return st;
}

inline swa_status_t GraphRelease(State& s, Input& in) {
  const std::vector<uint32_t> v = SlotList(in);
  if (s.graph == nullptr) return swa_decode_graph_release(nullptr, v.data(), v.size(), nullptr);
  const swa_status_t st = swa_decode_graph_release(s.graph, v.data(), v.size(), nullptr);
  if (st == SWA_OK)
    for (uint32_t x : v) s.imported[x] = false;  // in range, or it would have failed
  return st;
}

inline swa_status_t GraphPlan(State& s, Input& in) {
  const uint32_t n = in.Byte() % 7;  // up to max_seqs + 1 and more
  std::vector<int32_t> slots(n), seqlen_k(n);
  for (uint32_t i = 0; i < n; ++i) {
    const uint8_t b = in.Byte();
    slots[i] = b < 200 ? int32_t(b % 5) - 1 : b < 250 ? int32_t(b % 7) - 1 : Raw(in);
    seqlen_k[i] = in.Byte() < 230 ? in.Int(-2, 24) : Raw(in);
  }
  const bool null_arrays = in.Byte() == 3;
  if (s.graph == nullptr) return swa_decode_graph_plan(nullptr, slots.data(), seqlen_k.data(), n, nullptr);
  const bool was_clear = swa_decode_graph_error_record(s.graph)->reason == SWA_GRAPH_OK;
  const swa_status_t st = swa_decode_graph_plan(s.graph, null_arrays ? nullptr : slots.data(),
                                                seqlen_k.data(), n, nullptr);
  if (st != SWA_OK) return st;
  Check(n <= s.graph_seqs && !(null_arrays && n > 0), "graph plan accepted bad arguments");
  // The sequences the graph surely refuses (or pads).
  s.planned = true;
  s.plan_dead.assign(n, false);
  bool refused = false;
  for (uint32_t i = 0; i < n; ++i) {
    const int32_t slot = slots[i];
    const int64_t q_start = int64_t{seqlen_k[i]} - s.graph_tokens;  // seqlen_k may be near INT32_MIN
    bool dead = slot < 0 || slot >= int32_t(kSlots);
    for (uint32_t j = 0; j < i && !dead; ++j) dead = slots[j] == slot;
    dead = dead || !s.imported[slot] || q_start < 0 || q_start < s.imp_valid_start[slot];
    s.plan_dead[i] = dead;
    refused = refused || (dead && slot != -1);
  }
  if (was_clear && refused)
    Check(swa_decode_graph_error_record(s.graph)->reason != SWA_GRAPH_OK,
          "a refused sequence left the record clear");
  return st;
}

inline swa_status_t GraphStep(State& s, Input& in) {
  const size_t t = s.planned ? s.plan_dead.size() * s.graph_tokens : 1;
  FuzzStep fs(in, t);
  const swa_step_args_t& a = fs.a;
  const std::vector<float>& out = fs.out;
  const std::vector<float>& lse = fs.lse;
  if (s.graph == nullptr) return swa_decode_graph_step(nullptr, &a);
  const swa_status_t st = swa_decode_graph_step(s.graph, &a);
  Check(out.back() == 7.f && lse.back() == 7.f, "graph step overrun");
  if (st != SWA_OK) {
    Check(out == std::vector<float>(out.size(), 7.f) && lse == std::vector<float>(lse.size(), 7.f),
          "a failed graph step wrote its outputs");
    return st;
  }
  Check(s.planned, "graph step without a plan");
  const size_t row_bytes = 64 * (a.out_dtype == SWA_DTYPE_FP32 ? 4 : 2);
  const auto* ob = reinterpret_cast<const uint8_t*>(out.data());
  for (size_t i = 0; i < s.plan_dead.size(); ++i) {
    if (!s.plan_dead[i]) continue;
    for (size_t r = i * s.graph_tokens; r < (i + 1) * s.graph_tokens; ++r) {
      for (size_t b = 0; b < row_bytes; ++b) Check(ob[r * row_bytes + b] == 0, "padding/refused row not zero");
      // An empty row's LSE (docs/semantics.md): a later merge gives it weight 0.
      if (a.lse != nullptr)
        Check(std::isinf(lse[2 * r]) && lse[2 * r] < 0 && std::isinf(lse[2 * r + 1]) && lse[2 * r + 1] < 0,
              "padding/refused lse not -inf");
    }
  }
  return st;
}

// check(): OK iff the record's reason is 0, and it copies the record.
inline swa_status_t GraphCheck(State& s, Input& in) {
  swa_graph_error_t rec;
  std::memset(&rec, 0x5A, sizeof rec);
  const bool want = in.Bool();
  if (s.graph == nullptr) return swa_decode_graph_check(nullptr, nullptr, want ? &rec : nullptr);
  const swa_status_t st = swa_decode_graph_check(s.graph, nullptr, want ? &rec : nullptr);
  const swa_graph_error_t* r = swa_decode_graph_error_record(s.graph);
  Check((st == SWA_OK) == (r->reason == SWA_GRAPH_OK), "check disagrees with the record");
  if (st != SWA_OK)
    Check((st == SWA_INVALID_ARGUMENT || st == SWA_FAILED_PRECONDITION) && r->reason >= 1 &&
              r->reason <= 6,
          "check status or reason");
  if (want) Check(std::memcmp(&rec, r, sizeof rec) == 0, "check copied another record");
  return st;
}

inline swa_status_t SetLengths(State& s, Input& in) {
  const std::vector<uint32_t> v = SlotList(in);
  std::vector<int32_t> we(v.size()), vs(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    we[i] = in.Byte() < 240 ? in.Int(-2, 30) : Raw(in);
    vs[i] = in.Int(-1, 12);
  }
  const uint8_t f = in.Byte();
  const swa_status_t st = swa_slot_set_lengths(s.cache, v.data(), (f & 3) == 3 ? nullptr : we.data(),
                                               (f & 4) ? vs.data() : nullptr, v.size());
  if (st == SWA_OK)
    for (uint32_t x : v) s.adv[x] = false;
  return st;
}

// A device-advanced slot refuses a plan build of one plain decode token.
inline void ProbeAdvanced(State& s, Input& in) {
  const uint32_t slot = in.Byte() % kSlots;
  if (!s.adv[slot]) return;
  swa_slot_info_t i{sizeof i};
  Check(swa_slot_info(s.cache, slot, &i) == SWA_OK, "slot info");
  const swa_seq_t q{slot, 1, i.written_end + 1, 0};
  Check(swa_plan_build(s.plans[0], &q, 1) == SWA_FAILED_PRECONDITION,
        "a device-advanced slot was planned");
}

// The graph ops; `k` is the op number less the first graph op.
inline swa_status_t GraphOp(State& s, Input& in, int k, bool* read_only) {
  switch (k) {
    case 0: return GraphCreate(s, in);
    case 1: return GraphImport(s, in);
    case 2: return GraphRelease(s, in);
    case 3: return GraphPlan(s, in);
    case 4: return GraphStep(s, in);
    case 5: *read_only = true; return GraphCheck(s, in);
    case 6: return swa_decode_graph_reset_error(in.Byte() == 9 ? nullptr : s.graph, nullptr);
    case 7: return SetLengths(s, in);
    case 8: *read_only = true; ProbeAdvanced(s, in); return SWA_OK;
    default: s.SetGraph(nullptr, 0, 0); return SWA_OK;  // destroy
  }
}

}  // namespace swa_fuzz
