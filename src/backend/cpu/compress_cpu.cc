#include "backend/cpu/compress_cpu.h"

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

// One window's entry into out row k.
void ComputeWindow(const CompressWork& w, size_t k, std::vector<CompressSlotSrc>* slots,
                   std::vector<float>* x) {
  const CompressWindow& win = w.windows[k];
  const int32_t n = CompressWindowSlots(w.geometry);
  const bool ring_bf16 = w.row_format == Format::kBf16;
  const bool in_bf16 = w.dtype == Dtype::kBf16;
  const size_t half = w.row_values * ValueBytes(w.row_format);
  const size_t in_row = w.row_values * DtypeBytes(w.dtype);
  slots->resize(n);
  for (int32_t j = 0; j < n; ++j) {
    CompressSlotSrc& s = (*slots)[j];
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
  x->resize(w.entry_dim);
  for (uint32_t f = 0; f < w.entry_dim; ++f)
    (*x)[f] = CompressPoolFeature(w.geometry, w.entry_dim, w.row_values, slots->data(),
                                  w.position_bias, f);
  CompressNorm(x->data(), w.entry_dim, w.norm_weight, w.norm_eps);
  if (w.rope != nullptr && w.rope->dims != 0) {
    const uint32_t n_rot = w.rope->dims, first = w.entry_dim - n_rot;
    for (uint32_t i = 0; i < n_rot / 2; ++i) {
      float c, s;
      RopeAngle(static_cast<float>(win.position), w.rope->inv_freq[i], w.rope->attention_factor,
                &c, &s);
      RotatePair(&(*x)[first + 2 * i], &(*x)[first + 2 * i + 1], c, s);
    }
  }
  const size_t base = k * w.entry_dim;
  if (w.out_dtype == Dtype::kFp32) {
    std::memcpy(static_cast<float*>(w.out) + base, x->data(), w.entry_dim * sizeof(float));
  } else {
    uint16_t* o = static_cast<uint16_t*>(w.out) + base;
    for (uint32_t f = 0; f < w.entry_dim; ++f) o[f] = codec::Bf16FromFloat((*x)[f]);
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
    std::vector<CompressSlotSrc> slots;
    std::vector<float> x;
    for (size_t k = begin; k < end; ++k) ComputeWindow(w, k, &slots, &x);
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
