#include "store/blob_auth.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <algorithm>
#include <atomic>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <string>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "store/blob.h"
#include "store/hash_workers.h"

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

namespace {

struct Piece {
  const uint8_t* data;
  uint64_t len;
};

void PutU64(uint64_t v, uint8_t out[8]) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}

// HMAC-SHA-256 with `key` over the concatenation of `pieces`.
absl::Status Hmac(const std::vector<uint8_t>& key, std::initializer_list<Piece> pieces,
                  uint8_t out[kBlobTagBytes]) {
  EVP_MAC* mac = HmacMac();
  if (mac == nullptr) return CryptoError("EVP_MAC_fetch(\"HMAC\")");
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(mac);
  if (ctx == nullptr) return CryptoError("EVP_MAC_CTX_new");
  absl::Cleanup free_ctx = [ctx] { EVP_MAC_CTX_free(ctx); };
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0), OSSL_PARAM_END};
  if (EVP_MAC_init(ctx, key.data(), key.size(), params) != 1) return CryptoError("EVP_MAC_init");
  for (const Piece& p : pieces) {
    // EVP_MAC_update takes a size_t; hand the bytes over in pieces that fit.
    for (uint64_t done = 0; done < p.len;) {
      const uint64_t n = std::min<uint64_t>(p.len - done, uint64_t{1} << 30);
      if (EVP_MAC_update(ctx, p.data + done, static_cast<size_t>(n)) != 1)
        return CryptoError("EVP_MAC_update");
      done += n;
    }
  }
  size_t written = 0;
  if (EVP_MAC_final(ctx, out, &written, kBlobTagBytes) != 1 || written != kBlobTagBytes)
    return CryptoError("EVP_MAC_final");
  return absl::OkStatus();
}

// SHA-256, fetched once like the HMAC.
EVP_MD* Sha256() {
  static EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  return md;
}

}  // namespace

absl::Status BlobSecret::Tag(const uint8_t* header, std::string_view full_key,
                             const uint8_t* payload, uint64_t payload_len,
                             uint8_t out[kBlobTagBytes]) const {
  uint8_t key_len[8];
  PutU64(full_key.size(), key_len);
  return Hmac(bytes_,
              {{header, kBlobHeaderBytes},
               {key_len, sizeof key_len},
               {reinterpret_cast<const uint8_t*>(full_key.data()), full_key.size()},
               {payload, payload_len}},
              out);
}

absl::Status ChunkDigest(const uint8_t* chunk, uint64_t len, uint8_t out[kBlobTagBytes]) {
  EVP_MD* md = Sha256();
  if (md == nullptr) return CryptoError("EVP_MD_fetch(\"SHA256\")");
  unsigned int got = 0;
  if (EVP_Digest(chunk, static_cast<size_t>(len), out, &got, md, nullptr) != 1 ||
      got != kBlobTagBytes)
    return CryptoError("EVP_Digest(SHA256)");
  return absl::OkStatus();
}

std::optional<uint8_t> NamedTagChunkLog2(const uint8_t* header) {
  const uint16_t version = static_cast<uint16_t>(header[4] | header[5] << 8);
  const uint32_t flags = uint32_t{header[kBlobFlagsOffset]} |
                         uint32_t{header[kBlobFlagsOffset + 1]} << 8 |
                         uint32_t{header[kBlobFlagsOffset + 2]} << 16 |
                         uint32_t{header[kBlobFlagsOffset + 3]} << 24;
  if (version >= kBlobChunkedTagVersion && (flags & kBlobFlagChunkedTag) != 0)
    return header[kBlobTagChunkOffset];
  return std::nullopt;
}

absl::Status CheckTagChunkLog2(uint8_t chunk_log2) {
  if (chunk_log2 >= kBlobTagChunkLog2Min && chunk_log2 <= kBlobTagChunkLog2Max)
    return absl::OkStatus();
  return absl::DataLossError(absl::StrFormat(
      "blob header names a chunked HMAC tag with chunk exponent %u, outside %u ... %u: "
      "altered or corrupt",
      chunk_log2, kBlobTagChunkLog2Min, kBlobTagChunkLog2Max));
}

absl::Status MatchTag(const uint8_t want[kBlobTagBytes], const uint8_t tag[kBlobTagBytes]) {
  if (CRYPTO_memcmp(want, tag, kBlobTagBytes) != 0)
    return absl::DataLossError(
        "blob HMAC-SHA-256 tag does not match: the blob was altered, tagged with another "
        "secret, moved here from another key or namespace, or saved without a secret");
  return absl::OkStatus();
}

absl::Status BlobSecret::TagFromDigests(const uint8_t* header, std::string_view full_key,
                                        uint64_t payload_len, absl::Span<const uint8_t> digests,
                                        uint8_t out[kBlobTagBytes]) const {
  uint8_t lens[24];
  PutU64(full_key.size(), lens);
  PutU64(payload_len, lens + 8);
  PutU64(digests.size() / kBlobTagBytes, lens + 16);
  return Hmac(bytes_,
              {{header, kBlobHeaderBytes},
               {lens, 8},
               {reinterpret_cast<const uint8_t*>(full_key.data()), full_key.size()},
               {lens + 8, 16},
               {digests.data(), digests.size()}},
              out);
}

absl::Status BlobSecret::TagChunked(const uint8_t* header, std::string_view full_key,
                                    const uint8_t* payload, uint64_t payload_len,
                                    uint8_t chunk_log2, size_t threads,
                                    uint8_t out[kBlobTagBytes]) const {
  if (chunk_log2 < kBlobTagChunkLog2Min || chunk_log2 > kBlobTagChunkLog2Max)
    return absl::InvalidArgumentError(absl::StrFormat(
        "blob HMAC: tag chunk exponent %u is outside %u ... %u", chunk_log2,
        kBlobTagChunkLog2Min, kBlobTagChunkLog2Max));
  const uint64_t chunk = uint64_t{1} << chunk_log2;
  const uint64_t n = payload_len / chunk + (payload_len % chunk != 0 ? 1 : 0);
  // n <= payload_len / 64 + 1 and the payload is in memory: n * 32 fits.
  std::vector<uint8_t> digests(static_cast<size_t>(n) * kBlobTagBytes);
  std::atomic<bool> failed{false};
  std::mutex error_mu;
  absl::Status error;
  ParallelFor(static_cast<size_t>(n), threads, [&](size_t i) {
    const uint64_t from = uint64_t{i} * chunk;
    absl::Status s = ChunkDigest(payload + from, std::min(chunk, payload_len - from),
                                 &digests[i * kBlobTagBytes]);
    if (s.ok()) return;
    std::lock_guard<std::mutex> lock(error_mu);
    if (!failed.exchange(true)) error = s;
  });
  if (failed.load()) return error;
  return TagFromDigests(header, full_key, payload_len, digests, out);
}

absl::Status BlobSecret::Verify(const uint8_t* header, std::string_view full_key,
                                const uint8_t* payload, uint64_t payload_len,
                                const uint8_t tag[kBlobTagBytes], size_t threads) const {
  uint8_t want[kBlobTagBytes];
  absl::Cleanup wipe = [&want] { OPENSSL_cleanse(want, sizeof want); };
  // The construction the (not yet authenticated) header names: a header
  // changed to name the other one is another HMAC input, so its tag fails.
  if (const std::optional<uint8_t> c = NamedTagChunkLog2(header); c.has_value()) {
    SWA_RETURN_IF_ERROR(CheckTagChunkLog2(*c));
    SWA_RETURN_IF_ERROR(TagChunked(header, full_key, payload, payload_len, *c, threads, want));
  } else {
    SWA_RETURN_IF_ERROR(Tag(header, full_key, payload, payload_len, want));
  }
  return MatchTag(want, tag);
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
