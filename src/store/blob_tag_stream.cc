#include "store/blob_tag_stream.h"

#include <algorithm>

#include "absl/cleanup/cleanup.h"
#include "common/status_macros.h"
#include "store/blob.h"

#include <openssl/crypto.h>

namespace swa {

StreamingTagCheck::~StreamingTagCheck() {
  if (stream_ != nullptr) stream_->Cancel();
}

void StreamingTagCheck::Landed(uint64_t n) {
  if (n < kBlobHeaderBytes) return;
  if (!looked_) {
    looked_ = true;
    // The header is not authenticated yet: it only picks the construction
    // and the chunk size, both under the tag (docs/store.md).
    const std::optional<uint8_t> c = NamedTagChunkLog2(header_);
    if (!c.has_value() || !CheckTagChunkLog2(*c).ok()) return;  // Verify decides
    chunk_log2_ = *c;
    const uint64_t chunk = uint64_t{1} << chunk_log2_;
    chunks_ = payload_len_ / chunk + (payload_len_ % chunk != 0 ? 1 : 0);
    digests_.resize(static_cast<size_t>(chunks_) * kBlobTagBytes);
    stream_ = std::make_unique<ChunkStream>(static_cast<size_t>(chunks_), threads_, [this,
                                                                                    chunk](size_t i) {
      const uint64_t from = uint64_t{i} * chunk;
      absl::Status s = ChunkDigest(payload_ + from, std::min(chunk, payload_len_ - from),
                                   &digests_[i * kBlobTagBytes]);
      if (s.ok()) return;
      std::lock_guard<std::mutex> lock(error_mu_);
      if (!failed_.exchange(true)) error_ = s;
    });
  }
  if (stream_ == nullptr) return;
  const uint64_t in = std::min(n - kBlobHeaderBytes, payload_len_);
  stream_->Ready(in == payload_len_ ? static_cast<size_t>(chunks_)
                                    : static_cast<size_t>(in >> chunk_log2_));
}

absl::Status StreamingTagCheck::Verify(const uint8_t tag[kBlobTagBytes]) {
  if (stream_ == nullptr) return secret_.Verify(header_, full_key_, payload_, payload_len_, tag, threads_);
  stream_->Finish();
  stream_.reset();
  if (failed_.load()) return error_;
  uint8_t want[kBlobTagBytes];
  absl::Cleanup wipe = [&want] { OPENSSL_cleanse(want, sizeof want); };
  SWA_RETURN_IF_ERROR(secret_.TagFromDigests(header_, full_key_, payload_len_, digests_, want));
  return MatchTag(want, tag);
}

}  // namespace swa
