// Shared by the fuzz harnesses: reading typed values from the fuzzer's bytes
// (zeros once the input is used up) and a check that aborts, so that
// libFuzzer records the input as a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace swa_fuzz {

inline void Check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz check failed: %s\n", what);
  std::abort();
}

class Input {
 public:
  Input(const uint8_t* data, size_t size) : p_(data), left_(size) {}
  bool empty() const { return left_ == 0; }
  size_t left() const { return left_; }
  uint8_t Byte() {
    if (left_ == 0) return 0;
    --left_;
    return *p_++;
  }
  bool Bool() { return Byte() & 1; }
  uint16_t U16() { return static_cast<uint16_t>(Byte() | (Byte() << 8)); }
  uint32_t U32() { return U16() | (uint32_t{U16()} << 16); }
  // Uniform enough in [lo, hi].
  int32_t Int(int32_t lo, int32_t hi) {
    const uint64_t span = static_cast<uint64_t>(int64_t{hi} - lo) + 1;
    return static_cast<int32_t>(lo + static_cast<int64_t>(U32() % span));
  }
  float Float() {
    const uint32_t bits = U32();
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  // The rest of the input (or up to n bytes of it).
  const uint8_t* Take(size_t n, size_t* got) {
    *got = n < left_ ? n : left_;
    const uint8_t* out = p_;
    p_ += *got;
    left_ -= *got;
    return out;
  }

 private:
  const uint8_t* p_;
  size_t left_;
};

// A status of the C API is one of swa_status_t's values.
inline bool KnownStatus(int s) { return s >= 0 && s <= 16; }

}  // namespace swa_fuzz
