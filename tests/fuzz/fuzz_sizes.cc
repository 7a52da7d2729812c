// Fuzz harness (5): the sizes that calls take from the caller, in
// swa_attention_merge, swa_project and swa_codec_encode/decode. Each input is
// a list of calls with fuzzed sizes (raw 64-bit values, biased toward powers
// of two and the types' edges). The harness computes every tensor's true size
// in 128 bits, independently of the library, and then:
//  - when every tensor fits a small buffer, it passes exact buffers followed
//    by guards: a valid call succeeds and writes nothing past them;
//  - when a tensor passes the documented limit (2^60 elements for merge and
//    projection, PTRDIFF_MAX bytes for the codec), it passes tiny buffers: the
//    call returns SWA_INVALID_ARGUMENT with a message and writes nothing;
//  - in between (buffers that cannot exist here) the call is skipped.
// Negative counts and zero dimensions must be refused whatever the rest.
// Input format (regressions/sizes/ is written in it): per call, one op byte
// (% 3: merge, project, codec), then each size as a kind byte and its payload
// (see Size); kind 3 is a raw little-endian uint64.
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "swacache.h"

using swa_fuzz::Check;
using swa_fuzz::Input;

namespace {

using u128 = unsigned __int128;
constexpr u128 kElemLimit = u128{1} << 60;
constexpr u128 kSmall = 4096;  // elements (merge, projection) or 16 KiB (codec)

uint64_t Size(Input& in) {
  const uint8_t kind = in.Byte() % 8;
  switch (kind) {
    case 0:
      return in.Byte() % 9;
    case 1:
      return uint64_t{1} << (in.Byte() % 64);
    case 2:
      return (uint64_t{1} << (in.Byte() % 64)) + in.Byte() - 128;
    case 3:
      return uint64_t{in.U32()} | (uint64_t{in.U32()} << 32);
    case 4:
      return UINT64_MAX - in.Byte();
    case 5:
      return in.U32();
    case 6:
      return uint64_t{UINT32_MAX} - in.Byte();
    default:
      return uint64_t{INT32_MAX} - in.Byte();
  }
}

constexpr uint8_t kGuard = 0xC5;

// A buffer of `bytes` followed by 64 guard bytes (at least 64 bytes in all).
struct Guarded {
  std::vector<uint8_t> b;
  size_t bytes;
  explicit Guarded(size_t n, uint8_t fill = 0x3C) : b(n + 64, kGuard), bytes(n) {
    std::memset(b.data(), fill, n);
  }
  void* data() { return b.data(); }
  bool Intact() const {
    for (size_t i = bytes; i < b.size(); ++i)
      if (b[i] != kGuard) return false;
    return true;
  }
};

void ExpectRefused(swa_status_t st, const char* what) {
  if (st != SWA_INVALID_ARGUMENT || swa_last_error()[0] == '\0') {
    std::fprintf(stderr, "%s: status %d (%s)\n", what, st, swa_last_error());
    Check(false, "a size past the limit (or a bad count) was not refused");
  }
}

void Merge(swa_cache_t* cache, Input& in) {
  const int64_t rows = static_cast<int64_t>(Size(in));
  const uint32_t dim = static_cast<uint32_t>(Size(in));
  const u128 elems = u128(uint64_t(rows)) * dim;
  const bool bad = rows < 0 || dim == 0;
  if (!bad && elems > kSmall && elems <= kElemLimit) return;
  const bool real = !bad && elems <= kSmall;
  const size_t n = real ? size_t(elems) : 4, r = real ? size_t(rows) : 1;
  Guarded a(n * 4), b(n * 4), out(n * 4, 0x7F), la(r * 4, 0), lb(r * 4, 0), lse(r * 4, 0x7F);
  swa_merge_args_t m;
  swa_merge_args_init(&m);
  m.rows = rows, m.head_dim = dim, m.out_a = a.data(), m.out_b = b.data(), m.out = out.data();
  m.lse_a = static_cast<const float*>(la.data()), m.lse_b = static_cast<const float*>(lb.data());
  m.lse = static_cast<float*>(lse.data());
  const swa_status_t st = swa_attention_merge(cache, &m);
  Check(out.Intact() && lse.Intact(), "merge wrote past its buffers");
  if (real) {
    Check(st == SWA_OK, "a small valid merge failed");
  } else {
    ExpectRefused(st, "merge");
    Check(out.b[0] == 0x7F && lse.b[0] == 0x7F, "a refused merge wrote");
  }
}

void Project(swa_cache_t* cache, Input& in) {
  const int32_t t = static_cast<int32_t>(Size(in));
  const uint32_t k = static_cast<uint32_t>(Size(in));
  const uint32_t q = static_cast<uint32_t>(Size(in)), kv = static_cast<uint32_t>(Size(in));
  const u128 nout = u128(q) + kv;
  const u128 sizes[3] = {u128(uint32_t(t)) * k, u128(k) * nout, u128(uint32_t(t)) * nout};
  const bool bad = t < 0 || k == 0 || nout == 0;
  bool all_small = true, any_over = false;
  for (u128 s : sizes) all_small = all_small && s <= kSmall, any_over = any_over || s > kElemLimit;
  if (!bad && !all_small && !any_over) return;
  const bool real = !bad && all_small;
  Guarded h(real ? size_t(sizes[0]) * 2 : 8), w(real ? size_t(sizes[1]) * 2 : 8),
      out(real ? size_t(sizes[2]) * 4 : 8, 0x7F);
  swa_project_args_t p;
  swa_project_args_init(&p);
  p.hidden = h.data(), p.weight = w.data(), p.out = out.data();
  p.n_tokens = t, p.hidden_dim = k, p.q_dim = q, p.kv_dim = kv;
  const swa_status_t st = swa_project(cache, &p);
  Check(out.Intact(), "projection wrote past its buffer");
  if (real) {
    Check(st == SWA_OK, "a small valid projection failed");
  } else {
    ExpectRefused(st, "project");
    Check(out.b[0] == 0x7F, "a refused projection wrote");
  }
}

void Codec(Input& in) {
  const auto format = static_cast<swa_format_t>(in.Byte() % 3);
  const bool encode = in.Bool();
  const size_t n = static_cast<size_t>(Size(in));
  const uint32_t dim = static_cast<uint32_t>(Size(in));
  uint32_t vec = 0;
  const bool bad = swa_format_vector_bytes(format, dim, &vec) != SWA_OK;
  const u128 fp32_bytes = u128(n) * dim * 4, stored_bytes = u128(n) * vec;
  const u128 big = fp32_bytes > stored_bytes ? fp32_bytes : stored_bytes;
  if (!bad && big > 4 * kSmall && big <= u128(PTRDIFF_MAX)) return;
  const bool real = !bad && big <= 4 * kSmall;
  Guarded fp32(real ? size_t(fp32_bytes) : 64, 0), stored(real ? size_t(stored_bytes) : 64, 0x7F);
  uint64_t nonfinite = 12345;
  const swa_status_t st = encode
                              ? swa_codec_encode(format, SWA_SCALE_CEIL, fp32.data(),
                                                 SWA_DTYPE_FP32, n, dim, stored.data(), &nonfinite)
                              : swa_codec_decode(format, stored.data(), n, dim, fp32.data(),
                                                 SWA_DTYPE_FP32, &nonfinite);
  Check(fp32.Intact() && stored.Intact(), "the codec wrote past its buffers");
  if (real) {
    Check(st == SWA_OK, "a small valid codec call failed");
  } else {
    ExpectRefused(st, "codec");
    Check(nonfinite == 12345, "a refused codec call wrote nonfinite_blocks");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static swa_cache_t* cache = [] {
    swa_layer_desc_t l;
    swa_layer_desc_init(&l);
    swa_config_t c;
    swa_config_init(&c);
    c.window = 8, c.max_slots = 1, c.backend = SWA_BACKEND_CPU, c.num_layers = 1, c.layers = &l;
    c.num_threads = 1;
    swa_cache_t* out = nullptr;
    Check(swa_cache_create(&c, &out) == SWA_OK, "cache");
    return out;
  }();
  Input in(data, size);
  for (int call = 0; call < 32 && !in.empty(); ++call) {
    switch (in.Byte() % 3) {
      case 0:
        Merge(cache, in);
        break;
      case 1:
        Project(cache, in);
        break;
      default:
        Codec(in);
        break;
    }
  }
  return 0;
}
