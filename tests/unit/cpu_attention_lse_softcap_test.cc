// The LSE and the logit soft-cap of the CPU attention core against an FP64
// reference written here (docs/semantics.md, "Attention"): z_j = cap *
// tanh(scale * q.k_j / cap) (the scale first, then the cap; no cap: scale *
// q.k_j), the sink S_h joins the denominator uncapped, LSE = ln(exp(S_h) +
// sum_j exp(z_j)), -inf for a row with no key and no sink (then the output
// row is 0). Every path the attention unit tests take runs on the same
// inputs: the portable, AVX2 and AVX-512 kernels on FP32 tiles and on MXFP8
// rows read in place, and the AVX512-BF16 kernels on FP32 and on BF16 tiles,
// each on the calling thread and on a pool. Keys and values are MXFP8 rows
// decoded (so exact in FP32 and BF16), queries BF16-exact.
//
// With one KV head the FP32 kernels read Q in place and scale the raw scores
// inside the softmax, before the cap; with several they pre-scale Q; the
// BF16 kernels scale in the score GEMM: the cases cover all three.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/thread_pool.h"
#include "codec/codec.h"
#include "gtest/gtest.h"
#include "test_random.h"

namespace swa::cpu {
namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

struct Shape {
  int hq, hkv, d;
  bool shared_kv, sinks;
  float softcap;  // 0: none
};

std::string Describe(const Shape& s) {
  char cap[32];
  std::snprintf(cap, sizeof cap, " softcap %g", s.softcap);
  return "Hq " + std::to_string(s.hq) + " Hkv " + std::to_string(s.hkv) + " D " +
         std::to_string(s.d) + (s.shared_kv ? " shared" : " separate") +
         (s.sinks ? " sinks" : " no-sinks") + cap;
}

uint16_t Bf16Bits(float x) {  // round to nearest even (finite inputs)
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return static_cast<uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}
float FromBf16(uint16_t h) {
  const uint32_t b = uint32_t{h} << 16;
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}

// One sequence's problem: token t sees keys [begin[t], end[t]) (empty ranges
// allowed). K/V as MXFP8 rows (k then v vectors in each row) and the same
// values as FP32 and BF16 tiles.
struct Problem {
  int n_tokens = 0, n_keys = 0;
  std::vector<int32_t> begin, end;
  std::vector<float> q, k, v;  // [tokens, Hq, D], [keys, Hkv, D] (v empty when shared)
  std::vector<uint16_t> q16, k16, v16;
  size_t vec_bytes = 0;
  std::vector<uint8_t> bytes;        // the encoded rows, back to back
  std::vector<const uint8_t*> rows;  // [keys]
  // FP64 reference: outputs, LSEs, and max |v| over each row's visible keys.
  std::vector<double> want, want_lse, vmax;
};

struct Batch {
  Shape s;
  float scale;
  std::vector<float> sinks;
  std::vector<Problem> problems;

  Batch(const Shape& shape, uint32_t seed) : s(shape) {
    std::mt19937 rng(seed);
    swa_test::UniformReal<float> u(-3.0f, 3.0f);
    scale = 1.0f / std::sqrt(static_cast<float>(s.d));
    for (int h = 0; h < s.hq; ++h) sinks.push_back(u(rng));
  }

  // Random non-zero data for ranges already set; then the FP64 reference.
  void Add(std::vector<int32_t> begin, std::vector<int32_t> end, int n_keys, uint32_t seed) {
    std::mt19937 rng(seed);
    swa_test::UniformReal<float> mag(0.05f, 1.0f);
    auto nonzero = [&](float amp) { return ((rng() & 1) ? amp : -amp) * mag(rng); };
    Problem p;
    p.n_tokens = static_cast<int>(begin.size());
    p.n_keys = n_keys;
    p.begin = std::move(begin);
    p.end = std::move(end);
    // Queries of amplitude 4: logits of a few units, where tanh bends.
    p.q.resize(static_cast<size_t>(p.n_tokens) * s.hq * s.d);
    for (float& x : p.q) x = FromBf16(Bf16Bits(nonzero(4.0f)));
    const int vectors = s.hkv * (s.shared_kv ? 1 : 2);
    p.vec_bytes = VectorBytes(Format::kMxfp8, static_cast<uint32_t>(s.d));
    const size_t row_bytes = p.vec_bytes * vectors;
    p.bytes.resize(row_bytes * n_keys);
    std::vector<float> src(static_cast<size_t>(vectors) * s.d);
    std::vector<float> decoded(src.size());
    p.k.resize(static_cast<size_t>(n_keys) * s.hkv * s.d);
    if (!s.shared_kv) p.v.resize(p.k.size());
    const size_t head_floats = static_cast<size_t>(s.hkv) * s.d;
    for (int r = 0; r < n_keys; ++r) {
      for (float& x : src) x = nonzero(1.0f);
      uint8_t* row = p.bytes.data() + row_bytes * r;
      codec::EncodeRows(Format::kMxfp8, ScaleMode::kCeil, static_cast<uint32_t>(s.d), vectors,
                        {src.data(), Dtype::kFp32, static_cast<size_t>(s.d)},
                        {.base = row, .stride = p.vec_bytes});
      codec::DecodeRows(Format::kMxfp8, static_cast<uint32_t>(s.d), vectors,
                        {.base = row, .stride = p.vec_bytes},
                        {decoded.data(), Dtype::kFp32, static_cast<size_t>(s.d)});
      std::copy(decoded.begin(), decoded.begin() + head_floats, p.k.begin() + r * head_floats);
      if (!s.shared_kv)
        std::copy(decoded.begin() + head_floats, decoded.end(), p.v.begin() + r * head_floats);
      p.rows.push_back(row);
    }
    for (float x : p.q) p.q16.push_back(Bf16Bits(x));
    for (float x : p.k) p.k16.push_back(Bf16Bits(x));
    for (float x : p.v) p.v16.push_back(Bf16Bits(x));
    Reference(p);
    problems.push_back(std::move(p));
  }

  // history earlier tokens plus `tokens` new ones, window w.
  void Banded(int history, int tokens, int w, uint32_t seed) {
    const int first = std::max(0, history - w + 1);
    std::vector<int32_t> b, e;
    for (int t = 0; t < tokens; ++t) {
      b.push_back(std::max(0, history + t - w + 1) - first);
      e.push_back(history + t + 1 - first);
    }
    Add(b, e, history + tokens - first, seed);
  }

  void Reference(Problem& p) const {
    const int ratio = s.hq / s.hkv;
    const std::vector<float>& vals = s.shared_kv ? p.k : p.v;
    p.want.assign(static_cast<size_t>(p.n_tokens) * s.hq * s.d, 0.0);
    p.want_lse.assign(static_cast<size_t>(p.n_tokens) * s.hq, 0.0);
    p.vmax.assign(p.want_lse.size(), 0.0);
    for (int t = 0; t < p.n_tokens; ++t) {
      for (int h = 0; h < s.hq; ++h) {
        const int g = h / ratio;
        const float* q = &p.q[(static_cast<size_t>(t) * s.hq + h) * s.d];
        std::vector<double> z;
        double m = s.sinks ? double{sinks[h]} : -kInf;
        for (int j = p.begin[t]; j < p.end[t]; ++j) {
          const float* k = &p.k[(static_cast<size_t>(j) * s.hkv + g) * s.d];
          double dot = 0;
          for (int e = 0; e < s.d; ++e) dot += double{q[e]} * double{k[e]};
          double logit = double{scale} * dot;
          if (s.softcap > 0) logit = s.softcap * std::tanh(logit / s.softcap);
          z.push_back(logit);
          m = std::max(m, logit);
        }
        double l = s.sinks ? std::exp(double{sinks[h]} - m) : 0.0;
        const size_t row = static_cast<size_t>(t) * s.hq + h;
        double* o = &p.want[row * s.d];
        for (int j = p.begin[t]; j < p.end[t]; ++j) {
          const double w = std::exp(z[j - p.begin[t]] - m);
          l += w;
          const float* vj = &vals[(static_cast<size_t>(j) * s.hkv + g) * s.d];
          for (int e = 0; e < s.d; ++e) {
            o[e] += w * vj[e];
            p.vmax[row] = std::max(p.vmax[row], double{std::fabs(vj[e])});
          }
        }
        for (int e = 0; e < s.d; ++e) o[e] = l > 0 ? o[e] / l : 0.0;
        p.want_lse[row] = l > 0 ? m + std::log(l) : -kInf;
      }
    }
  }
};

// Where K/V come from, and which kernels read them.
enum class Source { kFp32Tile, kMxfp8Rows, kBf16Kernels, kBf16KernelsBf16Tile };

struct Path {
  std::string name;
  AttentionIsa isa;
  Source source;
};

std::vector<Path> PathsHere() {
  std::vector<std::pair<std::string, AttentionIsa>> fp32 = {{"portable", AttentionIsa::kPortable}};
  if (Avx2KernelsAvailable()) fp32.push_back({"avx2", AttentionIsa::kAvx2});
  if (Avx512KernelsAvailable()) fp32.push_back({"avx512", AttentionIsa::kAvx512});
  std::vector<Path> paths;
  for (const auto& [name, isa] : fp32) {
    paths.push_back({name + " fp32 tile", isa, Source::kFp32Tile});
    paths.push_back({name + " mxfp8 rows", isa, Source::kMxfp8Rows});
  }
  if (Bf16KernelsAvailable()) {
    paths.push_back({"bf16 kernels, fp32 tile", AttentionIsa::kBf16, Source::kBf16Kernels});
    paths.push_back({"bf16 kernels, bf16 tile", AttentionIsa::kBf16, Source::kBf16KernelsBf16Tile});
  }
  return paths;
}

struct Result {
  std::vector<std::vector<float>> out, lse;
};

Result Run(const Batch& b, const Path& path, ThreadPool* pool) {
  const Shape& s = b.s;
  Result r;
  std::vector<SeqProblem> seqs;
  for (const Problem& p : b.problems) {
    r.out.emplace_back(p.want.size(), kNaN);  // poison
    r.lse.emplace_back(p.want_lse.size(), kNaN);
  }
  for (size_t i = 0; i < b.problems.size(); ++i) {
    const Problem& p = b.problems[i];
    SeqProblem sp{p.n_tokens, p.q.data(), p.n_keys, nullptr, nullptr,
                  p.begin.data(), p.end.data(), r.out[i].data()};
    sp.lse = r.lse[i].data();
    switch (path.source) {
      case Source::kMxfp8Rows:
        sp.mx.rows = p.rows.data();
        sp.mx.k_offset = 0;
        sp.mx.v_offset = s.shared_kv ? 0 : s.hkv * p.vec_bytes;
        sp.mx.vec_bytes = p.vec_bytes;
        break;
      case Source::kBf16KernelsBf16Tile:
        sp.q = nullptr;
        sp.q_bf16 = p.q16.data();
        sp.k16 = p.k16.data();
        sp.v16 = s.shared_kv ? p.k16.data() : p.v16.data();
        break;
      case Source::kBf16Kernels:
        sp.q_bf16 = p.q16.data();
        [[fallthrough]];
      case Source::kFp32Tile:
        sp.k = p.k.data();
        sp.v = s.shared_kv ? p.k.data() : p.v.data();
        break;
    }
    seqs.push_back(sp);
  }
  AttentionShape shape{s.hq, s.hkv, s.d, b.scale, s.sinks ? b.sinks.data() : nullptr, s.softcap};
  AttendWithIsa(path.isa, shape, seqs.data(), static_cast<int>(seqs.size()), pool);
  return r;
}

// Worst errors relative to their bounds (<= 1 passes), for the printout.
struct Worst {
  double out = 0, lse = 0;
};

// Checks every output element and every LSE; returns false after the first
// failure (reported with gtest).
bool Check(const Batch& b, const Path& path, const Result& r, const std::string& what, Worst* worst) {
  const Shape& s = b.s;
  const bool bf16_p = path.source == Source::kBf16Kernels ||
                      path.source == Source::kBf16KernelsBf16Tile;
  for (size_t pi = 0; pi < b.problems.size(); ++pi) {
    const Problem& p = b.problems[pi];
    for (int t = 0; t < p.n_tokens; ++t) {
      for (int h = 0; h < s.hq; ++h) {
        const size_t row = static_cast<size_t>(t) * s.hq + h;
        const std::string where = what + ": problem " + std::to_string(pi) + " token " +
                                  std::to_string(t) + " head " + std::to_string(h);
        const float got_lse = r.lse[pi][row];
        const double want_lse = p.want_lse[row];
        if (p.begin[t] >= p.end[t]) {
          // No key: LSE exactly -inf, or exactly the sink (m = S, l = 1);
          // the output row exactly 0.
          const float want = s.sinks ? b.sinks[h] : -std::numeric_limits<float>::infinity();
          if (!(got_lse == want)) {
            ADD_FAILURE() << where << " (no key): lse " << got_lse << ", want " << want;
            return false;
          }
          for (int e = 0; e < s.d; ++e) {
            if (r.out[pi][row * s.d + e] != 0.0f) {
              ADD_FAILURE() << where << " (no key): out[" << e << "] = " << r.out[pi][row * s.d + e];
              return false;
            }
          }
          continue;
        }
        // FP32 scores, softmax and log: a few FP32 roundings of the LSE's size.
        const double lse_bound = 2e-6 * std::max(1.0, std::fabs(want_lse));
        const double lse_err = std::fabs(double{got_lse} - want_lse);
        if (!(lse_err <= lse_bound)) {
          ADD_FAILURE() << where << ": lse " << got_lse << ", want " << want_lse << " (bound "
                        << lse_bound << ")";
          return false;
        }
        worst->lse = std::max(worst->lse, lse_err / lse_bound);
        // The FP32 budget, plus P rounded to BF16 on the BF16 kernels
        // (cpu_attention_bf16_test.cc derives 2^-8 * max|v|).
        const double vmax = p.vmax[row];
        const double bound = (bf16_p ? std::ldexp(1.0, -8) * vmax : 0.0) + 1e-5 * vmax;
        for (int e = 0; e < s.d; ++e) {
          const float got = r.out[pi][row * s.d + e];
          const double want = p.want[row * s.d + e];
          const double err = std::fabs(double{got} - want);
          if (!(err <= bound)) {
            ADD_FAILURE() << where << ": out[" << e << "] = " << got << ", want " << want
                          << " (bound " << bound << ")";
            return false;
          }
          worst->out = std::max(worst->out, err / bound);
        }
      }
    }
  }
  return true;
}

void ExpectAllPathsMatch(const Batch& b, const std::string& what) {
  ThreadPool pool3(3);
  const std::vector<Path> paths = PathsHere();
  Worst worst;
  for (const Path& path : paths) {
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool3}) {
      const Result r = Run(b, path, pool);
      // One failure per path: each path's result is reported.
      if (!Check(b, path, r, what + ", " + path.name + (pool ? ", 3 threads" : ""), &worst)) break;
    }
  }
  std::printf("%s: %zu paths, worst error / bound: out %.3f, lse %.3f\n", what.c_str(),
              paths.size(), worst.out, worst.lse);
}

// With and without sinks and a soft-cap, on one KV head (DeepSeek-V4's 64
// heads on one shared 512-wide vector, and a narrower one), GQA with
// separate K/V, and MHA.
const Shape kShapes[] = {
    {64, 1, 512, true, false, 0}, {16, 1, 128, true, false, 0},
    {16, 2, 128, false, false, 0}, {8, 8, 64, false, false, 0},
};

TEST(CpuAttentionLseSoftcap, DecodeAndPrefillMatchFp64) {
  uint32_t seed = 1;
  for (Shape s : kShapes) {
    for (int variant = 0; variant < 4; ++variant) {
      s.sinks = variant & 1;
      s.softcap = (variant & 2) ? 1.5f : 0.0f;
      Batch b(s, seed++);
      b.Banded(500, 6, 128, seed++);  // decode + 5 drafts, a full window
      b.Banded(40, 3, 128, seed++);   // a short history
      if (s.d <= 128) b.Banded(0, 70, 48, seed++);  // prefill past the window
      ExpectAllPathsMatch(b, Describe(s));
    }
  }
}

// Keys beyond one key chunk: the running max and the sums are rescaled
// between chunks (and with one KV head the outputs no longer go in place).
TEST(CpuAttentionLseSoftcap, WindowsLongerThanAKeyChunk) {
  uint32_t seed = 101;
  for (Shape s : {Shape{8, 1, 512, true, true, 2.0f}, Shape{8, 2, 256, false, true, 2.0f},
                  Shape{8, 1, 512, true, false, 0}, Shape{4, 4, 64, false, false, 1.0f}}) {
    Batch b(s, seed++);
    b.Banded(1200, 4, 1000, seed++);
    b.Banded(0, 20, 1000, seed++);
    ExpectAllPathsMatch(b, Describe(s) + ", long windows");
  }
}

// Tokens that see no key (an empty range: valid_start past them, or padding)
// next to tokens that do, so that the register tiles mix both: the LSE is
// -inf without sinks and the sink's logit with them, the output 0.
TEST(CpuAttentionLseSoftcap, EmptyRowsGiveMinusInfinityOrTheSink) {
  uint32_t seed = 201;
  for (Shape s : {Shape{16, 1, 128, true, false, 0}, Shape{8, 2, 64, false, false, 0},
                  Shape{64, 1, 512, true, false, 0}}) {
    for (int variant = 0; variant < 4; ++variant) {
      s.sinks = variant & 1;
      s.softcap = (variant & 2) ? 1.5f : 0.0f;
      Batch b(s, seed++);
      b.Add({0, 4, 7, 2, 9}, {5, 4, 10, 2, 12}, 12, seed++);  // tokens 1 and 3 see nothing
      b.Add({3, 3}, {3, 3}, 8, seed++);                       // no token sees anything
      ExpectAllPathsMatch(b, Describe(s) + ", empty rows");
    }
  }
}

// Logits far past the cap (large queries): the capped scores saturate at
// +-cap, and a sink above the cap dominates every key.
TEST(CpuAttentionLseSoftcap, SaturatedSoftcapAndADominantSink) {
  uint32_t seed = 301;
  for (Shape s : {Shape{16, 1, 128, true, true, 0.5f}, Shape{16, 4, 64, false, true, 0.5f}}) {
    Batch b(s, seed++);
    for (float& x : b.sinks) x = (x > 0 ? 1.0f : -1.0f) * 6.0f;  // |S| >> cap
    b.Banded(90, 5, 64, seed++);
    for (Problem& p : b.problems) {
      for (float& x : p.q) x = FromBf16(Bf16Bits(8.0f * x));  // |logit| up to dozens
      p.q16.clear();
      for (float x : p.q) p.q16.push_back(Bf16Bits(x));
      b.Reference(p);
    }
    ExpectAllPathsMatch(b, Describe(s) + ", saturated");
  }
}

}  // namespace
}  // namespace swa::cpu
