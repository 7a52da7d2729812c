// The CPU attention core: sliding-window attention (docs/semantics.md, "Attention") over FP32
// tiles of keys/values, for many sequences at once. The caller (swa_step on the
// CPU backend) dequantises each sequence's visible KV rows into a tile and
// describes, per query token, which rows of that tile it sees.
//
// Design, measured numbers and the benchmark command: docs/cpu_attention.md.
#pragma once

#include <cstdint>

#include "backend/cpu/thread_pool.h"

namespace swa::cpu {

// Head dims the attention core handles: multiples of 32 up to this (the
// packed panels and score blocks are sized for it).
inline constexpr int kMaxHeadDim = 1024;
inline constexpr bool HeadDimSupported(int d) { return d >= 32 && d <= kMaxHeadDim && d % 32 == 0; }

struct AttentionShape {
  int q_heads;         // Hq
  int kv_heads;        // Hkv; query head h uses KV head h / (Hq / Hkv)
  int head_dim;        // D: HeadDimSupported(D)
  float scale;         // softmax scale (already resolved; never 0 here)
  const float* sinks;  // [Hq] unscaled sink logits, or nullptr
  float softcap = 0;   // > 0: scores become softcap * tanh(score / softcap)
};

// K and V of a problem as MXFP8 rows, read in place of FP32 tiles: row r of
// the tile is rows[r] (nullptr: a row of zeros); KV head g's key vector is at
// rows[r] + k_offset + g * vec_bytes, its value vector at rows[r] + v_offset +
// g * vec_bytes (codec layout: D codes, then D / 32 scale bytes). The FP32
// kernels decode them 16 rows at a time straight into their K^T panels and V
// slabs (no FP32 tile). Values are exactly those of codec::DecodeRows.
// With `bf16` the vectors are D BF16 values (a BF16 ring) instead: the FP32
// kernels (RunBlock) widen them into the same panels, and the AMX-BF16 driver
// packs them into its tiles for problems with q_bf16 (q may then be nullptr).
struct MxfpRows {
  const uint8_t* const* rows = nullptr;  // [n_keys]
  size_t k_offset = 0;
  size_t v_offset = 0;  // equal to k_offset for shared K/V
  size_t vec_bytes = 0;
  bool bf16 = false;
};

// One sequence's problem. Keys are a tile of consecutive positions; token t
// sees rows [key_begin[t], key_end[t]) of the tile (non-empty for every token;
// an empty range yields a zero output row, docs/semantics.md "Attention"). Rows of the tile
// that no token sees are never read into an output, so they may hold anything
// (NaN included).
struct SeqProblem {
  int n_tokens;
  const float* q;  // [n_tokens, Hq, D] contiguous
  int n_keys;
  const float* k;            // [n_keys, Hkv, D] contiguous (nullptr with mx)
  const float* v;            // [n_keys, Hkv, D]; may equal k (shared K/V)
  const int32_t* key_begin;  // [n_tokens]
  const int32_t* key_end;    // [n_tokens]
  float* out;                // [n_tokens, Hq, D]; must not overlap the inputs
  float* lse = nullptr;      // [n_tokens, Hq]: ln of each row's denominator, or nullptr
  // The same queries as BF16 bit patterns ([n_tokens, Hq, D]), or nullptr.
  // When set (q is then exactly these values) and k / v hold values exact in
  // BF16 (an MXFP8 or BF16 ring), the BF16 kernels may run: products exact,
  // FP32 sums, P rounded to BF16 for P.V (docs/cpu_attention.md, "Paths").
  const uint16_t* q_bf16 = nullptr;
  // K and V tiles as BF16 ([n_keys, Hkv, D] each, may be equal) in place of
  // k and v (then nullptr): only for problems with q_bf16 and only when
  // Bf16AttentionSelected() (the BF16 kernels read them; q may be nullptr).
  const uint16_t* k16 = nullptr;
  const uint16_t* v16 = nullptr;
  // K and V as MXFP8 rows in place of k and v (then nullptr): the FP32
  // kernels, and the AMX-BF16 driver for problems with q_bf16 (q must be set
  // too: a value vector with a NaN code or scale sends the problem's KV head
  // to the FP32 kernels). The AVX512-BF16 driver never reads them. swa_step
  // hands BF16-query problems on an MXFP8 ring BF16 tiles instead (faster in
  // a first A/B run under load; docs/cpu_attention.md), on a BF16 ring the
  // rows (mx.bf16) when the AMX driver runs.
  MxfpRows mx;
};

// Computes o = sum_j exp(z_j - m) v_j / (sum_j exp(z_j - m) + exp(S_h - m)),
// z_j = scale * q.k_j, m = max(max_j z_j, S_h) (no sink term when sinks ==
// nullptr), with FP32 accumulation. Thread-safe for distinct problems; `pool`
// may be nullptr (runs on the calling thread). Allocates nothing once the
// calling and pool threads have seen a problem of this size (each thread keeps
// a workspace that only grows).
void Attend(const AttentionShape& shape, const SeqProblem* problems, int n_problems,
            ThreadPool* pool);

// Which micro-kernels run. kAuto picks the best the CPU has (AMX-BF16, else
// AVX512-BF16, for problems with q_bf16; else AVX-512, then AVX2/FMA, then
// portable), or what SWACACHE_ATTENTION forces ("portable", "avx2", "avx512",
// "bf16", "amx"; read once; a set the CPU lacks falls back to the next one
// down). kBf16 and kAmx run the FP32 AVX-512 kernels for problems without
// q_bf16 (and for MXFP8 rows read in place).
enum class AttentionIsa { kAuto, kPortable, kAvx2, kAvx512, kBf16, kAmx };

// True when the AVX2/FMA kernels are compiled in and the CPU supports them.
bool Avx2KernelsAvailable();
// True when the AVX-512 F kernels are compiled in and the CPU supports them.
bool Avx512KernelsAvailable();
// True when the AVX512-BF16 kernels are compiled in and the CPU supports them.
bool Bf16KernelsAvailable();
// True when the CPU has AMX-BF16 (amx_bf16, amx_tile), the OS enables the
// tile state in XCR0 and Linux granted this process XTILEDATA
// (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), asked once, thread-safe;
// a refusal leaves every other path as it was).
bool AmxTileDataGranted();
// True when the AMX-BF16 driver is compiled in, Bf16KernelsAvailable() (it
// packs with their kernels and falls back to them) and AmxTileDataGranted().
bool AmxKernelsAvailable();
// True when Attend (kAuto) runs the AMX-BF16 driver for problems with
// q_bf16 (and no MXFP8 rows): SWACACHE_ATTENTION unset or "amx", and
// AmxKernelsAvailable().
bool AmxAttentionSelected();
// True when Attend (kAuto) runs the BF16 kernels (AVX512-BF16 or AMX) for problems with q_bf16:
// SWACACHE_ATTENTION does not force an FP32 set and Bf16KernelsAvailable().
bool Bf16AttentionSelected();
// The ISA SWACACHE_ATTENTION forces (kAuto when unset or unknown).
AttentionIsa ForcedAttentionIsa();
// The name of the kernel set kAuto runs for FP32 queries ("avx512",
// "avx2_fma", "portable").
const char* AttentionKernelName();
// The name of the path kAuto runs for BF16 queries on an MXFP8 or BF16 ring
// without RoPE ("amx_bf16", "avx512_bf16", or AttentionKernelName()).
const char* Bf16AttentionPathName();

// Attend with a chosen kernel set (tests compare the paths). A set the CPU
// lacks falls back to the next one down.
void AttendWithIsa(AttentionIsa isa, const AttentionShape& shape, const SeqProblem* problems,
                   int n_problems, ThreadPool* pool);

}  // namespace swa::cpu
