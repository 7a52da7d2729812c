// Cycles per tdpbf16ps of the AMX attention's tile-loop shapes (issue 34),
// operands at the sizes and strides of the real kernels (attention_amx.cc),
// timed with rdtsc (TSC cycles; best of many short windows so that no window
// holds a preemption). 16 TSC cycles per tdpbf16ps is the unit's full rate at
// a core clock equal to the TSC's.
//
//   build/bench/amx_loop_bench [--reps N]
//
// Stand-alone (no library code): the loops are copies of the kernels' shapes
// and of their candidate replacements, to learn what the unit sustains here.
// docs/perf/cpu-attention-2026-12-03-evening-amx.md has a run.
#include <cstdio>
#if defined(__x86_64__)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#define AMX_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,amx-tile,amx-bf16")))

namespace {

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

AMX_TARGET void Config() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;
  }
  // GCC's _tile_loadconfig tells the compiler it reads 8 bytes only: the
  // stores of rows / colsb would be dropped. The whole struct as the operand.
  __asm__ volatile("ldtilecfg %0" : : "m"(cfg));
}

template <typename T>
T* Alloc(size_t n) {
  T* p = static_cast<T*>(std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64));
  for (size_t i = 0; i < n * sizeof(T) / 2; ++i)
    reinterpret_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(0x3f80 + (i * 7) % 64);  // ~1.x
  return p;
}

// Best TSC cycles per tdpbf16ps of fn() (which issues `dps` of them).
double Time(const std::function<void()>& fn, long dps, int reps) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const uint64_t t0 = __rdtsc();
    fn();
    const uint64_t t1 = __rdtsc();
    best = std::min(best, static_cast<double>(t1 - t0) / dps);
  }
  return best;
}

constexpr int D = 512;        // DeepSeek-V4-like head dim
constexpr int kRows = 384;    // the block's query rows
constexpr int kKeys = 144;    // 133 keys rounded to 16 (9 panels)
constexpr int kPanels = kKeys / 16;
constexpr int kLdp = 160;     // P row: keys rounded to 32

// --- Q.K^T as landed: row pair, panel pair, e loop (A rows D apart). ---
AMX_TARGET void ScoresLanded(const uint16_t* q, const uint16_t* kt, float* s, int lds) {
  const size_t sa = 2 * D, ss = 4 * lds;
  const ptrdiff_t panel = 16 * D;
  for (int r0 = 0; r0 < kRows; r0 += 32) {
    const uint16_t* a0 = q + r0 * D;
    const uint16_t* a1 = a0 + 16 * D;
    float* s0 = s + r0 * lds;
    float* s1 = s0 + 16 * lds;
    int p = 0;
    for (; p + 2 <= kPanels; p += 2) {
      const uint16_t* b0 = kt + p * panel;
      const uint16_t* b1 = b0 + panel;
      _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
      for (int e = 0; e < D; e += 32) {
        _tile_loadd(4, a0 + e, sa);
        _tile_loadd(6, b0 + 16 * e, 64);
        _tile_loadd(7, b1 + 16 * e, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_loadd(5, a1 + e, sa);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      _tile_stored(0, s0 + 16 * p, ss); _tile_stored(1, s0 + 16 * (p + 1), ss);
      _tile_stored(2, s1 + 16 * p, ss); _tile_stored(3, s1 + 16 * (p + 1), ss);
    }
    for (; p < kPanels; ++p) {
      const uint16_t* b0 = kt + p * panel;
      _tile_zero(0); _tile_zero(2);
      for (int e = 0; e < D; e += 32) {
        _tile_loadd(4, a0 + e, sa);
        _tile_loadd(6, b0 + 16 * e, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_loadd(5, a1 + e, sa);
        _tile_dpbf16ps(2, 5, 6);
      }
      _tile_stored(0, s0 + 16 * p, ss); _tile_stored(2, s1 + 16 * p, ss);
    }
  }
}

// --- Q.K^T, panel-major: a K^T panel pair (32 KiB) stays in L1 while every
// row pair streams past it (Q from L2). ---
AMX_TARGET void ScoresPanelMajor(const uint16_t* q, const uint16_t* kt, float* s, int lds) {
  const size_t sa = 2 * D, ss = 4 * lds;
  const ptrdiff_t panel = 16 * D;
  for (int p = 0; p < kPanels; p += 2) {
    const bool two = p + 1 < kPanels;
    const uint16_t* b0 = kt + p * panel;
    const uint16_t* b1 = b0 + panel;
    for (int r0 = 0; r0 < kRows; r0 += 32) {
      const uint16_t* a0 = q + r0 * D;
      const uint16_t* a1 = a0 + 16 * D;
      float* s0 = s + r0 * lds;
      float* s1 = s0 + 16 * lds;
      _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
      if (two) {
        for (int e = 0; e < D; e += 32) {
          _tile_loadd(4, a0 + e, sa);
          _tile_loadd(6, b0 + 16 * e, 64);
          _tile_loadd(7, b1 + 16 * e, 64);
          _tile_dpbf16ps(0, 4, 6);
          _tile_dpbf16ps(1, 4, 7);
          _tile_loadd(5, a1 + e, sa);
          _tile_dpbf16ps(2, 5, 6);
          _tile_dpbf16ps(3, 5, 7);
        }
        _tile_stored(0, s0 + 16 * p, ss); _tile_stored(1, s0 + 16 * (p + 1), ss);
        _tile_stored(2, s1 + 16 * p, ss); _tile_stored(3, s1 + 16 * (p + 1), ss);
      } else {
        for (int e = 0; e < D; e += 32) {
          _tile_loadd(4, a0 + e, sa);
          _tile_loadd(6, b0 + 16 * e, 64);
          _tile_dpbf16ps(0, 4, 6);
          _tile_loadd(5, a1 + e, sa);
          _tile_dpbf16ps(2, 5, 6);
        }
        _tile_stored(0, s0 + 16 * p, ss); _tile_stored(2, s1 + 16 * p, ss);
      }
    }
  }
}

// --- Q.K^T in depth slices of kKc: a row pair's Q slice (16 KiB at 256)
// stays in L1 across the panels; partial sums go through the score rows. ---
template <int kKc, int kPf = 0>
AMX_TARGET void ScoresSliced(const uint16_t* q, const uint16_t* kt, float* s, int lds) {
  const size_t sa = 2 * D, ss = 4 * lds;
  const ptrdiff_t panel = 16 * D;
  for (int r0 = 0; r0 < kRows; r0 += 32) {
    const uint16_t* a0 = q + r0 * D;
    const uint16_t* a1 = a0 + 16 * D;
    float* s0 = s + r0 * lds;
    float* s1 = s0 + 16 * lds;
    // The next row pair's Q (32 contiguous KiB), kPf lines per step.
    const char* pf = reinterpret_cast<const char*>(a0 + 32 * D);
    const char* pf_end = r0 + 32 < kRows ? pf + 64 * D : pf;
    for (int e0 = 0; e0 < D; e0 += kKc) {
      int p = 0;
      for (; p + 2 <= kPanels; p += 2) {
        const uint16_t* b0 = kt + p * panel;
        const uint16_t* b1 = b0 + panel;
        if (e0 == 0) {
          _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
        } else {
          _tile_loadd(0, s0 + 16 * p, ss); _tile_loadd(1, s0 + 16 * (p + 1), ss);
          _tile_loadd(2, s1 + 16 * p, ss); _tile_loadd(3, s1 + 16 * (p + 1), ss);
        }
        for (int e = e0; e < e0 + kKc; e += 32) {
          for (int i = 0; i < kPf && pf < pf_end; ++i, pf += 64) _mm_prefetch(pf, _MM_HINT_T0);
          _tile_loadd(4, a0 + e, sa);
          _tile_loadd(6, b0 + 16 * e, 64);
          _tile_loadd(7, b1 + 16 * e, 64);
          _tile_dpbf16ps(0, 4, 6);
          _tile_dpbf16ps(1, 4, 7);
          _tile_loadd(5, a1 + e, sa);
          _tile_dpbf16ps(2, 5, 6);
          _tile_dpbf16ps(3, 5, 7);
        }
        _tile_stored(0, s0 + 16 * p, ss); _tile_stored(1, s0 + 16 * (p + 1), ss);
        _tile_stored(2, s1 + 16 * p, ss); _tile_stored(3, s1 + 16 * (p + 1), ss);
      }
      for (; p < kPanels; ++p) {
        const uint16_t* b0 = kt + p * panel;
        if (e0 == 0) {
          _tile_zero(0); _tile_zero(2);
        } else {
          _tile_loadd(0, s0 + 16 * p, ss); _tile_loadd(2, s1 + 16 * p, ss);
        }
        for (int e = e0; e < e0 + kKc; e += 32) {
          _tile_loadd(4, a0 + e, sa);
          _tile_loadd(6, b0 + 16 * e, 64);
          _tile_dpbf16ps(0, 4, 6);
          _tile_loadd(5, a1 + e, sa);
          _tile_dpbf16ps(2, 5, 6);
        }
        _tile_stored(0, s0 + 16 * p, ss); _tile_stored(2, s1 + 16 * p, ss);
      }
    }
  }
}

// --- Q.K^T, 4 row tiles x 1 panel...: A reloaded; C = 4 tiles per panel.
// Variant: 1 B x 4 A accumulators? 8 tiles: C0..3 (4 row tiles x 1 panel),
// A 4..6 rotating, B 7. Loads per 4 dp: 4 A + 1 B = 5.
AMX_TARGET void ScoresRow4(const uint16_t* q, const uint16_t* kt, float* s, int lds) {
  const size_t sa = 2 * D, ss = 4 * lds;
  const ptrdiff_t panel = 16 * D;
  for (int r0 = 0; r0 < kRows; r0 += 64) {
    const uint16_t* a = q + r0 * D;
    float* s0 = s + r0 * lds;
    for (int p = 0; p < kPanels; ++p) {
      const uint16_t* b = kt + p * panel;
      _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
      for (int e = 0; e < D; e += 32) {
        _tile_loadd(7, b + 16 * e, 64);
        _tile_loadd(4, a + e, sa);
        _tile_dpbf16ps(0, 4, 7);
        _tile_loadd(5, a + 16 * D + e, sa);
        _tile_dpbf16ps(1, 5, 7);
        _tile_loadd(6, a + 32 * D + e, sa);
        _tile_dpbf16ps(2, 6, 7);
        _tile_loadd(4, a + 48 * D + e, sa);
        _tile_dpbf16ps(3, 4, 7);
      }
      _tile_stored(0, s0 + 16 * p, ss); _tile_stored(1, s0 + 16 * lds + 16 * p, ss);
      _tile_stored(2, s0 + 32 * lds + 16 * p, ss); _tile_stored(3, s0 + 48 * lds + 16 * p, ss);
    }
  }
}

// --- Q.K^T, 2x2 over the whole depth with the row pair's Q first packed
// into tile order (each 16 x 32 A tile 1 KiB contiguous: tile loads 64
// bytes apart, no L1 set conflicts of rows 1 KiB apart). kPack: include the
// packing (AVX-512 copies) in the time. ---
template <bool kPack>
AMX_TARGET void ScoresPackedA(const uint16_t* q, const uint16_t* kt, float* s, int lds,
                              uint16_t* qp) {
  const size_t ss = 4 * lds;
  const ptrdiff_t panel = 16 * D;
  for (int r0 = 0; r0 < kRows; r0 += 32) {
    const uint16_t* a = q + r0 * D;
    if (kPack) {
      // qp[e / 32][row 0..31][32 values]
      for (int r = 0; r < 32; ++r)
        for (int e = 0; e < D; e += 32)
          _mm512_store_si512(qp + (e / 32) * 1024 + r * 32, _mm512_loadu_si512(a + r * D + e));
    }
    float* s0 = s + r0 * lds;
    float* s1 = s0 + 16 * lds;
    int p = 0;
    for (; p + 2 <= kPanels; p += 2) {
      const uint16_t* b0 = kt + p * panel;
      const uint16_t* b1 = b0 + panel;
      _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
      for (int e = 0; e < D; e += 32) {
        const uint16_t* at = qp + (e / 32) * 1024;
        _tile_loadd(4, at, 64);
        _tile_loadd(6, b0 + 16 * e, 64);
        _tile_loadd(7, b1 + 16 * e, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_loadd(5, at + 512, 64);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      _tile_stored(0, s0 + 16 * p, ss); _tile_stored(1, s0 + 16 * (p + 1), ss);
      _tile_stored(2, s1 + 16 * p, ss); _tile_stored(3, s1 + 16 * (p + 1), ss);
    }
    for (; p < kPanels; ++p) {
      const uint16_t* b0 = kt + p * panel;
      _tile_zero(0); _tile_zero(2);
      for (int e = 0; e < D; e += 32) {
        const uint16_t* at = qp + (e / 32) * 1024;
        _tile_loadd(4, at, 64);
        _tile_loadd(6, b0 + 16 * e, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_loadd(5, at + 512, 64);
        _tile_dpbf16ps(2, 5, 6);
      }
      _tile_stored(0, s0 + 16 * p, ss); _tile_stored(2, s1 + 16 * p, ss);
    }
  }
}

// --- Q.K^T, 4 row tiles x 1 panel in depth slices of kKc: the 64 rows' Q
// slice (32 KiB at 256) stays in L1, each K^T tile from L2 feeds 4 products
// (the 2x2 step's B tiles feed 2). Partial sums through the score rows. ---
template <int kKc>
AMX_TARGET void ScoresRow4Sliced(const uint16_t* q, const uint16_t* kt, float* s, int lds) {
  const size_t sa = 2 * D, ss = 4 * lds;
  const ptrdiff_t panel = 16 * D;
  for (int r0 = 0; r0 < kRows; r0 += 64) {
    const uint16_t* a = q + r0 * D;
    float* s0 = s + r0 * lds;
    for (int e0 = 0; e0 < D; e0 += kKc) {
      for (int p = 0; p < kPanels; ++p) {
        const uint16_t* b = kt + p * panel;
        if (e0 == 0) {
          _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
        } else {
          _tile_loadd(0, s0 + 16 * p, ss); _tile_loadd(1, s0 + 16 * lds + 16 * p, ss);
          _tile_loadd(2, s0 + 32 * lds + 16 * p, ss); _tile_loadd(3, s0 + 48 * lds + 16 * p, ss);
        }
        for (int e = e0; e < e0 + kKc; e += 32) {
          _tile_loadd(7, b + 16 * e, 64);
          _tile_loadd(4, a + e, sa);
          _tile_dpbf16ps(0, 4, 7);
          _tile_loadd(5, a + 16 * D + e, sa);
          _tile_dpbf16ps(1, 5, 7);
          _tile_loadd(6, a + 32 * D + e, sa);
          _tile_dpbf16ps(2, 6, 7);
          _tile_loadd(4, a + 48 * D + e, sa);
          _tile_dpbf16ps(3, 4, 7);
        }
        _tile_stored(0, s0 + 16 * p, ss); _tile_stored(1, s0 + 16 * lds + 16 * p, ss);
        _tile_stored(2, s0 + 32 * lds + 16 * p, ss); _tile_stored(3, s0 + 48 * lds + 16 * p, ss);
      }
    }
  }
}

// --- P.V as landed: row pair, column pair, key steps; C stored to O rows
// D floats apart. ---
template <bool kContigO>
AMX_TARGET void ValuesLanded(const uint16_t* p16, const uint16_t* vp, float* o) {
  const size_t sa = 2 * kLdp;
  const ptrdiff_t slab = kLdp * 16;
  const int steps = kLdp / 32;
  const size_t so = kContigO ? 64 : 4 * D;
  for (int r0 = 0; r0 < kRows; r0 += 32) {
    const uint16_t* a0 = p16 + r0 * kLdp;
    const uint16_t* a1 = a0 + 16 * kLdp;
    float* o0 = o + r0 * D;
    float* o1 = o0 + 16 * D;
    for (int j = 0; j < D; j += 32) {
      _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
      const uint16_t* b0 = vp + (j / 16) * slab;
      const uint16_t* b1 = b0 + slab;
      for (int ks = 0; ks < steps; ++ks) {
        _tile_loadd(4, a0 + 32 * ks, sa);
        _tile_loadd(6, b0 + 512 * ks, 64);
        _tile_loadd(7, b1 + 512 * ks, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_loadd(5, a1 + 32 * ks, sa);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      if (kContigO) {  // 16 x 16 blocks, 1 KiB each, in a scratch that stays in L1
        _tile_stored(0, o, so); _tile_stored(1, o + 256, so);
        _tile_stored(2, o + 512, so); _tile_stored(3, o + 768, so);
      } else {
        _tile_stored(0, o0 + j, so); _tile_stored(1, o0 + j + 16, so);
        _tile_stored(2, o1 + j, so); _tile_stored(3, o1 + j + 16, so);
      }
    }
  }
}

// --- P.V, C stored to an L1 scratch, then each row scaled by its 1 / l
// (the normalisation) and written to O rows D apart with AVX-512 stores
// (kStream: non-temporal). ---
template <bool kStream>
AMX_TARGET void ValuesScratch(const uint16_t* p16, const uint16_t* vp, float* o, const float* inv) {
  const size_t sa = 2 * kLdp;
  const ptrdiff_t slab = kLdp * 16;
  const int steps = kLdp / 32;
  alignas(64) float c[4][256];
  for (int r0 = 0; r0 < kRows; r0 += 32) {
    const uint16_t* a0 = p16 + r0 * kLdp;
    const uint16_t* a1 = a0 + 16 * kLdp;
    for (int j = 0; j < D; j += 32) {
      _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
      const uint16_t* b0 = vp + (j / 16) * slab;
      const uint16_t* b1 = b0 + slab;
      for (int ks = 0; ks < steps; ++ks) {
        _tile_loadd(4, a0 + 32 * ks, sa);
        _tile_loadd(6, b0 + 512 * ks, 64);
        _tile_loadd(7, b1 + 512 * ks, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_loadd(5, a1 + 32 * ks, sa);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      _tile_stored(0, c[0], 64); _tile_stored(1, c[1], 64);
      _tile_stored(2, c[2], 64); _tile_stored(3, c[3], 64);
      for (int h = 0; h < 2; ++h)
        for (int r = 0; r < 16; ++r) {
          const __m512 sc = _mm512_set1_ps(inv[r0 + 16 * h + r]);
          float* dst = o + (r0 + 16 * h + r) * D + j;
          const __m512 x0 = _mm512_mul_ps(_mm512_load_ps(c[2 * h] + 16 * r), sc);
          const __m512 x1 = _mm512_mul_ps(_mm512_load_ps(c[2 * h + 1] + 16 * r), sc);
          if (kStream) {
            _mm512_stream_ps(dst, x0);
            _mm512_stream_ps(dst + 16, x1);
          } else {
            _mm512_storeu_ps(dst, x0);
            _mm512_storeu_ps(dst + 16, x1);
          }
        }
    }
  }
}

// --- P.V, no stores at all (the loads and dps only). ---
AMX_TARGET void ValuesNoStore(const uint16_t* p16, const uint16_t* vp) {
  const size_t sa = 2 * kLdp;
  const ptrdiff_t slab = kLdp * 16;
  const int steps = kLdp / 32;
  for (int r0 = 0; r0 < kRows; r0 += 32) {
    const uint16_t* a0 = p16 + r0 * kLdp;
    const uint16_t* a1 = a0 + 16 * kLdp;
    for (int j = 0; j < D; j += 32) {
      const uint16_t* b0 = vp + (j / 16) * slab;
      const uint16_t* b1 = b0 + slab;
      for (int ks = 0; ks < steps; ++ks) {
        _tile_loadd(4, a0 + 32 * ks, sa);
        _tile_loadd(6, b0 + 512 * ks, 64);
        _tile_loadd(7, b1 + 512 * ks, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_loadd(5, a1 + 32 * ks, sa);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
    }
  }
}

// 2x2 step from fixed L1 operands, n steps.
AMX_TARGET void L1Loop(const uint16_t* a, const uint16_t* b, int n) {
  _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
  for (int i = 0; i < n; ++i) {
    _tile_loadd(4, a, 64);
    _tile_loadd(6, b, 64);
    _tile_loadd(7, b + 512, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_loadd(5, a + 512, 64);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
}

// The same with the step's four loads issued before its four products.
AMX_TARGET void L1LoopLoadsFirst(const uint16_t* a, const uint16_t* b, int n) {
  _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
  for (int i = 0; i < n; ++i) {
    _tile_loadd(4, a, 64);
    _tile_loadd(5, a + 512, 64);
    _tile_loadd(6, b, 64);
    _tile_loadd(7, b + 512, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
}

AMX_TARGET void NoLoads(int n) {
  _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
  for (int i = 0; i < n; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
}

AMX_TARGET void Release() { _tile_release(); }

}  // namespace

int main(int argc, char** argv) {
  if (!__builtin_cpu_supports("amx-tile") || !__builtin_cpu_supports("amx-bf16")) {
    std::printf("no AMX-BF16 on this CPU: skipped\n");
    return 0;
  }
  int reps = 200;
  for (int a = 1; a + 1 < argc; ++a)
    if (std::string(argv[a]) == "--reps") reps = std::atoi(argv[++a]);
  if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) {
    std::printf("no AMX tile data permission: skipped\n");
    return 0;
  }
  Config();
  // 16 sequences' Q and O, used in turn by the "cold" rows: as in a decode
  // step, each block's Q and O come from L3 (6 MiB + 12 MiB), not L2.
  constexpr int kSeqs = 16;
  uint16_t* qs = Alloc<uint16_t>(static_cast<size_t>(kSeqs) * kRows * D);
  float* os = Alloc<float>(static_cast<size_t>(kSeqs) * kRows * D);
  int seq = 0;
  auto next_q = [&] { seq = (seq + 1) % kSeqs; return qs + static_cast<size_t>(seq) * kRows * D; };
  auto next_o = [&] { seq = (seq + 1) % kSeqs; return os + static_cast<size_t>(seq) * kRows * D; };
  uint16_t* q = Alloc<uint16_t>(kRows * D);
  uint16_t* kt = Alloc<uint16_t>(kKeys * D);
  float* s = Alloc<float>(kRows * kKeys);
  uint16_t* p16 = Alloc<uint16_t>(kRows * kLdp);
  uint16_t* vp = Alloc<uint16_t>(kLdp * D);
  float* o = Alloc<float>(kRows * D);
  uint16_t* l1 = Alloc<uint16_t>(2048);
  uint16_t* qp = Alloc<uint16_t>(32 * D);
  float* inv = Alloc<float>(kRows);
  for (int i = 0; i < kRows; ++i) inv[i] = 1.0f / (1.0f + i);

  const long qk_dps = static_cast<long>(kRows / 16) * kPanels * (D / 32);
  const long pv_dps = static_cast<long>(kRows / 16) * (D / 16) * (kLdp / 32);
  struct Row {
    const char* name;
    std::function<void()> fn;
    long dps;
  };
  std::vector<Row> rows = {
      {"no loads, 4 accumulators (probe)", [] { NoLoads(256); }, 1024},
      {"2x2 step, 4 tile loads from L1", [&] { L1Loop(l1, l1 + 1024, 256); }, 1024},
      {"2x2 step, L1, the 4 loads first", [&] { L1LoopLoadsFirst(l1, l1 + 1024, 256); }, 1024},
      {"Q.K^T landed (row pair, panel pair)", [&] { ScoresLanded(q, kt, s, kKeys); }, qk_dps},
      {"Q.K^T panel-major (K^T pair in L1)", [&] { ScoresPanelMajor(q, kt, s, kKeys); }, qk_dps},
      {"Q.K^T 256-deep slices", [&] { ScoresSliced<256>(q, kt, s, kKeys); }, qk_dps},
      {"Q.K^T 128-deep slices", [&] { ScoresSliced<128>(q, kt, s, kKeys); }, qk_dps},
      {"Q.K^T 256-deep slices, Q cold", [&] { ScoresSliced<256>(next_q(), kt, s, kKeys); }, qk_dps},
      {"Q.K^T 256 slices, Q cold, prefetch 8/step", [&] { ScoresSliced<256, 8>(next_q(), kt, s, kKeys); }, qk_dps},
      {"Q.K^T 256 slices, Q cold, prefetch 16/step", [&] { ScoresSliced<256, 16>(next_q(), kt, s, kKeys); }, qk_dps},
      {"Q.K^T 2x2, A packed (not timed)", [&] { ScoresPackedA<false>(q, kt, s, kKeys, qp); }, qk_dps},
      {"Q.K^T 2x2, A packed (timed)", [&] { ScoresPackedA<true>(q, kt, s, kKeys, qp); }, qk_dps},
      {"Q.K^T 2x2, A packed (timed), Q cold", [&] { ScoresPackedA<true>(next_q(), kt, s, kKeys, qp); }, qk_dps},
      {"Q.K^T 4x1, 256-deep slices", [&] { ScoresRow4Sliced<256>(q, kt, s, kKeys); }, qk_dps},
      {"Q.K^T 4x1, 128-deep slices", [&] { ScoresRow4Sliced<128>(q, kt, s, kKeys); }, qk_dps},
      {"Q.K^T 4x1, 128-deep slices, Q cold", [&] { ScoresRow4Sliced<128>(next_q(), kt, s, kKeys); }, qk_dps},
      {"Q.K^T 4 row tiles x 1 panel", [&] { ScoresRow4(q, kt, s, kKeys); }, qk_dps},
      {"Q.K^T landed, Q cold (L3)", [&] { ScoresLanded(next_q(), kt, s, kKeys); }, qk_dps},
      {"Q.K^T panel-major, Q cold (L3)", [&] { ScoresPanelMajor(next_q(), kt, s, kKeys); }, qk_dps},
      {"P.V landed (O rows D apart)", [&] { ValuesLanded<false>(p16, vp, o); }, pv_dps},
      {"P.V landed, O cold (L3)", [&] { ValuesLanded<false>(p16, vp, next_o()); }, pv_dps},
      {"P.V, scratch + scaled AVX-512 rows, O cold", [&] { ValuesScratch<false>(p16, vp, next_o(), inv); }, pv_dps},
      {"P.V, scratch + scaled NT rows, O cold", [&] { ValuesScratch<true>(p16, vp, next_o(), inv); }, pv_dps},
      {"P.V, scratch + scaled AVX-512 rows, O in L2", [&] { ValuesScratch<false>(p16, vp, o, inv); }, pv_dps},
      {"P.V, C stored to an L1 scratch", [&] { ValuesLanded<true>(p16, vp, o); }, pv_dps},
      {"P.V, no C stores", [&] { ValuesNoStore(p16, vp); }, pv_dps},
  };
  // Interleaved: each repetition times every row once, so that each row's
  // best window comes from the same stretches of the machine (a busy
  // sibling vCPU halves the tile unit's rate on this VM).
  std::vector<std::vector<double>> t(rows.size());
  for (const Row& r : rows) r.fn();
  for (int rep = 0; rep < reps; ++rep)
    for (size_t i = 0; i < rows.size(); ++i) t[i].push_back(Time(rows[i].fn, rows[i].dps, 1));
  std::printf("TSC cycles per tdpbf16ps over %d interleaved windows (16 = full rate at the TSC clock)\n", reps);
  std::printf("  %-44s %6s %6s\n", "", "best", "median");
  for (size_t i = 0; i < rows.size(); ++i) {
    std::sort(t[i].begin(), t[i].end());
    std::printf("  %-44s %6.1f %6.1f\n", rows[i].name, t[i][0], t[i][t[i].size() / 2]);
  }
  Release();
  return 0;
}
#else
int main() {
  std::printf("not x86-64: skipped\n");
  return 0;
}
#endif
