// Checks a blob's HMAC tag while the blob is still arriving
// (KvStore::GetStreaming): the chunks of a chunked tag (store/blob_auth.h)
// are hashed by the hash workers as soon as they are whole, so that a store
// that receives a blob in parts (the Redis store) overlaps the network with
// the hashing. A blob with a single-pass tag, or whose store reports it only
// once whole, is checked at the end as BlobSecret::Verify does.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "store/blob_auth.h"
#include "store/hash_workers.h"

namespace swa {

class StreamingTagCheck {
 public:
  // `header` (kBlobHeaderBytes), `payload` (payload_len bytes) and the tag
  // are the pieces a GetStreaming fills, in that order; all must outlive
  // this object. Up to `threads` hash workers (0: DefaultHashThreads()).
  StreamingTagCheck(const BlobSecret& secret, std::string_view full_key, const uint8_t* header,
                    const uint8_t* payload, uint64_t payload_len, size_t threads)
      : secret_(secret), full_key_(full_key), header_(header), payload_(payload),
        payload_len_(payload_len), threads_(threads) {}
  ~StreamingTagCheck();  // stops the hashing if Verify did not run

  // The first `n` bytes of header + payload + tag are in place for good.
  void Landed(uint64_t n);
  // After the whole blob has landed: OK when `tag` is its tag; DATA_LOSS
  // otherwise, INTERNAL when libcrypto fails (BlobSecret::Verify's rules).
  absl::Status Verify(const uint8_t tag[kBlobTagBytes]);

 private:
  const BlobSecret& secret_;
  const std::string_view full_key_;
  const uint8_t* const header_;
  const uint8_t* const payload_;
  const uint64_t payload_len_;
  const size_t threads_;
  bool looked_ = false;  // the header has been read
  uint8_t chunk_log2_ = 0;
  uint64_t chunks_ = 0;
  std::vector<uint8_t> digests_;
  std::mutex error_mu_;
  absl::Status error_;  // the first chunk that failed
  std::atomic<bool> failed_{false};
  std::unique_ptr<ChunkStream> stream_;  // only for a chunked tag with a valid exponent
};

}  // namespace swa
