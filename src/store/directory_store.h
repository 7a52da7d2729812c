// The built-in directory store: one file per key, 256 shard subdirectories,
// temp file + fsync + rename so that readers see whole blobs only.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "store/kv_store.h"

namespace swa {

struct DirectoryStoreOptions {
  std::string path;
  bool create = true;  // mkdir -p the root when missing
  bool sync = true;    // fsync file and directory before a put returns
};

class DirectoryStore final : public KvStore {
 public:
  static absl::StatusOr<std::unique_ptr<DirectoryStore>> Open(const DirectoryStoreOptions& options);

  absl::Status Put(std::string_view key, absl::Span<const ConstByteSpan> pieces) override;
  absl::StatusOr<uint64_t> Get(std::string_view key, absl::Span<const ByteSpan> pieces) override;
  absl::StatusOr<bool> Exists(std::string_view key) override;
  absl::Status Remove(std::string_view key) override;

  // Path of the file that holds `key`, relative to the root: "<shard>/<hex>.blob",
  // with the hex split into 200-character directory levels for long keys.
  static std::string RelativePath(std::string_view key);
  const std::string& root() const { return options_.path; }

 private:
  explicit DirectoryStore(DirectoryStoreOptions options) : options_(std::move(options)) {}

  DirectoryStoreOptions options_;
  std::atomic<uint64_t> temp_counter_{0};
};

}  // namespace swa
