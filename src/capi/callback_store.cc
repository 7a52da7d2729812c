#include "capi/callback_store.h"

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "capi/struct_versions.h"

namespace swa::capi {
namespace {

const uint8_t* KeyBytes(std::string_view key) {
  return reinterpret_cast<const uint8_t*>(key.data());
}

absl::Status Unsupported(const char* call) {
  return absl::UnimplementedError(
      absl::StrFormat("the attached store does not support %s (its %s entry is NULL)", call, call));
}

// The callback's message buffer: zeroed before the call, NUL-terminated after.
struct Message {
  char text[SWA_STORE_MESSAGE_BYTES] = {0};
  const char* Finish() {
    text[sizeof text - 1] = '\0';
    return text;
  }
};

template <typename Span>
std::vector<swa_iov_t> ToIov(absl::Span<const Span> pieces) {
  std::vector<swa_iov_t> iov(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    iov[i].data = const_cast<uint8_t*>(pieces[i].data());  // put only reads them
    iov[i].size = pieces[i].size();
  }
  return iov;
}

}  // namespace

absl::Status FromCallbackStatus(int code, const char* message) {
  if (code == SWA_OK) return absl::OkStatus();
  const int value = code;
  std::string text(message, strnlen(message, SWA_STORE_MESSAGE_BYTES));
  if (text.empty()) text = "(no message)";
  if (!IsErrorStatus(value))
    return absl::UnknownError(
        absl::StrFormat("returned %d, which is not a swa_status_t: %s", value, text));
  return absl::Status(static_cast<absl::StatusCode>(value), text);
}

absl::StatusOr<std::unique_ptr<CallbackStore>> CallbackStore::Create(const swa_kv_store_t& table) {
  if (absl::Status s = CheckStructSize<swa_kv_store_t>(table.struct_size); !s.ok()) return s;
  if (table.put == nullptr && table.get == nullptr)
    return absl::InvalidArgumentError("swa_kv_store_t has neither put nor get: nothing to use");
  return std::unique_ptr<CallbackStore>(new CallbackStore(table));
}

CallbackStore::~CallbackStore() {
  if (table_.release != nullptr) table_.release(table_.user_data);
}

absl::Status CallbackStore::Put(std::string_view key, absl::Span<const ConstByteSpan> pieces) {
  if (table_.put == nullptr) return Unsupported("put");
  const std::vector<swa_iov_t> iov = ToIov(pieces);
  Message message;
  const int code = table_.put(table_.user_data, KeyBytes(key), key.size(), iov.data(),
                                       iov.size(), message.text, sizeof message.text);
  return FromCallbackStatus(code, message.Finish());
}

absl::StatusOr<uint64_t> CallbackStore::Get(std::string_view key,
                                            absl::Span<const ByteSpan> pieces) {
  if (table_.get == nullptr) return Unsupported("get");
  const std::vector<swa_iov_t> iov = ToIov(pieces);
  Message message;
  uint64_t blob_size = TotalBytes(pieces);  // the contract: the buffers' total on entry
  const int code = table_.get(table_.user_data, KeyBytes(key), key.size(), iov.data(),
                                       iov.size(), &blob_size, message.text, sizeof message.text);
  if (absl::Status s = FromCallbackStatus(code, message.Finish()); !s.ok()) return s;
  return blob_size;
}

absl::StatusOr<bool> CallbackStore::Exists(std::string_view key) {
  if (table_.exists == nullptr) return Unsupported("exists");
  Message message;
  uint32_t exists = 0;
  const int code = table_.exists(table_.user_data, KeyBytes(key), key.size(), &exists,
                                          message.text, sizeof message.text);
  if (absl::Status s = FromCallbackStatus(code, message.Finish()); !s.ok()) return s;
  return exists != 0;
}

absl::Status CallbackStore::Remove(std::string_view key) {
  if (table_.remove == nullptr) return Unsupported("remove");
  Message message;
  const int code = table_.remove(table_.user_data, KeyBytes(key), key.size(),
                                          message.text, sizeof message.text);
  return FromCallbackStatus(code, message.Finish());
}

}  // namespace swa::capi
