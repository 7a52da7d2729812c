// The FP32 attention kernels reading MXFP8 rows in place (SeqProblem::mx):
// bit for bit the same outputs and LSEs as the same kernels on the FP32 tile
// that codec::DecodeRows makes of those rows, on every kernel set this CPU
// has, and within the FP32 budget of the FP64 dense reference. Rows come from
// scattered allocations (as ring rows and staged new tokens do), some are
// missing (nullptr: zeros), and some hold NaN codes or a NaN scale.
// Registered once more per AVX-512 register tiling (tests/CMakeLists.txt):
// api/forced_attention_path.h skips those runs, with the reason, where the
// tiling adds nothing (no AVX-512 F, or this CPU's default tiling).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/attention_amx.h"
#include "api/forced_attention_path.h"
#include "backend/cpu/thread_pool.h"
#include "codec/codec.h"
#include "gtest/gtest.h"
#include "test_random.h"

namespace swa::cpu {
namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Case {
  int hq, hkv, d;
  bool shared_kv, sinks;
  int history, tokens, window;  // a banded decode / prefill problem
};

std::string Describe(const Case& c) {
  return "Hq " + std::to_string(c.hq) + " Hkv " + std::to_string(c.hkv) + " D " +
         std::to_string(c.d) + (c.shared_kv ? " shared" : " separate") +
         (c.sinks ? " sinks" : "") + " history " + std::to_string(c.history) + " tokens " +
         std::to_string(c.tokens) + " window " + std::to_string(c.window);
}

// One problem: token rows in the codec layout, each its own allocation.
struct MxProblem {
  Case c;
  int n_keys = 0;
  size_t vec_bytes = 0, row_bytes = 0;
  std::vector<std::unique_ptr<uint8_t[]>> storage;
  std::vector<const uint8_t*> rows;  // nullptr: a row of zeros
  std::vector<float> q, k, v;        // k, v: the rows decoded (the tile)
  std::vector<int32_t> begin, end;
  std::vector<float> sinks;
  float scale = 0;
};

MxProblem Make(const Case& c, uint32_t seed, bool with_missing_rows) {
  MxProblem p;
  p.c = c;
  std::mt19937 rng(seed);
  swa_test::UniformReal<float> mag(0.05f, 1.0f);
  std::uniform_int_distribution<int> octave(-2, 2);
  auto nonzero = [&] { return ((rng() & 1) ? 1.0f : -1.0f) * mag(rng); };
  const int first = std::max(0, c.history - c.window + 1);
  p.n_keys = c.history + c.tokens - first;
  for (int t = 0; t < c.tokens; ++t) {
    const int pos = c.history + t;
    p.begin.push_back(std::max(0, pos - c.window + 1) - first);
    p.end.push_back(pos + 1 - first);
  }
  p.vec_bytes = VectorBytes(Format::kMxfp8, static_cast<uint32_t>(c.d));
  const int vectors = c.hkv * (c.shared_kv ? 1 : 2);
  p.row_bytes = p.vec_bytes * vectors;
  std::vector<float> src(static_cast<size_t>(vectors) * c.d);
  for (int r = 0; r < p.n_keys; ++r) {
    // Blocks of different magnitudes (scale bytes differ), and elements
    // spread over E4M3's range inside each block (subnormal codes included).
    for (size_t b = 0; b < src.size(); b += 32) {
      const int block_octave = octave(rng);
      for (size_t e = b; e < b + 32; ++e)
        src[e] = std::ldexp(nonzero(), block_octave + octave(rng));
    }
    p.storage.emplace_back(new uint8_t[p.row_bytes + 64]);
    uint8_t* row = p.storage.back().get() + (rng() % 64);  // any alignment
    codec::EncodeRows(Format::kMxfp8, ScaleMode::kCeil, static_cast<uint32_t>(c.d), vectors,
                      {src.data(), Dtype::kFp32, static_cast<size_t>(c.d)},
                      {.base = row, .stride = p.vec_bytes});
    p.rows.push_back(row);
  }
  // Missing rows (a staged plan's padding): zeros, seen or not.
  if (with_missing_rows)
    for (int r = 1; r < p.n_keys; r += 5) p.rows[r] = nullptr;
  swa_test::UniformReal<float> qd(-2.0f, 2.0f);
  p.q.resize(static_cast<size_t>(c.tokens) * c.hq * c.d);
  for (float& x : p.q) x = qd(rng);
  for (int h = 0; h < c.hq; ++h) p.sinks.push_back(3.0f * nonzero());
  p.scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  return p;
}

// The FP32 tile of the rows, as the step used to build it.
void DecodeTile(MxProblem& p) {
  const Case& c = p.c;
  const size_t floats = static_cast<size_t>(p.n_keys) * c.hkv * c.d;
  p.k.assign(floats, kNaN);
  p.v.assign(c.shared_kv ? 0 : floats, kNaN);
  for (int r = 0; r < p.n_keys; ++r) {
    float* kr = p.k.data() + static_cast<size_t>(r) * c.hkv * c.d;
    float* vr = c.shared_kv ? nullptr : p.v.data() + static_cast<size_t>(r) * c.hkv * c.d;
    if (p.rows[r] == nullptr) {
      std::fill(kr, kr + c.hkv * c.d, 0.0f);
      if (vr != nullptr) std::fill(vr, vr + c.hkv * c.d, 0.0f);
      continue;
    }
    codec::DecodeRows(Format::kMxfp8, static_cast<uint32_t>(c.d), c.hkv,
                      {.base = p.rows[r], .stride = p.vec_bytes},
                      {kr, Dtype::kFp32, static_cast<size_t>(c.d)});
    if (vr != nullptr)
      codec::DecodeRows(Format::kMxfp8, static_cast<uint32_t>(c.d), c.hkv,
                        {.base = p.rows[r] + c.hkv * p.vec_bytes, .stride = p.vec_bytes},
                        {vr, Dtype::kFp32, static_cast<size_t>(c.d)});
  }
}

struct Result {
  std::vector<float> out, lse;
};

Result Attention(const MxProblem& p, bool in_place_rows, AttentionIsa isa, ThreadPool* pool,
                 const uint16_t* q_bf16 = nullptr) {
  const Case& c = p.c;
  Result r;
  r.out.assign(static_cast<size_t>(c.tokens) * c.hq * c.d, kNaN);
  r.lse.assign(static_cast<size_t>(c.tokens) * c.hq, kNaN);
  AttentionShape shape{c.hq, c.hkv, c.d, p.scale, c.sinks ? p.sinks.data() : nullptr};
  SeqProblem sp{c.tokens, p.q.data(), p.n_keys, nullptr, nullptr, p.begin.data(), p.end.data(),
                r.out.data()};
  sp.lse = r.lse.data();
  sp.q_bf16 = q_bf16;
  if (in_place_rows) {
    sp.mx.rows = p.rows.data();
    sp.mx.k_offset = 0;
    sp.mx.v_offset = c.shared_kv ? 0 : c.hkv * p.vec_bytes;
    sp.mx.vec_bytes = p.vec_bytes;
  } else {
    sp.k = p.k.data();
    sp.v = c.shared_kv ? p.k.data() : p.v.data();
  }
  AttendWithIsa(isa, shape, &sp, 1, pool);
  return r;
}

// Bit patterns equal (NaN payloads included).
void ExpectSameBits(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  size_t differ = 0, first = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0 && differ++ == 0) first = i;
  }
  EXPECT_EQ(differ, 0u) << what << ": first at " << first << " (" << a[first] << " vs "
                        << b[first] << ")";
}

// FP64 dense band-mask attention over the decoded tile.
SWA_TEST_UNSANITIZED double RelativeErrorToReference(const MxProblem& p,
                                                     const std::vector<float>& got) {
  const Case& c = p.c;
  const int ratio = c.hq / c.hkv;
  const std::vector<float>& v = c.shared_kv ? p.k : p.v;
  double err = 0, norm = 0;
  for (int t = 0; t < c.tokens; ++t) {
    for (int h = 0; h < c.hq; ++h) {
      const int g = h / ratio;
      const float* q = &p.q[(static_cast<size_t>(t) * c.hq + h) * c.d];
      std::vector<double> z;
      double m = c.sinks ? p.sinks[h] : -std::numeric_limits<double>::infinity();
      for (int j = p.begin[t]; j < p.end[t]; ++j) {
        const float* k = &p.k[(static_cast<size_t>(j) * c.hkv + g) * c.d];
        double dot = 0;
        for (int e = 0; e < c.d; ++e) dot += static_cast<double>(q[e]) * k[e];
        z.push_back(static_cast<double>(p.scale) * dot);
        m = std::max(m, z.back());
      }
      double denom = c.sinks ? std::exp(p.sinks[h] - m) : 0.0;
      std::vector<double> o(c.d, 0.0);
      double* od = o.data();  // raw pointers in the inner loops: see SWA_TEST_UNSANITIZED
      for (int j = p.begin[t]; j < p.end[t]; ++j) {
        const double w = std::exp(z[j - p.begin[t]] - m);
        denom += w;
        const float* vj = &v[(static_cast<size_t>(j) * c.hkv + g) * c.d];
        for (int e = 0; e < c.d; ++e) od[e] += w * vj[e];
      }
      const float* out = &got[(static_cast<size_t>(t) * c.hq + h) * c.d];
      for (int e = 0; e < c.d; ++e) {
        const double want = o[e] / denom;
        err += (out[e] - want) * (out[e] - want);
        norm += want * want;
      }
    }
  }
  return std::isnan(err) ? std::numeric_limits<double>::infinity() : std::sqrt(err / norm);
}

// In a run with a forced AVX-512 tiling (SWACACHE_AVX512_TILES) only the
// AVX-512 set differs from the binary's unforced run.
std::vector<AttentionIsa> IsasHere() {
  const char* tiles = std::getenv("SWACACHE_AVX512_TILES");
  const bool tiling_run = tiles != nullptr && *tiles != '\0';
  std::vector<AttentionIsa> isas;
  if (!tiling_run) isas.push_back(AttentionIsa::kPortable);
  if (!tiling_run && Avx2KernelsAvailable()) isas.push_back(AttentionIsa::kAvx2);
  if (Avx512KernelsAvailable()) isas.push_back(AttentionIsa::kAvx512);
  return isas;
}

const Case kCases[] = {
    {64, 1, 512, true, true, 500, 6, 128},   // DeepSeek-V4-like decode (in-place output)
    {64, 1, 512, true, false, 40, 3, 128},   // short history, no sinks
    {64, 8, 64, false, true, 300, 5, 128},   // gpt-oss-like GQA, separate K/V
    {8, 2, 128, false, true, 90, 7, 32},     // mixed-token register tiles
    {4, 1, 512, true, true, 600, 70, 400},   // several key chunks (not in place)
    {16, 4, 256, false, false, 700, 33, 300},
};

TEST(CpuAttentionMxfp8, InPlaceRowsMatchTheDecodedTileBitForBit) {
  ThreadPool pool(3);
  uint32_t seed = 7;
  for (const Case& c : kCases) {
    for (bool missing : {false, true}) {
      MxProblem p = Make(c, ++seed, missing);
      DecodeTile(p);
      for (AttentionIsa isa : IsasHere()) {
        for (ThreadPool* tp : {static_cast<ThreadPool*>(nullptr), &pool}) {
          const std::string what = Describe(c) + " isa " + std::to_string(static_cast<int>(isa)) +
                                   (missing ? " missing rows" : "") + (tp ? " pool" : "");
          const Result tile = Attention(p, false, isa, tp);
          const Result rows = Attention(p, true, isa, tp);
          ExpectSameBits(rows.out, tile.out, what + " out");
          ExpectSameBits(rows.lse, tile.lse, what + " lse");
          EXPECT_LE(RelativeErrorToReference(p, rows.out), 1e-5) << what;
        }
      }
    }
  }
}

// BF16 queries under AMX: the driver decodes the rows straight into its tile
// layout, with the same bits as from the decoded FP32 tile (the same panels)
// and within the BF16-P budget of the FP64 reference (relative L2 here); a
// NaN code in a later token's value row sends the KV head to the FP32
// kernels, which keep it in the rows that see it.
TEST(CpuAttentionMxfp8, AmxReadsTheRowsInPlace) {
  if (!AmxKernelsAvailable()) GTEST_SKIP() << "no AMX-BF16 tile data on this CPU / OS";
  ThreadPool pool(2);
  uint32_t seed = 400;
  for (const Case& c : kCases) {
    MxProblem p = Make(c, ++seed, /*with_missing_rows=*/true);
    std::vector<uint16_t> q16(p.q.size());
    for (size_t i = 0; i < p.q.size(); ++i) {  // BF16 queries (nearest even)
      uint32_t b;
      std::memcpy(&b, &p.q[i], 4);
      q16[i] = static_cast<uint16_t>((b + 0x7FFF + ((b >> 16) & 1)) >> 16);
      b = static_cast<uint32_t>(q16[i]) << 16;
      std::memcpy(&p.q[i], &b, 4);
    }
    DecodeTile(p);
    for (ThreadPool* tp : {static_cast<ThreadPool*>(nullptr), &pool}) {
      const std::string what = Describe(c) + (tp ? " pool" : "");
      const Result rows = Attention(p, true, AttentionIsa::kAmx, tp, q16.data());
      const Result tile = Attention(p, false, AttentionIsa::kAmx, tp, q16.data());
      ExpectSameBits(rows.out, tile.out, what + " out");
      ExpectSameBits(rows.lse, tile.lse, what + " lse");
      EXPECT_LE(RelativeErrorToReference(p, rows.out), 4e-3) << what;
      EXPECT_NE(rows.out, Attention(p, true, AttentionIsa::kAvx512, tp).out)
          << what << ": kAmx gave the FP32 kernels' bits";
    }
    if (c.tokens < 6) continue;
    const int key = p.end[4] - 1;  // tokens 4 and 5 see it
    uint8_t* row = const_cast<uint8_t*>(p.rows[key]);
    if (row == nullptr) continue;
    for (int g = 0; g < c.hkv; ++g) row[(c.shared_kv ? 0 : c.hkv * p.vec_bytes) + g * p.vec_bytes + 5] = 0x7F;
    const Result bad = Attention(p, true, AttentionIsa::kAmx, nullptr, q16.data());
    const size_t per_token = static_cast<size_t>(c.hq) * c.d;
    for (size_t i = 0; i < 4 * per_token; ++i)
      ASSERT_TRUE(std::isfinite(bad.out[i])) << Describe(c) << " elem " << i;
    for (size_t i = 4 * per_token; i < bad.out.size(); i += c.d) {
      bool any_bad = false;
      for (int x = 0; x < c.d; ++x) any_bad |= !std::isfinite(bad.out[i + x]);
      EXPECT_TRUE(any_bad) << Describe(c) << ": a row that sees the NaN is finite";
    }
  }
}

// A large in-place AMX output (one KV head, one key chunk, 384 x 512 floats
// in one block) goes out with non-temporal stores, realigned to whole lines
// when the output does not start on one: the same bits at every offset as
// with ordinary stores, within the BF16-P budget of the FP64 reference, and
// nothing written outside the output; a token that sees no key and has no
// sink (l = 0) gets rows of +0.
TEST(CpuAttentionMxfp8, AmxStreamedOutputHasTheStoredOutputsBits) {
  if (!AmxKernelsAvailable()) GTEST_SKIP() << "no AMX-BF16 tile data on this CPU / OS";
  uint32_t seed = 500;
  for (const Case& c : {Case{64, 1, 512, true, true, 500, 6, 128},
                        Case{64, 1, 512, true, false, 300, 6, 128}}) {
    MxProblem p = Make(c, ++seed, /*with_missing_rows=*/true);
    const int empty = c.sinks ? -1 : 2;  // without sinks, token 2 sees no key
    if (empty >= 0) p.begin[empty] = p.end[empty];
    std::vector<uint16_t> q16(p.q.size());
    for (size_t i = 0; i < p.q.size(); ++i) {
      uint32_t b;
      std::memcpy(&b, &p.q[i], 4);
      q16[i] = static_cast<uint16_t>((b + 0x7FFF + ((b >> 16) & 1)) >> 16);
      b = static_cast<uint32_t>(q16[i]) << 16;
      std::memcpy(&p.q[i], &b, 4);
    }
    DecodeTile(p);
    const size_t n = static_cast<size_t>(c.tokens) * c.hq * c.d;
    SetAmxStreamingStores(false);
    const Result stored = Attention(p, true, AttentionIsa::kAmx, nullptr, q16.data());
    SetAmxStreamingStores(true);
    std::vector<float> buffer(n + 64);
    float* line = buffer.data() + (64 - reinterpret_cast<uintptr_t>(buffer.data()) % 64) / 4;
    for (int offset : {0, 1, 4, 15}) {  // floats past a 64-byte line
      const std::string what = Describe(c) + " offset " + std::to_string(offset);
      float* out = line + offset;
      std::fill(buffer.begin(), buffer.end(), kNaN);
      std::vector<float> lse(static_cast<size_t>(c.tokens) * c.hq, kNaN);
      AttentionShape shape{c.hq, c.hkv, c.d, p.scale, c.sinks ? p.sinks.data() : nullptr};
      SeqProblem sp{c.tokens, p.q.data(), p.n_keys, nullptr, nullptr, p.begin.data(),
                    p.end.data(), out};
      sp.lse = lse.data();
      sp.q_bf16 = q16.data();
      sp.mx.rows = p.rows.data();
      sp.mx.k_offset = 0;
      sp.mx.v_offset = 0;
      sp.mx.vec_bytes = p.vec_bytes;
      AttendWithIsa(AttentionIsa::kAmx, shape, &sp, 1, nullptr);
      const std::vector<float> got(out, out + n);
      ExpectSameBits(got, stored.out, what);
      ExpectSameBits(lse, stored.lse, what + " lse");
      for (float* x = buffer.data(); x < out; ++x) ASSERT_TRUE(std::isnan(*x)) << what << ": before";
      for (float* x = out + n; x < buffer.data() + buffer.size(); ++x)
        ASSERT_TRUE(std::isnan(*x)) << what << ": after";
    }
    if (empty < 0) {
      EXPECT_LE(RelativeErrorToReference(p, stored.out), 4e-3) << Describe(c);
      continue;
    }
    const size_t per_token = static_cast<size_t>(c.hq) * c.d;
    for (size_t i = empty * per_token; i < (empty + 1) * per_token; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &stored.out[i], 4);
      ASSERT_EQ(bits, 0u) << Describe(c) << ": token without keys, elem " << i;
    }
  }
}

// A value row that only a later token sees holds a NaN code or a NaN scale:
// the earlier tokens' rows stay exact, the later ones are non-finite, exactly
// as on the decoded tile.
TEST(CpuAttentionMxfp8, NanInALaterTokensRowStaysInItsRows) {
  for (const Case& c : {Case{8, 4, 64, false, true, 50, 6, 16}, Case{8, 8, 64, true, false, 50, 6, 16},
                        Case{64, 1, 512, true, true, 200, 6, 128}}) {
    for (bool nan_scale : {false, true}) {
      MxProblem p = Make(c, 99, false);
      DecodeTile(p);
      const Result clean = Attention(p, true, AttentionIsa::kAuto, nullptr);
      const int poisoned = 4;  // token 4's own key: tokens 4 and 5 see it
      const int key = p.end[poisoned] - 1;
      // Poison the value vectors of the key (the K vectors when shared).
      uint8_t* row = const_cast<uint8_t*>(p.rows[key]);
      for (int g = 0; g < c.hkv; ++g) {
        uint8_t* vec = row + (c.shared_kv ? 0 : c.hkv * p.vec_bytes) + g * p.vec_bytes;
        if (nan_scale) {
          vec[c.d + 1] = 0xFF;  // the second block's scale
        } else {
          vec[5] = 0x7F;  // a NaN code
        }
      }
      DecodeTile(p);
      for (AttentionIsa isa : IsasHere()) {
        const std::string what = Describe(c) + (nan_scale ? " NaN scale" : " NaN code") +
                                 " isa " + std::to_string(static_cast<int>(isa));
        const Result tile = Attention(p, false, isa, nullptr);
        const Result rows = Attention(p, true, isa, nullptr);
        ExpectSameBits(rows.out, tile.out, what);
        const size_t row_floats = static_cast<size_t>(c.hq) * c.d;
        for (size_t i = 0; i < poisoned * row_floats; ++i)
          ASSERT_TRUE(std::isfinite(rows.out[i])) << what << ": an earlier token's output at " << i;
        double diff = 0, size = 0;
        for (size_t i = 0; i < poisoned * row_floats; ++i) {
          diff = std::max(diff, std::fabs(static_cast<double>(rows.out[i]) - clean.out[i]));
          size = std::max(size, std::fabs(static_cast<double>(clean.out[i])));
        }
        EXPECT_LE(diff, 1e-5 * size) << what;  // row by row: another summation order
        for (size_t i = poisoned * row_floats; i < rows.out.size(); i += c.d) {
          bool any_bad = false;
          for (int e = 0; e < c.d; ++e) any_bad |= !std::isfinite(rows.out[i + e]);
          EXPECT_TRUE(any_bad) << what << ": a row that sees the NaN is finite";
        }
      }
    }
  }
}

// BF16 rows read in place (SeqProblem::mx with bf16: a BF16 ring under FP32
// queries): the same bits as the same kernels on the FP32 tile of the widened
// values, on every kernel set this CPU has (AVX-512 widens them straight into
// its panels), missing rows as zeros, a NaN value in a key only later tokens
// see kept in exactly those tokens' rows; within the FP32 budget of the FP64
// reference.
TEST(CpuAttentionMxfp8, Bf16RowsInPlaceMatchTheWidenedTileBitForBit) {
  ThreadPool pool(3);
  uint32_t seed = 900;
  for (const Case& c : kCases) {
    for (bool poison : {false, true}) {
      MxProblem p = Make(c, ++seed, /*with_missing_rows=*/true);
      p.vec_bytes = sizeof(uint16_t) * c.d;
      const int vectors = c.hkv * (c.shared_kv ? 1 : 2);
      p.row_bytes = p.vec_bytes * vectors;
      std::mt19937 rng(seed);
      swa_test::UniformReal<float> u(-2.0f, 2.0f);
      std::vector<std::unique_ptr<uint8_t[]>> storage;
      std::vector<std::vector<float>> widened(p.n_keys);  // the row's values as FP32
      for (int r = 0; r < p.n_keys; ++r) {
        storage.emplace_back(new uint8_t[p.row_bytes + 64]);
        uint8_t* row = storage.back().get() + 2 * (rng() % 32);  // any even offset
        widened[r].resize(static_cast<size_t>(vectors) * c.d);
        for (size_t e = 0; e < widened[r].size(); ++e) {
          const float x = u(rng);
          uint32_t b;
          std::memcpy(&b, &x, 4);
          const uint16_t h = static_cast<uint16_t>(b >> 16);  // truncated: a BF16 value
          std::memcpy(row + 2 * e, &h, 2);
          b = static_cast<uint32_t>(h) << 16;
          std::memcpy(&widened[r][e], &b, 4);
        }
        if (p.rows[r] != nullptr) p.rows[r] = row;
      }
      const int poisoned = c.tokens - 1;  // only the last token sees its own key
      const int key = p.end[poisoned] - 1;
      if (poison && p.rows[key] != nullptr) {
        const uint16_t nan = 0x7FC1;
        for (int g = 0; g < c.hkv; ++g) {
          const size_t e = static_cast<size_t>(c.shared_kv ? g : c.hkv + g) * c.d + 3;
          std::memcpy(const_cast<uint8_t*>(p.rows[key]) + 2 * e, &nan, 2);
          const uint32_t b = static_cast<uint32_t>(nan) << 16;  // the widened payload
          std::memcpy(&widened[key][e], &b, 4);
        }
      }
      const size_t floats = static_cast<size_t>(p.n_keys) * c.hkv * c.d;
      p.k.assign(floats, 0.0f);
      p.v.assign(c.shared_kv ? 0 : floats, 0.0f);
      for (int r = 0; r < p.n_keys; ++r) {
        if (p.rows[r] == nullptr) continue;
        const size_t per_row = static_cast<size_t>(c.hkv) * c.d;
        std::copy(widened[r].begin(), widened[r].begin() + per_row, p.k.begin() + r * per_row);
        if (!c.shared_kv)
          std::copy(widened[r].begin() + per_row, widened[r].end(), p.v.begin() + r * per_row);
      }
      for (AttentionIsa isa : IsasHere()) {
        for (ThreadPool* tp : {static_cast<ThreadPool*>(nullptr), &pool}) {
          const std::string what = Describe(c) + " isa " + std::to_string(static_cast<int>(isa)) +
                                   (poison ? " NaN" : "") + (tp ? " pool" : "");
          const Result tile = Attention(p, false, isa, tp);
          Result rows;
          {
            rows.out.assign(tile.out.size(), kNaN);
            rows.lse.assign(tile.lse.size(), kNaN);
            AttentionShape shape{c.hq, c.hkv, c.d, p.scale, c.sinks ? p.sinks.data() : nullptr};
            SeqProblem sp{c.tokens, p.q.data(), p.n_keys, nullptr, nullptr, p.begin.data(),
                          p.end.data(), rows.out.data()};
            sp.lse = rows.lse.data();
            sp.mx.rows = p.rows.data();
            sp.mx.k_offset = 0;
            sp.mx.v_offset = c.shared_kv ? 0 : c.hkv * p.vec_bytes;
            sp.mx.vec_bytes = p.vec_bytes;
            sp.mx.bf16 = true;
            AttendWithIsa(isa, shape, &sp, 1, tp);
          }
          ExpectSameBits(rows.out, tile.out, what + " out");
          ExpectSameBits(rows.lse, tile.lse, what + " lse");
          const size_t row_floats = static_cast<size_t>(c.hq) * c.d;
          const bool nan_seen = poison && p.rows[key] != nullptr;
          if (!nan_seen) {
            EXPECT_LE(RelativeErrorToReference(p, rows.out), 1e-5) << what;
            continue;
          }
          for (size_t i = 0; i < poisoned * row_floats; ++i)
            ASSERT_TRUE(std::isfinite(rows.out[i])) << what << ": an earlier token's output at " << i;
          for (size_t i = poisoned * row_floats; i < rows.out.size(); i += c.d) {
            bool any_bad = false;
            for (int e = 0; e < c.d; ++e) any_bad |= !std::isfinite(rows.out[i + e]);
            EXPECT_TRUE(any_bad) << what << ": a row that sees the NaN is finite";
          }
        }
      }
    }
  }
}

// BF16 rows read in place by the AMX driver (SeqProblem::mx with bf16 and
// BF16 queries: swa_step's BF16 queries on a BF16 ring): the same bits as the
// AMX driver on the BF16 tile (k16 / v16) of the same values, as the step
// built it before. Rows evenly spaced in one buffer (packed straight from the
// rows), or with scattered and missing rows among them (copied 16 at a time);
// a NaN in a key and a value only the last token sees: the block runs the
// AVX512-BF16 driver (as from the tile), and the NaN reaches that token's
// rows only. Within the BF16-P budget of the FP64 reference otherwise.
TEST(CpuAttentionMxfp8, AmxBf16RowsInPlaceMatchTheBf16TileBitForBit) {
  if (!AmxKernelsAvailable()) {
    std::printf("SKIPPED: no AMX-BF16 tile data on this CPU / OS (amx_bf16, amx_tile, XTILEDATA)\n");
    GTEST_SKIP() << "no AMX-BF16 tile data on this CPU / OS";
  }
  ThreadPool pool(3);
  uint32_t seed = 1300;
  for (const Case& c : kCases) {
    for (bool scattered : {false, true}) {
      for (bool poison : {false, true}) {
        MxProblem p = Make(c, ++seed, /*with_missing_rows=*/false);
        p.vec_bytes = sizeof(uint16_t) * c.d;
        const int vectors = c.hkv * (c.shared_kv ? 1 : 2);
        const size_t per_row = static_cast<size_t>(vectors) * c.d;  // values
        p.row_bytes = p.vec_bytes * vectors + 2 * 3;  // rows 6 bytes apart past the vectors
        std::mt19937 rng(seed);
        swa_test::UniformReal<float> u(-2.0f, 2.0f);
        auto bf16 = [&] {
          const float x = u(rng);
          uint32_t b;
          std::memcpy(&b, &x, 4);
          return static_cast<uint16_t>(b >> 16);
        };
        std::unique_ptr<uint8_t[]> ring(new uint8_t[p.n_keys * p.row_bytes + 64]);
        uint8_t* base = ring.get() + 2 * (rng() % 32);
        std::vector<std::unique_ptr<uint8_t[]>> elsewhere;
        std::vector<uint16_t> values(static_cast<size_t>(p.n_keys) * per_row);
        for (int r = 0; r < p.n_keys; ++r) {
          uint8_t* row = base + r * p.row_bytes;
          if (scattered && r % 7 == 3) {  // a staged row, or past the ring's wrap
            elsewhere.emplace_back(new uint8_t[p.row_bytes + 64]);
            row = elsewhere.back().get() + 2 * (rng() % 32);
          }
          for (size_t e = 0; e < per_row; ++e) values[r * per_row + e] = bf16();
          std::memcpy(row, &values[r * per_row], sizeof(uint16_t) * per_row);
          p.rows[r] = scattered && r % 5 == 1 && r != p.n_keys - 1 ? nullptr : row;
        }
        const int poisoned = c.tokens - 1;  // only the last token sees its own key
        const int key = p.end[poisoned] - 1;  // n_keys - 1: never missing
        if (poison) {
          const uint16_t nan = 0x7FC1;
          for (int g = 0; g < c.hkv; ++g) {
            for (size_t e : {static_cast<size_t>(g) * c.d + 3,
                             static_cast<size_t>(c.shared_kv ? g : c.hkv + g) * c.d + 5}) {
              values[key * per_row + e] = nan;
              std::memcpy(const_cast<uint8_t*>(p.rows[key]) + 2 * e, &nan, 2);
            }
          }
        }
        // The BF16 tile as the step built it (missing rows: zeros), its FP32
        // values for the reference, and BF16 queries.
        const size_t kv = static_cast<size_t>(c.hkv) * c.d;
        std::vector<uint16_t> k16(p.n_keys * kv, 0), v16(c.shared_kv ? 0 : p.n_keys * kv, 0);
        for (int r = 0; r < p.n_keys; ++r) {
          if (p.rows[r] == nullptr) continue;
          std::copy_n(&values[r * per_row], kv, &k16[r * kv]);
          if (!c.shared_kv) std::copy_n(&values[r * per_row + kv], kv, &v16[r * kv]);
        }
        auto widen = [](const std::vector<uint16_t>& h) {
          std::vector<float> f(h.size());
          for (size_t i = 0; i < h.size(); ++i) {
            const uint32_t b = static_cast<uint32_t>(h[i]) << 16;
            std::memcpy(&f[i], &b, 4);
          }
          return f;
        };
        p.k = widen(k16);
        p.v = widen(v16);
        std::vector<uint16_t> q16(p.q.size());
        for (size_t i = 0; i < p.q.size(); ++i) {
          uint32_t b;
          std::memcpy(&b, &p.q[i], 4);
          q16[i] = static_cast<uint16_t>(b >> 16);
          b = static_cast<uint32_t>(q16[i]) << 16;
          std::memcpy(&p.q[i], &b, 4);
        }
        for (ThreadPool* tp : {static_cast<ThreadPool*>(nullptr), &pool}) {
          const std::string what = Describe(c) + (scattered ? " scattered" : " even") +
                                   (poison ? " NaN" : "") + (tp ? " pool" : "");
          AttentionShape shape{c.hq, c.hkv, c.d, p.scale, c.sinks ? p.sinks.data() : nullptr};
          auto run = [&](bool in_place) {
            Result r;
            r.out.assign(static_cast<size_t>(c.tokens) * c.hq * c.d, kNaN);
            r.lse.assign(static_cast<size_t>(c.tokens) * c.hq, kNaN);
            SeqProblem sp{c.tokens, nullptr, p.n_keys, nullptr, nullptr, p.begin.data(),
                          p.end.data(), r.out.data()};
            sp.lse = r.lse.data();
            sp.q_bf16 = q16.data();
            if (in_place) {
              sp.mx.rows = p.rows.data();
              sp.mx.k_offset = 0;
              sp.mx.v_offset = c.shared_kv ? 0 : kv * sizeof(uint16_t);
              sp.mx.vec_bytes = p.vec_bytes;
              sp.mx.bf16 = true;
            } else {
              sp.k16 = k16.data();
              sp.v16 = c.shared_kv ? k16.data() : v16.data();
            }
            AttendWithIsa(AttentionIsa::kAmx, shape, &sp, 1, tp);
            return r;
          };
          const Result tile = run(false);
          const Result rows = run(true);
          ExpectSameBits(rows.out, tile.out, what + " out");
          ExpectSameBits(rows.lse, tile.lse, what + " lse");
          if (!poison) {
            EXPECT_LE(RelativeErrorToReference(p, rows.out), 4e-3) << what;
            continue;
          }
          const size_t row_floats = static_cast<size_t>(c.hq) * c.d;
          for (size_t i = 0; i < poisoned * row_floats; ++i)
            ASSERT_TRUE(std::isfinite(rows.out[i])) << what << ": an earlier token's output at " << i;
          for (size_t i = poisoned * row_floats; i < rows.out.size(); i += c.d) {
            bool any_bad = false;
            for (int e = 0; e < c.d; ++e) any_bad |= !std::isfinite(rows.out[i + e]);
            EXPECT_TRUE(any_bad) << what << ": a row that sees the NaN is finite";
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace swa::cpu
