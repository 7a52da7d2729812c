// What a backend needs to run one layer of one planned step, as plain data
// (no planner or cache types, so backends stay below them). The plan's arrays
// are pointed to, never copied; the caller's tensors are converted from the C
// struct once, at the C edge.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/records.h"
#include "layout/rope_table.h"

namespace swa {

// One layer of the cache: where its ring rows are and the shape of its heads.
struct StepLayer {
  RingRows ring;           // rows of this layer (slot 0 at ring.base)
  uint32_t vec_bytes = 0;  // bytes of one stored vector
  int32_t window = 0;
  Format format = Format::kMxfp8;
  ScaleMode scale_mode = ScaleMode::kCeil;
  int q_heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  bool shared_kv = true;
  const RopeTable* rope = nullptr;  // never null; rope->on() false = no rotation
  float softcap = 0;                // logit soft-cap; 0 = off
  float softmax_scale = 0;          // the layer's (LayerSpec); 0 = none
};

// The caller's tensors of one layer (swa_step_args_t without struct_size).
struct StepTensors {
  uint32_t layer = 0;
  const void* q = nullptr;      // [T, Hq, D]
  Dtype q_dtype = Dtype::kFp32;
  const void* k_new = nullptr;  // [T, Hkv, D]
  const void* v_new = nullptr;  // [T, Hkv, D] or nullptr for shared K/V
  Dtype kv_dtype = Dtype::kFp32;
  void* out = nullptr;          // [T, Hq, D]
  Dtype out_dtype = Dtype::kFp32;
  const float* sinks = nullptr;  // [Hq] or nullptr
  float softmax_scale = 0;       // 0 = 1/sqrt(D)
  void* stream = nullptr;
  float* lse = nullptr;          // [T, Hq] or nullptr
  // [T] host memory: RoPE positions of the tokens (checked >= 0), or nullptr
  // = the cache positions. RoPE only: rows, window and mask ignore them.
  const int32_t* positions = nullptr;
};

// A built plan's arrays, pointing into the plan (valid while it is not rebuilt).
struct PlanView {
  uint64_t stamp = 0;  // unique per build in the process: keys prepared state
  bool staged = false;
  int32_t window = 0;    // W: staging section 1 holds W rows per sequence
  const PlannedSeq* seqs = nullptr;
  uint32_t n_seqs = 0;
  int32_t n_tokens = 0;
  int32_t max_seqlen_q = 0;
  const int32_t* offset_len = nullptr;        // ring-only path: [T, 2]
  const RowSegment* load_segments = nullptr;  // staged path, in sequence order
  size_t n_load_segments = 0;
  const int32_t* pivots = nullptr;      // staged path: [T, 4]
  const int32_t* store_rows = nullptr;  // [T]: ring row of each new token, -1 = not stored
};

// What a backend derives from a plan once per build, for every layer's step.
class PreparedPlan {
 public:
  virtual ~PreparedPlan() = default;
  uint64_t stamp = 0;  // the PlanView::stamp it was prepared from
};

struct StepWork {
  StepLayer layer;
  PlanView plan;
  const StepTensors* tensors = nullptr;  // validated by the caller
  float scale = 0;                       // resolved softmax scale
};

struct StepResult {
  uint64_t nonfinite_blocks = 0;  // NaN/Inf blocks met while encoding new K/V
};

}  // namespace swa
