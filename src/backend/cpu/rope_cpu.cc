#include "backend/cpu/rope_cpu.h"

#include "common/mxfp8_math.h"
#include "common/rope.h"

namespace swa::cpu {

void RotateHeadsAt(const RopeTable& table, float* v, uint32_t heads, uint32_t head_dim,
                   int32_t pos, float factor, float sign, std::vector<float>& cs) {
  const uint32_t half = table.dims / 2;
  cs.resize(2 * size_t(half));
  for (uint32_t i = 0; i < half; ++i)
    RopeAngle(static_cast<float>(pos), table.inv_freq[i], factor, &cs[i], &cs[half + i]);
  for (uint32_t h = 0; h < heads; ++h)
    RotateHead(v + size_t(h) * head_dim, table.style, table.first_dim, table.dims, cs.data(),
               cs.data() + half, sign);
}

void RopeApplyCpu(const RopeWork& w) {
  const float factor = RopeWorkFactor(w), sign = RopeWorkSign(w);
  const size_t per_token = size_t(w.heads) * w.head_dim;
  std::vector<float> cs, row;
  for (int64_t t = 0; t < w.tokens; ++t) {
    if (w.dtype == Dtype::kFp32) {
      float* v = static_cast<float*>(w.x) + size_t(t) * per_token;
      RotateHeadsAt(*w.table, v, w.heads, w.head_dim, w.positions[t], factor, sign, cs);
      continue;
    }
    // BF16: widened exactly, rotated in FP32, rounded back to nearest even.
    uint16_t* h = static_cast<uint16_t*>(w.x) + size_t(t) * per_token;
    row.resize(per_token);
    for (size_t e = 0; e < per_token; ++e) row[e] = codec::Bf16ToFloat(h[e]);
    RotateHeadsAt(*w.table, row.data(), w.heads, w.head_dim, w.positions[t], factor, sign, cs);
    for (size_t e = 0; e < per_token; ++e) h[e] = codec::Bf16FromFloat(row[e]);
  }
}

}  // namespace swa::cpu
