// Fuzz harness (2): the C API as a program of calls. Each input is a list of
// calls with fuzzed arguments on one small cache: slot operations, plan
// builds with arbitrary sequence fields, exporters with wrong capacities,
// cancel, steps with small tensors (NaN/Inf included, wrong dtypes, missing
// tensors), save/restore through a store that corrupts, truncates or lies
// about sizes and statuses, codec calls with odd sizes, and the graph decode
// (fuzz_capi_graph.h: create, import/release, plan, step, check, reset_error,
// set_lengths, destroy, with the graph's own invariants). After every call:
//  - a failure returns a known status with a non-empty message and changes
//    nothing observable (every slot's info, both plans' info, the pool bytes,
//    the graph's error record, the caller's output buffers and out-parameters);
//  - calls that only read (info, exporters, save, exists) change nothing
//    either, whatever they return.
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "fuzz/fuzz_capi_graph.h"
#include "fuzz/fuzz_capi_state.h"

using swa_fuzz::Check;
using swa_fuzz::FuzzStep;
using swa_fuzz::Raw;
using swa_fuzz::Input;
using swa_fuzz::State;

namespace {

std::string Key(Input& in) {
  const uint8_t k = in.Byte();
  if (k == 255) return std::string(SWA_STORE_MAX_KEY_BYTES + 1, 'x');
  return std::string(k % 4, static_cast<char>('a' + k % 3));  // "" is too short
}

// A device-advanced slot refuses saves and restores with a valid key.
swa_status_t SaveOrRestore(State& s, Input& in, bool save) {
  const uint32_t slot = in.Byte() % 6;
  const std::string key = Key(in);
  const auto* k = reinterpret_cast<const uint8_t*>(key.data());
  const swa_status_t st = save ? swa_slot_save(s.cache, slot, k, key.size())
                               : swa_slot_restore(s.cache, slot, k, key.size());
  if (slot < swa_fuzz::kSlots && s.adv[slot] && !key.empty() && key.size() <= SWA_STORE_MAX_KEY_BYTES)
    if (st != SWA_FAILED_PRECONDITION) {
      std::fprintf(stderr, "%s of slot %u: status %d: %s\n", save ? "save" : "restore", slot, st,
                   st != SWA_OK ? swa_last_error() : "");
      Check(false, "a device-advanced slot was saved or restored");
    }
  return st;
}

swa_status_t Build(State& s, Input& in) {
  const int p = in.Bool();
  swa_plan_t* plan = s.plans[p];
  const uint32_t n = in.Byte() % 5;
  std::vector<swa_seq_t> seqs(n);
  for (swa_seq_t& q : seqs) {
    q.slot = in.Byte() % 6;
    if (in.Byte() < 12) {  // any sign, up to 2^16: big steps, not gigabyte ones
      q.seqlen_q = Raw(in);
      q.seqlen_k = Raw(in);
      q.valid_start = Raw(in);
    } else {
      q.seqlen_q = in.Int(-2, 12);
      q.seqlen_k = in.Int(-2, 40);
      q.valid_start = in.Bool() ? in.Int(-1, 40) : 0;
    }
  }
  const swa_status_t st = swa_plan_build(plan, n ? seqs.data() : nullptr, n);
  if (st != SWA_OK) return st;
  s.plan_slots[p].clear();
  for (const swa_seq_t& q : seqs) {
    Check(q.slot < swa_fuzz::kSlots && !s.adv[q.slot], "a device-advanced slot was planned");
    s.plan_slots[p].push_back(q.slot);
  }
  return st;
}

// Exporters with exact, short and NULL buffers; guards after each buffer.
swa_status_t Export(State& s, Input& in) {
  const swa_plan_t* plan = s.plans[in.Bool()];
  swa_plan_info_t pi{sizeof pi};
  Check(swa_plan_info(plan, &pi) == SWA_OK, "plan info");
  const size_t t = pi.n_tokens > 0 ? static_cast<size_t>(pi.n_tokens) : 0;
  const int which = in.Byte() % 6;
  const size_t shrink = in.Byte() % 3;  // elements fewer than needed (capacity calls)
  constexpr int32_t kGuard = 0x5EEDBEEF;
  auto guarded = [&](size_t n) { return std::vector<int32_t>(n + 1, kGuard); };
  swa_status_t st = SWA_OK;
  if (which == 0) {
    auto ol = guarded(2 * t), idx = guarded(t * pi.window);
    st = swa_plan_decode_index(plan, in.Bool() ? ol.data() : nullptr, in.Bool() ? idx.data() : nullptr);
    Check(ol.back() == kGuard && idx.back() == kGuard, "decode index overrun");
    if (st != SWA_OK) Check(ol[0] == kGuard && idx[0] == kGuard, "a failed export wrote");
  } else if (which == 1 || which == 2) {
    size_t count = 12345;
    auto fn = which == 1 ? swa_plan_load_segments : swa_plan_store_segments;
    st = fn(plan, nullptr, 0, &count);
    if (st != SWA_OK) return st;
    const size_t cap = count >= shrink ? count - shrink : 0;
    std::vector<swa_segment_t> segs(cap + 1, swa_segment_t{kGuard, kGuard, kGuard});
    size_t count2 = 777;
    st = fn(plan, segs.data(), cap, &count2);
    Check(segs.back().dst_row == kGuard, "segment overrun");
    if (cap < count) {
      Check(st == SWA_OUT_OF_RANGE, "short capacity refused");
      Check(segs[0].dst_row == kGuard, "short capacity wrote");
    } else {
      Check(st == SWA_OK && count2 == count, "segment count");
    }
  } else if (which == 3) {
    auto p = guarded(4 * t);
    st = swa_plan_pivots(plan, in.Bool() ? p.data() : nullptr);
    Check(p.back() == kGuard, "pivot overrun");
  } else if (which == 4) {
    auto r = guarded(t);
    st = swa_plan_store_rows(plan, r.data());
    Check(r.back() == kGuard, "store rows overrun");
  } else {
    auto cu = guarded(pi.n_seqs + 1), q0 = guarded(pi.n_seqs), vs = guarded(pi.n_seqs);
    st = swa_plan_seq_offsets(plan, cu.data(), in.Bool() ? q0.data() : nullptr, vs.data());
    Check(cu.back() == kGuard && q0.back() == kGuard && vs.back() == kGuard, "offsets overrun");
  }
  return st;
}

// A plan whose slot became device-advanced after the build is refused.
swa_status_t Step(State& s, Input& in) {
  const int p = in.Bool();
  swa_plan_t* plan = s.plans[p];
  swa_plan_info_t pi{sizeof pi};
  Check(swa_plan_info(plan, &pi) == SWA_OK, "plan info");
  const size_t t = pi.n_tokens > 0 ? static_cast<size_t>(pi.n_tokens) : 0;
  if (t > 4096) return swa_step(s.cache, plan, nullptr);  // tensors too big to fuzz with
  FuzzStep fs(in, t);
  const swa_status_t st = swa_step(s.cache, plan, &fs.a);
  for (uint32_t slot : s.plan_slots[p])
    Check(st != SWA_OK || !s.adv[slot], "a plan of a device-advanced slot was stepped");
  return st;
}

swa_status_t Codec(Input& in) {
  const int format = in.Byte() % 5;  // 3: FP8_DS_MLA (dim 512 only), 4: not a format
  const uint32_t dim = in.Byte() < 200 ? 32 * (in.Byte() % 4) : in.U16();
  uint32_t bytes = 4242;
  const swa_status_t vb = swa_format_vector_bytes(static_cast<swa_format_t>(format), dim, &bytes);
  if (vb != SWA_OK) {
    Check(bytes == 4242, "vector_bytes wrote on failure");
    return vb;
  }
  const size_t n = in.Byte() % 3;
  std::vector<float> src(n * dim);
  for (float& x : src) x = in.Float();
  std::vector<uint8_t> dst(n * bytes + 1, 0xEE);
  std::vector<float> back(n * dim + 1, 3.f);
  swa_status_t st = swa_codec_encode(static_cast<swa_format_t>(format), SWA_SCALE_CEIL, src.data(),
                                     SWA_DTYPE_FP32, n, dim, dst.data(), nullptr);
  Check(dst.back() == 0xEE, "encode overrun");
  if (st != SWA_OK) return st;
  st = swa_codec_decode(static_cast<swa_format_t>(format), dst.data(), n, dim, back.data(),
                        SWA_DTYPE_FP32, nullptr);
  Check(back.back() == 3.f, "decode overrun");
  return st;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  State s;
  for (int call = 0; call < 64 && !in.empty(); ++call) {
    const int op = in.Byte() % 26;  // 16...25: the graph decode (fuzz_capi_graph.h)
    const swa_fuzz::Snapshot before = s.Take();
    bool read_only = false;
    swa_status_t st = SWA_OK;
    uint32_t out_slot = 0xABCD, exists = 0xABCD;
    const uint32_t slot = in.Byte() % 6, other = in.Byte() % 6;
    switch (op) {
      case 0: st = swa_slot_alloc(s.cache, &out_slot);
        Check(st == SWA_OK || out_slot == 0xABCD, "alloc wrote on failure"); break;
      case 1: st = swa_slot_free(s.cache, slot);
        if (st == SWA_OK) s.adv[slot] = false;
        break;
      case 2: st = swa_slot_reset(s.cache, slot);
        if (st == SWA_OK) s.adv[slot] = false;
        break;
      case 3: st = swa_slot_copy(s.cache, slot, other); break;
      case 4: st = swa_slot_set_valid_start(s.cache, slot, in.Int(-3, 40)); break;
      case 5: st = swa_slot_begin_replay(s.cache, slot, in.Int(-3, 40), nullptr, nullptr); break;
      case 6: st = Build(s, in); break;
      case 7: {
        const int p = in.Bool();
        st = swa_plan_cancel(s.plans[p]);
        if (st == SWA_OK) s.plan_slots[p].clear();
        break;
      }
      case 8: st = Export(s, in); read_only = true; break;
      case 9: st = Step(s, in); break;
      case 10: st = SaveOrRestore(s, in, true); read_only = true; break;
      case 11: st = SaveOrRestore(s, in, false); break;
      case 12: st = s.SetStore(in); break;
      case 13: st = Codec(in); read_only = true; break;
      case 14: {
        const std::string key = Key(in);
        st = swa_cache_store_exists(s.cache, reinterpret_cast<const uint8_t*>(key.data()), key.size(), &exists);
        Check(st == SWA_OK || exists == 0xABCD, "exists wrote on failure");
        read_only = true;
        break;
      }
      case 15: {
        swa_slot_info_t i{in.Bool() ? sizeof i : 3};
        st = swa_slot_info(s.cache, slot, &i);
        read_only = true;
        break;
      }
      default: st = swa_fuzz::GraphOp(s, in, op - 16, &read_only); break;
    }
    if (st != SWA_OK) {
      Check(swa_fuzz::KnownStatus(st), "unknown status");
      Check(swa_last_error()[0] != '\0', "failure without a message");
      Check(s.Take() == before, "a failed call changed something");
    } else if (read_only) {
      Check(s.Take() == before, "a read-only call changed something");
    }
  }
  return 0;
}
