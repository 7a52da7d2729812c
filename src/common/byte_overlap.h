// Whether a call's tensors share memory: the one rule and message of the C
// API for an output that overlaps another argument (swa_codec_*, swa_step,
// the graph step, swa_attention_merge, swa_compress_step, swa_project,
// swa_rope_apply). Addresses only: host pointers, or device pointers of one
// device (one address space); never dereferenced.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace swa {

// A tensor's bytes [addr, addr + bytes), with its name for the message.
// NULL or zero bytes is empty and overlaps nothing.
struct MemRange {
  const char* name;
  uintptr_t addr;
  uint64_t bytes;
};

inline MemRange RangeOf(const char* name, const void* p, uint64_t bytes) {
  return MemRange{name, reinterpret_cast<uintptr_t>(p), p == nullptr ? 0 : bytes};
}

// True when the two share a byte. Wrap-safe for any addr and bytes.
inline bool RangesOverlap(const MemRange& a, const MemRange& b) {
  if (a.bytes == 0 || b.bytes == 0) return false;
  return a.addr >= b.addr ? a.addr - b.addr < b.bytes : b.addr - a.addr < a.bytes;
}

// INVALID_ARGUMENT naming both ranges when they overlap, e.g.
// "out [0x1000, +512) and q [0x1100, +512) overlap". With `may_equal`,
// exactly the same bytes (same start and length: an in-place output) is
// allowed, and a partial overlap says so.
inline absl::Status CheckApart(const MemRange& out, const MemRange& other, bool may_equal = false) {
  if (!RangesOverlap(out, other)) return absl::OkStatus();
  if (may_equal && out.addr == other.addr && out.bytes == other.bytes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s [%p, +%u) and %s [%p, +%u) overlap%s", out.name, reinterpret_cast<void*>(out.addr),
      out.bytes, other.name, reinterpret_cast<void*>(other.addr), other.bytes,
      may_equal ? absl::StrFormat(" (%s may be exactly %s, the same bytes, but must not "
                                  "otherwise share memory with it)",
                                  out.name, other.name)
                : std::string(" (an output must not share memory with another argument)")));
}

}  // namespace swa
