// Fuzz harness (3): the step planner against the brute-force reference
// (tests/unit/plan_reference.h). The input chooses the geometry (W, N, R),
// the plan options, each slot's state and a batch of sequences with arbitrary
// fields. A batch the reference calls legal must build and export exactly the
// reference's arrays and slot updates; any other batch must be refused with
// INVALID_ARGUMENT, OUT_OF_RANGE or FAILED_PRECONDITION and change nothing.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <vector>

#include "cache/cache.h"
#include "fuzz/fuzz_input.h"
#include "plan/step_plan.h"
#include "unit/plan_reference.h"

namespace {

using swa::plan::Path;
using swa::plan::StepPlan;
using swa_fuzz::Check;
using swa_fuzz::Input;

constexpr uint32_t kSlots = 6;
constexpr int32_t kMaxPos = 600;  // keeps the brute force cheap

std::unique_ptr<swa::Cache> MakeCache(uint32_t w, uint32_t n, uint32_t r) {
  swa::ModelSpec spec;
  spec.window = w;
  spec.draft_tokens = n;
  spec.ring_len = r;
  spec.max_slots = kSlots;
  swa::LayerSpec layer;
  layer.head_dim = 32;
  layer.q_heads = 1;
  layer.format = swa::Format::kFp32;
  spec.layers.push_back(layer);
  auto cache = swa::Cache::Create(spec, swa::CacheOptions{});
  return cache.ok() ? std::move(*cache) : nullptr;
}

std::vector<swa::SlotState> Snapshot(const swa::Cache& c) {
  std::vector<swa::SlotState> out;
  for (uint32_t s = 0; s < kSlots; ++s) out.push_back(*c.slots().Get(s));
  return out;
}

bool Same(const std::vector<swa::SlotState>& a, const std::vector<swa::SlotState>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].allocated != b[i].allocated || a[i].written_end != b[i].written_end ||
        a[i].valid_start != b[i].valid_start || a[i].ring_high != b[i].ring_high)
      return false;
  return true;
}

template <typename T>
std::vector<int32_t> Vec(absl::Span<const T> s) {
  return std::vector<int32_t>(s.begin(), s.end());
}

void CheckBuilt(const StepPlan& plan, const std::vector<plan_ref::Seq>& ref, int32_t w, int32_t r) {
  const int32_t n = static_cast<int32_t>(ref.size());
  const int32_t t_total = plan_ref::TotalTokens(ref);
  Check(plan.n_tokens() == t_total, "n_tokens");
  Check(plan.path() == (plan_ref::RingOnly(ref, w, r) ? Path::kRing : Path::kStaged), "path");
  int32_t off = 0;
  for (int32_t i = 0; i < n; ++i) {
    Check(plan.cu_seqlens()[i] == off, "cu_seqlens");
    Check(plan.seqs()[i].q_start == ref[i].seqlen_k - ref[i].seqlen_q, "q_start");
    Check(plan.seqs()[i].valid_start == ref[i].valid_start, "valid_start");
    off += ref[i].seqlen_q;
  }
  Check(plan.cu_seqlens()[n] == t_total, "cu_seqlens[n]");
  const std::vector<int32_t> store = plan_ref::StoreRows(ref, r);
  Check(Vec(plan.store_rows()) == store, "store rows");
  std::vector<int32_t> from_segs(t_total, -1);
  for (const auto& sg : plan.store_segments()) {
    Check(sg.count >= 1 && sg.dst_row % r + sg.count <= r, "store segment shape");
    for (int32_t k = 0; k < sg.count; ++k) {
      Check(sg.src_row + k >= 0 && sg.src_row + k < t_total, "store segment source");
      from_segs[sg.src_row + k] = sg.dst_row + k;
    }
  }
  Check(from_segs == store, "store segments");
  if (plan.path() == Path::kRing) {
    std::vector<int32_t> index, offset_len;
    const bool pad_last = plan.options().index_pad == swa::plan::IndexPad::kLastRow;
    plan_ref::DecodeIndex(ref, w, r, pad_last, &index, &offset_len);
    Check(Vec(plan.offset_len()) == offset_len, "offset_len");
    if (plan.options().materialize_index) Check(Vec(plan.decode_index()) == index, "decode index");
    std::vector<int32_t> got_index(index.size() + 1, 0x7b7b7b7b);
    std::vector<int32_t> got_ol(offset_len.size() + 1, 0x7b7b7b7b);
    plan.WriteDecodeIndex(got_ol.data(), got_index.data());
    Check(got_index.back() == 0x7b7b7b7b && got_ol.back() == 0x7b7b7b7b, "export overrun");
    got_index.pop_back();
    got_ol.pop_back();
    Check(got_index == index && got_ol == offset_len, "written decode index");
    return;
  }
  const std::vector<int32_t> hist = plan_ref::HistorySources(ref, w, r);
  std::vector<int32_t> loaded(static_cast<size_t>(n) * w, -2);
  for (const auto& sg : plan.load_segments()) {
    Check(sg.count >= 1, "load segment count");
    const int32_t i = sg.dst_row / w;
    Check(i < n && sg.dst_row + sg.count <= (i + 1) * w, "load segment spills");
    if (sg.src_row >= 0)
      Check(sg.src_row / r == static_cast<int32_t>(ref[i].slot) && sg.src_row % r + sg.count <= r,
            "load segment source");
    for (int32_t k = 0; k < sg.count; ++k) {
      Check(loaded[sg.dst_row + k] == -2, "row loaded twice");
      loaded[sg.dst_row + k] = sg.src_row < 0 ? -1 : sg.src_row + k;
    }
  }
  Check(loaded == hist, "load plan");
  const auto staged = plan_ref::StagedRows(ref, w);
  Check(plan.pivots().size() == 4 * static_cast<size_t>(t_total), "pivot count");
  for (int32_t t = 0; t < t_total; ++t) {
    const int32_t* p = &plan.pivots()[4 * t];
    std::vector<int32_t> got;
    for (int32_t k = 0; k < p[1]; ++k) got.push_back(p[0] + k);
    for (int32_t k = 0; k < p[3]; ++k) got.push_back(p[2] + k);
    Check(got == staged[t], "pivots");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  const uint32_t w = 1 + in.Byte() % 24;
  const uint32_t n = in.Byte() % 6;
  const uint32_t r = w + n + in.Byte() % 8;  // the cache refuses R < W + N
  auto cache = MakeCache(w, n, r);
  Check(cache != nullptr, "cache");
  for (uint32_t s = 0; s < kSlots; ++s) Check(cache->slots().Alloc().ok(), "alloc");
  swa::plan::PlanOptions opts;
  const uint8_t o = in.Byte();
  opts.index_pad = (o & 1) ? swa::plan::IndexPad::kLastRow : swa::plan::IndexPad::kMinusOne;
  opts.materialize_index = (o & 2) == 0;
  StepPlan plan(&cache->slots(), cache->layout(), opts);
  for (int round = 0; round < 4 && !in.empty(); ++round) {
    // Slot states, some freed.
    for (uint32_t s = 0; s < kSlots; ++s) {
      if (!in.Bool()) continue;
      swa::SlotState st;
      st.allocated = true;
      st.written_end = in.Int(0, kMaxPos);
      st.valid_start = in.Int(0, kMaxPos);
      st.ring_high = in.Bool() ? st.written_end + in.Int(0, static_cast<int32_t>(n) + 2) : 0;
      Check(cache->slots().Set(s, st).ok(), "set slot");
    }
    const uint32_t count = in.Byte() % (kSlots + 2);
    std::vector<swa::SeqDesc> batch;
    std::vector<plan_ref::Seq> ref;
    std::vector<int32_t> highs;
    std::set<uint32_t> seen;
    bool legal = true;
    for (uint32_t i = 0; i < count; ++i) {
      swa::SeqDesc sd;
      sd.slot = in.Byte() % (kSlots + 1);  // kSlots: out of range
      const bool raw = in.Byte() < 16;     // now and then any int32 at all
      // Raw new-token counts stay below 2^16: a legal step of 2^30 tokens
      // allocates gigabytes, as asked (positions may be any int32).
      sd.seqlen_q = raw ? std::min(static_cast<int32_t>(in.U32()), int32_t{1} << 16)
                        : in.Int(-2, 3 * static_cast<int32_t>(r) + 3);
      sd.seqlen_k = raw ? static_cast<int32_t>(in.U32()) : in.Int(-1, kMaxPos);
      sd.valid_start = raw ? static_cast<int32_t>(in.U32()) : (in.Bool() ? in.Int(-1, kMaxPos) : 0);
      batch.push_back(sd);
      if (sd.slot >= kSlots || !seen.insert(sd.slot).second || sd.seqlen_q < 0 ||
          sd.seqlen_k < sd.seqlen_q || sd.valid_start < 0 || sd.seqlen_k > kMaxPos + 3 * int32_t(r)) {
        legal = false;  // the last: beyond what the brute force is asked to enumerate
        continue;
      }
      const swa::SlotState st = *cache->slots().Get(sd.slot);
      const int32_t q0 = sd.seqlen_k - sd.seqlen_q;
      const int32_t eff = std::max(st.valid_start, sd.valid_start);
      legal = legal && sd.valid_start <= q0 &&
              plan_ref::LegalAgainstSlot(st.written_end, eff, q0, w, r, st.ring_high);
      ref.push_back({sd.slot, sd.seqlen_q, sd.seqlen_k, eff});
      highs.push_back(std::max(st.written_end, st.ring_high));
    }
    const auto before = Snapshot(*cache);
    const Path path_before = plan.path();
    const int32_t tokens_before = plan.n_tokens();
    const absl::Status st = plan.Build(batch);
    bool huge = false;
    for (const swa::SeqDesc& sd : batch)
      huge = huge || (sd.seqlen_k > kMaxPos + 3 * int32_t(r) && sd.seqlen_q >= 0 &&
                      sd.seqlen_k >= sd.seqlen_q && sd.valid_start >= 0);
    if (!st.ok()) {
      Check(!legal || huge, "a legal batch was refused");
      Check(absl::IsInvalidArgument(st) || absl::IsOutOfRange(st) || absl::IsFailedPrecondition(st),
            "refusal status");
      Check(!st.message().empty(), "refusal message");
      Check(Same(before, Snapshot(*cache)), "a refused build changed a slot");
      Check(plan.path() == path_before && plan.n_tokens() == tokens_before, "a refused build changed the plan");
      continue;
    }
    Check(legal || huge, "an illegal batch was accepted");
    if (!legal) continue;  // accepted huge positions: not enumerated
    for (size_t i = 0; i < ref.size(); ++i) {
      const swa::SlotState now = *cache->slots().Get(ref[i].slot);
      Check(now.written_end == ref[i].seqlen_k, "written_end after build");
      Check(now.valid_start == ref[i].valid_start, "valid_start after build");
      Check(std::max(now.written_end, now.ring_high) == std::max(highs[i], ref[i].seqlen_k),
            "ring_high after build");
    }
    CheckBuilt(plan, ref, static_cast<int32_t>(w), static_cast<int32_t>(r));
    if (in.Bool()) {
      const absl::Status c = plan.Cancel();
      Check(c.ok(), "cancel of a fresh build");
      Check(Same(before, Snapshot(*cache)), "cancel did not restore the slots");
    }
  }
  return 0;
}
