// The AMX-BF16 attention driver (compiled with -mamx-tile -mamx-bf16 and the
// AVX512-BF16 flags; attention.cc calls it only after AmxKernelsAvailable():
// cpuid says amx_bf16 / amx_tile, XCR0 enables the tile state and the kernel
// granted this process XTILEDATA). Same inputs and the same error as the
// AVX512-BF16 driver (attention_bf16.cc): BF16 queries, keys and values exact
// in BF16, products exact (tdpbf16ps), sums in FP32, the FP32 online softmax,
// P rounded to BF16 (nearest even) for P.V (docs/cpu_attention.md, "Paths").
//
// A tile holds 16 rows of 64 bytes. Q.K^T: A = 16 query rows x 32 depth
// values (read in place, rows D apart), B = a pack_kt panel's 16 depth pairs
// (the VNNI layout: 16 keys x 2 per 64-byte row), C = 16 x 16 FP32 scores.
// P.V: A = 16 rows of P x 32 keys, B = 16 key pairs x 16 columns of V (this
// file's PackValues), C = 16 x 16 FP32 outputs. Two row tiles by two column
// tiles per step (4 accumulators: tmm0..3, A: tmm4..5, B: tmm6..7).
#if defined(__x86_64__)

#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "backend/cpu/attention_amx.h"
#include "backend/cpu/attention_block.h"
#include "codec/codec.h"

namespace swa::cpu {

namespace {

constexpr long kArchGetXcompPerm = 0x1022;
constexpr long kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

bool CpuHasAmxBf16() {
  unsigned a, b, c, d;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  const bool amx = (d & (1u << 22)) != 0 && (d & (1u << 24)) != 0;  // amx_bf16, amx_tile
  if (!amx) return false;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0 || (c & (1u << 27)) == 0) return false;  // OSXSAVE
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & (3u << 17)) == (3u << 17);  // XTILECFG and XTILEDATA enabled by the OS
}

// Asks Linux for the tile data state (per process, once; inherited by every
// thread). False when the kernel refuses or predates the request (< 5.16).
bool RequestTileData() {
#if defined(__linux__)
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return false;
  unsigned long long granted = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &granted) != 0) return false;
  return (granted & (1ull << kXfeatureXtiledata)) != 0;
#else
  return false;
#endif
}

}  // namespace

namespace {
bool g_streaming_stores = true;  // SetAmxStreamingStores
}  // namespace

void SetAmxStreamingStores(bool on) { g_streaming_stores = on; }

bool AmxTileDataGranted() {
  static const bool granted = CpuHasAmxBf16() && RequestTileData();
  return granted;
}

namespace attn {
namespace {

constexpr int kAmxRows = 16;     // rows of a tile
constexpr __mmask16 kAllLanes = 0xFFFF;
constexpr int kAmxKeyStep = 32;  // keys per P.V step (16 pairs)
constexpr size_t kStreamBytes = 256 * 1024;  // in-place outputs this large: non-temporal stores

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64, "ldtilecfg reads 64 bytes");

// The calling thread's tile configuration while one block runs (each thread
// loads its own; released at the end so that the thread holds no tile state
// between steps). Tiles 0, 1, 4 have m0 rows (row tile 0: two accumulators,
// its A), tiles 2, 3, 5 m1 rows (row tile 1, 0: unused); 6, 7 are B.
class Tiles {
 public:
  Tiles() = default;
  Tiles(const Tiles&) = delete;
  Tiles& operator=(const Tiles&) = delete;
  ~Tiles() {
    if (m0_ >= 0) _tile_release();
  }
  void Use(int m0, int m1) {
    if (m0 == m0_ && m1 == m1_) return;
    TileConfig cfg;
    auto set = [&](int t, int rows) {
      cfg.rows[t] = static_cast<uint8_t>(rows);
      cfg.colsb[t] = static_cast<uint16_t>(rows > 0 ? 64 : 0);
    };
    for (int t : {0, 1, 4}) set(t, m0);
    for (int t : {2, 3, 5}) set(t, m1);
    for (int t : {6, 7}) set(t, kAmxRows);
    // GCC's _tile_loadconfig declares an 8-byte memory operand: the whole
    // configuration as the operand, so that no store to it is dropped.
    __asm__ volatile("ldtilecfg %0" : : "m"(cfg));
    m0_ = m0;
    m1_ = m1;
  }

 private:
  int m0_ = -1, m1_ = -1;
};

// Raw scores of row tiles a0 (m0 rows) and, with kTwo, a1 (m1 rows) against
// K^T panels [p0, p1) of kt (pack_kt layout, d deep): s0 / s1 rows lds floats
// apart, panel p at column 16 p. The depth is cut in slices of kAmxDepthSlice
// (when d is a multiple of it) so that the row pair's Q slice (16 KiB) stays
// in L1 while the K^T panels stream past it from L2; the partial sums go
// through the score rows (FP32 stores and loads: the same sums, in the same
// order, as one pass). pf / pf_end: lines to prefetch into L1 on the way,
// kPrefetchLines per step (the next row pair's Q, cold in L3).
constexpr int kAmxDepthSlice = 256;
constexpr int kPrefetchLines = 8;
template <bool kTwo>
void Scores(const uint16_t* a0, const uint16_t* a1, ptrdiff_t lda, int d, const uint16_t* kt,
            int p0, int p1, float* s0, float* s1, ptrdiff_t lds, const char* pf,
            const char* pf_end) {
  const size_t sa = sizeof(uint16_t) * lda, ss = sizeof(float) * lds;
  const ptrdiff_t panel = static_cast<ptrdiff_t>(kTileCols) * d;
  const int kc = d > kAmxDepthSlice && d % kAmxDepthSlice == 0 ? kAmxDepthSlice : d;
  auto prefetch = [&] {
    for (int i = 0; i < kPrefetchLines && pf < pf_end; ++i, pf += 64) _mm_prefetch(pf, _MM_HINT_T0);
  };
  for (int e0 = 0; e0 < d; e0 += kc) {
    const int e1 = e0 + kc;
    int p = p0;
    for (; p + 2 <= p1; p += 2) {
      const uint16_t* b0 = kt + p * panel;
      const uint16_t* b1 = b0 + panel;
      if (e0 == 0) {
        _tile_zero(0);
        _tile_zero(1);
        if (kTwo) {
          _tile_zero(2);
          _tile_zero(3);
        }
      } else {
        _tile_loadd(0, s0 + kTileCols * p, ss);
        _tile_loadd(1, s0 + kTileCols * (p + 1), ss);
        if (kTwo) {
          _tile_loadd(2, s1 + kTileCols * p, ss);
          _tile_loadd(3, s1 + kTileCols * (p + 1), ss);
        }
      }
      for (int e = e0; e < e1; e += 32) {  // depth pair e / 2 sits 32 * (e / 2) values in
        prefetch();
        _tile_loadd(4, a0 + e, sa);
        _tile_loadd(6, b0 + 16 * e, 64);
        _tile_loadd(7, b1 + 16 * e, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        if (kTwo) {
          _tile_loadd(5, a1 + e, sa);
          _tile_dpbf16ps(2, 5, 6);
          _tile_dpbf16ps(3, 5, 7);
        }
      }
      _tile_stored(0, s0 + kTileCols * p, ss);
      _tile_stored(1, s0 + kTileCols * (p + 1), ss);
      if (kTwo) {
        _tile_stored(2, s1 + kTileCols * p, ss);
        _tile_stored(3, s1 + kTileCols * (p + 1), ss);
      }
    }
    if (p < p1) {
      const uint16_t* b0 = kt + p * panel;
      if (e0 == 0) {
        _tile_zero(0);
        if (kTwo) _tile_zero(2);
      } else {
        _tile_loadd(0, s0 + kTileCols * p, ss);
        if (kTwo) _tile_loadd(2, s1 + kTileCols * p, ss);
      }
      for (int e = e0; e < e1; e += 32) {
        prefetch();
        _tile_loadd(4, a0 + e, sa);
        _tile_loadd(6, b0 + 16 * e, 64);
        _tile_dpbf16ps(0, 4, 6);
        if (kTwo) {
          _tile_loadd(5, a1 + e, sa);
          _tile_dpbf16ps(2, 5, 6);
        }
      }
      _tile_stored(0, s0 + kTileCols * p, ss);
      if (kTwo) _tile_stored(2, s1 + kTileCols * p, ss);
    }
  }
}

// The P . V key steps [k0, k1) of one column pair: tiles 0 / 1 (rows a0)
// and 2 / 3 (rows a1, kTwo) accumulate P rows (BF16, sa bytes apart) times
// the two V slabs b0 / b1 (PackValues layout, 32 keys per step).
template <bool kTwo>
inline __attribute__((always_inline)) void ValueSteps(const uint16_t* a0, const uint16_t* a1,
                                                      size_t sa, const uint16_t* b0,
                                                      const uint16_t* b1, int k0, int k1) {
  constexpr ptrdiff_t kStep = kAmxKeyStep * kTileCols;  // values of a key step in a slab
    for (int ks = k0; ks < k1; ++ks) {
      _tile_loadd(4, a0 + kAmxKeyStep * ks, sa);
      _tile_loadd(6, b0 + kStep * ks, 64);
      _tile_loadd(7, b1 + kStep * ks, 64);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      if (kTwo) {
        _tile_loadd(5, a1 + kAmxKeyStep * ks, sa);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
    }
}

// o0 / o1 (rows ldo floats apart, d columns) += P . V over key steps
// [k0, k1) (32 keys each): P rows a0 / a1 (BF16, ldp apart, indexed by key),
// V in PackValues slabs.
template <bool kTwo>
void Values(const uint16_t* a0, const uint16_t* a1, ptrdiff_t ldp, const uint16_t* vp,
            ptrdiff_t slab, int k0, int k1, int d, float* o0, float* o1, ptrdiff_t ldo) {
  const size_t sa = sizeof(uint16_t) * ldp, so = sizeof(float) * ldo;
  for (int j = 0; j < d; j += 2 * kTileCols) {
    _tile_loadd(0, o0 + j, so);
    _tile_loadd(1, o0 + j + kTileCols, so);
    if (kTwo) {
      _tile_loadd(2, o1 + j, so);
      _tile_loadd(3, o1 + j + kTileCols, so);
    }
    const uint16_t* b0 = vp + (j / kTileCols) * slab;
    const uint16_t* b1 = b0 + slab;
    ValueSteps<kTwo>(a0, a1, sa, b0, b1, k0, k1);
    _tile_stored(0, o0 + j, so);
    _tile_stored(1, o0 + j + kTileCols, so);
    if (kTwo) {
      _tile_stored(2, o1 + j, so);
      _tile_stored(3, o1 + j + kTileCols, so);
    }
  }
}

// P . V of a block written in place (one key chunk: every row's l is
// final): rows a0 (m0) and a1 (m1) of P over key steps [k0, k1); each
// column pair's four accumulators go through an L1 scratch and leave it
// multiplied by 1 / l of their row (NormaliseRows' product: the same bits;
// l == 0, a row with no key and no sink, is written as zeros) into the
// output rows o0 / o1, ldo apart. Each cold output line is written once, in
// full, and never read back by the block.
// kStream: non-temporal stores (ldo a multiple of 16, so every row starts
// `mu` floats past a 64-byte line): with mu > 0 each row's 32-float pieces
// are realigned to whole lines through a per-row carry of the previous
// piece; the row's first and last partial lines (shared with the
// neighbouring rows) take ordinary masked stores.
template <bool kTwo, bool kStream>
void ValuesOut(const uint16_t* a0, const uint16_t* a1, ptrdiff_t ldp, const uint16_t* vp,
               ptrdiff_t slab, int k0, int k1, int d, float* o0, float* o1, ptrdiff_t ldo,
               int m0, int m1, const float* l, int mu) {
  const size_t sa = sizeof(uint16_t) * ldp;
  float inv[2 * kAmxRows];
  for (int i = 0; i < m0 + m1; ++i) inv[i] = l[i] != 0.0f ? 1.0f / l[i] : 0.0f;
  alignas(64) float c[4][kAmxRows * kTileCols];
  alignas(64) float carry[2 * kAmxRows][kTileCols];  // the previous piece's upper half
  // Lane i of a line starting mu floats before x's piece: lo[16 - mu + i]
  // for i < mu, hi[i - mu] after (permutex2var: bit 4 picks hi).
  const __m512i shift = _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
                                                           12, 13, 14, 15),
                                         _mm512_set1_epi32(kTileCols - mu));
  const __mmask16 head = static_cast<__mmask16>(0xFFFFu << mu);  // the row's first line
  const __mmask16 tail = static_cast<__mmask16>(~head);          // its last, partial line
  auto put = [&](float* dst, int i, int j, __m512 x0, __m512 x1) {
    if (!kStream) {
      _mm512_storeu_ps(dst, x0);
      _mm512_storeu_ps(dst + kTileCols, x1);
    } else if (mu == 0) {
      _mm512_stream_ps(dst, x0);
      _mm512_stream_ps(dst + kTileCols, x1);
    } else {
      float* line = dst - mu;
      const __m512 prev = j == 0 ? _mm512_setzero_ps() : _mm512_load_ps(carry[i]);
      const __m512 first = _mm512_permutex2var_ps(prev, shift, x0);
      if (j == 0)
        _mm512_mask_storeu_ps(line, head, first);
      else
        _mm512_stream_ps(line, first);
      _mm512_stream_ps(line + kTileCols, _mm512_permutex2var_ps(x0, shift, x1));
      if (j + 2 * kTileCols == d)
        _mm512_mask_storeu_ps(line + 2 * kTileCols, tail, _mm512_permutex2var_ps(x1, shift, x1));
      else
        _mm512_store_ps(carry[i], x1);
    }
  };
  auto emit = [&](const float* c0, const float* c1, float* o, int m, int i0, int j) {
    for (int r = 0; r < m; ++r) {
      float* dst = o + r * ldo + j;
      if (l[i0 + r] == 0.0f) {
        put(dst, i0 + r, j, _mm512_setzero_ps(), _mm512_setzero_ps());
        continue;
      }
      const __m512 sc = _mm512_set1_ps(inv[i0 + r]);
      put(dst, i0 + r, j, _mm512_mul_ps(_mm512_load_ps(c0 + kTileCols * r), sc),
          _mm512_mul_ps(_mm512_load_ps(c1 + kTileCols * r), sc));
    }
  };
  for (int j = 0; j < d; j += 2 * kTileCols) {
    _tile_zero(0);
    _tile_zero(1);
    if (kTwo) {
      _tile_zero(2);
      _tile_zero(3);
    }
    const uint16_t* b0 = vp + (j / kTileCols) * slab;
    const uint16_t* b1 = b0 + slab;
    ValueSteps<kTwo>(a0, a1, sa, b0, b1, k0, k1);
    _tile_stored(0, c[0], 64);
    _tile_stored(1, c[1], 64);
    if (kTwo) {
      _tile_stored(2, c[2], 64);
      _tile_stored(3, c[3], 64);
    }
    emit(c[0], c[1], o0, m0, 0, j);
    if (kTwo) emit(c[2], c[3], o1, m1, kAmxRows, j);
  }
}

// ValuesOut of row tiles a0 (m0 rows) and, when m1 > 0, the next (m1 rows;
// P rows ldp apart, output rows d apart); l: the denominators of the m0 + m1
// rows. stream: non-temporal stores (d a multiple of 32, o float-aligned);
// rows_from_o0: the block's output rows from o0 on.
void ValuesInPlace(const uint16_t* a0, int m0, int m1, ptrdiff_t ldp, const uint16_t* vp,
                   ptrdiff_t slab, int k0, int k1, int d, float* o0, bool stream,
                   const float* l, int rows_from_o0) {
  const uint16_t* a1 = a0 + kAmxRows * ldp;
  float* o1 = o0 + static_cast<ptrdiff_t>(kAmxRows) * d;
  const int mu = static_cast<int>(reinterpret_cast<uintptr_t>(o0) % 64 / sizeof(float));
  if (stream && mu > 0) {
    // The lines shared by two rows take ordinary stores: owned ahead (this
    // row pair's, then the next one's, written after this one's P.V).
    for (int r = 0; r <= std::min(4 * kAmxRows, rows_from_o0); ++r) {
      const char* line = reinterpret_cast<const char*>(o0 + static_cast<ptrdiff_t>(r) * d - mu);
      __asm__ volatile("prefetchw %0" : : "m"(*line));
    }
  }
  if (m1 > 0 && stream)
    ValuesOut<true, true>(a0, a1, ldp, vp, slab, k0, k1, d, o0, o1, d, m0, m1, l, mu);
  else if (m1 > 0)
    ValuesOut<true, false>(a0, a1, ldp, vp, slab, k0, k1, d, o0, o1, d, m0, m1, l, 0);
  else if (stream)
    ValuesOut<false, true>(a0, nullptr, ldp, vp, slab, k0, k1, d, o0, nullptr, d, m0, 0, l, mu);
  else
    ValuesOut<false, false>(a0, nullptr, ldp, vp, slab, k0, k1, d, o0, nullptr, d, m0, 0, l, 0);
}

// Key pair (a, b) of 16 columns as 16 dwords (a low, b high), from BF16 or
// from FP32 values exact in BF16 (their upper halves). b == nullptr: the high
// halves are zero. The widening and the shifts are the zero-masking forms
// with every lane selected (the same instructions): GCC 12 warns that the
// plain forms' _mm512_undefined_epi32() merge source "may be used
// uninitialized", which no lane of an all-ones mask ever takes.
inline __m512i Widen16(const uint16_t* x) {
  return _mm512_maskz_cvtepu16_epi32(kAllLanes,
                                     _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
}
inline __m512i PairOf(const uint16_t* a, const uint16_t* b) {
  const __m512i lo = Widen16(a);
  const __m512i hi =
      b != nullptr ? _mm512_maskz_slli_epi32(kAllLanes, Widen16(b), 16) : _mm512_setzero_si512();
  return _mm512_or_si512(lo, hi);
}
inline __m512i PairOf(const float* a, const float* b) {
  const __m512i lo = _mm512_maskz_srli_epi32(kAllLanes, _mm512_loadu_si512(a), 16);
  const __m512i hi = b != nullptr ? _mm512_and_si512(_mm512_loadu_si512(b),
                                                     _mm512_set1_epi32(static_cast<int>(0xFFFF0000u)))
                                  : _mm512_setzero_si512();
  return _mm512_or_si512(lo, hi);
}

// Rows [0, n) of V (row r at v + r * ldv, d values exact in BF16) as key
// pairs in 16-column slabs of `slab` values: dst[e / 16][q][e % 16][r] = key
// 2q + r, element e; pairs up to `pairs` (keys past n are zero). A tile step
// of P.V reads 16 pairs (32 keys) of one slab, 64 bytes per pair.
template <typename T>
void PackValues(const T* v, ptrdiff_t ldv, int n, int d, int pairs, uint16_t* dst,
                ptrdiff_t slab) {
  for (int q = 0; q < pairs; ++q) {
    const int k = 2 * q;
    const T* a = k < n ? v + k * ldv : nullptr;
    const T* b = k + 1 < n ? v + (k + 1) * ldv : nullptr;
    uint16_t* out = dst + static_cast<ptrdiff_t>(q) * 32;
    for (int e = 0; e < d; e += kTileCols) {
      const __m512i x = a != nullptr ? PairOf(a + e, b != nullptr ? b + e : nullptr)
                                     : _mm512_setzero_si512();
      _mm512_storeu_si512(out + (e / kTileCols) * slab, x);
    }
  }
}

// P row in BF16 over [0, width): exp scores s[x] for x in [b, e) (the row's
// keys in the chunk), 0 elsewhere. s holds at least RoundUp(e, 16) floats;
// lanes outside [b, e) are not read.
void PRow(const float* s, int b, int e, int width, uint16_t* dst) {
  for (int x = 0; x < width; x += 16) {
    const int lo = std::clamp(b - x, 0, 16), hi = std::clamp(e - x, 0, 16);
    const uint32_t bits = lo < hi ? ((hi == 16 ? 0xFFFFu : (1u << hi) - 1) & ~((1u << lo) - 1)) : 0;
    const __m512 p = _mm512_maskz_loadu_ps(static_cast<__mmask16>(bits), s + x);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + x), (__m256i)_mm512_cvtneps_pbh(p));
  }
}

// Whether one of rows [0, n) (row r at v + r * ld, d values; d a multiple
// of 32) holds a NaN or an Inf: all exponent bits set.
bool NonFiniteRows(const uint16_t* v, ptrdiff_t ld, int n, int d) {
  const __m512i exp = _mm512_set1_epi16(0x7f80);
  __mmask32 bad = 0;
  for (int r = 0; r < n; ++r)
    for (int e = 0; e < d; e += 32)
      bad |= _mm512_cmpeq_epi16_mask(_mm512_and_si512(_mm512_loadu_si512(v + r * ld + e), exp), exp);
  return bad != 0;
}
bool NonFiniteRows(const float* v, ptrdiff_t ld, int n, int d) {
  const __m512i exp = _mm512_set1_epi32(0x7f800000);
  __mmask16 bad = 0;
  for (int r = 0; r < n; ++r)
    for (int e = 0; e < d; e += 16)
      bad |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(_mm512_loadu_si512(v + r * ld + e), exp), exp);
  return bad != 0;
}


// Keys [c0, c1) seen by rows [r0, r1) of the block.
Range RowsHull(const Workspace& ws, int r0, int r1, int c0, int c1) {
  Range h{c1, c0};
  for (int i = r0; i < r1; ++i) {
    const Range rk = Intersect(ws.row_keys[i], c0, c1);
    if (rk.begin >= rk.end) continue;
    h = {std::min(h.begin, rk.begin), std::max(h.end, rk.end)};
  }
  return h;
}

// K^T panels and V pair slabs of keys [c0, c0 + n) of KV head g straight
// from MXFP8 rows: 16 rows at a time decoded to BF16 (exact: every MXFP8
// value is a BF16 value) into a 16 x D buffer that stays in L1/L2, then
// packed from there; no tile of the sequence is written. Pairs past the
// keys, up to ldp / 2, are zero.
void PackMxfpChunk(const Bf16AttentionKernels& kb, const SeqProblem& pr, int g, int c0, int n,
                   int d, int ldp, uint16_t* kt, uint16_t* vp, ptrdiff_t slab, Workspace& ws) {
  const codec::RowKernels& codec = codec::ActiveKernels();
  uint16_t* buf = U16(ws.rows, static_cast<size_t>(kTileCols) * d);
  auto decode = [&](size_t offset, int r0, int m) {
    for (int r = 0; r < m; ++r) {
      const uint8_t* row = pr.mx.rows[r0 + r];
      uint16_t* out = buf + static_cast<ptrdiff_t>(r) * d;
      if (row == nullptr)
        std::memset(out, 0, sizeof(uint16_t) * d);
      else
        codec.mxfp8_decode_bf16(row + offset + static_cast<size_t>(g) * pr.mx.vec_bytes,
                                static_cast<uint32_t>(d), out);
    }
  };
  const bool shared = pr.mx.k_offset == pr.mx.v_offset;
  for (int p0 = 0; p0 < n; p0 += kTileCols) {
    const int m = std::min(kTileCols, n - p0);
    decode(pr.mx.k_offset, c0 + p0, m);
    kb.pack_kt16(buf, d, m, d, kt + static_cast<ptrdiff_t>(p0) * d);
    if (!shared) decode(pr.mx.v_offset, c0 + p0, m);
    PackValues(buf, d, m, d, (m + 1) / 2, vp + static_cast<ptrdiff_t>(p0 / 2) * 32, slab);
  }
  const int done = (n + 1) / 2;
  PackValues(buf, d, 0, d, ldp / 2 - done, vp + static_cast<ptrdiff_t>(done) * 32, slab);
}

// The block of the next KV head (g + 1: its K and V vectors in BF16 rows
// [r0, r1), then its BF16 query rows), asked for a few lines at
// a time (Step) while this head's block runs, when that block is the next
// task (this block holds all of the problem's rows): attention_fp32.cc's
// NextHeadPrefetch for the AMX driver's own inputs (BF16 ring rows in place,
// BF16 queries). The ring rows are cold and one KV head's vectors are a few
// lines of each: no hardware prefetcher follows them, and the next block's
// packing (pack_kt16 straight from the rows) would wait on every line. Its
// output rows (FP32, written by WriteRows) are not asked for: no gain
// measured.
class NextHeadRows {
 public:
  NextHeadRows(const AttentionShape& shape, const SeqProblem& pr, int g, int r0, int r1,
               bool whole_problem)
      : pr_(pr) {
    if (!whole_problem || pr.mx.rows == nullptr || !pr.mx.bf16 || pr.q_bf16 == nullptr ||
        g + 1 >= shape.kv_heads || r0 >= r1)
      return;
    const int d = shape.head_dim, hq = shape.q_heads, ratio = hq / shape.kv_heads;
    const size_t head = static_cast<size_t>(g + 1) * pr.mx.vec_bytes;
    k_ = pr.mx.k_offset + head;
    v_ = pr.mx.v_offset + head;
    vecs_ = pr.mx.k_offset == pr.mx.v_offset ? 1 : 2;
    lines_ = static_cast<int>((sizeof(uint16_t) * d + 63) / 64);
    row_ = r0;
    end_ = r1;
    q_ = reinterpret_cast<const char*>(pr.q_bf16 + static_cast<ptrdiff_t>(g + 1) * ratio * d);
    q_stride_ = static_cast<ptrdiff_t>(sizeof(uint16_t)) * hq * d;
    q_bytes_ = static_cast<int>(sizeof(uint16_t)) * ratio * d;
    tokens_ = pr.n_tokens;
  }
  // Asks for about n more lines.
  void Step(int n) {
    for (; n > 0 && row_ < end_; n -= vecs_ * lines_, ++row_) {
      const uint8_t* row = pr_.mx.rows[row_];
      if (row == nullptr) continue;
      const char* k = reinterpret_cast<const char*>(row + k_);
      const char* v = reinterpret_cast<const char*>(row + v_);
      for (int l = 0; l < lines_; ++l) {
        _mm_prefetch(k + 64 * l, _MM_HINT_T1);
        if (vecs_ == 2) _mm_prefetch(v + 64 * l, _MM_HINT_T1);
      }
    }
    for (; n > 0 && token_ < tokens_; n -= q_bytes_ / 64, ++token_) {
      const char* q = q_ + token_ * q_stride_;
      for (int b = 0; b < q_bytes_ + 64; b += 64)  // the last line too when q is unaligned
        _mm_prefetch(q + std::min(b, q_bytes_ - 1), _MM_HINT_T1);
    }
  }

 private:
  const SeqProblem& pr_;
  size_t k_ = 0, v_ = 0;
  int vecs_ = 1, lines_ = 0, row_ = 0, end_ = 0;
  const char* q_ = nullptr;
  ptrdiff_t q_stride_ = 0;
  int q_bytes_ = 0, token_ = 0, tokens_ = 0;
};

// Lines NextHeadRows asks for per 16-key group packed, per row pair's
// Scores / Values and per P row (a gpt-oss-like block: ~900 in all for the
// next block's ~630: 133 rows x 2 vectors x 2 lines, 6 tokens x 17 lines).
constexpr int kNextLinesPerGroup = 32;
constexpr int kNextLinesPerPair = 64;
constexpr int kNextLinesPerRow = 8;

// K^T panels and V pair slabs of keys [c0, c0 + n) of KV head g read in
// place from BF16 rows (pr.mx.bf16: a BF16 ring): a 16-key group whose rows
// are all present and equally spaced (one run of the ring, the usual case)
// packs straight from the rows; any other group (a missing row, the ring's
// wrap, the step's staged rows) is copied into a 16 x D buffer first. The
// same packing calls on the same BF16 bits as from a decoded BF16 tile.
// Pairs past the keys, up to ldp / 2, are zero.
void PackBf16Chunk(const Bf16AttentionKernels& kb, const SeqProblem& pr, int g, int c0, int n,
                   int d, int ldp, uint16_t* kt, uint16_t* vp, ptrdiff_t slab, Workspace& ws,
                   NextHeadRows& next) {
  uint16_t* buf = U16(ws.rows, static_cast<size_t>(kTileCols) * d);
  const size_t head = static_cast<size_t>(g) * pr.mx.vec_bytes;
  const bool shared = pr.mx.k_offset == pr.mx.v_offset;
  // Rows [r0, r0 + m) of the vectors at `offset`: (first, ld in values).
  auto rows_of = [&](size_t offset, int r0, int m, ptrdiff_t* ld) -> const uint16_t* {
    const uint8_t* const* rows = pr.mx.rows + r0;
    // Addresses as integers: the rows may be separate allocations.
    auto at = [&](int r) { return static_cast<ptrdiff_t>(reinterpret_cast<uintptr_t>(rows[r])); };
    bool even = rows[0] != nullptr;
    const ptrdiff_t step = m > 1 && even ? at(1) - at(0) : 0;
    for (int r = 1; r < m && even; ++r) even = rows[r] != nullptr && at(r) - at(r - 1) == step;
    if (even && step % static_cast<ptrdiff_t>(sizeof(uint16_t)) == 0 &&
        reinterpret_cast<uintptr_t>(rows[0] + offset + head) % sizeof(uint16_t) == 0) {
      *ld = step / static_cast<ptrdiff_t>(sizeof(uint16_t));
      return reinterpret_cast<const uint16_t*>(rows[0] + offset + head);
    }
    for (int r = 0; r < m; ++r) {
      uint16_t* out = buf + static_cast<ptrdiff_t>(r) * d;
      if (rows[r] == nullptr)
        std::memset(out, 0, sizeof(uint16_t) * d);
      else
        std::memcpy(out, rows[r] + offset + head, sizeof(uint16_t) * d);
    }
    *ld = d;
    return buf;
  };
  for (int p0 = 0; p0 < n; p0 += kTileCols) {
    const int m = std::min(kTileCols, n - p0);
    ptrdiff_t ldk = 0, ldv = 0;
    const uint16_t* k = rows_of(pr.mx.k_offset, c0 + p0, m, &ldk);
    kb.pack_kt16(k, ldk, m, d, kt + static_cast<ptrdiff_t>(p0) * d);
    const uint16_t* v = shared ? k : rows_of(pr.mx.v_offset, c0 + p0, m, &ldv);
    if (shared) ldv = ldk;
    PackValues(v, ldv, m, d, (m + 1) / 2, vp + static_cast<ptrdiff_t>(p0 / 2) * 32, slab);
    next.Step(kNextLinesPerGroup);
  }
  const int done = (n + 1) / 2;
  PackValues(buf, d, 0, d, ldp / 2 - done, vp + static_cast<ptrdiff_t>(done) * 32, slab);
}

// Whether a value vector of KV head g in rows [b, e) of BF16 rows (pr.mx.bf16)
// holds a NaN or an Inf (missing rows are zeros).
bool NonFiniteBf16Values(const SeqProblem& pr, int g, int b, int e, int d) {
  const size_t at = pr.mx.v_offset + static_cast<size_t>(g) * pr.mx.vec_bytes;
  for (int r = b; r < e; ++r) {
    const uint8_t* row = pr.mx.rows[r];
    if (row != nullptr && NonFiniteRows(reinterpret_cast<const uint16_t*>(row + at), 0, 1, d))
      return true;
  }
  return false;
}

// RunBlockBf16 of BF16 rows (pr.mx.bf16) through a BF16 tile of KV head g
// (the other heads' columns unused): the AVX512-BF16 driver reads tiles only.
thread_local std::vector<uint16_t> tls_bf16_tile;
void RunBlockBf16FromRows(const Bf16AttentionKernels& kb, const AttentionKernels& kn,
                          const AttentionShape& shape, const SeqProblem& pr, int g, int row0,
                          int row1, const Blocking& blocking, Workspace& ws) {
  const int d = shape.head_dim;
  const size_t ldkv = static_cast<size_t>(shape.kv_heads) * d;
  const bool shared = pr.mx.k_offset == pr.mx.v_offset;
  const size_t per = static_cast<size_t>(pr.n_keys) * ldkv;
  std::vector<uint16_t>& tile = tls_bf16_tile;
  tile.resize(shared ? per : 2 * per);
  const size_t head = static_cast<size_t>(g) * pr.mx.vec_bytes;
  for (int r = 0; r < pr.n_keys; ++r) {
    const uint8_t* row = pr.mx.rows[r];
    uint16_t* k = tile.data() + r * ldkv + static_cast<size_t>(g) * d;
    uint16_t* v = shared ? k : k + per;
    for (auto [dst, offset] : {std::pair{k, pr.mx.k_offset}, std::pair{v, pr.mx.v_offset}}) {
      if (row == nullptr)
        std::memset(dst, 0, sizeof(uint16_t) * d);
      else
        std::memcpy(dst, row + offset + head, sizeof(uint16_t) * d);
    }
  }
  SeqProblem t = pr;
  t.mx = MxfpRows{};
  t.k16 = tile.data();
  t.v16 = shared ? tile.data() : tile.data() + per;
  RunBlockBf16(kb, kn, shape, t, g, row0, row1, blocking, ws);
}

}  // namespace

bool MxfpValuesFinite(const SeqProblem& pr, int g, int d) {
  const __m256i nan_code = _mm256_set1_epi8(0x7F);
  __mmask32 bad = 0;
  unsigned bad_scale = 0;
  for (int r = 0; r < pr.n_keys; ++r) {
    const uint8_t* row = pr.mx.rows[r];
    if (row == nullptr) continue;
    const uint8_t* vec = row + pr.mx.v_offset + static_cast<size_t>(g) * pr.mx.vec_bytes;
    for (int e = 0; e < d; e += 32) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(vec + e));
      bad |= _mm256_cmpeq_epi8_mask(_mm256_and_si256(x, nan_code), nan_code);  // E4M3 NaN
    }
    for (int b = 0; b < d / 32; ++b) bad_scale |= vec[d + b] == 0xFF;  // NaN scale
  }
  return bad == 0 && bad_scale == 0;
}

void RunBlockAmx(const Bf16AttentionKernels& kb, const AttentionKernels& kn,
                 const AttentionShape& shape, const SeqProblem& pr, int g, int row0, int row1,
                 const Blocking& blocking, Workspace& ws) {
  const int d = shape.head_dim;
  const int hq = shape.q_heads;
  const int ratio = shape.q_heads / shape.kv_heads;
  const ptrdiff_t ldkv = static_cast<ptrdiff_t>(shape.kv_heads) * d;
  const ptrdiff_t head = static_cast<ptrdiff_t>(g) * d;
  const bool tile16 = pr.k16 != nullptr;
  // MXFP8 rows: the caller checked their values (MxfpValuesFinite).
  const bool mx = pr.mx.rows != nullptr && !pr.mx.bf16;
  const bool mx_bf16 = pr.mx.rows != nullptr && pr.mx.bf16;  // BF16 rows in place
  const int rows = row1 - row0;
  const int tiles = CutTiles(rows, ws);  // the softmax's register tiles
  const Range hull = SetUpBlock(shape, pr, g, row0, rows, tiles, ws);

  // A non-finite value in the band: 16-row tiles would multiply it by the
  // P = 0 of rows that do not see it. The AVX512-BF16 driver keeps such
  // values in the rows that see them (its row-by-row P.V).
  if (mx_bf16 && hull.begin < hull.end &&
      NonFiniteBf16Values(pr, g, hull.begin, hull.end, d))
    return RunBlockBf16FromRows(kb, kn, shape, pr, g, row0, row1, blocking, ws);
  if (!mx && !mx_bf16 && hull.begin < hull.end) {
    const int n = hull.end - hull.begin;
    const bool bad = tile16 ? NonFiniteRows(pr.v16 + head + hull.begin * ldkv, ldkv, n, d)
                            : NonFiniteRows(pr.v + head + hull.begin * ldkv, ldkv, n, d);
    if (bad) return RunBlockBf16(kb, kn, shape, pr, g, row0, row1, blocking, ws);
  }

  bool q_in_place = false;
  const uint16_t* q = BlockQueryBf16(shape, pr, g, row0, rows, ws, &q_in_place);

  const BlockOutput out = SetUpOutput(pr, hull, row0, rows, d, q_in_place, blocking, ws);
  float* const o = out.o;
  // The first row pair's Q (cold), on its way while the chunk is packed; each
  // row pair's Scores prefetch the next one's.
  for (int i = 0; i < std::min(rows, 2 * kAmxRows) * d * 2; i += 64)
    _mm_prefetch(reinterpret_cast<const char*>(q) + i, _MM_HINT_T0);
  // A large in-place output (the rows of a DeepSeek-V4-like block: 768 KiB)
  // is written once and not read by the block: non-temporal stores spare the
  // read for ownership of each cold line and the eviction of the K^T / V
  // tiles from L2.
  const bool stream = g_streaming_stores && out.in_place && d % (2 * kTileCols) == 0 &&
                      reinterpret_cast<uintptr_t>(o) % sizeof(float) == 0 &&
                      static_cast<size_t>(rows) * d * sizeof(float) >= kStreamBytes;
  NextHeadRows next_head(shape, pr, g, hull.begin, hull.end,
                         row0 == 0 && row1 == pr.n_tokens * ratio);
  Tiles amx;
  if (out.n_chunks > 0) {
    const int chunk = RoundUp(CeilDiv(out.span, out.n_chunks), kAmxKeyStep);
    uint16_t* kt = U16(ws.kt16, static_cast<size_t>(chunk) * d);
    uint16_t* vp = U16(ws.v16, static_cast<size_t>(chunk) * d);
    float* s = ws.s.Get(static_cast<size_t>(rows) * chunk);
    uint16_t* p16 = U16(ws.p16, static_cast<size_t>(rows) * chunk);

    for (int c0 = hull.begin; c0 < hull.end; c0 += chunk) {
      const int c1 = std::min(c0 + chunk, hull.end);
      const int lds = RoundUp(c1 - c0, kTileCols);
      const int ldp = RoundUp(c1 - c0, kAmxKeyStep);
      const ptrdiff_t slab = static_cast<ptrdiff_t>(ldp) * kTileCols;
      if (mx_bf16) {
        PackBf16Chunk(kb, pr, g, c0, c1 - c0, d, ldp, kt, vp, slab, ws, next_head);
      } else if (mx) {
        PackMxfpChunk(kb, pr, g, c0, c1 - c0, d, ldp, kt, vp, slab, ws);
      } else if (tile16) {
        kb.pack_kt16(pr.k16 + head + c0 * ldkv, ldkv, c1 - c0, d, kt);
        PackValues(pr.v16 + head + c0 * ldkv, ldkv, c1 - c0, d, ldp / 2, vp, slab);
      } else {
        kb.pack_kt(pr.k + head + c0 * ldkv, ldkv, c1 - c0, d, kt);
        PackValues(pr.v + head + c0 * ldkv, ldkv, c1 - c0, d, ldp / 2, vp, slab);
      }

      // Raw scores (the softmax applies the scale), two row tiles at a time,
      // over the K^T panels their rows' keys meet.
      for (int r0 = 0; r0 < rows; r0 += 2 * kAmxRows) {
        const int m0 = std::min(kAmxRows, rows - r0);
        const int m1 = std::clamp(rows - r0 - kAmxRows, 0, kAmxRows);
        const Range h = RowsHull(ws, r0, r0 + m0 + m1, c0, c1);
        if (h.begin >= h.end) continue;
        const int p0 = (h.begin - c0) / kTileCols, p1 = CeilDiv(h.end - c0, kTileCols);
        const uint16_t* a0 = q + static_cast<ptrdiff_t>(r0) * d;
        float* s0 = s + static_cast<ptrdiff_t>(r0) * lds;
        amx.Use(m0, m1);
        // The next row pair's Q rows (contiguous, d apart), into L1 on the way.
        const char* pf = reinterpret_cast<const char*>(q + static_cast<ptrdiff_t>(r0 + 2 * kAmxRows) * d);
        const char* pf_end = reinterpret_cast<const char*>(q + static_cast<ptrdiff_t>(std::min(rows, r0 + 4 * kAmxRows)) * d);
        if (m1 > 0)
          Scores<true>(a0, a0 + kAmxRows * d, d, d, kt, p0, p1, s0, s0 + kAmxRows * lds, lds, pf, pf_end);
        else
          Scores<false>(a0, nullptr, d, d, kt, p0, p1, s0, nullptr, lds, pf, pf_end);
        next_head.Step(kNextLinesPerPair);
      }

      OnlineSoftmax(kn, shape, rows, c0, c1, lds, shape.scale, s, o, d, ws);
      for (int i = 0; i < rows; ++i) {
        const Range rk = Intersect(ws.row_keys[i], c0, c1);
        PRow(s + static_cast<ptrdiff_t>(i) * lds, rk.begin - c0, rk.end - c0, ldp,
             p16 + static_cast<ptrdiff_t>(i) * ldp);
        next_head.Step(kNextLinesPerRow);
      }

      // O (+)= P V over the key steps the rows' keys meet (P is 0 elsewhere
      // and every value of the band is finite). In place (one chunk) the
      // rows are written divided by l (ValuesOut), else accumulated into
      // the cleared, rescaled O.
      for (int r0 = 0; r0 < rows; r0 += 2 * kAmxRows) {
        const int m0 = std::min(kAmxRows, rows - r0);
        const int m1 = std::clamp(rows - r0 - kAmxRows, 0, kAmxRows);
        const Range h = RowsHull(ws, r0, r0 + m0 + m1, c0, c1);
        const int k0 = h.begin < h.end ? (h.begin - c0) / kAmxKeyStep : 0;
        const int k1 = h.begin < h.end ? CeilDiv(h.end - c0, kAmxKeyStep) : 0;
        if (k0 >= k1 && !out.in_place) continue;
        const uint16_t* a0 = p16 + static_cast<ptrdiff_t>(r0) * ldp;
        float* o0 = o + static_cast<ptrdiff_t>(r0) * d;
        amx.Use(m0, m1);
        next_head.Step(kNextLinesPerPair);
        if (out.in_place) {
          ValuesInPlace(a0, m0, m1, ldp, vp, slab, k0, k1, d, o0, stream, &ws.l[r0], rows - r0);
          continue;
        }
        if (m1 > 0)
          Values<true>(a0, a0 + kAmxRows * ldp, ldp, vp, slab, k0, k1, d, o0, o0 + kAmxRows * d, d);
        else
          Values<false>(a0, nullptr, ldp, vp, slab, k0, k1, d, o0, nullptr, d);
      }
    }
  }
  if (stream) _mm_sfence();  // the non-temporal stores ordered before the step's end
  WriteRows(kn, pr, g, row0, rows, ratio, hq, d, o, ws, out.in_place);
}

}  // namespace attn
}  // namespace swa::cpu

#else  // no x86-64: no AMX

namespace swa::cpu {
bool AmxTileDataGranted() { return false; }
void SetAmxStreamingStores(bool) {}
}  // namespace swa::cpu

#endif
