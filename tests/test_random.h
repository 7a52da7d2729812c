// Test-input helpers shared by the unit and API tests.
//
// UniformReal: uniform real numbers in [a, b) with the interface of
// std::uniform_real_distribution as the tests use it (construct with a and b,
// call with an engine), but not its values. libstdc++'s generate_canonical
// evaluates a long-double logarithm on every draw; in the sanitizer trees
// that was a fifth of the suite's run time.
//
// SWA_TEST_UNSANITIZED: on a test's own FP64 reference, so that the sanitizer
// trees check the library at full strength without instrumenting the
// reference's inner loops (they are test code, and run in the plain trees
// with every check of the test). clang does not inline instrumented functions
// (std::vector::operator[], std::max) into an uninstrumented one: such a
// reference indexes raw pointers in its inner loops.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 8)
#define SWA_TEST_UNSANITIZED __attribute__((no_sanitize("address", "undefined", "thread")))
#else
#define SWA_TEST_UNSANITIZED
#endif

namespace swa_test {

template <class T = double>
class UniformReal {
  static_assert(std::is_floating_point_v<T>, "UniformReal<float> or UniformReal<double>");

 public:
  explicit UniformReal(T a = T(0), T b = T(1)) : a_(a), b_(b) {}

  // Takes one draw of a 64-bit engine; of a 32-bit engine one for float and
  // two for double.
  template <class G>
  T operator()(G& g) const {
    constexpr uint64_t kRange = uint64_t(G::max() - G::min());
    static_assert(kRange == ~uint64_t(0) || kRange == 0xffffffffu,
                  "UniformReal needs an engine with 32 or 64 random bits (mt19937, mt19937_64)");
    uint64_t bits = uint64_t(g() - G::min());
    double u;  // in [0, 1)
    if constexpr (kRange == ~uint64_t(0)) {
      u = double(bits >> 11) * 0x1.0p-53;
    } else if constexpr (std::is_same_v<T, float>) {
      u = double(bits >> 8) * 0x1.0p-24;
    } else {
      bits = (bits << 32) | uint64_t(g() - G::min());
      u = double(bits >> 11) * 0x1.0p-53;
    }
    const T x = T(double(a_) + (double(b_) - double(a_)) * u);
    return x < b_ ? x : std::nextafter(b_, a_);  // rounding never reaches b
  }

 private:
  T a_, b_;
};

}  // namespace swa_test
