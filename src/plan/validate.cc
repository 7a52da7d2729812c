#include "plan/validate.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "absl/strings/str_format.h"
#include "common/rewind_rule.h"

namespace swa::plan {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

template <typename... Args>
absl::Status Invalid(const absl::FormatSpec<Args...>& fmt, const Args&... args) {
  return absl::InvalidArgumentError(absl::StrFormat(fmt, args...));
}

template <typename... Args>
absl::Status Precondition(const absl::FormatSpec<Args...>& fmt, const Args&... args) {
  return absl::FailedPreconditionError(absl::StrFormat(fmt, args...));
}

// Rules that hold whatever the slot state (INVALID_ARGUMENT).
absl::Status CheckArguments(uint32_t i, const SeqDesc& s) {
  if (s.seqlen_q < 0) return Invalid("seqs[%u]: seqlen_q = %d is negative", i, s.seqlen_q);
  if (s.seqlen_k < 0) return Invalid("seqs[%u]: seqlen_k = %d is negative", i, s.seqlen_k);
  if (s.valid_start < 0)
    return Invalid("seqs[%u]: valid_start = %d is negative", i, s.valid_start);
  if (s.seqlen_q > s.seqlen_k)
    return Invalid("seqs[%u]: seqlen_q = %d exceeds seqlen_k = %d", i, s.seqlen_q, s.seqlen_k);
  const int32_t q_start = s.seqlen_k - s.seqlen_q;
  if (s.valid_start > q_start)
    return Invalid("seqs[%u]: valid_start = %d is past q_start = seqlen_k - seqlen_q = %d - %d = %d",
                   i, s.valid_start, s.seqlen_k, s.seqlen_q, q_start);
  return absl::OkStatus();
}

// docs/semantics.md "Rewinds" (common/rewind_rule.h, shared with the graph
// decode): no gap of never-written positions, and the oldest key the first new
// token needs must still be in the ring.
absl::Status CheckAgainstSlot(uint32_t i, const SeqDesc& s, const SlotState& st, int32_t window,
                              int32_t ring_len, int32_t valid_start) {
  const int32_t q = s.seqlen_k - s.seqlen_q;
  const int32_t e = st.written_end;
  const RewindCheck c = CheckRewind(q, valid_start, e, st.ring_high, window, ring_len);
  switch (c.verdict) {
    case kRewindOk:
      return absl::OkStatus();
    case kRewindBelowValidStart:
      return Precondition(
          "seqs[%u] (slot %u): q_start = %d is below the slot's valid_start = %d (positions below "
          "it are missing)",
          i, s.slot, q, valid_start);
    case kRewindGap:
      return Precondition(
          "seqs[%u] (slot %u): q_start = %d leaves a gap: the slot's written_end = %d and "
          "valid_start = %d, so positions %d ... %d were never written",
          i, s.slot, q, e, valid_start, std::max(e, valid_start), q - 1);
    default:
      break;
  }
  if (c.high == e)
    return Precondition(
        "seqs[%u] (slot %u): rewind too deep: q_start = %d needs position %d but the ring "
        "(R = %d) holds only positions >= written_end - R = %d - %d = %d (at most R - W + 1 = "
        "%d positions behind written_end)",
        i, s.slot, q, c.oldest, ring_len, e, ring_len, e - ring_len, ring_len - window + 1);
  return Precondition(
      "seqs[%u] (slot %u): rewind too deep: q_start = %d needs position %d but rejected "
      "positions up to %d (written_end = %d) have overwritten the ring (R = %d) below %d",
      i, s.slot, q, c.oldest, c.high - 1, e, ring_len, c.high - ring_len);
}

}  // namespace

absl::Status ValidateBatch(const SlotTable& slots, int32_t window, int32_t ring_len,
                           absl::Span<const SeqDesc> seqs, uint64_t* slot_mark, uint32_t stamp,
                           PlannedSeq* out, PrevSlotState* prev, BatchSummary* summary) {
  const uint32_t n = static_cast<uint32_t>(seqs.size());
  const int32_t max_ring_tokens = ring_len - window + 1;
  int64_t n_tokens = 0;
  int32_t max_q = 0;
  int32_t max_k = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const SeqDesc& s = seqs[i];
    if (absl::Status st = CheckArguments(i, s); !st.ok()) return st;
    if (absl::Status st = slots.CheckPlannableLocked(s.slot); !st.ok())
      return absl::Status(st.code(), absl::StrFormat("seqs[%u]: %s", i, st.message()));
    const uint64_t mark = slot_mark[s.slot];
    if ((mark >> 32) == stamp)
      return Invalid("seqs[%u]: slot %u already appears in seqs[%u]; a slot may appear once per batch",
                     i, s.slot, static_cast<uint32_t>(mark & 0xffffffffu));
    slot_mark[s.slot] = (uint64_t{stamp} << 32) | i;

    const SlotState& st = slots.StateLocked(s.slot);
    const int32_t valid_start = std::max(st.valid_start, s.valid_start);
    if (absl::Status c = CheckAgainstSlot(i, s, st, window, ring_len, valid_start); !c.ok())
      return c;

    n_tokens += s.seqlen_q;
    if (n_tokens > kInt32Max)
      return Invalid("seqs[%u]: the batch's new tokens reach %d, which overflows int32", i,
                     n_tokens);
    out[i] = PlannedSeq{.slot = s.slot,
                        .seqlen_q = s.seqlen_q,
                        .seqlen_k = s.seqlen_k,
                        .q_start = s.seqlen_k - s.seqlen_q,
                        .valid_start = valid_start,
                        .token_offset = static_cast<int32_t>(n_tokens - s.seqlen_q)};
    const int32_t high = RingContentEnd(st.written_end, st.ring_high);
    prev[i] = PrevSlotState{st.written_end, st.valid_start, st.ring_high,
                            std::max(high, s.seqlen_k), st.generation,
                            st.epoch, st.builds};
    max_q = std::max(max_q, s.seqlen_q);
    max_k = std::max(max_k, s.seqlen_k);
  }

  const Path path = max_q <= max_ring_tokens ? Path::kRing : Path::kStaged;
  if (path == Path::kRing) {
    const int64_t elems = n_tokens * window;
    if (elems > kInt32Max)
      return Invalid(
          "the decode index would hold n_tokens * window = %d * %d = %d entries, which overflows "
          "int32; split the batch",
          n_tokens, window, elems);
  } else {
    const int64_t rows = int64_t{n} * window + n_tokens;
    if (rows > kInt32Max || 4 * n_tokens > kInt32Max)
      return Invalid(
          "the staging buffer would hold n_seqs * window + n_tokens = %u * %d + %d = %d rows (and "
          "the pivots %d entries), which overflows int32; split the batch",
          n, window, n_tokens, rows, 4 * n_tokens);
  }
  summary->n_tokens = static_cast<int32_t>(n_tokens);
  summary->max_seqlen_q = max_q;
  summary->max_seqlen_k = max_k;
  summary->path = path;
  return absl::OkStatus();
}

}  // namespace swa::plan
