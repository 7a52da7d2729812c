#include "backend/cpu/compress_cpu.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "common/compress_entry.h"
#include "common/mxfp8_math.h"
#include "common/rope.h"

namespace swa::cpu {
namespace {

const uint8_t* RingRow(const CompressWork& w, uint32_t slot, int32_t row) {
  return w.ring_base + slot * w.slot_bytes + static_cast<uint64_t>(row) * w.row_bytes;
}

size_t ValueBytes(Format f) { return f == Format::kBf16 ? 2 : 4; }
size_t DtypeBytes(Dtype d) { return d == Dtype::kBf16 ? 2 : 4; }

// Values vo .. vo + n - 1 of a slot's kv or gate row as FP32 (rounded through
// BF16 where the ring keeps BF16 but the slot reads the caller's FP32 row).
void LoadSlot(const CompressSlotSrc& s, const void* row, uint32_t vo, uint32_t n, float* out) {
  if (s.bf16) {
    const uint16_t* p = static_cast<const uint16_t*>(row) + vo;
    for (uint32_t f = 0; f < n; ++f) out[f] = codec::Bf16ToFloat(p[f]);
  } else {
    std::memcpy(out, static_cast<const float*>(row) + vo, n * sizeof(float));
    if (s.round_bf16)
      for (uint32_t f = 0; f < n; ++f) out[f] = codec::Bf16ToFloat(codec::Bf16FromFloat(out[f]));
  }
}

struct Scratch {
  std::vector<CompressSlotSrc> slots;
  std::vector<float> logits;  // [S, d]: gate + bias, then exp(logit - max)
  std::vector<float> mx, sum, x, tmp;
};

// One window's entry into out row k: per feature, the arithmetic of
// common/compress_entry.h's CompressPoolFeature (the same operations in the
// same order, so the same bits), with the slots in the outer loops so that the
// feature loops run over contiguous values.
void ComputeWindow(const CompressWork& w, size_t k, Scratch* sc) {
  const CompressWindow& win = w.windows[k];
  const int32_t n = CompressWindowSlots(w.geometry);
  const uint32_t d = w.entry_dim;
  const bool ring_bf16 = w.row_format == Format::kBf16;
  const bool in_bf16 = w.dtype == Dtype::kBf16;
  const size_t half = w.row_values * ValueBytes(w.row_format);
  const size_t in_row = w.row_values * DtypeBytes(w.dtype);
  sc->slots.resize(n);
  for (int32_t j = 0; j < n; ++j) {
    CompressSlotSrc& s = sc->slots[j];
    if (j < win.n_missing) {
      s = {nullptr, nullptr, false, false};
    } else if (j < win.n_missing + win.n_ring) {
      const int32_t row = (win.ring_row + (j - win.n_missing)) % w.geometry.ring_len;
      const uint8_t* p = RingRow(w, win.slot, row);
      s = {p, p + half, ring_bf16, false};
    } else {
      const int64_t t = win.new_row + (j - win.n_missing - win.n_ring);
      s = {static_cast<const uint8_t*>(w.kv) + t * in_row,
           static_cast<const uint8_t*>(w.gate) + t * in_row, in_bf16, ring_bf16 && !in_bf16};
    }
  }
  sc->logits.resize(static_cast<size_t>(n) * d);
  sc->mx.assign(d, -INFINITY);
  sc->sum.assign(d, 0.0f);
  sc->x.assign(d, 0.0f);
  sc->tmp.resize(d);
  float* mx = sc->mx.data();
  float* sum = sc->sum.data();
  float* x = sc->x.data();
  float* tmp = sc->tmp.data();
  for (int32_t j = 0; j < n; ++j) {  // logits and their max per feature
    const CompressSlotSrc& s = sc->slots[j];
    if (s.kv == nullptr) continue;
    uint32_t vo;
    int32_t br;
    CompressSlotIndex(w.geometry, d, j, 0, &vo, &br);
    const float* bias = w.position_bias + static_cast<size_t>(br) * w.row_values + vo;
    float* lj = sc->logits.data() + static_cast<size_t>(j) * d;
    LoadSlot(s, s.gate, vo, d, lj);
    for (uint32_t f = 0; f < d; ++f) {
      lj[f] = lj[f] + bias[f];
      mx[f] = lj[f] > mx[f] ? lj[f] : mx[f];
    }
  }
  for (int32_t j = 0; j < n; ++j) {  // exp(logit - max) and their sum
    if (sc->slots[j].kv == nullptr) continue;
    float* lj = sc->logits.data() + static_cast<size_t>(j) * d;
    for (uint32_t f = 0; f < d; ++f) {
      lj[f] = expf(lj[f] - mx[f]);
      sum[f] += lj[f];
    }
  }
  for (int32_t j = 0; j < n; ++j) {  // the weighted sum of kv
    const CompressSlotSrc& s = sc->slots[j];
    if (s.kv == nullptr) continue;
    uint32_t vo;
    int32_t br;
    CompressSlotIndex(w.geometry, d, j, 0, &vo, &br);
    const float* lj = sc->logits.data() + static_cast<size_t>(j) * d;
    LoadSlot(s, s.kv, vo, d, tmp);
    for (uint32_t f = 0; f < d; ++f) x[f] += tmp[f] * (lj[f] / sum[f]);
  }
  CompressNorm(x, d, w.norm_weight, w.norm_eps);
  if (w.rope != nullptr && w.rope->dims != 0) {
    const uint32_t n_rot = w.rope->dims, first = d - n_rot;
    for (uint32_t i = 0; i < n_rot / 2; ++i) {
      float c, s;
      RopeAngle(static_cast<float>(win.position), w.rope->inv_freq[i], w.rope->attention_factor,
                &c, &s);
      RotatePair(&x[first + 2 * i], &x[first + 2 * i + 1], c, s);
    }
  }
  const size_t base = k * d;
  if (w.out_dtype == Dtype::kFp32) {
    std::memcpy(static_cast<float*>(w.out) + base, x, d * sizeof(float));
  } else {
    uint16_t* o = static_cast<uint16_t*>(w.out) + base;
    for (uint32_t f = 0; f < d; ++f) o[f] = codec::Bf16FromFloat(x[f]);
  }
}

// Source row t (kv and gate) into ring row `row` of `slot`, in the ring's format.
void StoreRow(const CompressWork& w, uint32_t slot, int32_t row, int64_t t) {
  uint8_t* dst = const_cast<uint8_t*>(RingRow(w, slot, row));
  const size_t in_row = w.row_values * DtypeBytes(w.dtype);
  const void* src[2] = {static_cast<const uint8_t*>(w.kv) + t * in_row,
                        static_cast<const uint8_t*>(w.gate) + t * in_row};
  const size_t half = w.row_values * ValueBytes(w.row_format);
  for (int h = 0; h < 2; ++h) {
    uint8_t* d = dst + h * half;
    if (w.row_format == Format::kFp32 && w.dtype == Dtype::kFp32) {
      std::memcpy(d, src[h], half);
    } else if (w.row_format == Format::kBf16 && w.dtype == Dtype::kBf16) {
      std::memcpy(d, src[h], half);
    } else if (w.row_format == Format::kFp32) {  // BF16 in, FP32 ring
      float* o = reinterpret_cast<float*>(d);
      for (uint32_t i = 0; i < w.row_values; ++i) o[i] = CompressLoad(src[h], true, i);
    } else {  // FP32 in, BF16 ring
      uint16_t* o = reinterpret_cast<uint16_t*>(d);
      for (uint32_t i = 0; i < w.row_values; ++i)
        o[i] = codec::Bf16FromFloat(CompressLoad(src[h], false, i));
    }
  }
}

}  // namespace

void CompressCpu(const CompressWork& w, ThreadPool* pool) {
  auto windows = [&w](size_t begin, size_t end) {
    Scratch scratch;
    for (size_t k = begin; k < end; ++k) ComputeWindow(w, k, &scratch);
  };
  if (pool == nullptr || pool->num_threads() <= 1 || w.n_windows < 2)
    windows(0, w.n_windows);
  else
    pool->ParallelFor(w.n_windows, windows);
  // Every window has read its ring rows: now the new rows may overwrite them.
  const uint32_t L = static_cast<uint32_t>(w.geometry.ring_len);
  for (size_t i = 0; i < w.n_store; ++i) {
    const RowSegment& s = w.store[i];
    for (int32_t c = 0; c < s.count; ++c) {
      const uint32_t flat = static_cast<uint32_t>(s.dst_row + c);
      StoreRow(w, flat / L, static_cast<int32_t>(flat % L), s.src_row + c);
    }
  }
}

}  // namespace swa::cpu
