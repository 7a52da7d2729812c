// CRC32C (Castagnoli, reflected polynomial 0x82F63B78): the blob checksum.
// It detects every single-bit error (and every burst up to 32 bits), and the
// x86 paths below run at memory speed, so verifying a restore is cheap.
#pragma once

#include <cstddef>
#include <cstdint>

namespace swa {

// Standard CRC32C of `n` bytes, chainable: Crc32c(Crc32c(0, a), b) is the CRC
// of a followed by b. Picks the fastest implementation this CPU supports.
uint32_t Crc32c(uint32_t crc, const void* data, size_t n);

// The implementations, exposed for tests and benchmarks. Each returns the same
// value; the x86 ones are only callable when Crc32cSupported() says so.
enum class Crc32cImpl { kTable = 0, kSse42 = 1, kAvx512 = 2 };
bool Crc32cSupported(Crc32cImpl impl);
uint32_t Crc32cWith(Crc32cImpl impl, uint32_t crc, const void* data, size_t n);
Crc32cImpl Crc32cBestImpl();
const char* Crc32cImplName(Crc32cImpl impl);

namespace crc32c_internal {

inline constexpr uint32_t kPoly = 0x82F63B78u;  // reflected

// Raw register update (no pre/post inversion): the building block of every path.
uint32_t RawTable(uint32_t raw, const uint8_t* p, size_t n);
uint32_t RawSse42(uint32_t raw, const uint8_t* p, size_t n);   // x86-64 only
uint32_t RawAvx512(uint32_t raw, const uint8_t* p, size_t n);  // x86-64 only

// Carry-less a * b mod P on reflected 32-bit polynomials, and x^(8n) mod P:
// they let independent streams be combined (raw(r, X) = r * x^(8|X|) ^ raw(0, X)).
uint32_t MulModP(uint32_t a, uint32_t b);
uint32_t XPow8n(uint64_t n);
// x^e mod P for a small exponent e (used to build folding constants).
uint32_t XPowModP(uint64_t e);

}  // namespace crc32c_internal
}  // namespace swa
