#include "backend/cpu/merge_cpu.h"

#include <cstring>

#include "backend/cpu/thread_pool.h"
#include "common/merge.h"

namespace swa::cpu {
namespace {

float Load(const void* p, Dtype dtype, size_t i) {
  if (dtype == Dtype::kFp32) return static_cast<const float*>(p)[i];
  const uint32_t bits = uint32_t{static_cast<const uint16_t*>(p)[i]} << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

void Store(void* p, Dtype dtype, size_t i, float v) {
  if (dtype == Dtype::kFp32) {
    static_cast<float*>(p)[i] = v;
    return;
  }
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  uint16_t h;
  if ((u & 0x7FFFFFFFu) > 0x7F800000u)
    h = static_cast<uint16_t>((u >> 16) | 0x40);  // NaN stays NaN (quiet)
  else
    h = static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);  // nearest even
  static_cast<uint16_t*>(p)[i] = h;
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
