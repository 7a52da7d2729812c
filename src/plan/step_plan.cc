#include "plan/step_plan.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "common/index_math.h"
#include "plan/compress_plan.h"
#include "plan/validate.h"

namespace swa::plan {
namespace {

// GCC/Clang vector extension: four int32 lanes, plain SSE2 on x86-64. The
// index fill is a pure store stream; -O2 does not vectorise open-ended loops.
typedef int32_t Lanes4 __attribute__((vector_size(16)));

// out[j] = first + j for j < n.
inline void WriteRun(int32_t* out, int32_t first, int32_t n) {
  int32_t j = 0;
  if (n >= 8) {
    Lanes4 a = {first, first + 1, first + 2, first + 3};
    Lanes4 b = a + 4;
    for (; j + 8 <= n; j += 8) {
      std::memcpy(out + j, &a, sizeof a);
      std::memcpy(out + j + 4, &b, sizeof b);
      a += 8;
      b += 8;
    }
  }
  for (; j < n; ++j) out[j] = first + j;
}

// out[j] = value for j < n.
inline void WriteFill(int32_t* out, int32_t value, int32_t n) {
  int32_t j = 0;
  const Lanes4 v = {value, value, value, value};
  for (; j + 8 <= n; j += 8) {
    std::memcpy(out + j, &v, sizeof v);
    std::memcpy(out + j + 4, &v, sizeof v);
  }
  for (; j < n; ++j) out[j] = value;
}

}  // namespace

StepPlan::StepPlan(SlotTable* slots, const Layout& layout, PlanOptions options)
    : slots_(slots),
      options_(options),
      window_(static_cast<int32_t>(layout.window())),
      ring_len_(static_cast<int32_t>(layout.ring_len())),
      ring_mod_(layout.ring_len()),
      compress_rings_(CompressRingsOf(layout)),
      compress_ran_(new std::atomic<uint8_t>[2 * size_t{layout.num_layers()}]),
      n_compress_ran_(2 * size_t{layout.num_layers()}),
      step_ran_(new std::atomic<uint8_t>[layout.num_layers()]),
      n_step_ran_(layout.num_layers()) {
  for (size_t i = 0; i < n_compress_ran_; ++i) compress_ran_[i].store(0, std::memory_order_relaxed);
  for (size_t i = 0; i < n_step_ran_; ++i) step_ran_[i].store(0, std::memory_order_relaxed);
  const uint32_t n = layout.max_slots();
  slot_mark_.Reserve(n);
  slot_mark_.SetSize(n);
  std::fill(slot_mark_.data(), slot_mark_.data() + n, uint64_t{0});  // stamp 0 is never used
}

void StepPlan::Clear() {
  path_ = Path::kNone;
  executed_ = false;
  for (size_t i = 0; i < n_compress_ran_; ++i) compress_ran_[i].store(0, std::memory_order_relaxed);
  for (size_t i = 0; i < n_step_ran_; ++i) step_ran_[i].store(0, std::memory_order_relaxed);
  n_tokens_ = max_seqlen_q_ = max_seqlen_k_ = 0;
  for (auto* b : {&cu_seqlens_, &token_seq_, &store_rows_, &offset_len_, &decode_index_, &pivots_})
    b->SetSize(0);
  seqs_.SetSize(0);
  prev_.SetSize(0);
  store_segments_.SetSize(0);
  load_segments_.SetSize(0);
}

absl::Status StepPlan::Build(absl::Span<const SeqDesc> seqs) {
  SlotTable& slots = *slots_;
  const size_t n = seqs.size();
  if (n > slots.size())
    return absl::InvalidArgumentError(absl::StrFormat(
        "n_seqs = %u exceeds max_slots = %u: some slot would appear twice", n, slots.size()));
  scratch_.Reserve(n);
  scratch_prev_.Reserve(n);
  if (++build_stamp_ == 0) {  // wrapped: forget every old mark
    std::fill(slot_mark_.data(), slot_mark_.data() + slot_mark_.size(), uint64_t{0});
    build_stamp_ = 1;
  }

  BatchSummary sum;
  {
    absl::MutexLock lock(&slots.mu());
    SWA_RETURN_IF_ERROR(ValidateBatch(slots, window_, ring_len_, seqs, slot_mark_.data(),
                                      build_stamp_, scratch_.data(), scratch_prev_.data(), &sum));
    SWA_RETURN_IF_ERROR(
        CheckCompressRewinds(compress_rings_, scratch_.data(), scratch_prev_.data(), n));
    // Grow every array before the commit so that a bad_alloc changes nothing.
    const size_t t = static_cast<size_t>(sum.n_tokens);
    cu_seqlens_.Reserve(n + 1);
    token_seq_.Reserve(t);
    store_rows_.Reserve(t);
    store_segments_.Reserve(2 * n);
    if (sum.path == Path::kRing) {
      offset_len_.Reserve(2 * t);
      if (options_.materialize_index) decode_index_.Reserve(t * static_cast<size_t>(window_));
    } else {
      load_segments_.Reserve(3 * n);
      pivots_.Reserve(4 * t);
    }
    for (size_t i = 0; i < n; ++i) {
      SlotState& st = slots.StateLocked(scratch_[i].slot);
      st.written_end = scratch_[i].seqlen_k;
      st.valid_start = scratch_[i].valid_start;
      st.ring_high = scratch_prev_[i].new_ring_high;
      st.builds = scratch_prev_[i].builds + 1;
    }
  }

  Clear();
  std::swap(seqs_, scratch_);
  std::swap(prev_, scratch_prev_);
  seqs_.SetSize(n);
  prev_.SetSize(n);
  path_ = sum.path;
  n_tokens_ = sum.n_tokens;
  max_seqlen_q_ = sum.max_seqlen_q;
  max_seqlen_k_ = sum.max_seqlen_k;
  FillCommon();
  if (path_ == Path::kRing)
    FillRing();
  else
    FillStaged();
  static std::atomic<uint64_t> next_stamp{1};
  stamp_ = next_stamp.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status StepPlan::Cancel() {
  if (!built())
    return absl::FailedPreconditionError(
        "the plan holds no build to cancel (never built, or already cancelled)");
  if (executed())
    return absl::FailedPreconditionError(
        "the plan has been executed (a layer ran): its slot updates can no longer be undone");
  SlotTable& slots = *slots_;
  absl::MutexLock lock(&slots.mu());
  // Restore only what is still exactly as this build left it; anything else
  // means another plan, a reset or a free intervened, and undoing would corrupt.
  for (uint32_t i = 0; i < n_seqs(); ++i) {
    const PlannedSeq& s = seqs_[i];
    if (absl::Status st = CheckOwnerLocked(i); !st.ok())
      return absl::FailedPreconditionError(
          absl::StrFormat("cannot cancel: seqs[%u]: %s", i, st.message()));
    const SlotState& cur = slots.StateLocked(s.slot);
    if (cur.written_end != s.seqlen_k || cur.valid_start != s.valid_start ||
        cur.ring_high != prev_[i].new_ring_high)
      return absl::FailedPreconditionError(absl::StrFormat(
          "cannot cancel: seqs[%u] (slot %u) changed since the build: written_end = %d, "
          "valid_start = %d, the build left %d, %d",
          i, s.slot, cur.written_end, cur.valid_start, s.seqlen_k, s.valid_start));
    if (cur.builds != prev_[i].builds + 1)
      return absl::FailedPreconditionError(absl::StrFormat(
          "cannot cancel: seqs[%u] (slot %u) was planned again by a later build (cancel that "
          "one first)",
          i, s.slot));
  }
  for (uint32_t i = 0; i < n_seqs(); ++i) {
    SlotState& cur = slots.StateLocked(seqs_[i].slot);
    cur.written_end = prev_[i].written_end;
    cur.valid_start = prev_[i].valid_start;
    cur.ring_high = prev_[i].ring_high;
    cur.builds = prev_[i].builds;
  }
  Clear();
  return absl::OkStatus();
}

absl::Status StepPlan::CheckOwnerLocked(uint32_t i) const {
  const uint32_t slot = seqs_[i].slot;  // in range: the build checked it
  const SlotState& st = slots_->StateLocked(slot);
  if (!st.allocated)
    return absl::FailedPreconditionError(
        absl::StrFormat("slot %u was freed after the plan was built", slot));
  if (st.generation != prev_[i].generation)
    return absl::FailedPreconditionError(absl::StrFormat(
        "slot %u was freed and allocated again after the plan was built: the plan no longer "
        "describes its owner",
        slot));
  if (st.epoch != prev_[i].epoch)
    return absl::FailedPreconditionError(absl::StrFormat(
        "slot %u was reset, copied into, restored or prepared for replay after the plan was "
        "built: the plan no longer describes the sequence it holds",
        slot));
  return slots_->CheckPlannableLocked(slot);  // busy, or advanced by a graph decode
}

absl::Status StepPlan::CheckSlotsStillPlanned() const {
  absl::MutexLock lock(&slots_->mu());
  for (uint32_t i = 0; i < n_seqs(); ++i)
    if (absl::Status st = CheckOwnerLocked(i); !st.ok())
      return absl::FailedPreconditionError(
          absl::StrFormat("the plan's seqs[%u]: %s", i, st.message()));
  return absl::OkStatus();
}

absl::Status StepPlan::TakeStepHolds() const {
  absl::MutexLock lock(&slots_->mu());
  for (uint32_t i = 0; i < n_seqs(); ++i)
    if (absl::Status st = CheckOwnerLocked(i); !st.ok())
      return absl::FailedPreconditionError(
          absl::StrFormat("the plan's seqs[%u]: %s", i, st.message()));
  for (uint32_t i = 0; i < n_seqs(); ++i) ++slots_->StateLocked(seqs_[i].slot).step_holds;
  return absl::OkStatus();
}

void StepPlan::ReleaseStepHolds() const {
  absl::MutexLock lock(&slots_->mu());
  for (uint32_t i = 0; i < n_seqs(); ++i) {
    int32_t& holds = slots_->StateLocked(seqs_[i].slot).step_holds;
    if (holds > 0) --holds;
  }
}

// cu_seqlens and token -> sequence (both paths).
void StepPlan::FillCommon() {
  const uint32_t n = n_seqs();
  cu_seqlens_.SetSize(n + 1);
  token_seq_.SetSize(n_tokens_);
  store_rows_.SetSize(n_tokens_);
  int32_t* cu = cu_seqlens_.data();
  int32_t* tseq = token_seq_.data();
  cu[0] = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const PlannedSeq s = seqs_[i];
    cu[i + 1] = s.token_offset + s.seqlen_q;
    std::fill(tseq + s.token_offset, tseq + s.token_offset + s.seqlen_q, static_cast<int32_t>(i));
  }
}

// Store plan of one sequence: positions `first` ... seqlen_k - 1 go to the
// ring (`r_first` = first mod R, from the caller, which has a cheaper way to
// get it than a division); earlier new tokens are not stored.
size_t StepPlan::FillStore(PlannedSeq s, int32_t first, int32_t r_first, size_t n_segs) {
  int32_t* rows = store_rows_.data() + s.token_offset;
  RowSegment* segs = store_segments_.data();
  const int32_t skipped = first - s.q_start;
  std::fill(rows, rows + skipped, -1);
  const int32_t count = s.seqlen_k - first;
  if (count == 0) return n_segs;
  const int32_t base = static_cast<int32_t>(s.slot) * ring_len_;
  const int32_t run1 = std::min(count, ring_len_ - r_first);
  int32_t* out = rows + skipped;
  for (int32_t j = 0; j < run1; ++j) out[j] = base + r_first + j;
  for (int32_t j = run1; j < count; ++j) out[j] = base + (j - run1);
  segs[n_segs++] = RowSegment{base + r_first, s.token_offset + skipped, run1};
  if (count > run1) segs[n_segs++] = RowSegment{base, s.token_offset + skipped + run1, count - run1};
  return n_segs;
}

void StepPlan::FillRing() {
  offset_len_.SetSize(2 * static_cast<size_t>(n_tokens_));
  int32_t* ol = offset_len_.data();
  const int32_t r = ring_len_;
  size_t n_store = 0;
  const int32_t window = window_;
  for (const PlannedSeq& seq : seqs_.span()) {
    const PlannedSeq s = seq;  // a copy: the stores below cannot alias it
    if (s.seqlen_q == 0) continue;
    const int32_t base = static_cast<int32_t>(s.slot) * r;
    // lo never decreases along a sequence's tokens, and q_start - lo0 < W <= R:
    // one remainder per sequence serves the gather and the store plan.
    const int32_t lo0 = WindowLo(s.q_start, s.valid_start, window);
    const int32_t r_lo0 = static_cast<int32_t>(ring_mod_(static_cast<uint32_t>(lo0)));
    int32_t* o = ol + 2 * static_cast<size_t>(s.token_offset);
    // Token j's lo is max(lo0, p - W + 1): it grows by 0 or 1 per token.
    int32_t lo = lo0, r_lo = r_lo0;
    for (int32_t j = 0; j < s.seqlen_q; ++j) {
      const int32_t p = s.q_start + j;
      if (p - window + 1 > lo) {
        ++lo;
        if (++r_lo == r) r_lo = 0;
      }
      o[2 * j] = base + r_lo;
      o[2 * j + 1] = p - lo + 1;
    }
    // Ring-only: seqlen_q <= R, so every new token is stored.
    int32_t r_q = r_lo0 + (s.q_start - lo0);
    if (r_q >= r) r_q -= r;
    n_store = FillStore(s, s.q_start, r_q, n_store);
  }
  store_segments_.SetSize(n_store);
  if (options_.materialize_index) {
    decode_index_.SetSize(static_cast<size_t>(n_tokens_) * window_);
    FillIndexRows(decode_index_.data(), 0, n_tokens_);
  }
}

void StepPlan::FillIndexRows(int32_t* index, int32_t t_begin, int32_t t_end) const {
  const int32_t* ol = offset_len_.data();
  const int32_t* tseq = token_seq_.data();
  const int32_t w = window_;
  const int32_t r = ring_len_;
  const bool pad_last = options_.index_pad == IndexPad::kLastRow;
  // Same entries as FillIndexRow (index_math.h), written with vector stores.
  for (int32_t t = t_begin; t < t_end; ++t) {
    const int32_t base = static_cast<int32_t>(seqs_[tseq[t]].slot) * r;
    const int32_t first = ol[2 * t];
    const int32_t len = ol[2 * t + 1];
    const int32_t pad = pad_last ? LastGatherRow(base, first, len, r) : -1;
    int32_t* row = index + static_cast<size_t>(t) * w;
    const int32_t run1 = std::min(len, base + r - first);  // up to the wrap
    WriteRun(row, first, run1);
    WriteRun(row + run1, base, len - run1);
    WriteFill(row + len, pad, w - len);
  }
}

void StepPlan::WriteDecodeIndex(int32_t* offset_len, int32_t* index) const {
  if (offset_len != nullptr && n_tokens_ > 0)
    std::memcpy(offset_len, offset_len_.data(), 2 * sizeof(int32_t) * n_tokens_);
  // Regenerating is a pure write stream, cheaper than copying the kept index.
  if (index != nullptr) FillIndexRows(index, 0, n_tokens_);
}

void StepPlan::FillStaged() {
  const uint32_t n = n_seqs();
  const int32_t w = window_;
  const int32_t r = ring_len_;
  const int32_t sec2 = static_cast<int32_t>(n) * w;
  RowSegment* segs = load_segments_.data();
  size_t n_segs = 0;
  pivots_.SetSize(4 * static_cast<size_t>(n_tokens_));
  int32_t* piv = pivots_.data();
  size_t n_store = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const PlannedSeq s = seqs_[i];
    const int32_t first = FirstStoredPos(s.q_start, s.seqlen_k, r);
    n_store = FillStore(s, first, static_cast<int32_t>(ring_mod_(static_cast<uint32_t>(first))), n_store);
    const int32_t dst = static_cast<int32_t>(i) * w;
    // Load plan: zero rows, then the ring rows of hb + pad ... q_start - 1.
    const int32_t pad = HistoryPad(s.q_start, s.valid_start, w);
    if (pad > 0) segs[n_segs++] = RowSegment{dst, -1, pad};
    const int32_t count = w - pad;
    if (count > 0) {
      const int32_t base = static_cast<int32_t>(s.slot) * r;
      const int32_t r0 = static_cast<int32_t>(ring_mod_(static_cast<uint32_t>(s.q_start - w + pad)));
      const int32_t run1 = std::min(count, r - r0);
      segs[n_segs++] = RowSegment{dst + pad, base + r0, run1};
      if (count > run1) segs[n_segs++] = RowSegment{dst + pad + run1, base, count - run1};
    }
    int32_t* pv = piv + 4 * static_cast<size_t>(s.token_offset);
    for (int32_t j = 0; j < s.seqlen_q; ++j) {
      const Pivots p =
          StagedPivots(static_cast<int32_t>(i), s.q_start, j, s.valid_start, w, sec2 + s.token_offset);
      pv[4 * j] = p.p0;
      pv[4 * j + 1] = p.p1;
      pv[4 * j + 2] = p.p2;
      pv[4 * j + 3] = p.p3;
    }
  }
  load_segments_.SetSize(n_segs);
  store_segments_.SetSize(n_store);
}

}  // namespace swa::plan
