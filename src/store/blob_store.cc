#include "store/blob_store.h"

#include <memory>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "store/blob_tag_stream.h"

namespace swa {
namespace {

// Blobs of an unexpected size are read whole to learn why; past this size we
// give up and report the size alone.

// A store error with the call and the full key in front of the store's text.
absl::Status Named(const absl::Status& status, const char* call, std::string_view full_key) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrFormat("store %s(\"%s\"): %s", call,
                                                     PrintableKey(full_key), status.message()));
}

}  // namespace

absl::Status BlobStore::CheckKey(std::string_view key) {
  if (key.empty()) return absl::InvalidArgumentError("key_len = 0: a store key needs at least one byte");
  if (key.size() > kMaxKeyBytes)
    return absl::InvalidArgumentError(absl::StrFormat(
        "key_len = %u exceeds SWA_STORE_MAX_KEY_BYTES = %u", key.size(), kMaxKeyBytes));
  return absl::OkStatus();
}

std::string BlobStore::FullKey(std::string_view key) const {
  std::string full = prefix_;
  absl::StrAppendFormat(&full, "%016x:", fingerprint_);
  full.append(key.data(), key.size());
  return full;
}

absl::Status BlobStore::Put(std::string_view key, absl::Span<const ConstByteSpan> pieces) {
  const std::string full = FullKey(key);
  return Named(store_->Put(full, pieces), "put", full);
}

absl::StatusOr<uint64_t> BlobStore::Get(std::string_view key, absl::Span<const ByteSpan> pieces) {
  const std::string full = FullKey(key);
  // Unverified: a tiered store must not copy it into a faster tier.
  absl::StatusOr<uint64_t> size = store_->GetVerified(full, pieces, nullptr, nullptr);
  if (!size.ok()) return Named(size.status(), "get", full);
  return size;
}

absl::StatusOr<bool> BlobStore::Exists(std::string_view key) {
  const std::string full = FullKey(key);
  absl::StatusOr<bool> found = store_->Exists(full);
  if (!found.ok()) return Named(found.status(), "exists", full);
  return found;
}

absl::StatusOr<int64_t> BlobStore::FirstPresent(absl::Span<const std::string_view> keys) {
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    if (absl::Status s = CheckKey(keys[i]); !s.ok())
      return absl::Status(s.code(), absl::StrFormat("probe key %zu: %s", i, s.message()));
    full.push_back(FullKey(keys[i]));
  }
  size_t failed = SIZE_MAX;  // a store that names no key
  absl::StatusOr<int64_t> found = store_->FirstPresent(full, &failed);
  if (!found.ok()) {
    if (failed >= full.size())
      return absl::Status(found.status().code(),
                          absl::StrFormat("store probe: %s", found.status().message()));
    return absl::Status(found.status().code(),
                        absl::StrFormat("store probe: key %zu (\"%s\"): %s", failed,
                                        PrintableKey(full[failed]), found.status().message()));
  }
  if (*found < -1 || *found >= static_cast<int64_t>(full.size()))
    return absl::InternalError(absl::StrFormat(
        "store probe: the store answered key %d of %zu", *found, full.size()));
  return found;
}

absl::Status BlobStore::Remove(std::string_view key) {
  const std::string full = FullKey(key);
  return Named(store_->Remove(full), "remove", full);
}

absl::Status BlobStore::WriteBlob(std::string_view key, const BlobHeader& header,
                                  const uint8_t* payload) {
  BlobHeader bound = header;
  bound.key_hash = BlobKeyHash(key);
  bound.flags = (header.flags & kBlobFlagCompression) | (tagged() ? kBlobFlagTagged : 0);
  bound.tag_chunk_log2 = 0;
  const bool chunked = tagged() && security_.tag_chunk_log2 != 0;
  if (chunked) {
    bound.version = kBlobChunkedTagVersion;
    bound.flags |= kBlobFlagChunkedTag;
    bound.tag_chunk_log2 = security_.tag_chunk_log2;
  }
  uint8_t head[kBlobHeaderBytes];
  EncodeBlobHeader(bound, payload, head);
  uint8_t tag[kBlobTagBytes];
  if (tagged()) {
    const std::string full = FullKey(key);
    if (chunked)
      SWA_RETURN_IF_ERROR(security_.secret->TagChunked(head, full, payload, header.payload_bytes,
                                                       bound.tag_chunk_log2,
                                                       security_.tag_threads, tag));
    else
      SWA_RETURN_IF_ERROR(security_.secret->Tag(head, full, payload, header.payload_bytes, tag));
  }
  const ConstByteSpan pieces[3] = {ConstByteSpan(head, sizeof head),
                                   ConstByteSpan(payload, header.payload_bytes),
                                   ConstByteSpan(tag, sizeof tag)};
  return Put(key, absl::MakeConstSpan(pieces, tagged() ? 3 : 2));
}

absl::StatusOr<BlobHeader> BlobStore::ReadBlob(std::string_view key, const BlobExpectation& expect,
                                               uint8_t* header_buf, uint8_t* payload_buf,
                                               uint8_t* tag_buf) {
  BlobExpectation keyed = expect;
  keyed.key_hash = BlobKeyHash(key);
  const std::string full = FullKey(key);
  auto named = [&](const absl::Status& s) {
    return absl::Status(s.code(),
                        absl::StrFormat("key \"%s\": %s", PrintableKey(full), s.message()));
  };
  const ByteSpan pieces[3] = {ByteSpan(header_buf, kBlobHeaderBytes),
                              ByteSpan(payload_buf, keyed.payload_bytes),
                              ByteSpan(tag_buf, tagged() ? kBlobTagBytes : 0)};
  // With a secret, the chunks of a chunked tag are hashed as they arrive.
  std::unique_ptr<StreamingTagCheck> check;
  if (tagged())
    check = std::make_unique<StreamingTagCheck>(*security_.secret, full, header_buf, payload_buf,
                                                keyed.payload_bytes, security_.tag_threads);
  // Verified inside the get, so that a store which copies what it read (a
  // tiered store's promotion) copies only a blob accepted here.
  absl::StatusOr<BlobHeader> verified = absl::InternalError("blob not verified");
  bool verify_ran = false;
  auto verify = [&]() -> absl::Status {
    verify_ran = true;
    if (tagged()) {
      // The tag first: nothing an adversary wrote is interpreted before it holds.
      absl::Status auth = check->Verify(tag_buf);
      if (!auth.ok()) return (verified = named(auth)).status();
      keyed.authenticated = true;  // the tag covers all the CRC covers
    }
    absl::StatusOr<BlobHeader> h = VerifyBlob(header_buf, payload_buf, keyed.payload_bytes, keyed);
    if (!h.ok()) return (verified = named(h.status())).status();
    const bool has_tag = (h->flags & kBlobFlagTagged) != 0;
    if (has_tag && !tagged())
      return (verified = named(absl::DataLossError(
                  "blob is flagged as HMAC-tagged but arrived without its tag (stripped), or was "
                  "saved by a cache with a store secret; this cache has none")))
          .status();
    if (!has_tag && tagged())  // only a writer holding the secret could get here
      return (verified = named(absl::DataLossError("blob has a valid tag but is not flagged as tagged")))
          .status();
    verified = *h;
    return absl::OkStatus();
  };
  const size_t n_pieces = tagged() ? 3 : 2;
  std::function<void(uint64_t)> landed;
  if (tagged()) landed = [&check](uint64_t n) { check->Landed(n); };
  absl::StatusOr<uint64_t> blob_size =
      store_->GetVerified(full, absl::MakeConstSpan(pieces, n_pieces), landed, verify);
  if (verify_ran && !verified.ok()) return verified.status();  // refused, as the store returned it
  if (!blob_size.ok()) return Named(blob_size.status(), "get", full);
  if (*blob_size != BlobBytes(keyed.payload_bytes))
    return ExplainSizeMismatch(key, *blob_size, keyed);
  // A store that filled the pieces without calling verify: verify here.
  if (!verify_ran) SWA_RETURN_IF_ERROR(verify());
  return verified;
}

absl::Status BlobStore::ExplainSizeMismatch(std::string_view key, uint64_t blob_size,
                                            const BlobExpectation& expect) {
  const std::string where = absl::StrFormat("blob \"%s\" is %u bytes, this cache's blobs are %u",
                                            PrintableKey(FullKey(key)), blob_size,
                                            BlobBytes(expect.payload_bytes));
  if (blob_size < kBlobHeaderBytes)
    return absl::DataLossError(absl::StrFormat("%s: shorter than a header, truncated", where));
  // The size of this layout's blob with a tag when this cache has none, or
  // without one when it has one: read it (never more than a tagged blob) to
  // say which.
  const uint64_t untagged_bytes = kBlobHeaderBytes + expect.payload_bytes;
  if (tagged() ? blob_size == untagged_bytes : blob_size == untagged_bytes + kBlobTagBytes) {
    std::vector<uint8_t> blob(blob_size);
    const ByteSpan whole[1] = {ByteSpan(blob.data(), blob.size())};
    absl::StatusOr<uint64_t> again = Get(key, whole);
    if (!again.ok()) return again.status();
    if (*again == blob_size) {
      absl::StatusOr<BlobHeader> h = VerifyBlob(blob.data(), untagged_bytes, expect);
      if (tagged())
        return absl::DataLossError(absl::StrFormat(
            "%s: %s", where,
            h.ok() ? "an untagged blob, and this cache has a store secret: saved without the "
                     "secret (or its tag stripped); refused"
                   : absl::StrCat("no valid HMAC tag (", h.status().message(), ")")));
      if (h.ok() && (h->flags & kBlobFlagTagged) != 0)
        return absl::DataLossError(absl::StrFormat(
            "%s: an HMAC-tagged blob, saved by a cache with a store secret; this cache has none "
            "(set the same store_secret to read it)",
            where));
    }
  }
  // With a secret, nothing without a valid tag is anything but lost.
  if (tagged())
    return absl::DataLossError(absl::StrFormat("%s: no valid HMAC-tagged blob of this layout", where));
  // Never allocate more than this cache's blobs take, whatever the store claims.
  if (blob_size > kBlobHeaderBytes + expect.payload_bytes)
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: larger than any blob of this layout (another layout, or a store reporting a wrong "
        "size); not read",
        where));
  std::vector<uint8_t> blob(blob_size);
  const ByteSpan whole[1] = {ByteSpan(blob.data(), blob.size())};
  absl::StatusOr<uint64_t> again = Get(key, whole);
  if (!again.ok()) return again.status();
  if (*again != blob_size)
    return absl::AbortedError(absl::StrFormat("%s, then %u bytes: it changed while read", where,
                                              *again));
  absl::StatusOr<BlobHeader> h = VerifyBlob(blob.data(), blob.size(), expect);
  if (h.ok()) return absl::InternalError(absl::StrFormat("%s, yet it verified", where));
  return absl::Status(h.status().code(), absl::StrFormat("%s: %s", where, h.status().message()));
}

}  // namespace swa
