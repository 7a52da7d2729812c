#include "store/blob_auth.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <algorithm>
#include <string>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace swa {
namespace {

absl::Status CryptoError(const char* what) {
  const unsigned long err = ERR_get_error();
  char text[256] = "no OpenSSL error queued";
  if (err != 0) ERR_error_string_n(err, text, sizeof text);
  ERR_clear_error();
  return absl::InternalError(absl::StrFormat("blob HMAC: %s failed: %s", what, text));
}

// The HMAC implementation, fetched once (EVP_MAC_fetch is not cheap).
EVP_MAC* HmacMac() {
  static EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  return mac;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const BlobSecret>> BlobSecret::Create(
    absl::Span<const uint8_t> bytes, const char* what) {
  if (bytes.size() < kMinStoreSecretBytes || bytes.size() > kMaxStoreSecretBytes)
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s_len = %u: a store secret is %u ... %u bytes (0 with NULL for none)", what,
        bytes.size(), kMinStoreSecretBytes, kMaxStoreSecretBytes));
  return std::shared_ptr<const BlobSecret>(new BlobSecret(bytes));
}

BlobSecret::~BlobSecret() {
  if (!bytes_.empty()) OPENSSL_cleanse(bytes_.data(), bytes_.size());
}

absl::Status BlobSecret::Tag(const uint8_t* header, std::string_view full_key,
                             const uint8_t* payload, uint64_t payload_len,
                             uint8_t out[kBlobTagBytes]) const {
  EVP_MAC* mac = HmacMac();
  if (mac == nullptr) return CryptoError("EVP_MAC_fetch(\"HMAC\")");
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(mac);
  if (ctx == nullptr) return CryptoError("EVP_MAC_CTX_new");
  absl::Cleanup free_ctx = [ctx] { EVP_MAC_CTX_free(ctx); };
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0), OSSL_PARAM_END};
  if (EVP_MAC_init(ctx, bytes_.data(), bytes_.size(), params) != 1)
    return CryptoError("EVP_MAC_init");
  uint8_t key_len[8];
  for (int i = 0; i < 8; ++i) key_len[i] = static_cast<uint8_t>(uint64_t{full_key.size()} >> (8 * i));
  if (EVP_MAC_update(ctx, header, 64) != 1 || EVP_MAC_update(ctx, key_len, sizeof key_len) != 1 ||
      EVP_MAC_update(ctx, reinterpret_cast<const uint8_t*>(full_key.data()), full_key.size()) != 1)
    return CryptoError("EVP_MAC_update");
  // EVP_MAC_update takes a size_t; hand the payload over in pieces that fit.
  for (uint64_t done = 0; done < payload_len;) {
    const uint64_t n = std::min<uint64_t>(payload_len - done, uint64_t{1} << 30);
    if (EVP_MAC_update(ctx, payload + done, static_cast<size_t>(n)) != 1)
      return CryptoError("EVP_MAC_update");
    done += n;
  }
  size_t written = 0;
  if (EVP_MAC_final(ctx, out, &written, kBlobTagBytes) != 1 || written != kBlobTagBytes)
    return CryptoError("EVP_MAC_final");
  return absl::OkStatus();
}

absl::Status BlobSecret::Verify(const uint8_t* header, std::string_view full_key,
                                const uint8_t* payload, uint64_t payload_len,
                                const uint8_t tag[kBlobTagBytes]) const {
  uint8_t want[kBlobTagBytes];
  absl::Cleanup wipe = [&want] { OPENSSL_cleanse(want, sizeof want); };
  if (absl::Status s = Tag(header, full_key, payload, payload_len, want); !s.ok()) return s;
  if (CRYPTO_memcmp(want, tag, kBlobTagBytes) != 0)
    return absl::DataLossError(
        "blob HMAC-SHA-256 tag does not match: the blob was altered, tagged with another "
        "secret, moved here from another key or namespace, or saved without a secret");
  return absl::OkStatus();
}

absl::Status CheckStoreNamespace(std::string_view name_space, const char* what) {
  if (name_space.size() > kMaxStoreNamespaceBytes)
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s_len = %u exceeds %u bytes", what, name_space.size(), kMaxStoreNamespaceBytes));
  return absl::OkStatus();
}

std::string StoreNamespacePrefix(std::string_view name_space) {
  if (name_space.empty()) return std::string();
  return absl::StrCat("ns", name_space.size(), ":",
                      absl::string_view(name_space.data(), name_space.size()));
}

}  // namespace swa
