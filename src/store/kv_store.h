// The C++ interface of a key-value store. The built-in stores implement it;
// an engine's C callback table reaches it through the adaptor in src/capi/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace swa {

using ConstByteSpan = absl::Span<const uint8_t>;
using ByteSpan = absl::Span<uint8_t>;

// Most bytes of an engine key (the C header's SWA_STORE_MAX_KEY_BYTES).
inline constexpr size_t kMaxKeyBytes = 1024;

// Thread-safe: calls may run concurrently from several threads. Spans are
// borrowed for the call only.
class KvStore {
 public:
  virtual ~KvStore() = default;

  // Stores the concatenation of `pieces` under `key`, replacing any blob
  // there; readers see the old blob or the new one, never a mix.
  virtual absl::Status Put(std::string_view key, absl::Span<const ConstByteSpan> pieces) = 0;
  // Returns the size of the blob under `key` (NOT_FOUND when there is none).
  // When it equals the pieces' total, the blob is copied into them in order;
  // otherwise their contents are unspecified.
  virtual absl::StatusOr<uint64_t> Get(std::string_view key,
                                       absl::Span<const ByteSpan> pieces) = 0;
  // Get, telling how much has arrived: when the blob's size equals the
  // pieces' total, `landed(n)` is called on the calling thread, n never
  // decreasing and last equal to the size, whenever the first n bytes of the
  // blob are in the pieces for good. The default calls Get, then landed once;
  // stores that receive a blob in parts (the Redis store) call it as the
  // parts arrive, so that the caller can work on them meanwhile.
  virtual absl::StatusOr<uint64_t> GetStreaming(std::string_view key,
                                                absl::Span<const ByteSpan> pieces,
                                                const std::function<void(uint64_t)>& landed);
  // GetStreaming, then, when the blob filled the pieces, `verify()` on the
  // bytes in them: its error is returned as it is. A store that copies what
  // it read into another store (the tiered store's promotion) copies only a
  // blob that `verify` accepted, and never one read without a `verify`
  // (null): a blob the reader refuses must not outlive the refusal elsewhere.
  // The default: GetStreaming, then verify.
  virtual absl::StatusOr<uint64_t> GetVerified(std::string_view key,
                                               absl::Span<const ByteSpan> pieces,
                                               const std::function<void(uint64_t)>& landed,
                                               const std::function<absl::Status()>& verify);
  virtual absl::StatusOr<bool> Exists(std::string_view key) = 0;
  // NOT_FOUND when there is no blob under `key`.
  virtual absl::Status Remove(std::string_view key) = 0;
  // Longest-prefix probe: the index of the first of `keys` present, or -1 when
  // none is. An error for a key before the first present one is returned, with
  // that key's index in `*failed_key`; errors after it do not matter (a store
  // may stop asking at the first hit). The default asks Exists key by key;
  // stores with a batched round trip override it.
  virtual absl::StatusOr<int64_t> FirstPresent(absl::Span<const std::string> keys,
                                               size_t* failed_key);
};

// Total bytes of a scattered buffer.
uint64_t TotalBytes(absl::Span<const ConstByteSpan> pieces);
uint64_t TotalBytes(absl::Span<const ByteSpan> pieces);

// Concatenates `pieces` into `dst` (TotalBytes(pieces) bytes).
void GatherInto(absl::Span<const ConstByteSpan> pieces, uint8_t* dst);
// Spreads TotalBytes(pieces) bytes of `src` over `pieces`, in order.
void ScatterFrom(const uint8_t* src, absl::Span<const ByteSpan> pieces);

// A key as text for messages: printable bytes as they are, others escaped,
// long keys shortened.
std::string PrintableKey(std::string_view key);

}  // namespace swa
