#include "backend/cpu/gemm_cpu.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "common/mxfp8_math.h"
#include "backend/cpu/gemm_microkernel.h"
#include "backend/cpu/thread_pool.h"

namespace swa::cpu {
namespace {

MicroKernelFn ChooseKernel() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    if (MicroKernelFn k = Avx2MicroKernel()) return k;
#endif
  return BaselineMicroKernel();
}

float Bf16(uint16_t h) { return codec::Bf16ToFloat(h); }

// One kMc x kNc output tile over the whole depth.
class TileWorker {
 public:
  explicit TileWorker(const ProjectWork& w, MicroKernelFn kernel)
      : w_(w), kernel_(kernel), a_(kMc * kKc), b_(kKc * kNc), c_(kMc * kNc) {}

  void Run(int64_t m0, int64_t n0) {
    const int64_t mc = std::min(kMc, w_.tokens - m0);
    const int64_t nc = std::min(kNc, w_.out_dim - n0);
    const int64_t mc_pad = (mc + kMr - 1) / kMr * kMr;
    const int64_t nc_pad = (nc + kNr - 1) / kNr * kNr;
    std::fill(c_.begin(), c_.begin() + mc_pad * kNc, 0.0f);
    for (int64_t k0 = 0; k0 < w_.in_dim; k0 += kKc) {
      const int64_t kc = std::min(kKc, w_.in_dim - k0);
      PackA(m0, mc, mc_pad, k0, kc);
      PackB(n0, nc, nc_pad, k0, kc);
      for (int64_t i = 0; i < mc_pad; i += kMr)
        for (int64_t j = 0; j < nc_pad; j += kNr)
          kernel_(kc, a_.data() + i * kc, b_.data() + j * kc, c_.data() + i * kNc + j, kNc);
    }
    Write(m0, mc, n0, nc);
  }

 private:
  // a_[i-block][k][kMr]: for register tile rows i..i+kMr, depth-major.
  void PackA(int64_t m0, int64_t mc, int64_t mc_pad, int64_t k0, int64_t kc) {
    for (int64_t i = 0; i < mc_pad; i += kMr)
      for (int64_t r = 0; r < kMr; ++r) {
        float* dst = a_.data() + i * kc + r;
        if (i + r >= mc) {
          for (int64_t k = 0; k < kc; ++k) dst[k * kMr] = 0.0f;
          continue;
        }
        const uint16_t* src = w_.hidden + (m0 + i + r) * w_.in_dim + k0;
        for (int64_t k = 0; k < kc; ++k) dst[k * kMr] = Bf16(src[k]);
      }
  }

  // b_[j-block][k][kNr]: for register tile columns j..j+kNr, depth-major.
  void PackB(int64_t n0, int64_t nc, int64_t nc_pad, int64_t k0, int64_t kc) {
    for (int64_t j = 0; j < nc_pad; j += kNr) {
      float* dst = b_.data() + j * kc;
      for (int64_t k = 0; k < kc; ++k)
        for (int64_t c = 0; c < kNr; ++c) {
          const int64_t n = n0 + j + c;
          float v = 0.0f;
          if (j + c < nc)
            v = w_.layout == WeightLayout::kOutIn ? Bf16(w_.weight[n * w_.in_dim + k0 + k])
                                                  : Bf16(w_.weight[(k0 + k) * w_.out_dim + n]);
          dst[k * kNr + c] = v;
        }
    }
  }

  void Write(int64_t m0, int64_t mc, int64_t n0, int64_t nc) {
    for (int64_t i = 0; i < mc; ++i) {
      const float* src = c_.data() + i * kNc;
      const int64_t off = (m0 + i) * w_.out_dim + n0;
      if (w_.out_dtype == Dtype::kFp32) {
        std::memcpy(static_cast<float*>(w_.out) + off, src, nc * sizeof(float));
      } else {
        uint16_t* dst = static_cast<uint16_t*>(w_.out) + off;
        for (int64_t j = 0; j < nc; ++j) dst[j] = codec::Bf16FromFloat(src[j]);
      }
    }
  }

  const ProjectWork& w_;
  MicroKernelFn kernel_;
  std::vector<float> a_, b_, c_;
};

}  // namespace

void GemmBf16Cpu(const ProjectWork& w, ThreadPool* pool) {
  if (w.tokens == 0 || w.out_dim == 0) return;
  static const MicroKernelFn kernel = ChooseKernel();
  const int64_t tiles_m = (w.tokens + kMc - 1) / kMc;
  const int64_t tiles_n = (w.out_dim + kNc - 1) / kNc;
  const int64_t tiles = tiles_m * tiles_n;
  auto run = [&](size_t begin, size_t end) {
    TileWorker worker(w, kernel);
    for (size_t t = begin; t < end; ++t)
      worker.Run((int64_t(t) / tiles_n) * kMc, (int64_t(t) % tiles_n) * kNc);
  };
  const double flops = 2.0 * double(w.tokens) * double(w.out_dim) * double(w.in_dim);
  if (pool == nullptr || pool->num_threads() <= 1 || flops < 8e6 || tiles == 1) {
    run(0, size_t(tiles));  // waking the workers would dominate
    return;
  }
  // Chunks of a few tiles: each chunk packs its own panels once.
  const size_t grain = std::max<size_t>(1, size_t(tiles) / (4 * pool->num_threads()));
  pool->ParallelFor(size_t(tiles), grain, run);
}

}  // namespace swa::cpu
