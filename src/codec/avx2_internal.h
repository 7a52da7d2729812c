// Shared by the *_avx2.cc files only (compiled with -mavx2 -mfma -mf16c).
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__x86_64__) && defined(__AVX2__) && defined(__F16C__)
// Helpers must inline: an out-of-line call costs a vzeroupper and a spill of
// the block, several times the work itself.
#define SWA_AVX2_INLINE inline __attribute__((always_inline))

namespace swa::codec {

uint32_t Avx2Mxfp8EncodeF32(const float* src, uint32_t dim, bool ceil, uint8_t* dst);
uint32_t Avx2Mxfp8EncodeBf16(const uint16_t* src, uint32_t dim, bool ceil, uint8_t* dst);
uint64_t Avx2Mxfp8EncodeF32Rows(const float* src, size_t src_stride, uint32_t dim, size_t n, bool ceil,
                                uint8_t* dst, size_t dst_stride);
uint64_t Avx2Mxfp8EncodeBf16Rows(const uint16_t* src, size_t src_stride, uint32_t dim, size_t n,
                                 bool ceil, uint8_t* dst, size_t dst_stride);
uint32_t Avx2DsMlaEncodeF32(const float* src, uint8_t* dst);
uint32_t Avx2DsMlaEncodeBf16(const uint16_t* src, uint8_t* dst);

}  // namespace swa::codec
#endif
