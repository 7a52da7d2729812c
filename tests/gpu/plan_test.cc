// Device-side decode planner (kernels/plan/) against the brute-force
// reference, on random decode batches; skips without a CUDA device.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/plan/decode_plan.h"
#include "unit/plan_reference.h"

namespace {

using swa::kernels::DecodePlanParams;

bool HaveDevice() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

template <typename T>
struct DeviceArray {
  T* ptr = nullptr;
  size_t n = 0;
  explicit DeviceArray(size_t count) : n(count) {
    if (cudaMalloc(reinterpret_cast<void**>(&ptr), std::max<size_t>(1, count) * sizeof(T)) != cudaSuccess) ptr = nullptr;
  }
  ~DeviceArray() { cudaFree(ptr); }
  void Upload(const std::vector<T>& v) { cudaMemcpy(ptr, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice); }
  std::vector<T> Download() const {
    std::vector<T> v(n);
    cudaMemcpy(v.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost);
    return v;
  }
  void Poison() { cudaMemset(ptr, 0x5a, std::max<size_t>(1, n) * sizeof(T)); }
};

struct PlanRun {
  std::vector<int32_t> cu, offset_len, index;
  int32_t error = 0;
};

PlanRun Plan(const std::vector<plan_ref::Seq>& seqs, int32_t w, int32_t r, int32_t max_slots,
         int32_t max_tokens, bool pad_last, bool with_index) {
  const size_t n = seqs.size();
  std::vector<uint32_t> slot(n);
  std::vector<int32_t> q(n), k(n), v(n);
  for (size_t i = 0; i < n; ++i) {
    slot[i] = seqs[i].slot;
    q[i] = seqs[i].seqlen_q;
    k[i] = seqs[i].seqlen_k;
    v[i] = seqs[i].valid_start;
  }
  DeviceArray<uint32_t> d_slot(n);
  DeviceArray<int32_t> d_q(n), d_k(n), d_v(n), d_cu(n + 1), d_ol(2 * size_t(max_tokens)),
      d_index(with_index ? size_t(max_tokens) * w : 0), d_err(1);
  d_slot.Upload(slot);
  d_q.Upload(q);
  d_k.Upload(k);
  d_v.Upload(v);
  d_cu.Poison();
  d_ol.Poison();
  d_index.Poison();
  d_err.Poison();
  DecodePlanParams p;
  p.batch.slot = d_slot.ptr;
  p.batch.seqlen_q = d_q.ptr;
  p.batch.seqlen_k = d_k.ptr;
  p.batch.valid_start = d_v.ptr;
  p.batch.n_seqs = static_cast<int32_t>(n);
  p.max_tokens = max_tokens;
  p.window = w;
  p.ring_len = r;
  p.max_slots = max_slots;
  p.pad_last_row = pad_last ? 1 : 0;
  p.cu_seqlens = d_cu.ptr;
  p.offset_len = d_ol.ptr;
  p.index = with_index ? d_index.ptr : nullptr;
  p.error = d_err.ptr;
  PlanRun out;
  EXPECT_EQ(swa::kernels::LaunchDecodePlan(p, nullptr), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  out.cu = d_cu.Download();
  out.offset_len = d_ol.Download();
  if (with_index) out.index = d_index.Download();
  out.error = d_err.Download()[0];
  return out;
}

TEST(GpuDecodePlan, MatchesBruteForceOnRandomBatches) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device: the device-side planner is only compiled";
  std::mt19937 rng(5);
  auto rand = [&](int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng); };
  const int32_t geos[][2] = {{1, 1}, {4, 8}, {8, 14}, {33, 38}, {128, 134}};
  for (const auto& g : geos) {
    const int32_t w = g[0], r = g[1], max_slots = 2000;
    for (int trial = 0; trial < 40; ++trial) {
      const int32_t n = rand(0, trial < 20 ? 8 : 1500);
      std::vector<uint32_t> slots(max_slots);
      std::iota(slots.begin(), slots.end(), 0u);
      std::shuffle(slots.begin(), slots.end(), rng);
      std::vector<plan_ref::Seq> seqs;
      for (int32_t i = 0; i < n; ++i) {
        const int32_t q = rand(0, r - w + 1), q0 = rand(0, 5 * r);
        seqs.push_back({slots[i], q, q0 + q, rand(0, 3) == 0 ? rand(0, q0) : 0});
      }
      const int32_t t_total = plan_ref::TotalTokens(seqs);
      const int32_t max_tokens = t_total + rand(0, 9);
      const bool pad_last = trial % 2 == 1;
      const PlanRun run = Plan(seqs, w, r, max_slots, max_tokens, pad_last, true);
      ASSERT_EQ(run.error, 0);
      std::vector<int32_t> index, offset_len;
      plan_ref::DecodeIndex(seqs, w, r, pad_last, &index, &offset_len);
      int32_t off = 0;
      for (int32_t i = 0; i < n; ++i) {
        ASSERT_EQ(run.cu[i], off);
        off += seqs[i].seqlen_q;
      }
      ASSERT_EQ(run.cu[n], t_total);
      ASSERT_EQ(std::vector<int32_t>(run.offset_len.begin(), run.offset_len.begin() + 2 * t_total), offset_len);
      ASSERT_EQ(std::vector<int32_t>(run.index.begin(), run.index.begin() + size_t(t_total) * w), index);
      for (int32_t t = t_total; t < max_tokens; ++t) {  // rows past T: empty, padded
        ASSERT_EQ(run.offset_len[2 * t + 1], 0);
        for (int32_t j = 0; j < w; ++j) ASSERT_EQ(run.index[size_t(t) * w + j], pad_last ? 0 : -1);
      }
    }
  }
}

TEST(GpuDecodePlan, ReportsBadSequencesAndOverflow) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device: the device-side planner is only compiled";
  const int32_t w = 8, r = 14;
  std::vector<plan_ref::Seq> seqs = {{0, 2, 10, 0}, {1, 8, 20, 0}, {2, 1, 5, 0}};  // seq 1: 8 > R - W + 1
  PlanRun run = Plan(seqs, w, r, 4, 16, false, true);
  EXPECT_EQ(run.error, 2);
  for (int32_t t = 0; t < 16; ++t) EXPECT_EQ(run.offset_len[2 * t + 1], 0);  // nothing planned
  seqs = {{0, 2, 10, 0}, {3, 1, 5, 5}};  // valid_start past q_start
  EXPECT_EQ(Plan(seqs, w, r, 4, 16, false, false).error, 2);
  seqs = {{0, 2, 10, 0}, {9, 1, 5, 0}};  // slot past the pool
  EXPECT_EQ(Plan(seqs, w, r, 4, 16, false, false).error, 2);
  seqs = {{0, 7, 10, 0}, {1, 7, 20, 0}};  // 14 tokens > max_tokens 10
  EXPECT_EQ(Plan(seqs, w, r, 4, 10, false, false).error, swa::kernels::kDecodePlanTooManyTokens);
  DecodePlanParams bad;
  EXPECT_EQ(swa::kernels::LaunchDecodePlan(bad, nullptr), cudaErrorInvalidValue);
}

}  // namespace
