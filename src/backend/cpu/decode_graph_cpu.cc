// Plan: the per-sequence checks of common/graph_math.h (the device planner's
// code), then the valid sequences as a compact ring-only plan, which the CPU
// step runs exactly as it runs a host-planned one. Step: rows of the valid
// sequences are gathered when some sequence is padding or invalid, and the
// outputs scattered back around zero rows.
#include "backend/cpu/decode_graph_cpu.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "common/graph_math.h"

namespace swa::cpu {
namespace {

// Stamps of graph plans: a range apart from the host planner's (which counts up from 1).
uint64_t NextGraphStamp() {
  static std::atomic<uint64_t> next{1};
  return (uint64_t{1} << 63) | next.fetch_add(1, std::memory_order_relaxed);
}

size_t DtypeBytes(Dtype d) { return d == Dtype::kFp32 ? 4 : 2; }

class CpuGraph final : public GraphExecutor {
 public:
  CpuGraph(Backend& backend, const GraphSetup& setup)
      : backend_(backend), s_(setup), slots_(size_t(setup.max_slots), plan::GraphSlot{0, 0, 0, 0}),
        claim_(size_t(setup.max_slots), -1) {}

  absl::Status SetSlots(const uint32_t* slots, const plan::GraphSlot* values, size_t n,
                        void*) override {
    for (size_t i = 0; i < n; ++i) slots_[slots[i]] = values[i];
    return absl::OkStatus();
  }

  absl::Status Plan(const int32_t* slots, const int32_t* seqlen_k, int32_t n_seqs,
                    void*) override {
    const int32_t tokens = s_.tokens;
    n_seqs_ = n_seqs;
    seqs_.clear();
    source_.clear();
    // Checks against the slot copy as it was before the step.
    std::vector<int32_t>& reason = reason_;
    reason.assign(size_t(n_seqs), plan::kGraphOk);
    for (int32_t i = 0; i < n_seqs; ++i) {
      const int32_t slot = slots[i];
      if (slot == -1) {
        reason[i] = -1;  // padding
        continue;
      }
      if (slot >= 0 && slot < s_.max_slots) {
        if (claim_[slot] >= 0) {
          reason[i] = plan::kGraphDuplicateSlot;
          continue;
        }
        claim_[slot] = i;
      }
      reason[i] = plan::CheckGraphSeq(slot, seqlen_k[i], tokens, s_.max_slots, s_.window,
                                      s_.ring_len, slots_.data());
    }
    for (int32_t i = 0; i < n_seqs; ++i)
      if (slots[i] >= 0 && slots[i] < s_.max_slots) claim_[slots[i]] = -1;
    for (int32_t i = 0; i < n_seqs; ++i) {
      if (reason[i] > 0) {
        RecordError(i, slots[i], seqlen_k[i], reason[i]);
        continue;
      }
      if (reason[i] < 0) continue;
      plan::GraphSlot& st = slots_[slots[i]];
      seqs_.push_back(plan::GraphPlannedSeq(slots[i], seqlen_k[i], tokens, st.valid_start,
                                            int32_t(seqs_.size()) * tokens));
      source_.push_back(i);
      plan::AdvanceGraphSlot(&st, seqlen_k[i]);
    }
    const size_t t = seqs_.size() * size_t(tokens);
    offset_len_.resize(2 * t);
    store_rows_.resize(t);
    for (const PlannedSeq& s : seqs_)
      for (int32_t j = 0; j < tokens; ++j) {
        const size_t ti = size_t(s.token_offset) + size_t(j);
        plan::GraphTokenRows(s, j, s_.window, s_.ring_len, &offset_len_[2 * ti], &store_rows_[ti]);
      }
    view_ = PlanView{};
    view_.stamp = NextGraphStamp();
    view_.window = s_.window;
    view_.seqs = seqs_.data();
    view_.n_seqs = uint32_t(seqs_.size());
    view_.n_tokens = int32_t(t);
    view_.max_seqlen_q = seqs_.empty() ? 0 : tokens;
    view_.offset_len = offset_len_.data();
    view_.store_rows = store_rows_.data();
    return absl::OkStatus();
  }

  absl::Status Step(const StepLayer& layer, const StepTensors& x, float scale,
                    StepResult* result) override {
    const int32_t tokens = s_.tokens;
    const size_t q_row = size_t(layer.q_heads) * layer.head_dim * DtypeBytes(x.q_dtype);
    const size_t kv_row = size_t(layer.kv_heads) * layer.head_dim * DtypeBytes(x.kv_dtype);
    const size_t out_row = size_t(layer.q_heads) * layer.head_dim * DtypeBytes(x.out_dtype);
    const size_t lse_row = size_t(layer.q_heads) * sizeof(float);
    const bool compact = int32_t(seqs_.size()) == n_seqs_;  // every sequence runs, in place
    StepTensors t = x;
    if (!compact) {
      const size_t n = seqs_.size() * size_t(tokens);
      q_.resize(n * q_row);
      k_.resize(n * kv_row);
      v_.resize(x.v_new != nullptr ? n * kv_row : 0);
      out_.resize(n * out_row);
      lse_.resize(x.lse != nullptr ? n * layer.q_heads : 0);
      for (size_t c = 0; c < seqs_.size(); ++c) {
        const size_t from = size_t(source_[c]) * tokens, to = c * size_t(tokens);
        Gather(q_.data(), x.q, q_row, from, to);
        Gather(k_.data(), x.k_new, kv_row, from, to);
        if (x.v_new != nullptr) Gather(v_.data(), x.v_new, kv_row, from, to);
      }
      t.q = q_.data();
      t.k_new = k_.data();
      t.v_new = x.v_new != nullptr ? v_.data() : nullptr;
      t.out = out_.data();
      t.lse = x.lse != nullptr ? lse_.data() : nullptr;
    }
    if (!seqs_.empty()) {
      StepWork w;
      w.layer = layer;
      w.plan = view_;
      w.tensors = &t;
      w.scale = scale;
      if (prepared_ == nullptr || prepared_->stamp != view_.stamp)
        SWA_RETURN_IF_ERROR(backend_.Prepare(view_, &prepared_));
      SWA_RETURN_IF_ERROR(backend_.RunStep(w, *prepared_, result));
    }
    if (compact) return absl::OkStatus();
    // Idle rows everywhere (out 0, LSE of an empty row), then the rows of the
    // sequences that ran.
    const size_t rows = size_t(n_seqs_) * tokens;
    std::memset(x.out, 0, rows * out_row);
    if (x.lse != nullptr) std::fill_n(x.lse, rows * layer.q_heads, plan::GraphIdleRowLse());
    for (size_t c = 0; c < seqs_.size(); ++c) {
      const size_t to = size_t(source_[c]) * tokens, from = c * size_t(tokens);
      std::memcpy(static_cast<uint8_t*>(x.out) + to * out_row, out_.data() + from * out_row,
                  tokens * out_row);
      if (x.lse != nullptr)
        std::memcpy(x.lse + to * layer.q_heads, lse_.data() + from * layer.q_heads,
                    tokens * lse_row);
    }
    return absl::OkStatus();
  }

  plan::GraphError* error_record() override { return &error_; }
  absl::Status ReadError(void*, plan::GraphError* out) override {
    *out = error_;
    return absl::OkStatus();
  }
  absl::Status ResetError(void*) override {
    error_ = plan::GraphError{};  // all zero, as cudaMemsetAsync leaves it on CUDA
    return absl::OkStatus();
  }

 private:
  // Rows [from, from + tokens) of `src` to rows [to, ...) of `dst`.
  void Gather(uint8_t* dst, const void* src, size_t row, size_t from, size_t to) const {
    std::memcpy(dst + to * row, static_cast<const uint8_t*>(src) + from * row,
                size_t(s_.tokens) * row);
  }

  // Keeps the first error since the last reset (the lowest index of its step).
  void RecordError(int32_t i, int32_t slot, int32_t seqlen_k, int32_t reason) {
    if (error_.reason != plan::kGraphOk) return;
    const bool known = slot >= 0 && slot < s_.max_slots;
    error_ = plan::GraphError{reason, i, slot, seqlen_k, known ? slots_[slot].written_end : -1,
                              known ? slots_[slot].ring_high : -1};
  }

  Backend& backend_;
  const GraphSetup s_;
  std::vector<plan::GraphSlot> slots_;  // the graph's copy of the slot lengths
  std::vector<int32_t> claim_;          // per slot: the sequence using it (-1 outside Plan)
  plan::GraphError error_{};

  int32_t n_seqs_ = 0;
  std::vector<int32_t> reason_;
  std::vector<PlannedSeq> seqs_;  // the valid sequences, compact token offsets
  std::vector<int32_t> source_;   // their batch index
  std::vector<int32_t> offset_len_, store_rows_;
  PlanView view_;
  std::unique_ptr<PreparedPlan> prepared_;
  std::vector<uint8_t> q_, k_, v_, out_;
  std::vector<float> lse_;
};

}  // namespace

std::unique_ptr<GraphExecutor> MakeCpuGraph(Backend& backend, const GraphSetup& setup) {
  return std::make_unique<CpuGraph>(backend, setup);
}

}  // namespace swa::cpu
