// The built-in directory store: one file per key, 256 shard subdirectories,
// temp file + fsync + rename so that readers see whole blobs only. Files are
// created 0600 and folders 0700 (set with fchmod, whatever the umask); every
// path under the root is walked with openat(O_NOFOLLOW) from a descriptor of
// the root taken at Open, so a symbolic link under the root is refused
// (PERMISSION_DENIED), never followed (docs/store.md, "Threat model").
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
  ~DirectoryStore() override;

  absl::Status Put(std::string_view key, absl::Span<const ConstByteSpan> pieces) override;
  absl::StatusOr<uint64_t> Get(std::string_view key, absl::Span<const ByteSpan> pieces) override;
  absl::StatusOr<bool> Exists(std::string_view key) override;
  absl::Status Remove(std::string_view key) override;

  // Path of the file that holds `key`, relative to the root: "<shard>/<hex>.blob",
  // with the hex split into 200-character directory levels for long keys.
  static std::string RelativePath(std::string_view key);
  const std::string& root() const { return options_.path; }

 private:
  DirectoryStore(DirectoryStoreOptions options, int root_fd)
      : options_(std::move(options)), root_fd_(root_fd) {}

  // Opens the folder that holds `rel`'s file, one component at a time from
  // the root without following links (creating missing ones, 0700, when
  // `create`); *leaf gets the file's name in it. NOT_FOUND when a folder is
  // missing and !create; PERMISSION_DENIED for a link.
  absl::StatusOr<int> OpenParent(const std::string& rel, bool create, std::string* leaf) const;

  DirectoryStoreOptions options_;
  int root_fd_ = -1;  // the root as Open found it (a link to it is followed there, once)
  std::atomic<uint64_t> temp_counter_{0};
};

}  // namespace swa
