#include "step/decode_graph.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "step/step_tensors.h"

namespace swa {

const char* GraphReasonName(int32_t reason) {
  switch (reason) {
    case plan::kGraphOk: return "ok";
    case plan::kGraphSlotOutOfRange: return "slot out of range";
    case plan::kGraphSlotNotImported: return "slot not imported into the graph";
    case plan::kGraphLengthOutOfRange: return "seqlen_k out of range";
    case plan::kGraphGap: return "gap (a forward jump other than tokens_per_seq)";
    case plan::kGraphRewindTooDeep: return "rewind deeper than the ring keeps";
    case plan::kGraphDuplicateSlot: return "slot repeated in the batch";
    default: return "unknown reason";
  }
}

absl::StatusOr<std::unique_ptr<DecodeGraph>> DecodeGraph::Create(Cache& cache, int32_t max_seqs,
                                                                  int32_t tokens) {
  const Layout& lay = cache.layout();
  const int32_t max_q = int32_t(lay.ring_len() - lay.window() + 1);
  if (max_seqs < 1)
    return absl::InvalidArgumentError(absl::StrFormat("max_seqs = %d: need >= 1", max_seqs));
  if (tokens < 1 || tokens > max_q)
    return absl::InvalidArgumentError(absl::StrFormat(
        "tokens_per_seq = %d is outside [1, R - W + 1 = %d - %d + 1 = %d]", tokens,
        lay.ring_len(), lay.window(), max_q));
  if (int64_t{max_seqs} * tokens > INT32_MAX / int64_t{lay.window()})
    return absl::InvalidArgumentError(absl::StrFormat(
        "max_seqs * tokens_per_seq = %d * %d is too large", max_seqs, tokens));
  for (uint32_t l = 0; l < lay.num_layers(); ++l)
    if (lay.spec().layers[l].rope.style != RopeStyle::kNone)
      return absl::UnimplementedError(absl::StrFormat(
          "layers[%u] rotates inside the step (rope_style set), which the graph decode does not "
          "do: rotate q and k in the engine, or use swa_plan_build + swa_step",
          l));
  std::unique_ptr<DecodeGraph> g(new DecodeGraph());
  g->cache_ = &cache;
  g->setup_ = GraphSetup{.max_slots = int32_t(lay.max_slots()),
                         .max_seqs = max_seqs,
                         .tokens = tokens,
                         .window = int32_t(lay.window()),
                         .ring_len = int32_t(lay.ring_len())};
  g->held_.assign(lay.max_slots(), 0);
  SWA_ASSIGN_OR_RETURN(g->exec_, cache.backend().MakeGraph(g->setup_));
  return g;
}

DecodeGraph::~DecodeGraph() {
  std::vector<uint32_t> held;
  for (size_t s = 0; s < held_.size(); ++s)
    if (held_[s] != 0) held.push_back(uint32_t(s));
  if (!held.empty()) cache_->slots().DropGraphHolds(held.data(), held.size());
}

absl::Status DecodeGraph::Import(const uint32_t* slots, size_t n, void* stream) {
  if (n == 0) return absl::OkStatus();
  std::vector<SlotState> states(n);
  std::vector<plan::GraphSlot> values(n);
  // A re-import (after swa_slot_set_lengths) refreshes the copy without a second hold.
  std::vector<uint8_t> takes_hold(n);
  for (size_t i = 0; i < n; ++i)
    takes_hold[i] = slots[i] < held_.size() && held_[slots[i]] == 0 ? 1 : 0;
  SWA_RETURN_IF_ERROR(
      cache_->slots().MarkDeviceAdvanced(slots, n, takes_hold.data(), states.data()));
  for (size_t i = 0; i < n; ++i)
    values[i] = plan::GraphSlot{states[i].written_end, states[i].valid_start,
                                states[i].ring_high, 1};
  absl::Status st = exec_->SetSlots(slots, values.data(), n, stream);
  if (!st.ok()) {
    cache_->slots().UnmarkDeviceAdvanced(slots, n, takes_hold.data());  // the graph did not get them
    return st;
  }
  for (size_t i = 0; i < n; ++i) held_[slots[i]] = 1;
  return absl::OkStatus();
}

absl::Status DecodeGraph::Release(const uint32_t* slots, size_t n, void* stream) {
  if (n == 0) return absl::OkStatus();
  for (size_t i = 0; i < n; ++i)
    if (slots[i] >= uint32_t(setup_.max_slots))
      return absl::OutOfRangeError(absl::StrFormat(
          "slots[%u] = %u is out of range: the pool has %d slots", i, slots[i], setup_.max_slots));
  std::vector<plan::GraphSlot> values(n, plan::GraphSlot{0, 0, 0, 0});
  std::vector<uint32_t> dropped;
  dropped.reserve(n);
  SWA_RETURN_IF_ERROR(exec_->SetSlots(slots, values.data(), n, stream));
  // Only now: a release whose copy failed leaves the graph able to write.
  for (size_t i = 0; i < n; ++i)
    if (held_[slots[i]] != 0) {
      held_[slots[i]] = 0;
      dropped.push_back(slots[i]);
    }
  cache_->slots().DropGraphHolds(dropped.data(), dropped.size());
  return absl::OkStatus();
}

absl::Status DecodeGraph::Plan(const int32_t* slots, const int32_t* seqlen_k, int32_t n_seqs,
                               void* stream) {
  if (n_seqs < 0 || n_seqs > setup_.max_seqs)
    return absl::InvalidArgumentError(absl::StrFormat(
        "n_seqs = %d is outside [0, max_seqs = %d]", n_seqs, setup_.max_seqs));
  if (n_seqs > 0 && (slots == nullptr || seqlen_k == nullptr))
    return absl::InvalidArgumentError("slots and seqlen_k must not be NULL");
  SWA_RETURN_IF_ERROR(exec_->Plan(slots, seqlen_k, n_seqs, stream));
  planned_ = true;
  planned_seqs_ = n_seqs;
  return absl::OkStatus();
}

absl::Status DecodeGraph::Step(const StepTensors& t) {
  if (!planned_)
    return absl::FailedPreconditionError("no step has been planned on this graph yet");
  // Every row of the graph has its tensors (padding rows too): n_seqs *
  // tokens_per_seq of them. Positions were refused before (decode_graph_api.cc).
  SWA_RETURN_IF_ERROR(CheckStepTensors(cache_->layout(), t, /*has_tokens=*/true,
                                       int64_t{planned_seqs_} * setup_.tokens,
                                       cache_->backend().kind() != BackendKind::kCuda));
  const StepLayer layer = cache_->StepLayerOf(t.layer);
  const float scale = ResolveSoftmaxScale(t.softmax_scale, layer);
  StepResult result;
  SWA_RETURN_IF_ERROR(exec_->Step(layer, t, scale, &result));
  cache_->counters().nonfinite_blocks.fetch_add(result.nonfinite_blocks,
                                                std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status DecodeGraph::CheckError(void* stream, plan::GraphError* out) {
  plan::GraphError e;
  SWA_RETURN_IF_ERROR(exec_->ReadError(stream, &e));
  if (out != nullptr) *out = e;
  if (e.reason == plan::kGraphOk) return absl::OkStatus();
  const std::string msg = absl::StrFormat(
      "graph decode: seqs[%d] (slot %d, seqlen_k = %d): %s (reason %d; the graph's written_end = "
      "%d, ring_high = %d, tokens_per_seq = %d, R = %d, W = %d); its output rows were zeroed and "
      "nothing was written to its ring",
      e.seq, e.slot, e.seqlen_k, GraphReasonName(e.reason), e.reason, e.written_end, e.ring_high,
      setup_.tokens, setup_.ring_len, setup_.window);
  switch (e.reason) {
    case plan::kGraphSlotOutOfRange:
    case plan::kGraphLengthOutOfRange:
    case plan::kGraphDuplicateSlot:
      return absl::InvalidArgumentError(msg);
    default:
      return absl::FailedPreconditionError(msg);
  }
}

}  // namespace swa
