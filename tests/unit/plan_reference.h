// Brute-force reference for the step planner, written from docs/semantics.md
// ("Window", "Ring", "Steps and plans") by enumeration (no shared code with
// src/plan/): for every token, list
// the visible positions one by one and map each to where it lives.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace plan_ref {

struct Seq {
  uint32_t slot;
  int32_t seqlen_q;
  int32_t seqlen_k;
  int32_t valid_start;  // effective
};

// Positions a query at `p` sees, oldest first: x <= p, x >= v, p - x < W.
inline std::vector<int32_t> Visible(int32_t p, int32_t v, int32_t w) {
  std::vector<int32_t> out;
  for (int32_t x = 0; x <= p; ++x)
    if (x >= v && p - x < w) out.push_back(x);
  return out;
}

inline int32_t RingRowOf(uint32_t slot, int32_t pos, int32_t r) {
  return static_cast<int32_t>(slot) * r + pos % r;
}

inline bool RingOnly(const std::vector<Seq>& seqs, int32_t w, int32_t r) {
  for (const Seq& s : seqs)
    if (s.seqlen_q > r - w + 1) return false;
  return true;
}

inline int32_t TotalTokens(const std::vector<Seq>& seqs) {
  int32_t t = 0;
  for (const Seq& s : seqs) t += s.seqlen_q;
  return t;
}

// Ring-only path: [T, W] index (pad -1 or the token's own row) and [T, 2].
inline void DecodeIndex(const std::vector<Seq>& seqs, int32_t w, int32_t r, bool pad_last,
                        std::vector<int32_t>* index, std::vector<int32_t>* offset_len) {
  index->clear();
  offset_len->clear();
  for (const Seq& s : seqs) {
    const int32_t q0 = s.seqlen_k - s.seqlen_q;
    for (int32_t j = 0; j < s.seqlen_q; ++j) {
      const int32_t p = q0 + j;
      const std::vector<int32_t> vis = Visible(p, s.valid_start, w);
      offset_len->push_back(RingRowOf(s.slot, vis.front(), r));
      offset_len->push_back(static_cast<int32_t>(vis.size()));
      for (int32_t x : vis) index->push_back(RingRowOf(s.slot, x, r));
      for (size_t k = vis.size(); k < static_cast<size_t>(w); ++k)
        index->push_back(pad_last ? RingRowOf(s.slot, p, r) : -1);
    }
  }
}

// Staged path: the staging rows each token reads (section 1 holds positions
// q_start - W ... q_start - 1 of sequence i at rows i*W ...; section 2 holds
// the new tokens at n*W + token index).
inline std::vector<std::vector<int32_t>> StagedRows(const std::vector<Seq>& seqs, int32_t w) {
  std::vector<std::vector<int32_t>> out;
  const int32_t n = static_cast<int32_t>(seqs.size());
  int32_t off = 0;
  for (int32_t i = 0; i < n; ++i) {
    const Seq& s = seqs[i];
    const int32_t q0 = s.seqlen_k - s.seqlen_q;
    for (int32_t j = 0; j < s.seqlen_q; ++j) {
      std::vector<int32_t> rows;
      for (int32_t x : Visible(q0 + j, s.valid_start, w))
        rows.push_back(x < q0 ? i * w + (x - (q0 - w)) : n * w + off + (x - q0));
      out.push_back(rows);
    }
    off += s.seqlen_q;
  }
  return out;
}

// What section 1 must hold, row by row: the ring row to copy, or -1 for zeros.
inline std::vector<int32_t> HistorySources(const std::vector<Seq>& seqs, int32_t w, int32_t r) {
  std::vector<int32_t> out;
  for (const Seq& s : seqs) {
    const int32_t q0 = s.seqlen_k - s.seqlen_q;
    for (int32_t k = 0; k < w; ++k) {
      const int32_t x = q0 - w + k;
      out.push_back(x < 0 || x < s.valid_start ? -1 : RingRowOf(s.slot, x, r));
    }
  }
  return out;
}

// Ring row each new token is stored to, or -1 (only the last R positions).
inline std::vector<int32_t> StoreRows(const std::vector<Seq>& seqs, int32_t r) {
  std::vector<int32_t> out;
  for (const Seq& s : seqs)
    for (int32_t p = s.seqlen_k - s.seqlen_q; p < s.seqlen_k; ++p)
      out.push_back(p >= s.seqlen_k - r ? RingRowOf(s.slot, p, r) : -1);
  return out;
}

// "Rewinds" legality of one sequence against its slot: no never-written
// position between written_end and q_start (unless below valid_start), and the
// oldest key the first token needs, max(0, v, q_start - W + 1), is one the ring
// still holds: nothing at or above it + R was ever stored, and the newest
// stored position is max(written_end, ring_high) - 1 (ring_high counts
// rejected drafts above written_end that still occupy rows).
inline bool LegalAgainstSlot(int32_t written_end, int32_t valid_start, int32_t q_start,
                             int32_t w, int32_t r, int32_t ring_high = 0) {
  if (q_start < valid_start) return false;
  for (int32_t x = written_end; x < q_start; ++x)
    if (x >= valid_start) return false;
  int32_t oldest = q_start;
  for (int32_t x = q_start; x >= 0 && x >= valid_start && q_start - x < w; --x) oldest = x;
  const int32_t newest_stored = std::max(written_end, ring_high) - 1;
  return newest_stored < oldest + r;
}

}  // namespace plan_ref
