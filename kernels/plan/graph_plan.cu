// One block plans the whole batch (decode batches are small): claims for the
// duplicate check, the checks against the slot copy as it was before the step,
// the error record, then the commit and every token's rows.
#include "kernels/plan/graph_plan.h"

#include <limits.h>

#include "kernels/common/launch.cuh"

namespace swa::kernels {
namespace {

constexpr int kPlanThreads = 1024;
constexpr int kZeroThreads = 256;

__global__ void GraphPlanKernel(GraphPlanParams p) {
  __shared__ int32_t first_bad;
  const int tid = threadIdx.x;
  if (tid == 0) first_bad = INT_MAX;
  for (int i = tid; i < p.n_seqs; i += kPlanThreads) {
    const int32_t s = p.slots[i];
    if (s >= 0 && s < p.max_slots) atomicMin(&p.claim[s], i);
  }
  __syncthreads();
  for (int i = tid; i < p.n_seqs; i += kPlanThreads) {
    const int32_t s = p.slots[i];
    int32_t r;
    if (s == -1)
      r = -1;  // padding
    else if (s >= 0 && s < p.max_slots && p.claim[s] != i)
      r = plan::kGraphDuplicateSlot;
    else
      r = plan::CheckGraphSeq(s, p.seqlen_k[i], p.tokens, p.max_slots, p.window, p.ring_len,
                              p.table);
    p.reason[i] = r;
    PlannedSeq q;
    if (r == plan::kGraphOk) {
      q = plan::GraphPlannedSeq(s, p.seqlen_k[i], p.tokens, p.table[s].valid_start,
                                i * p.tokens);
    } else {
      q = plan::GraphPlannedSeq(0, p.tokens, p.tokens, 0, i * p.tokens);
      q.seqlen_q = 0;
      if (r > 0) atomicMin(&first_bad, i);
    }
    p.seqs[i] = q;
  }
  __syncthreads();
  if (tid == 0 && first_bad != INT_MAX && p.error->reason == plan::kGraphOk) {
    const int32_t i = first_bad, s = p.slots[i];
    const bool known = s >= 0 && s < p.max_slots;
    plan::GraphError e;
    e.reason = p.reason[i];
    e.seq = i;
    e.slot = s;
    e.seqlen_k = p.seqlen_k[i];
    e.written_end = known ? p.table[s].written_end : -1;
    e.ring_high = known ? p.table[s].ring_high : -1;
    *p.error = e;
  }
  __syncthreads();
  for (int i = tid; i < p.n_seqs; i += kPlanThreads) {
    const int32_t s = p.slots[i];
    if (p.reason[i] == plan::kGraphOk) plan::AdvanceGraphSlot(&p.table[s], p.seqlen_k[i]);
    if (s >= 0 && s < p.max_slots) p.claim[s] = INT_MAX;
  }
  const int32_t n_rows = p.n_seqs * p.tokens;
  for (int t = tid; t < n_rows; t += kPlanThreads) {
    const PlannedSeq q = p.seqs[t / p.tokens];
    if (q.seqlen_q > 0) {
      plan::GraphTokenRows(q, t % p.tokens, p.window, p.ring_len, p.offset_len + 2 * t,
                           p.store_rows + t);
    } else {
      p.offset_len[2 * t] = 0;
      p.offset_len[2 * t + 1] = 0;
      p.store_rows[t] = -1;
    }
  }
}

__global__ void GraphZeroKernel(GraphZeroParams p) {
  const int32_t t = blockIdx.x;  // one block per token row
  if (p.seqs[t / p.tokens].seqlen_q > 0) return;
  uint32_t* row = p.out + static_cast<int64_t>(t) * p.out_row_words;
  for (int j = threadIdx.x; j < p.out_row_words; j += kZeroThreads) row[j] = 0;
  if (p.lse != nullptr)
    for (int j = threadIdx.x; j < p.lse_row; j += kZeroThreads)
      p.lse[static_cast<int64_t>(t) * p.lse_row + j] = plan::GraphIdleRowLse();
}

struct SetSlotsParams {
  plan::GraphSlot* table;
  const GraphSlotEntry* entries;
  int32_t n;
};

__global__ void GraphSetSlotsKernel(SetSlotsParams p) {
  const int i = blockIdx.x * kZeroThreads + threadIdx.x;
  if (i < p.n) p.table[p.entries[i].slot] = p.entries[i].value;
}

}  // namespace

cudaError_t LaunchGraphPlan(const GraphPlanParams& p, cudaStream_t stream) {
  if (p.n_seqs < 0 || p.tokens < 1 || p.max_slots < 1 || p.window < 1 ||
      p.ring_len < p.window || p.table == nullptr || p.claim == nullptr || p.error == nullptr ||
      (p.n_seqs > 0 && (p.slots == nullptr || p.seqlen_k == nullptr || p.reason == nullptr ||
                        p.seqs == nullptr || p.offset_len == nullptr || p.store_rows == nullptr)))
    return cudaErrorInvalidValue;
  if (p.n_seqs == 0) return cudaSuccess;
  return Launch(GraphPlanKernel, dim3(1), dim3(kPlanThreads), 0, stream, p);
}

cudaError_t LaunchGraphZeroRows(const GraphZeroParams& p, cudaStream_t stream) {
  if (p.n_seqs < 0 || p.tokens < 1 || (p.n_seqs > 0 && (p.seqs == nullptr || p.out == nullptr)))
    return cudaErrorInvalidValue;
  if (p.n_seqs == 0) return cudaSuccess;
  return Launch(GraphZeroKernel, dim3(p.n_seqs * p.tokens), dim3(kZeroThreads), 0, stream, p);
}

cudaError_t LaunchGraphSetSlots(plan::GraphSlot* table, const GraphSlotEntry* entries, int32_t n,
                                cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  return Launch(GraphSetSlotsKernel, dim3((n + kZeroThreads - 1) / kZeroThreads),
                dim3(kZeroThreads), 0, stream, SetSlotsParams{table, entries, n});
}

}  // namespace swa::kernels
