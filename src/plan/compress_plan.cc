#include "plan/compress_plan.h"

#include "absl/strings/str_format.h"

namespace swa::plan {

std::vector<CompressRing> CompressRingsOf(const Layout& layout) {
  std::vector<CompressRing> rings;
  for (uint32_t i = 0; i < layout.num_layers(); ++i) {
    const LayerLayout& l = layout.layer(i);
    if (!l.typed_compressor()) continue;
    const CompressGeometry g = l.compress_geometry();
    bool seen = false;
    for (const CompressRing& r : rings)
      seen |= r.geometry.kind == g.kind && r.geometry.rate == g.rate &&
              r.geometry.ring_len == g.ring_len;
    if (!seen) rings.push_back({g, i});
  }
  return rings;
}

absl::Status CheckCompressRewinds(absl::Span<const CompressRing> rings, const PlannedSeq* seqs,
                                  const PrevSlotState* prev, size_t n) {
  for (const CompressRing& r : rings) {
    for (size_t i = 0; i < n; ++i) {
      const PlannedSeq& s = seqs[i];
      const int32_t high = prev[i].written_end > prev[i].ring_high ? prev[i].written_end
                                                                   : prev[i].ring_high;
      if (CompressRewindOk(r.geometry, s.q_start, s.valid_start, high)) continue;
      const int32_t oldest = CompressOldestNeeded(r.geometry, s.q_start, s.valid_start);
      return absl::FailedPreconditionError(absl::StrFormat(
          "seqs[%u] (slot %u): rewind too deep for the compressor ring of layer %u: q_start = %d "
          "reopens entry %d, whose window starts at position %d, but the ring of %d rows holds "
          "positions >= %d only (written_end = %d, highest written %d); a step may start at most "
          "N + 1 positions behind the highest",
          i, s.slot, r.layer, s.q_start, s.q_start / r.geometry.rate, oldest,
          r.geometry.ring_len, high - r.geometry.ring_len, prev[i].written_end, high));
    }
  }
  return absl::OkStatus();
}

size_t CountCompressWindows(CompressGeometry g, absl::Span<const PlannedSeq> seqs) {
  size_t n = 0;
  for (const PlannedSeq& s : seqs) n += CompressClosing(g, s.q_start, s.seqlen_k).count;
  return n;
}

void PlanCompressWindows(CompressGeometry g, absl::Span<const PlannedSeq> seqs,
                         std::vector<CompressWindow>* out) {
  out->clear();
  out->reserve(CountCompressWindows(g, seqs));
  for (uint32_t i = 0; i < seqs.size(); ++i) {
    const PlannedSeq& s = seqs[i];
    const ClosingEntries e = CompressClosing(g, s.q_start, s.seqlen_k);
    for (int32_t w = e.first; w < e.first + e.count; ++w) {
      const WindowSplit sp = CompressSplit(g, w, s.q_start, s.valid_start, s.token_offset);
      out->push_back({i, s.slot, w, w * g.rate, sp.first_position, sp.n_missing, sp.n_ring,
                      sp.ring_row, sp.n_new, sp.new_row});
    }
  }
}

void PlanCompressStore(CompressGeometry g, absl::Span<const PlannedSeq> seqs,
                       std::vector<RowSegment>* out) {
  out->clear();
  const int32_t L = g.ring_len;
  for (const PlannedSeq& s : seqs) {
    const int32_t n = s.seqlen_q < L ? s.seqlen_q : L;
    if (n == 0) continue;
    const int32_t p0 = s.seqlen_k - n;  // first stored position
    const int32_t t0 = s.token_offset + (p0 - s.q_start);
    const int32_t r0 = p0 % L;
    const int32_t first_run = n < L - r0 ? n : L - r0;
    const int32_t base = static_cast<int32_t>(s.slot) * L;
    out->push_back({base + r0, t0, first_run});
    if (first_run < n) out->push_back({base, t0 + first_run, n - first_run});
  }
}

}  // namespace swa::plan
