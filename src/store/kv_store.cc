#include "store/kv_store.h"

#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace swa {

absl::StatusOr<int64_t> KvStore::FirstPresent(absl::Span<const std::string> keys,
                                              size_t* failed_key) {
  for (size_t i = 0; i < keys.size(); ++i) {
    absl::StatusOr<bool> found = Exists(keys[i]);
    if (!found.ok()) {
      *failed_key = i;
      return found.status();
    }
    if (*found) return static_cast<int64_t>(i);
  }
  return int64_t{-1};
}

absl::StatusOr<uint64_t> KvStore::GetStreaming(std::string_view key,
                                               absl::Span<const ByteSpan> pieces,
                                               const std::function<void(uint64_t)>& landed) {
  absl::StatusOr<uint64_t> size = Get(key, pieces);
  if (size.ok() && *size == TotalBytes(pieces) && landed) landed(*size);
  return size;
}

absl::StatusOr<uint64_t> KvStore::GetVerified(std::string_view key,
                                              absl::Span<const ByteSpan> pieces,
                                              const std::function<void(uint64_t)>& landed,
                                              const std::function<absl::Status()>& verify) {
  absl::StatusOr<uint64_t> size = GetStreaming(key, pieces, landed);
  if (!size.ok() || *size != TotalBytes(pieces) || !verify) return size;
  if (absl::Status s = verify(); !s.ok()) return s;
  return size;
}

uint64_t TotalBytes(absl::Span<const ConstByteSpan> pieces) {
  uint64_t total = 0;
  for (ConstByteSpan p : pieces) total += p.size();
  return total;
}

uint64_t TotalBytes(absl::Span<const ByteSpan> pieces) {
  uint64_t total = 0;
  for (ByteSpan p : pieces) total += p.size();
  return total;
}

void GatherInto(absl::Span<const ConstByteSpan> pieces, uint8_t* dst) {
  for (ConstByteSpan p : pieces) {
    if (!p.empty()) std::memcpy(dst, p.data(), p.size());
    dst += p.size();
  }
}

void ScatterFrom(const uint8_t* src, absl::Span<const ByteSpan> pieces) {
  for (ByteSpan p : pieces) {
    if (!p.empty()) std::memcpy(p.data(), src, p.size());
    src += p.size();
  }
}

std::string PrintableKey(std::string_view key) {
  constexpr size_t kMax = 96;
  const std::string_view head = key.substr(0, kMax);
  std::string text = absl::CHexEscape(absl::string_view(head.data(), head.size()));
  if (key.size() > kMax) absl::StrAppend(&text, "...(", key.size(), " bytes)");
  return text;
}

}  // namespace swa
