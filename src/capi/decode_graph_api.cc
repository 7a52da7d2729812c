// The Graph decode section: swa_decode_graph_create, _destroy, _import,
// _release, _plan, _step, _error_record, _check, _reset_error, and
// swa_slot_set_lengths.
#include <cstddef>

#include "capi/enums.h"
#include "capi/error.h"
#include "capi/handles.h"
#include "capi/step_args.h"
#include "common/status_macros.h"
#include "common/graph_math.h"

using swa::capi::Guard;

namespace swa::capi {
namespace {

static_assert(sizeof(swa_graph_error_t) == sizeof(plan::GraphError));
static_assert(offsetof(swa_graph_error_t, reason) == offsetof(plan::GraphError, reason));
static_assert(offsetof(swa_graph_error_t, seq) == offsetof(plan::GraphError, seq));
static_assert(offsetof(swa_graph_error_t, slot) == offsetof(plan::GraphError, slot));
static_assert(offsetof(swa_graph_error_t, seqlen_k) == offsetof(plan::GraphError, seqlen_k));
static_assert(offsetof(swa_graph_error_t, written_end) ==
              offsetof(plan::GraphError, written_end));
static_assert(offsetof(swa_graph_error_t, ring_high) == offsetof(plan::GraphError, ring_high));
static_assert(SWA_GRAPH_OK == plan::kGraphOk);
static_assert(SWA_GRAPH_SLOT_OUT_OF_RANGE == plan::kGraphSlotOutOfRange);
static_assert(SWA_GRAPH_SLOT_NOT_IMPORTED == plan::kGraphSlotNotImported);
static_assert(SWA_GRAPH_SEQLEN_K_OUT_OF_RANGE == plan::kGraphLengthOutOfRange);
static_assert(SWA_GRAPH_GAP == plan::kGraphGap);
static_assert(SWA_GRAPH_REWIND_TOO_DEEP == plan::kGraphRewindTooDeep);
static_assert(SWA_GRAPH_DUPLICATE_SLOT == plan::kGraphDuplicateSlot);

absl::Status CheckGraph(const swa_decode_graph_t* graph) {
  if (graph == nullptr || graph->impl == nullptr) return NullArg("graph");
  return absl::OkStatus();
}

}  // namespace
}  // namespace swa::capi

extern "C" {

SWA_API swa_status_t swa_decode_graph_create(swa_cache_t* cache, uint32_t max_seqs,
                                             uint32_t tokens_per_seq, swa_decode_graph_t** out) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    SWA_CHECK_NOT_NULL(out);
    if (max_seqs > INT32_MAX || tokens_per_seq > INT32_MAX)
      return absl::InvalidArgumentError(absl::StrFormat(
          "max_seqs = %u, tokens_per_seq = %u: too large", max_seqs, tokens_per_seq));
    auto g = std::make_unique<swa_decode_graph_t>();
    SWA_ASSIGN_OR_RETURN(g->impl, swa::DecodeGraph::Create(*cache->impl, int32_t(max_seqs),
                                                           int32_t(tokens_per_seq)));
    *out = g.release();
    return absl::OkStatus();
  });
}

SWA_API void swa_decode_graph_destroy(swa_decode_graph_t* graph) { delete graph; }

SWA_API swa_status_t swa_decode_graph_import(swa_decode_graph_t* graph, const uint32_t* slots,
                                             size_t n, void* stream) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckGraph(graph));
    if (n > 0) SWA_CHECK_NOT_NULL(slots);
    return graph->impl->Import(slots, n, stream);
  });
}

SWA_API swa_status_t swa_decode_graph_release(swa_decode_graph_t* graph, const uint32_t* slots,
                                              size_t n, void* stream) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckGraph(graph));
    if (n > 0) SWA_CHECK_NOT_NULL(slots);
    return graph->impl->Release(slots, n, stream);
  });
}

SWA_API swa_status_t swa_decode_graph_plan(swa_decode_graph_t* graph, const int32_t* slots,
                                           const int32_t* seqlen_k, uint32_t n_seqs,
                                           void* stream) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckGraph(graph));
    if (n_seqs > INT32_MAX)
      return absl::InvalidArgumentError(absl::StrFormat("n_seqs = %u is too large", n_seqs));
    return graph->impl->Plan(slots, seqlen_k, int32_t(n_seqs), stream);
  });
}

SWA_API swa_status_t swa_decode_graph_step(swa_decode_graph_t* graph,
                                           const swa_step_args_t* args) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckGraph(graph));
    swa::StepTensors tensors;
    SWA_RETURN_IF_ERROR(swa::capi::ConvertStepArgs(args, &tensors));
    if (tensors.positions != nullptr)
      return absl::InvalidArgumentError(
          "positions is not NULL: the graph decode rotates by cache positions only (its captured "
          "work cannot read host positions)");
    return graph->impl->Step(tensors);
  });
}

SWA_API const swa_graph_error_t* swa_decode_graph_error_record(const swa_decode_graph_t* graph) {
  if (graph == nullptr || graph->impl == nullptr) return nullptr;
  return reinterpret_cast<const swa_graph_error_t*>(graph->impl->error_record());
}

SWA_API swa_status_t swa_decode_graph_check(swa_decode_graph_t* graph, void* stream,
                                            swa_graph_error_t* record) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckGraph(graph));
    return graph->impl->CheckError(stream, reinterpret_cast<swa::plan::GraphError*>(record));
  });
}

SWA_API swa_status_t swa_decode_graph_reset_error(swa_decode_graph_t* graph, void* stream) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckGraph(graph));
    return graph->impl->ResetError(stream);
  });
}

SWA_API swa_status_t swa_slot_set_lengths(swa_cache_t* cache, const uint32_t* slots,
                                          const int32_t* written_end, const int32_t* valid_start,
                                          size_t n) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    if (n == 0) return absl::OkStatus();
    SWA_CHECK_NOT_NULL(slots);
    SWA_CHECK_NOT_NULL(written_end);
    const swa::Layout& lay = cache->impl->layout();
    return cache->impl->slots().SetLengths(slots, written_end, valid_start, n,
                                           int32_t(lay.ring_len() - lay.window() + 1));
  });
}

}  // extern "C"
