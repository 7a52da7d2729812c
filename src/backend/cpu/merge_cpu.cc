#include "backend/cpu/merge_cpu.h"

#include "backend/cpu/thread_pool.h"
#include "common/mxfp8_math.h"
#include "common/merge.h"

namespace swa::cpu {
namespace {

// BF16 through the codec's conversions (NaN stays NaN, nearest even), the
// same as the CUDA merge kernel's.
float Load(const void* p, Dtype dtype, size_t i) {
  if (dtype == Dtype::kFp32) return static_cast<const float*>(p)[i];
  return codec::Bf16ToFloat(static_cast<const uint16_t*>(p)[i]);
}

void Store(void* p, Dtype dtype, size_t i, float v) {
  if (dtype == Dtype::kFp32)
    static_cast<float*>(p)[i] = v;
  else
    static_cast<uint16_t*>(p)[i] = codec::Bf16FromFloat(v);
}

void MergeRows(const MergeWork& w, size_t begin, size_t end) {
  for (size_t r = begin; r < end; ++r) {
    const MergeWeights mw = MergeOf(w.lse_a[r], w.lse_b[r]);
    const size_t base = r * w.dim;
    for (uint32_t d = 0; d < w.dim; ++d) {
      const float oa = Load(w.out_a, w.dtype, base + d), ob = Load(w.out_b, w.dtype, base + d);
      Store(w.out, w.dtype, base + d, MergeValue(mw, oa, ob));
    }
    if (w.lse != nullptr) w.lse[r] = mw.lse;  // after both LSEs of the row were read
  }
}

}  // namespace

void MergeCpu(const MergeWork& work, ThreadPool* pool) {
  const size_t rows = static_cast<size_t>(work.rows);
  if (pool == nullptr || pool->num_threads() <= 1 || rows * work.dim < (size_t{1} << 16)) {
    MergeRows(work, 0, rows);
    return;
  }
  pool->ParallelFor(rows, 64, [&](size_t b, size_t e) { MergeRows(work, b, e); });
}

}  // namespace swa::cpu
