// Portable CRC32C (slicing-by-8 tables), GF(2) helpers and the run-time choice
// of implementation.
#include "store/crc32c.h"

#include <array>
#include <bit>
#include <cstring>

namespace swa {
namespace crc32c_internal {
namespace {

using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables MakeTables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[0][b] = c;
  }
  for (int k = 1; k < 8; ++k)
    for (uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
  return t;
}

constexpr Tables kTables = MakeTables();

inline uint64_t LoadLe64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}

}  // namespace

uint32_t RawTable(uint32_t raw, const uint8_t* p, size_t n) {
  const Tables& t = kTables;
  for (; n >= 8; n -= 8, p += 8) {
    const uint64_t w = LoadLe64(p) ^ raw;
    raw = t[7][w & 0xff] ^ t[6][(w >> 8) & 0xff] ^ t[5][(w >> 16) & 0xff] ^
          t[4][(w >> 24) & 0xff] ^ t[3][(w >> 32) & 0xff] ^ t[2][(w >> 40) & 0xff] ^
          t[1][(w >> 48) & 0xff] ^ t[0][w >> 56];
  }
  for (; n > 0; --n, ++p) raw = (raw >> 8) ^ t[0][(raw ^ *p) & 0xff];
  return raw;
}

// Reflected polynomials: bit 31 holds the coefficient of x^0, bit 0 that of x^31.
uint32_t MulModP(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (int i = 0; i < 32; ++i) {
    if (a & (0x80000000u >> i)) product ^= b;  // term x^i of a
    b = (b & 1) ? (b >> 1) ^ kPoly : b >> 1;    // b *= x (mod P)
  }
  return product;
}

uint32_t XPowModP(uint64_t e) {
  uint32_t result = 0x80000000u;  // x^0
  uint32_t base = 0x40000000u;    // x^1
  for (; e != 0; e >>= 1) {
    if (e & 1) result = MulModP(result, base);
    base = MulModP(base, base);
  }
  return result;
}

uint32_t XPow8n(uint64_t n) { return XPowModP(8 * n); }

#if !defined(__x86_64__)
uint32_t RawSse42(uint32_t raw, const uint8_t* p, size_t n) { return RawTable(raw, p, n); }
uint32_t RawAvx512(uint32_t raw, const uint8_t* p, size_t n) { return RawTable(raw, p, n); }
#endif

}  // namespace crc32c_internal

bool Crc32cSupported(Crc32cImpl impl) {
  switch (impl) {
    case Crc32cImpl::kTable:
      return true;
#if defined(__x86_64__)
    case Crc32cImpl::kSse42:
      return __builtin_cpu_supports("sse4.2");
    case Crc32cImpl::kAvx512:
      return __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("pclmul") &&
             __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("vpclmulqdq");
#endif
    default:
      return false;
  }
}

Crc32cImpl Crc32cBestImpl() {
  static const Crc32cImpl best = [] {
    if (Crc32cSupported(Crc32cImpl::kAvx512)) return Crc32cImpl::kAvx512;
    if (Crc32cSupported(Crc32cImpl::kSse42)) return Crc32cImpl::kSse42;
    return Crc32cImpl::kTable;
  }();
  return best;
}

const char* Crc32cImplName(Crc32cImpl impl) {
  switch (impl) {
    case Crc32cImpl::kTable: return "table";
    case Crc32cImpl::kSse42: return "sse4.2";
    case Crc32cImpl::kAvx512: return "avx512-vpclmulqdq";
  }
  return "unknown";
}

uint32_t Crc32cWith(Crc32cImpl impl, uint32_t crc, const void* data, size_t n) {
  using namespace crc32c_internal;
  const auto* p = static_cast<const uint8_t*>(data);
  switch (impl) {
    case Crc32cImpl::kSse42: return ~RawSse42(~crc, p, n);
    case Crc32cImpl::kAvx512: return ~RawAvx512(~crc, p, n);
    case Crc32cImpl::kTable: break;
  }
  return ~RawTable(~crc, p, n);
}

uint32_t Crc32c(uint32_t crc, const void* data, size_t n) {
  static const auto raw_fn = [] {
    switch (Crc32cBestImpl()) {
      case Crc32cImpl::kAvx512: return &crc32c_internal::RawAvx512;
      case Crc32cImpl::kSse42: return &crc32c_internal::RawSse42;
      case Crc32cImpl::kTable: break;
    }
    return &crc32c_internal::RawTable;
  }();
  return ~raw_fn(~crc, static_cast<const uint8_t*>(data), n);
}

}  // namespace swa
