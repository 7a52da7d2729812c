// PrepareCpuPlan: the per-build preparation every layer of a CPU step shares
// (each sequence's tile shape and each token's visible tile rows).
#include "backend/cpu/cpu_step.h"

namespace swa::cpu {

void PrepareCpuPlan(const PlanView& plan, CpuPreparedPlan* out) {
  const int32_t w = plan.window;
  out->tiles.resize(plan.n_seqs);
  out->key_begin.resize(size_t(plan.n_tokens));
  out->key_end.resize(size_t(plan.n_tokens));
  out->positions.resize(size_t(plan.n_tokens));
  out->first_segment.assign(plan.staged ? plan.n_seqs : 0, plan.n_load_segments);
  for (uint32_t i = 0; i < plan.n_seqs; ++i) {
    const PlannedSeq& s = plan.seqs[i];
    SeqTile& t = out->tiles[i];
    t = SeqTile{};
    if (plan.staged) {
      t.base = s.q_start - w;
      t.n_hist = w;
    } else if (s.seqlen_q > 0) {
      t.base = s.q_start - plan.offset_len[2 * size_t(s.token_offset) + 1] + 1;  // oldest key
      t.n_hist = s.q_start - t.base;
    }
    t.n_keys = t.n_hist + s.seqlen_q;
    // Each token's visible rows of the tile: from its lowest visible position
    // (read back from the pivots or offset_len) up to itself.
    const int32_t sec2_first = int32_t(plan.n_seqs) * w + s.token_offset;
    for (int32_t j = 0; j < s.seqlen_q; ++j) {
      const size_t ti = size_t(s.token_offset) + size_t(j);
      const int32_t p = s.q_start + j;
      out->positions[ti] = p;
      int32_t lo;
      if (plan.staged) {
        const int32_t* pv = plan.pivots + 4 * ti;
        lo = pv[1] > 0 ? t.base + (pv[0] - int32_t(i) * w) : s.q_start + (pv[2] - sec2_first);
      } else {
        lo = p - plan.offset_len[2 * ti + 1] + 1;
      }
      out->key_begin[ti] = lo - t.base;
      out->key_end[ti] = p - t.base + 1;
    }
  }
  // Segments come in sequence order: the first one of each sequence.
  for (size_t g = plan.staged ? plan.n_load_segments : 0; g-- > 0;) {
    const uint32_t i = uint32_t(plan.load_segments[g].dst_row / w);
    if (i < plan.n_seqs) out->first_segment[i] = g;
  }
  out->stamp = plan.stamp;
}

}  // namespace swa::cpu
