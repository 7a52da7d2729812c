// MXFP8 codec throughput, single thread, next to memcpy in the same run; and
// the fp8_ds_mla (584-byte) decode the CPU step runs on its rings.
//
// One iteration handles a tile of 128 vectors of 512 values (the CPU
// attention's unit of work: 128 ring rows of 528 bytes). Baselines:
//  - encode: memcpy of the input bytes (the FP32 or BF16 vectors);
//  - decode: memcpy of the output bytes (an FP32 or BF16 tile, i.e. what
//    reading the same rows from an FP32/BF16 ring would cost), and, for
//    reference, memcpy of the 528-byte MXFP8 rows themselves.
// After the Google Benchmark table, a summary prints ns per vector for each
// case, its baseline and ratio = baseline_time / codec_time (>= 1 means
// faster than the memcpy). Targets: encode >= 0.5, decode >= 0.7 on the
// best SIMD set (AVX-512 where the CPU has it; the AVX2 rows are shown too).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "codec/codec.h"

namespace {

using swa::Format;
using swa::ScaleMode;
using swa::Dtype;
using namespace swa::codec;

constexpr uint32_t kDim = 512;
constexpr size_t kRows = 128;
constexpr size_t kVecBytes = kDim + kDim / 32;

struct Data {
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  std::vector<uint8_t> rows;
  std::vector<float> out_f32;
  std::vector<uint16_t> out_bf16;
  std::vector<uint8_t> copy_dst;
  std::vector<uint8_t> ds_rows;  // the same vectors as fp8_ds_mla records
  Data() : f32(kRows * kDim), bf16(kRows * kDim), rows(kRows * kVecBytes),
           out_f32(kRows * kDim), out_bf16(kRows * kDim), copy_dst(kRows * kDim * 4),
           ds_rows(kRows * swa::kDsMlaBytes) {
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (size_t i = 0; i < f32.size(); ++i) {
      f32[i] = normal(rng) * (i % 97 == 0 ? 30.0f : 1.0f);  // a few outliers per block
      uint32_t u;
      std::memcpy(&u, &f32[i], 4);
      bf16[i] = static_cast<uint16_t>(u >> 16);
    }
    EncodeRowsWith(ScalarKernels(), Format::kMxfp8, ScaleMode::kCeil, kDim, kRows,
                   {f32.data(), Dtype::kFp32, kDim}, {rows.data(), kVecBytes});
    EncodeRowsWith(ScalarKernels(), Format::kFp8DsMla, ScaleMode::kCeil, kDim, kRows,
                   {f32.data(), Dtype::kFp32, kDim}, {ds_rows.data(), swa::kDsMlaBytes});
  }
};

Data& D() {
  static Data d;
  return d;
}

enum class Set { kScalar, kAvx2, kAvx512 };

const RowKernels* Kernels(Set set) {
  switch (set) {
    case Set::kAvx2: return Avx2Kernels();
    case Set::kAvx512: return Avx512Kernels();
    default: return &ScalarKernels();
  }
}

void Encode(benchmark::State& state, Set set, Dtype dtype) {
  const RowKernels* k = Kernels(set);
  if (k == nullptr) return state.SkipWithError("kernel set not available on this CPU");
  Data& d = D();
  const void* src = dtype == Dtype::kFp32 ? static_cast<const void*>(d.f32.data()) : d.bf16.data();
  for (auto _ : state) {
    benchmark::DoNotOptimize(EncodeRowsWith(*k, Format::kMxfp8, ScaleMode::kCeil, kDim, kRows,
                                            {src, dtype, kDim}, {d.rows.data(), kVecBytes}));
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kRows);
  state.SetBytesProcessed(state.iterations() * kRows * kDim * (dtype == Dtype::kFp32 ? 4 : 2));
}

void Decode(benchmark::State& state, Set set, Dtype dtype) {
  const RowKernels* k = Kernels(set);
  if (k == nullptr) return state.SkipWithError("kernel set not available on this CPU");
  Data& d = D();
  void* dst = dtype == Dtype::kFp32 ? static_cast<void*>(d.out_f32.data()) : d.out_bf16.data();
  for (auto _ : state) {
    benchmark::DoNotOptimize(DecodeRowsWith(*k, Format::kMxfp8, kDim, kRows,
                                            {d.rows.data(), kVecBytes}, {dst, dtype, kDim}));
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kRows);
  state.SetBytesProcessed(state.iterations() * kRows * kDim * (dtype == Dtype::kFp32 ? 4 : 2));
}

void EncodeDsMla(benchmark::State& state, Set set, Dtype dtype) {
  const RowKernels* k = Kernels(set);
  if (k == nullptr) return state.SkipWithError("kernel set not available on this CPU");
  Data& d = D();
  const void* src = dtype == Dtype::kFp32 ? static_cast<const void*>(d.f32.data()) : d.bf16.data();
  for (auto _ : state) {
    benchmark::DoNotOptimize(EncodeRowsWith(*k, Format::kFp8DsMla, ScaleMode::kCeil, kDim, kRows,
                                            {src, dtype, kDim},
                                            {d.ds_rows.data(), swa::kDsMlaBytes}));
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kRows);
  state.SetBytesProcessed(state.iterations() * kRows * kDim * (dtype == Dtype::kFp32 ? 4 : 2));
}

void DecodeDsMla(benchmark::State& state, Set set, Dtype dtype) {
  const RowKernels* k = Kernels(set);
  if (k == nullptr) return state.SkipWithError("kernel set not available on this CPU");
  Data& d = D();
  void* dst = dtype == Dtype::kFp32 ? static_cast<void*>(d.out_f32.data()) : d.out_bf16.data();
  for (auto _ : state) {
    benchmark::DoNotOptimize(DecodeRowsWith(*k, Format::kFp8DsMla, kDim, kRows,
                                            {d.ds_rows.data(), swa::kDsMlaBytes},
                                            {dst, dtype, kDim}));
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kRows);
  state.SetBytesProcessed(state.iterations() * kRows * kDim * (dtype == Dtype::kFp32 ? 4 : 2));
}

// memcpy of `bytes_per_vector` per row, row by row like the codec.
void Memcpy(benchmark::State& state, size_t bytes_per_vector) {
  Data& d = D();
  const uint8_t* src = reinterpret_cast<const uint8_t*>(d.f32.data());
  for (auto _ : state) {
    for (size_t r = 0; r < kRows; ++r)
      std::memcpy(d.copy_dst.data() + r * bytes_per_vector, src + r * bytes_per_vector,
                  bytes_per_vector);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kRows);
  state.SetBytesProcessed(state.iterations() * kRows * bytes_per_vector);
}

BENCHMARK_CAPTURE(Memcpy, bytes_2048, 2048);
BENCHMARK_CAPTURE(Memcpy, bytes_1024, 1024);
BENCHMARK_CAPTURE(Memcpy, bytes_528, kVecBytes);
BENCHMARK_CAPTURE(Encode, f32_avx512, Set::kAvx512, Dtype::kFp32);
BENCHMARK_CAPTURE(Encode, f32_avx2, Set::kAvx2, Dtype::kFp32);
BENCHMARK_CAPTURE(Encode, f32_scalar, Set::kScalar, Dtype::kFp32);
BENCHMARK_CAPTURE(Encode, bf16_avx512, Set::kAvx512, Dtype::kBf16);
BENCHMARK_CAPTURE(Encode, bf16_avx2, Set::kAvx2, Dtype::kBf16);
BENCHMARK_CAPTURE(Encode, bf16_scalar, Set::kScalar, Dtype::kBf16);
BENCHMARK_CAPTURE(Decode, f32_avx512, Set::kAvx512, Dtype::kFp32);
BENCHMARK_CAPTURE(Decode, f32_avx2, Set::kAvx2, Dtype::kFp32);
BENCHMARK_CAPTURE(Decode, f32_scalar, Set::kScalar, Dtype::kFp32);
BENCHMARK_CAPTURE(Decode, bf16_avx512, Set::kAvx512, Dtype::kBf16);
BENCHMARK_CAPTURE(Decode, bf16_avx2, Set::kAvx2, Dtype::kBf16);
BENCHMARK_CAPTURE(Decode, bf16_scalar, Set::kScalar, Dtype::kBf16);
BENCHMARK_CAPTURE(EncodeDsMla, f32_avx2, Set::kAvx2, Dtype::kFp32);
BENCHMARK_CAPTURE(EncodeDsMla, f32_scalar, Set::kScalar, Dtype::kFp32);
BENCHMARK_CAPTURE(EncodeDsMla, bf16_avx2, Set::kAvx2, Dtype::kBf16);
BENCHMARK_CAPTURE(EncodeDsMla, bf16_scalar, Set::kScalar, Dtype::kBf16);
BENCHMARK_CAPTURE(DecodeDsMla, f32_avx512, Set::kAvx512, Dtype::kFp32);
BENCHMARK_CAPTURE(DecodeDsMla, f32_avx2, Set::kAvx2, Dtype::kFp32);
BENCHMARK_CAPTURE(DecodeDsMla, f32_scalar, Set::kScalar, Dtype::kFp32);
BENCHMARK_CAPTURE(DecodeDsMla, bf16_avx2, Set::kAvx2, Dtype::kBf16);
BENCHMARK_CAPTURE(DecodeDsMla, bf16_scalar, Set::kScalar, Dtype::kBf16);

// Remembers each run's time per iteration for the summary.
class Recorder : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs)
      if (!r.error_occurred) ns_[r.benchmark_name()] = r.GetAdjustedRealTime() / kRows;  // ns per vector
    ConsoleReporter::ReportRuns(runs);
  }
  double Get(const std::string& name) const {
    auto it = ns_.find(name);
    return it == ns_.end() ? 0.0 : it->second;
  }

 private:
  std::map<std::string, double> ns_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  Recorder rec;
  benchmark::RunSpecifiedBenchmarks(&rec);
  struct Row {
    const char* ours;
    const char* baseline;
    double target;
  };
  const Row rows[] = {
      {"Encode/f32_avx512", "Memcpy/bytes_2048", 0.5},  {"Encode/f32_avx2", "Memcpy/bytes_2048", 0.5},
      {"Encode/f32_scalar", "Memcpy/bytes_2048", 0},    {"Encode/bf16_avx512", "Memcpy/bytes_1024", 0.5},
      {"Encode/bf16_avx2", "Memcpy/bytes_1024", 0.5},   {"Encode/bf16_scalar", "Memcpy/bytes_1024", 0},
      {"Decode/f32_avx512", "Memcpy/bytes_2048", 0.7},  {"Decode/f32_avx2", "Memcpy/bytes_2048", 0.7},
      {"Decode/f32_scalar", "Memcpy/bytes_2048", 0},    {"Decode/f32_avx2", "Memcpy/bytes_528", 0},
      {"Decode/bf16_avx512", "Memcpy/bytes_1024", 0.7}, {"Decode/bf16_avx2", "Memcpy/bytes_1024", 0.7},
      {"Decode/bf16_scalar", "Memcpy/bytes_1024", 0},
      {"EncodeDsMla/f32_avx2", "Memcpy/bytes_2048", 0},   {"EncodeDsMla/f32_scalar", "Memcpy/bytes_2048", 0},
      {"EncodeDsMla/bf16_avx2", "Memcpy/bytes_1024", 0},  {"EncodeDsMla/bf16_scalar", "Memcpy/bytes_1024", 0},
      {"DecodeDsMla/f32_avx512", "Memcpy/bytes_2048", 0}, {"DecodeDsMla/f32_avx2", "Memcpy/bytes_2048", 0},
      {"DecodeDsMla/f32_scalar", "Memcpy/bytes_2048", 0}, {"DecodeDsMla/bf16_avx2", "Memcpy/bytes_1024", 0},
      {"DecodeDsMla/bf16_scalar", "Memcpy/bytes_1024", 0},
  };
  std::printf("\nSummary (512-wide vectors, %zu per iteration, one thread; ratio = memcpy time / codec time)\n",
              kRows);
  std::printf("%-22s %10s  %-20s %10s  %7s  %s\n", "case", "ns/vector", "baseline", "ns/vector",
              "ratio", "target");
  for (const Row& r : rows) {
    const double ours = rec.Get(r.ours), base = rec.Get(r.baseline);
    if (ours == 0 || base == 0) continue;  // filtered out or skipped
    char target[32] = "-";
    if (r.target > 0)
      std::snprintf(target, sizeof target, ">= %.1f %s", r.target,
                    base / ours >= r.target ? "met" : "NOT MET");
    std::printf("%-22s %10.1f  %-20s %10.1f  %7.2f  %s\n", r.ours, ours, r.baseline, base,
                base / ours, target);
  }
  benchmark::Shutdown();
  return 0;
}
