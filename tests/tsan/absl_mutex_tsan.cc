// ThreadSanitizer annotations for the system Abseil's absl::Mutex.
//
// Compiled into the library only when SWACACHE_TSAN=ON (CMakeLists.txt). The
// Debian libabsl is built without TSan, so TSan cannot see that
// Mutex::Lock/Unlock order memory: every field the library guards with an
// absl::Mutex would be reported as a race. Instead of suppressing those reports
// (which would hide real races in our code), this file defines the Mutex entry
// points the library calls; each forwards to Abseil's own definition (found
// with dlsym(RTLD_NEXT)) and reports the lock and unlock to TSan with its
// public mutex annotation API, reader locks as reader locks. The definitions
// are hidden (the library's visibility), so they bind only the library's own
// calls and the test executables linked with the internal archive.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/synchronization/mutex.h"

namespace {

#define SWA_STR2(x) #x
#define SWA_STR(x) SWA_STR2(x)

// Itanium mangling of absl::<inline ns>::Mutex::<method>().
template <typename Fn>
Fn Real(const char* method) {
  const std::string ns = SWA_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string name = "_ZN4absl" + std::to_string(ns.size()) + ns + "5Mutex" +
                           std::to_string(std::string(method).size()) + method + "Ev";
  void* p = dlsym(RTLD_NEXT, name.c_str());
  if (p == nullptr) {
    std::fprintf(stderr, "absl_mutex_tsan: %s not found\n", name.c_str());
    std::abort();
  }
  return reinterpret_cast<Fn>(p);
}

using VoidFn = void (*)(absl::Mutex*);
using BoolFn = bool (*)(absl::Mutex*);

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  static const VoidFn real = Real<VoidFn>("Lock");
  __tsan_mutex_pre_lock(this, 0);
  real(this);
  __tsan_mutex_post_lock(this, 0, 0);
}

void Mutex::Unlock() {
  static const VoidFn real = Real<VoidFn>("Unlock");
  __tsan_mutex_pre_unlock(this, 0);
  real(this);
  __tsan_mutex_post_unlock(this, 0);
}

bool Mutex::TryLock() {
  static const BoolFn real = Real<BoolFn>("TryLock");
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_lock);
  const bool ok = real(this);
  __tsan_mutex_post_lock(this, ok ? __tsan_mutex_try_lock : __tsan_mutex_try_lock_failed, 0);
  return ok;
}

void Mutex::ReaderLock() {
  static const VoidFn real = Real<VoidFn>("ReaderLock");
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  real(this);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
}

void Mutex::ReaderUnlock() {
  static const VoidFn real = Real<VoidFn>("ReaderUnlock");
  __tsan_mutex_pre_unlock(this, __tsan_mutex_read_lock);
  real(this);
  __tsan_mutex_post_unlock(this, __tsan_mutex_read_lock);
}

bool Mutex::ReaderTryLock() {
  static const BoolFn real = Real<BoolFn>("ReaderTryLock");
  const unsigned flags = __tsan_mutex_read_lock | __tsan_mutex_try_lock;
  __tsan_mutex_pre_lock(this, flags);
  const bool ok = real(this);
  __tsan_mutex_post_lock(
      this, ok ? flags : (__tsan_mutex_read_lock | __tsan_mutex_try_lock_failed), 0);
  return ok;
}

ABSL_NAMESPACE_END
}  // namespace absl
