#include "store/store_adaptor.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "store/kv_store.h"

namespace swa {
namespace {

// Blobs of an unexpected size are read whole to learn why; past this size we
// give up and report the size alone.
constexpr uint64_t kMaxInspectBytes = uint64_t{256} << 20;

// A callback's status and message as an absl::Status naming the call and key.
absl::Status FromCallback(swa_status_t code, const char* message, const char* call,
                          std::string_view full_key) {
  if (code == SWA_OK) return absl::OkStatus();
  const int value = static_cast<int>(code);
  std::string text(message, strnlen(message, SWA_STORE_MESSAGE_BYTES));
  if (text.empty()) text = "(no message)";
  if (value < 1 || value > SWA_UNAUTHENTICATED)
    return absl::UnknownError(absl::StrFormat(
        "store %s(\"%s\") returned %d, which is not a swa_status_t: %s", call,
        PrintableKey(full_key), value, text));
  return absl::Status(static_cast<absl::StatusCode>(value),
                      absl::StrFormat("store %s(\"%s\"): %s", call, PrintableKey(full_key), text));
}

absl::Status Unsupported(const char* call) {
  return absl::UnimplementedError(
      absl::StrFormat("the attached store does not support %s (its %s entry is NULL)", call, call));
}

swa_iov_t Iov(void* data, size_t size) {
  swa_iov_t v;
  v.struct_size = sizeof v;
  v.data = data;
  v.size = size;
  return v;
}

}  // namespace

absl::StatusOr<std::shared_ptr<StoreAdaptor>> StoreAdaptor::Create(const swa_kv_store_t& table,
                                                                   uint64_t fingerprint) {
  if (table.struct_size != sizeof(swa_kv_store_t))
    return absl::InvalidArgumentError(absl::StrFormat(
        "swa_kv_store_t.struct_size = %u is not a size this library knows (expected %u = "
        "sizeof(swa_kv_store_t))",
        table.struct_size, sizeof(swa_kv_store_t)));
  if (table.put == nullptr && table.get == nullptr)
    return absl::InvalidArgumentError("swa_kv_store_t has neither put nor get: nothing to use");
  return std::shared_ptr<StoreAdaptor>(new StoreAdaptor(table, fingerprint));
}

StoreAdaptor::~StoreAdaptor() {
  if (table_.release != nullptr) table_.release(table_.user_data);
}

absl::Status StoreAdaptor::CheckKey(std::string_view key) {
  if (key.empty()) return absl::InvalidArgumentError("key_len = 0: a store key needs at least one byte");
  if (key.size() > SWA_STORE_MAX_KEY_BYTES)
    return absl::InvalidArgumentError(absl::StrFormat(
        "key_len = %u exceeds SWA_STORE_MAX_KEY_BYTES = %u", key.size(), SWA_STORE_MAX_KEY_BYTES));
  return absl::OkStatus();
}

std::string StoreAdaptor::FullKey(std::string_view key) const {
  std::string full = absl::StrFormat("%016x:", fingerprint_);
  full.append(key.data(), key.size());
  return full;
}

absl::Status StoreAdaptor::Put(std::string_view key, absl::Span<const swa_iov_t> iov) {
  if (table_.put == nullptr) return Unsupported("put");
  const std::string full = FullKey(key);
  char message[SWA_STORE_MESSAGE_BYTES] = {0};
  const swa_status_t code =
      table_.put(table_.user_data, reinterpret_cast<const uint8_t*>(full.data()), full.size(),
                 iov.data(), iov.size(), message, sizeof message);
  message[sizeof message - 1] = '\0';
  return FromCallback(code, message, "put", full);
}

absl::Status StoreAdaptor::Get(std::string_view key, absl::Span<const swa_iov_t> iov,
                               uint64_t* blob_size) {
  if (table_.get == nullptr) return Unsupported("get");
  const std::string full = FullKey(key);
  char message[SWA_STORE_MESSAGE_BYTES] = {0};
  *blob_size = IovBytes(iov);
  const swa_status_t code =
      table_.get(table_.user_data, reinterpret_cast<const uint8_t*>(full.data()), full.size(),
                 iov.data(), iov.size(), blob_size, message, sizeof message);
  message[sizeof message - 1] = '\0';
  return FromCallback(code, message, "get", full);
}

absl::StatusOr<bool> StoreAdaptor::Exists(std::string_view key) {
  if (table_.exists == nullptr) return Unsupported("exists");
  const std::string full = FullKey(key);
  char message[SWA_STORE_MESSAGE_BYTES] = {0};
  uint32_t exists = 0;
  const swa_status_t code = table_.exists(table_.user_data,
                                          reinterpret_cast<const uint8_t*>(full.data()),
                                          full.size(), &exists, message, sizeof message);
  message[sizeof message - 1] = '\0';
  if (absl::Status s = FromCallback(code, message, "exists", full); !s.ok()) return s;
  return exists != 0;
}

absl::Status StoreAdaptor::Remove(std::string_view key) {
  if (table_.remove == nullptr) return Unsupported("remove");
  const std::string full = FullKey(key);
  char message[SWA_STORE_MESSAGE_BYTES] = {0};
  const swa_status_t code =
      table_.remove(table_.user_data, reinterpret_cast<const uint8_t*>(full.data()), full.size(),
                    message, sizeof message);
  message[sizeof message - 1] = '\0';
  return FromCallback(code, message, "remove", full);
}

absl::Status StoreAdaptor::WriteBlob(std::string_view key, const BlobHeader& header,
                                     const uint8_t* payload) {
  uint8_t head[kBlobHeaderBytes];
  EncodeBlobHeader(header, payload, head);
  const swa_iov_t iov[2] = {Iov(head, sizeof head),
                            Iov(const_cast<uint8_t*>(payload), header.payload_bytes)};
  return Put(key, iov);
}

absl::StatusOr<BlobHeader> StoreAdaptor::ReadBlob(std::string_view key,
                                                  const BlobExpectation& expect,
                                                  uint8_t* header_buf, uint8_t* payload_buf) {
  const swa_iov_t iov[2] = {Iov(header_buf, kBlobHeaderBytes),
                            Iov(payload_buf, expect.payload_bytes)};
  uint64_t blob_size = 0;
  if (absl::Status s = Get(key, iov, &blob_size); !s.ok()) return s;
  if (blob_size != kBlobHeaderBytes + expect.payload_bytes)
    return ExplainSizeMismatch(key, blob_size, expect);
  return VerifyBlob(header_buf, payload_buf, expect.payload_bytes, expect);
}

absl::Status StoreAdaptor::ExplainSizeMismatch(std::string_view key, uint64_t blob_size,
                                               const BlobExpectation& expect) {
  const std::string where = absl::StrFormat("blob \"%s\" is %u bytes, this cache's blobs are %u",
                                            PrintableKey(FullKey(key)), blob_size,
                                            kBlobHeaderBytes + expect.payload_bytes);
  if (blob_size < kBlobHeaderBytes)
    return absl::DataLossError(absl::StrFormat("%s: shorter than a header, truncated", where));
  if (blob_size > kMaxInspectBytes)
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: written for another layout (too large to inspect)", where));
  std::vector<uint8_t> blob(blob_size);
  const swa_iov_t iov[1] = {Iov(blob.data(), blob.size())};
  uint64_t again = 0;
  if (absl::Status s = Get(key, iov, &again); !s.ok()) return s;
  if (again != blob_size)
    return absl::AbortedError(absl::StrFormat("%s, then %u bytes: it changed while read", where,
                                              again));
  absl::StatusOr<BlobHeader> h = VerifyBlob(blob.data(), blob.size(), expect);
  if (h.ok()) return absl::InternalError(absl::StrFormat("%s, yet it verified", where));
  return absl::Status(h.status().code(), absl::StrFormat("%s: %s", where, h.status().message()));
}

}  // namespace swa
