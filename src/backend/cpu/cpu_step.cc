#include "backend/cpu/cpu_step.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "backend/cpu/attention.h"
#include "backend/cpu/rope_cpu.h"
#include "backend/cpu/thread_pool.h"
#include "codec/codec.h"

namespace swa::cpu {
namespace {

// Sequences whose tiles are built and attended together; bounds scratch memory.
constexpr size_t kMaxBatchTileFloats = size_t{8} << 20;  // 32 MiB of FP32
// A sequence whose K/V tile is at most this big is decoded and attended by one
// thread straight away, so the tile is still in that core's L2 when the
// attention core reads it (docs/step.md, "Fused tiles").
constexpr size_t kFusedTileFloats = size_t{256} << 10;  // 1 MiB of FP32
// Fused tiles only when every thread gets at least this many sequences;
// fewer are spread over KV heads and row blocks by the batch path instead.
constexpr size_t kFusedSeqsPerThread = 4;

// The calling thread's tile for fused sequences; only grows.
thread_local std::vector<float> tls_fused_tile;
// The calling thread's MXFP8 row pointers for a fused sequence.
thread_local std::vector<const uint8_t*> tls_rows;
// The calling thread's rotated key vectors and cos/sin of one position.
thread_local std::vector<float> tls_rope_vec;
thread_local std::vector<float> tls_rope_angles;

class StepRunner {
 public:
  StepRunner(const StepWork& w, const CpuPreparedPlan& prep, ThreadPool* pool, StepScratch& s)
      : w_(w), l_(w.layer), p_(w.plan), t_(*w.tensors), rope_(*w.layer.rope), prep_(prep),
        pool_(pool), s_(s),
        d_(l_.head_dim), hkv_(l_.kv_heads), token_floats_(size_t(l_.kv_heads) * l_.head_dim) {}

  absl::Status Run(StepResult* result) {
    if (p_.n_tokens == 0) return absl::OkStatus();
    EncodeNewTokens();
    PrepareQueries();
    ChooseFused();
    if (!s_.fused_list.empty()) AttendFused();
    for (uint32_t first = 0; first < p_.n_seqs;) {
      const uint32_t end = NextBatchEnd(first);
      AttendBatch(first, end);
      first = end;
    }
    StoreNewTokens();
    DerotateOutputs();
    FinishOutputs();
    result->nonfinite_blocks += nonfinite_.load();
    return absl::OkStatus();
  }

 private:
  template <typename Fn>
  void ParallelFor(size_t n, Fn&& fn) {
    if (pool_ == nullptr || n <= 1) {
      fn(size_t{0}, n);
      return;
    }
    pool_->ParallelFor(n, [&](size_t b, size_t e) { fn(b, e); });
  }

  // New K (then V) vectors of every token, encoded once in the layer's format.
  // New K (then V) vectors of every token, encoded once in the layer's format.
  // With RoPE the keys are rotated by their positions first (FP32).
  void EncodeNewTokens() {
    const size_t bpt = l_.ring.bytes_per_token;
    s_.staged.resize(size_t(p_.n_tokens) * bpt);
    const size_t elem = t_.kv_dtype == Dtype::kFp32 ? 4 : 2;
    ParallelFor(size_t(p_.n_tokens), [&](size_t b, size_t e) {
      uint64_t bad = 0;
      std::vector<float>& rotated = tls_rope_vec;
      for (size_t t = b; t < e; ++t) {
        uint8_t* dst = s_.staged.data() + t * bpt;
        const size_t src_off = t * token_floats_ * elem;
        codec::ConstVectors k{static_cast<const uint8_t*>(t_.k_new) + src_off, t_.kv_dtype,
                              size_t(d_)};
        if (rope_.on()) {
          rotated.resize(token_floats_);
          ToF32(k.data, t_.kv_dtype, hkv_, rotated.data());
          RotateHeads(rotated.data(), hkv_, RopePosition(t), rope_.attention_factor, 1.0f);
          k = {rotated.data(), Dtype::kFp32, size_t(d_)};
        }
        bad += codec::EncodeRows(l_.format, l_.scale_mode, d_, hkv_, k,
                                 {.base = dst, .stride = l_.vec_bytes});
        if (!l_.shared_kv)
          bad += codec::EncodeRows(
              l_.format, l_.scale_mode, d_, hkv_,
              {static_cast<const uint8_t*>(t_.v_new) + src_off, t_.kv_dtype, size_t(d_)},
              {.base = dst + size_t(hkv_) * l_.vec_bytes, .stride = l_.vec_bytes});
      }
      nonfinite_ += bad;
    });
  }

  // `n` vectors of D values in `dtype` -> FP32.
  void ToF32(const void* src, Dtype dtype, size_t n, float* dst) const {
    if (dtype == Dtype::kFp32) {
      std::memcpy(dst, src, n * d_ * sizeof(float));
      return;
    }
    codec::DecodeRows(Format::kBf16, d_, n,
                      {.base = static_cast<const uint8_t*>(src), .stride = size_t(2) * d_},
                      {dst, Dtype::kFp32, size_t(d_)});
  }

  // The RoPE position of step token t: the caller's (swa_step_args_t::
  // positions) when given, else its cache position.
  int32_t RopePosition(size_t t) const {
    return t_.positions != nullptr ? t_.positions[t] : prep_.positions[t];
  }

  // Rotates the rotary dims of `heads` consecutive head vectors by `pos`
  // (sign -1: back), cos and sin scaled by `factor`: the one host rotation
  // (rope_cpu.h), which swa_rope_apply shares.
  void RotateHeads(float* v, uint32_t heads, int32_t pos, float factor, float sign) const {
    RotateHeadsAt(rope_, v, heads, uint32_t(d_), pos, factor, sign, tls_rope_angles);
  }

  void PrepareQueries() {
    const size_t n = size_t(p_.n_tokens) * l_.q_heads;
    // BF16 queries on a ring whose values are exact in BF16 may take the BF16
    // kernels (docs/cpu_attention.md, "Paths"); rotated queries are not BF16.
    q_bf16_ = nullptr;
    if (t_.q_dtype == Dtype::kBf16 && !rope_.on() &&
        (l_.format == Format::kMxfp8 || l_.format == Format::kBf16))
      q_bf16_ = static_cast<const uint16_t*>(t_.q);
    // When Attend will take the BF16 kernels, the ring rows decode straight to
    // BF16 tiles (exact: MXFP8 and BF16 values are BF16 values), half the
    // bytes of FP32 ones, and the kernels pack them without converting.
    tile16_ = q_bf16_ != nullptr && Bf16AttentionSelected();
    // The FP32 kernels read MXFP8 and BF16 rows in place and decode them
    // straight into their packed layout: no FP32 tile (docs/cpu_attention.md,
    // "Design").
    // So does the AMX driver with BF16 rows (packed straight into its VNNI
    // tiles): BF16 queries on a BF16 ring take no tile either then.
    mx_rows_ = (!tile16_ && (l_.format == Format::kMxfp8 || l_.format == Format::kBf16)) ||
               (tile16_ && l_.format == Format::kBf16 && AmxAttentionSelected());
    // The BF16 kernels read q_bf16 only: no FP32 copy of the queries then.
    if (tile16_) {
      q32_ = nullptr;
    } else if (t_.q_dtype == Dtype::kBf16 || rope_.on()) {
      s_.q32.resize(n * d_);
      ParallelFor(size_t(p_.n_tokens), [&](size_t b, size_t e) {
        const size_t per_token = size_t(l_.q_heads) * d_;
        const size_t elem = t_.q_dtype == Dtype::kFp32 ? 4 : 2;
        for (size_t t = b; t < e; ++t) {
          float* q = s_.q32.data() + t * per_token;
          ToF32(static_cast<const uint8_t*>(t_.q) + t * per_token * elem, t_.q_dtype,
                l_.q_heads, q);
          if (rope_.on())
            RotateHeads(q, l_.q_heads, RopePosition(t), rope_.attention_factor, 1.0f);
        }
      });
      q32_ = s_.q32.data();
    } else {
      q32_ = static_cast<const float*>(t_.q);
    }
    if (t_.out_dtype == Dtype::kBf16) {
      s_.out32.resize(n * d_);
      out32_ = s_.out32.data();
    } else {
      out32_ = static_cast<float*>(t_.out);
    }
  }

  // The output's rotary dims back to the query's frame (no attention factor).
  void DerotateOutputs() {
    if (!rope_.on() || !rope_.derotate_output) return;
    ParallelFor(size_t(p_.n_tokens), [&](size_t b, size_t e) {
      for (size_t t = b; t < e; ++t)
        RotateHeads(out32_ + t * size_t(l_.q_heads) * d_, l_.q_heads, RopePosition(t), 1.0f,
                    -1.0f);
    });
  }

  SeqTile TileOf(uint32_t i) const { return prep_.tiles[i]; }

  // Floats of sequence i's tile (what it would take when the rows are read
  // in place: the fused/batched choice stays the same).
  size_t TileFloats(uint32_t i) const {
    return size_t(TileOf(i).n_keys) * token_floats_ * (l_.shared_kv ? 1 : 2);
  }

  // Which sequences take the fused path (all of the small ones, or none).
  void ChooseFused() {
    std::vector<uint8_t>& fused = s_.fused;
    std::vector<uint32_t>& fused_list = s_.fused_list;
    fused.assign(p_.n_seqs, 0);
    fused_list.clear();
    for (uint32_t i = 0; i < p_.n_seqs; ++i)
      if (p_.seqs[i].seqlen_q > 0 && TileFloats(i) <= kFusedTileFloats) s_.fused_list.push_back(i);
    const size_t threads = pool_ != nullptr ? pool_->num_threads() : 1;
    if (threads > 1 && s_.fused_list.size() < kFusedSeqsPerThread * threads) s_.fused_list.clear();
    for (uint32_t i : s_.fused_list) s_.fused[i] = 1;
  }

  uint32_t NextBatchEnd(uint32_t first) const {
    size_t floats = 0;
    uint32_t i = first;
    for (; i < p_.n_seqs; ++i) {
      const size_t need = s_.fused[i] ? 0 : TileFloats(i);
      if (i > first && floats + need > kMaxBatchTileFloats) break;
      floats += need;
    }
    return i;
  }

  // Decodes `n` consecutive token rows (`row_stride` bytes apart; each holds
  // the K vectors, then the V vectors) into tile rows. One codec call per KV
  // head and run rather than per row: a decode step's window is one or two
  // runs of the ring, and the per-call dispatch cost was visible.
  // Tiles hold FP32, or BF16 (tile16_) for the BF16 attention kernels.
  void DecodeRun(const uint8_t* first, size_t row_stride, int32_t n, float* k_row,
                 float* v_row) const {
    if (n <= 0) return;
    const Dtype dt = tile16_ ? Dtype::kBf16 : Dtype::kFp32;
    for (uint32_t g = 0; g < hkv_; ++g) {
      codec::DecodeRows(l_.format, d_, size_t(n),
                        {.base = first + size_t(g) * l_.vec_bytes, .stride = row_stride},
                        {Elem(k_row, size_t(g) * d_), dt, token_floats_});
      if (!l_.shared_kv)
        codec::DecodeRows(l_.format, d_, size_t(n),
                          {.base = first + size_t(hkv_ + g) * l_.vec_bytes, .stride = row_stride},
                          {Elem(v_row, size_t(g) * d_), dt, token_floats_});
    }
  }

  // Element i of a tile (FP32 or BF16 elements).
  float* Elem(float* tile, size_t i) const {
    return tile16_ ? reinterpret_cast<float*>(reinterpret_cast<uint16_t*>(tile) + i) : tile + i;
  }

  // Calls fn(first, n, r) for flat ring rows src_row ... src_row + n - 1 going
  // to tile rows r ..., one call per stretch of rows contiguous in memory (a
  // run ends at a slot's end; rows are bytes_per_token apart).
  template <typename Fn>
  void RingRuns(int64_t src_row, int32_t n, int32_t r, Fn&& fn) const {
    while (n > 0) {
      const int32_t in_ring = int32_t(src_row % l_.ring.ring_len);
      const int32_t run = std::min(n, l_.ring.ring_len - in_ring);
      fn(static_cast<const uint8_t*>(l_.ring.Row(src_row)), run, r);
      src_row += run;
      r += run;
      n -= run;
    }
  }

  // Where sequence i's tile rows come from: fn(first, n, r) for each run of
  // tile rows r ... r + n - 1 stored bytes_per_token apart from `first`
  // (nullptr: rows of zeros). Ring rows, then the step's new tokens, cast back
  // through the format (docs/semantics.md, "MXFP8").
  template <typename Fn>
  void ForEachRun(uint32_t i, const SeqTile& t, Fn&& fn) const {
    const PlannedSeq& s = p_.seqs[i];
    if (p_.staged) {
      // Section 1 from the load plan: rows i*W ... i*W + W - 1.
      for (size_t g = prep_.first_segment[i]; g < p_.n_load_segments; ++g) {
        const RowSegment& seg = p_.load_segments[g];
        if (seg.dst_row >= int32_t(i + 1) * l_.window) break;
        const int32_t r = seg.dst_row - int32_t(i) * l_.window;
        if (seg.src_row < 0) {
          fn(static_cast<const uint8_t*>(nullptr), seg.count, r);
        } else {
          RingRuns(seg.src_row, seg.count, r, fn);
        }
      }
    } else {
      // Positions base ... q_start - 1: at most two runs of the slot's ring.
      const int64_t slot_base = int64_t(s.slot) * l_.ring.ring_len;
      const int32_t first = t.n_hist > 0 ? t.base % l_.ring.ring_len : 0;
      const int32_t run = std::min(t.n_hist, l_.ring.ring_len - first);
      RingRuns(slot_base + first, run, 0, fn);
      RingRuns(slot_base, t.n_hist - run, run, fn);
    }
    fn(static_cast<const uint8_t*>(s_.staged.data() +
                                   size_t(s.token_offset) * l_.ring.bytes_per_token),
       s.seqlen_q, t.n_hist);
  }

  // Fills sequence i's tile (K at k, V at v; equal for shared K/V).
  void BuildTile(uint32_t i, const SeqTile& t, float* k, float* v) {
    ForEachRun(i, t, [&](const uint8_t* first, int32_t n, int32_t r) {
      if (first != nullptr) {
        DecodeRun(first, l_.ring.bytes_per_token, n, Elem(k, size_t(r) * token_floats_),
                  Elem(v, size_t(r) * token_floats_));
        return;
      }
      const size_t bytes = size_t(n) * token_floats_ * (tile16_ ? 2 : 4);
      std::memset(Elem(k, size_t(r) * token_floats_), 0, bytes);
      if (!l_.shared_kv) std::memset(Elem(v, size_t(r) * token_floats_), 0, bytes);
    });
  }

  // MXFP8 rows read in place (mx_rows_): sequence i's row pointers.
  void BuildRows(uint32_t i, const SeqTile& t, const uint8_t** rows) const {
    ForEachRun(i, t, [&](const uint8_t* first, int32_t n, int32_t r) {
      for (int32_t j = 0; j < n; ++j)
        rows[r + j] = first != nullptr ? first + size_t(j) * l_.ring.bytes_per_token : nullptr;
    });
  }

  AttentionShape Shape() const {
    AttentionShape shape;
    shape.q_heads = l_.q_heads;
    shape.kv_heads = l_.kv_heads;
    shape.head_dim = d_;
    shape.scale = w_.scale;
    shape.sinks = t_.sinks;
    shape.softcap = l_.softcap;
    return shape;
  }

  // rows: the MXFP8 row pointers of BuildRows (mx_rows_), else k and v.
  SeqProblem ProblemOf(uint32_t i, const SeqTile& t, const float* k, const float* v,
                       const uint8_t* const* rows = nullptr) const {
    const PlannedSeq& s = p_.seqs[i];
    const size_t q_off = size_t(s.token_offset) * l_.q_heads * d_;
    SeqProblem p;
    p.n_tokens = s.seqlen_q;
    p.q = q32_ != nullptr ? q32_ + q_off : nullptr;
    p.q_bf16 = q_bf16_ != nullptr ? q_bf16_ + q_off : nullptr;
    p.n_keys = t.n_keys;
    if (mx_rows_) {
      p.k = p.v = nullptr;
      p.mx.rows = rows;
      p.mx.k_offset = 0;
      p.mx.v_offset = l_.shared_kv ? 0 : size_t(hkv_) * l_.vec_bytes;
      p.mx.vec_bytes = l_.vec_bytes;
      p.mx.bf16 = l_.format == Format::kBf16;
    } else if (tile16_) {
      p.k16 = reinterpret_cast<const uint16_t*>(k);
      p.v16 = reinterpret_cast<const uint16_t*>(v);
    } else {
      p.k = k;
      p.v = v;
    }
    p.key_begin = prep_.key_begin.data() + s.token_offset;
    p.key_end = prep_.key_end.data() + s.token_offset;
    p.out = out32_ + q_off;
    p.lse = t_.lse != nullptr ? t_.lse + size_t(s.token_offset) * l_.q_heads : nullptr;
    return p;
  }

  // Fused path: each thread takes whole sequences and, for each, decodes the
  // tile into its own L2-sized buffer and attends it at once (single-threaded
  // Attend), instead of writing every tile of a batch to memory first and
  // reading them back in a second pass.
  void AttendFused() {
    const AttentionShape shape = Shape();
    ParallelFor(s_.fused_list.size(), [&](size_t b, size_t e) {
      std::vector<float>& buf = tls_fused_tile;
      for (size_t n = b; n < e; ++n) {
        const uint32_t i = s_.fused_list[n];
        const SeqTile t = TileOf(i);
        if (mx_rows_) {
          std::vector<const uint8_t*>& rows = tls_rows;
          rows.resize(size_t(t.n_keys));
          BuildRows(i, t, rows.data());
          const SeqProblem p = ProblemOf(i, t, nullptr, nullptr, rows.data());
          Attend(shape, &p, 1, nullptr);
          continue;
        }
        const size_t kv_floats = size_t(t.n_keys) * token_floats_;
        if (buf.size() < kFusedTileFloats) buf.resize(kFusedTileFloats);
        float* k = buf.data();
        float* v = l_.shared_kv ? k : Elem(k, kv_floats);
        BuildTile(i, t, k, v);
        const SeqProblem p = ProblemOf(i, t, k, v);
        Attend(shape, &p, 1, nullptr);
      }
    });
  }

  void AttendBatch(uint32_t first, uint32_t end) {
    std::vector<SeqTile>& tiles = s_.batch_tiles;
    tiles.clear();
    size_t floats = 0;
    for (uint32_t i = first; i < end; ++i) {
      SeqTile t = TileOf(i);
      if (s_.fused[i]) t.n_keys = 0;  // attended by AttendFused
      t.k_offset = floats;
      floats += size_t(t.n_keys) * token_floats_;
      t.v_offset = t.k_offset;
      if (!l_.shared_kv) {
        t.v_offset = floats;
        floats += size_t(t.n_keys) * token_floats_;
      }
      tiles.push_back(t);
    }
    if (mx_rows_) {
      // Row pointers instead of tiles: k_offset indexes s_.rows.
      size_t n_rows = 0;
      for (SeqTile& t : tiles) {
        t.k_offset = t.v_offset = n_rows;
        n_rows += size_t(t.n_keys);
      }
      s_.rows.resize(n_rows);
    } else {
      s_.tiles.resize(floats);
    }
    ParallelFor(end - first, [&](size_t b, size_t e) {
      for (size_t k = b; k < e; ++k) {
        const uint32_t i = first + uint32_t(k);
        if (s_.fused[i]) continue;
        if (mx_rows_) {
          BuildRows(i, tiles[k], s_.rows.data() + tiles[k].k_offset);
        } else {
          BuildTile(i, tiles[k], s_.tiles.data() + tiles[k].k_offset,
                    s_.tiles.data() + tiles[k].v_offset);
        }
      }
    });

    s_.problems.clear();
    for (uint32_t i = first; i < end; ++i) {
      const SeqTile& t = tiles[i - first];
      if (p_.seqs[i].seqlen_q == 0 || s_.fused[i]) continue;
      if (mx_rows_) {
        s_.problems.push_back(ProblemOf(i, t, nullptr, nullptr, s_.rows.data() + t.k_offset));
      } else {
        s_.problems.push_back(
            ProblemOf(i, t, s_.tiles.data() + t.k_offset, s_.tiles.data() + t.v_offset));
      }
    }
    if (s_.problems.empty()) return;
    const AttentionShape shape = Shape();
    Attend(shape, s_.problems.data(), int(s_.problems.size()), pool_);
  }

  // After every read of the ring: the new tokens' bytes go to their rows.
  void StoreNewTokens() {
    ParallelFor(size_t(p_.n_tokens), [&](size_t b, size_t e) {
      for (size_t t = b; t < e; ++t) {
        const int32_t row = p_.store_rows[t];
        if (row < 0) continue;
        std::memcpy(l_.ring.Row(row), s_.staged.data() + t * l_.ring.bytes_per_token,
                    l_.ring.bytes_per_token);
      }
    });
  }

  void FinishOutputs() {
    if (t_.out_dtype != Dtype::kBf16) return;
    const size_t n = size_t(p_.n_tokens) * l_.q_heads;
    codec::EncodeRows(Format::kBf16, ScaleMode::kCeil, d_, n,
                      {out32_, Dtype::kFp32, size_t(d_)},
                      {.base = static_cast<uint8_t*>(t_.out), .stride = size_t(2) * d_});
  }

  const StepWork& w_;
  const StepLayer& l_;
  const PlanView& p_;
  const StepTensors& t_;
  const RopeTable& rope_;
  const CpuPreparedPlan& prep_;
  ThreadPool* pool_;
  StepScratch& s_;
  const uint32_t d_;
  const uint32_t hkv_;
  const size_t token_floats_;
  const float* q32_ = nullptr;
  const uint16_t* q_bf16_ = nullptr;
  bool tile16_ = false;
  bool mx_rows_ = false;
  float* out32_ = nullptr;
  std::atomic<uint64_t> nonfinite_{0};
};

}  // namespace

absl::Status RunCpuStep(const StepWork& work, const CpuPreparedPlan& prepared, ThreadPool* pool,
                        StepScratch& scratch, StepResult* result) {
  StepRunner runner(work, prepared, pool, scratch);
  return runner.Run(result);
}

}  // namespace swa::cpu
