// The inner kernels of the CPU attention core, one table per instruction set.
// The drivers (attention.cc, attention_fp32.cc, attention_block.h) own the
// blocking, masking and online softmax; these own the arithmetic. Every set
// computes the same functions (results agree to rounding).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace swa::cpu {

// Register-tile shape shared by every kernel set: up to kTileRows query rows by
// kTileCols columns; the driver packs K^T in panels of kTileCols keys.
inline constexpr int kTileRows = 6;
inline constexpr int kTileCols = 16;

struct AttentionKernels {
  const char* name;

  // C[m][16] = (accumulate ? C : 0) + A[m][k] * B[k][16], 1 <= m <= 6, where A row i is at
  // a + i * lda (k contiguous floats) and B row kk is at b + kk * ldb (16
  // contiguous floats). C row i is at c + i * ldc. Used for both GEMMs of
  // attention: scores (A = scaled Q, B = a packed K^T panel) and values
  // (A = probabilities, B = 16 columns of V read in place).
  void (*gemm)(int m, int k, const float* a, ptrdiff_t lda, const float* b, ptrdiff_t ldb,
               float* c, ptrdiff_t ldc, bool accumulate);

  // max(x[0..n)); n >= 1.
  float (*row_max)(const float* x, int n);

  // x[i] = exp(scale * x[i] - m) in place; returns the sum of the new values.
  // Requires scale * x[i] <= m up to rounding (inputs above m are clamped,
  // never overflow). The scale lets raw Q.K scores skip a scaling pass.
  float (*exp_sum)(float* x, int n, float scale, float m);

  // dst[i] = src[i] * s for i < n.
  void (*scale_row)(float* dst, const float* src, int n, float s);

  // Packs keys [0, n_keys) (row r at k + r * ldk, d contiguous) transposed
  // into kTileCols-key panels: dst[p][d][c] = key p*16+c, element d. Keys past
  // n_keys in the last panel are zero. dst holds ceil(n_keys/16)*16*d floats.
  void (*pack_kt)(const float* k, ptrdiff_t ldk, int n_keys, int d, float* dst);

  // gemm over 8 columns (B row kk: 8 floats at b + kk * ldb; C row i: 8 floats
  // at c + i * ldc), or nullptr. Where a 256-bit FMA costs half a 512-bit one
  // (double-pumped AVX-512), the score GEMM runs a K^T panel that meets a
  // register tile's keys in only one half on that half alone.
  void (*gemm_half)(int m, int k, const float* a, ptrdiff_t lda, const float* b, ptrdiff_t ldb,
                    float* c, ptrdiff_t ldc, bool accumulate);

  // The value GEMM over whole output rows, or nullptr (the driver then calls
  // gemm per 16 columns and scale_row after): C[m][cols] = ((accumulate ? C :
  // 0) + A[m][k] * B) * (row_scale ? row_scale[i] : 1), cols a multiple of 16,
  // B in 16-column slabs of k rows (slab j, columns 16j .. 16j + 15, row kk at
  // b + j * slab + 16 * kk). The scale multiplies the FP32 sum as scale_row
  // would after (same bits).
  void (*gemm_pv)(int m, int k, const float* a, ptrdiff_t lda, const float* b, ptrdiff_t slab,
                  int cols, float* c, ptrdiff_t ldc, bool accumulate, const float* row_scale);

  // gemm over two 16-column B panels at once, or nullptr: C row i = 32
  // floats at c + i * ldc, columns [0, 16) from b0, [16, 32) from b1 (rows
  // ldb apart in each). Where a core has two full-width 512-bit FMA ports,
  // one broadcast of A then feeds two FMAs (the score GEMM over two
  // adjacent K^T panels that a register tile's keys both meet).
  void (*gemm2)(int m, int k, const float* a, ptrdiff_t lda, const float* b0, const float* b1,
                ptrdiff_t ldb, float* c, ptrdiff_t ldc, bool accumulate);

  // pack_kt from BF16 vectors read in place, widened to FP32 on the way (no
  // FP32 copy of the rows), or nullptr: key r's d values at rows[r] + offset
  // (bytes; rows[r] nullptr: a key of zeros), r < n_keys. Same dst as pack_kt.
  void (*pack_kt_bf16)(const uint8_t* const* rows, size_t offset, int n_keys, int d, float* dst);

  // The V slabs of keys [0, n_keys) from BF16 vectors as for pack_kt_bf16,
  // widened, or nullptr (with pack_kt_bf16): key r's columns [j, j + 16) at
  // dst + (j / 16) * slab + r * 16.
  void (*slabs_bf16)(const uint8_t* const* rows, size_t offset, int n_keys, int d, float* dst,
                     ptrdiff_t slab);
};

// Calls fn(std::integral_constant<int, M>{}) for M = clamp(m, 1, kTileRows):
// each kernel set's gemm instantiates its register tile for every row count.
template <typename Fn>
inline void ForTileRows(int m, Fn&& fn) {
  static_assert(kTileRows == 6, "one case per tile row count");
  switch (m) {
    case 1: return fn(std::integral_constant<int, 1>{});
    case 2: return fn(std::integral_constant<int, 2>{});
    case 3: return fn(std::integral_constant<int, 3>{});
    case 4: return fn(std::integral_constant<int, 4>{});
    case 5: return fn(std::integral_constant<int, 5>{});
    default: return fn(std::integral_constant<int, 6>{});
  }
}

// BF16 values in one 16-column slab of pack_v's layout.
inline constexpr ptrdiff_t PairSlabStride(int n_keys) { return ptrdiff_t{32} * ((n_keys + 1) / 2); }

// The BF16 kernels (vdpbf16ps). BF16 arrays are uint16_t bit patterns; both
// GEMMs take their depth in pairs of BF16 values.
struct Bf16AttentionKernels {
  const char* name;

  // Packs keys [0, n_keys) (FP32 rows at k + r * ldk whose values are exact in
  // BF16) into kTileCols-key panels of depth pairs: dst[p][e / 2][c][e % 2] =
  // key p*16+c, element e. Keys past n_keys in the last panel are zero. dst
  // holds ceil(n_keys/16)*16*d values; d is a multiple of 32.
  void (*pack_kt)(const float* k, ptrdiff_t ldk, int n_keys, int d, uint16_t* dst);

  // Packs rows [0, n_keys) of V (exact in BF16) as key pairs in 16-column
  // slabs: dst[e / 16][q][e % 16][r] = key 2q+r, element e (key n_keys, when
  // odd, is zero). A slab is PairSlabStride(n_keys) values; a pair 32.
  void (*pack_v)(const float* v, ptrdiff_t ldv, int n_keys, int d, uint16_t* dst);

  // pack_kt and pack_v from BF16 rows (no conversion).
  void (*pack_kt16)(const uint16_t* k, ptrdiff_t ldk, int n_keys, int d, uint16_t* dst);
  void (*pack_v16)(const uint16_t* v, ptrdiff_t ldv, int n_keys, int d, uint16_t* dst);

  // C[m][16] = (accumulate ? C : 0) + alpha * A[m][2*kpairs] . B, 1 <= m <= 6;
  // A row i at a + i * lda (BF16, contiguous), B a pack_kt panel at depth pair
  // 0 (32 values per pair). Products exact, sums in FP32.
  void (*gemm_qk)(int m, int kpairs, const uint16_t* a, ptrdiff_t lda, const uint16_t* b,
                  float alpha, float* c, ptrdiff_t ldc, bool accumulate);

  // C[m][cols] = ((accumulate ? C : 0) + sum over keys [k0, k1) of P[i][key] *
  // V[key][0..cols)) * (row_scale ? row_scale[i] : 1), 1 <= m <= 6, cols a
  // multiple of 16; P row i at p + i * ldp (BF16, indexed by key), V in pack_v
  // slabs (slab j, columns 16j .. 16j + 15, at vp + j * slab; pair q of a slab
  // 32 values after pair q - 1). The scale multiplies the FP32 sum as a
  // separate pass would (same bits). Keys outside [k0, k1) are never read,
  // not even the partner of an edge key.
  void (*gemm_pv)(int m, int k0, int k1, const uint16_t* p, ptrdiff_t ldp, const uint16_t* vp,
                  ptrdiff_t slab, int cols, float* c, ptrdiff_t ldc, bool accumulate,
                  const float* row_scale);

  // dst[i] = src[i] rounded to BF16 (nearest even), i < n.
  void (*to_bf16)(const float* src, int n, uint16_t* dst);

  // C[m][n] = alpha * A[m][2*kpairs] . K[n][2*kpairs], 1 <= m <= 6, n >= 1,
  // kpairs a multiple of 16: the scores of a few keys straight from their rows
  // (key j at k + j * ldk, FP32 values exact in BF16, or BF16), for a K^T
  // panel that meets a register tile's keys in only a few of its 16 columns
  // (a full panel costs the same for 1 key as for 16). A as for gemm_qk; C row
  // i at c + i * ldc, columns [0, n) written. Products exact, sums in FP32 (in
  // another order than gemm_qk's).
  void (*gemm_qk_rows)(int m, int n, int kpairs, const uint16_t* a, ptrdiff_t lda, const float* k,
                       ptrdiff_t ldk, float alpha, float* c, ptrdiff_t ldc);
  void (*gemm_qk_rows16)(int m, int n, int kpairs, const uint16_t* a, ptrdiff_t lda,
                         const uint16_t* k, ptrdiff_t ldk, float alpha, float* c, ptrdiff_t ldc);
};

const AttentionKernels& PortableAttentionKernels();

// nullptr when the build has no AVX2 path (non-x86); does not check the CPU.
const AttentionKernels* Avx2AttentionKernels();
// The AVX-512 F set (its K^T packing is the AVX2 one's); nullptr when the
// build has no x86-64 path; does not check the CPU.
const AttentionKernels* Avx512AttentionKernels();
// The AVX-512 F set with Mx32 register tiles (gemm2, a two-slab gemm_pv) for
// cores with two full-width 512-bit FMA ports; nullptr as above.
const AttentionKernels* Avx512WideAttentionKernels();
// The AVX512-BF16 set; nullptr when the build has no x86-64 path; does not
// check the CPU.
const Bf16AttentionKernels* Avx512Bf16AttentionKernels();

}  // namespace swa::cpu
