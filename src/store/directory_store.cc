#include "store/directory_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace swa {
namespace {

constexpr size_t kHexPerLevel = 200;  // file names stay far below NAME_MAX (255)

absl::Status ErrnoStatus(int err, std::string_view what, const std::string& path) {
  return absl::ErrnoToStatus(err, absl::StrFormat("directory store: %s \"%s\"", what, path));
}

// Creates every missing directory of `dir` (like mkdir -p).
absl::Status MakeDirs(const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string prefix = dir.substr(0, pos);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
      return ErrnoStatus(errno, "cannot create directory", prefix);
  }
  return absl::OkStatus();
}

absl::Status SyncDir(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "cannot open directory", dir);
  const int rc = fsync(fd);
  const int err = errno;
  close(fd);
  if (rc != 0) return ErrnoStatus(err, "cannot fsync directory", dir);
  return absl::OkStatus();
}

uint8_t ShardOf(std::string_view key) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a: stable across processes and machines
  for (unsigned char c : key) h = (h ^ c) * 0x100000001b3ull;
  return static_cast<uint8_t>(h ^ (h >> 32));
}

std::string DirName(const std::string& path) { return path.substr(0, path.rfind('/')); }

}  // namespace

std::string DirectoryStore::RelativePath(std::string_view key) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * key.size());
  for (unsigned char c : key) {
    hex.push_back(kHex[c >> 4]);
    hex.push_back(kHex[c & 15]);
  }
  const uint8_t shard = ShardOf(key);
  std::string rel = {kHex[shard >> 4], kHex[shard & 15]};
  for (size_t pos = 0; pos < hex.size(); pos += kHexPerLevel)
    absl::StrAppend(&rel, "/", hex.substr(pos, kHexPerLevel));
  absl::StrAppend(&rel, ".blob");
  return rel;
}

absl::StatusOr<std::unique_ptr<DirectoryStore>> DirectoryStore::Open(
    const DirectoryStoreOptions& options) {
  if (options.path.empty()) return absl::InvalidArgumentError("directory store: path is empty");
  DirectoryStoreOptions opts = options;
  while (opts.path.size() > 1 && opts.path.back() == '/') opts.path.pop_back();
  struct stat st;
  if (stat(opts.path.c_str(), &st) != 0) {
    if (errno != ENOENT) return ErrnoStatus(errno, "cannot stat", opts.path);
    if (!opts.create)
      return absl::NotFoundError(absl::StrFormat(
          "directory store: \"%s\" does not exist and create = 0", opts.path));
    if (absl::Status s = MakeDirs(opts.path); !s.ok()) return s;
  } else if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrFormat("directory store: \"%s\" is not a directory", opts.path));
  }
  if (access(opts.path.c_str(), R_OK | W_OK | X_OK) != 0)
    return ErrnoStatus(errno, "cannot read and write", opts.path);
  return std::unique_ptr<DirectoryStore>(new DirectoryStore(std::move(opts)));
}

absl::Status DirectoryStore::Put(std::string_view key, absl::Span<const ConstByteSpan> pieces) {
  const std::string path = absl::StrCat(options_.path, "/", RelativePath(key));
  const std::string dir = DirName(path);
  if (absl::Status s = MakeDirs(dir); !s.ok()) return s;
  // The temp name is unique per process and call, in the final directory so
  // that rename() is atomic.
  const std::string temp = absl::StrFormat("%s.tmp-%d-%u", path, getpid(), temp_counter_++);
  const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(errno, "cannot create", temp);
  bool committed = false;
  absl::Cleanup drop_temp = [&] {
    if (!committed) unlink(temp.c_str());
  };
  {
    absl::Cleanup close_fd = [fd] { close(fd); };
    for (ConstByteSpan piece : pieces) {
      const uint8_t* p = piece.data();
      for (size_t left = piece.size(); left > 0;) {
        const ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return ErrnoStatus(errno, "cannot write", temp);
        p += n;
        left -= static_cast<size_t>(n);
      }
    }
    if (options_.sync && fsync(fd) != 0) return ErrnoStatus(errno, "cannot fsync", temp);
  }
  if (rename(temp.c_str(), path.c_str()) != 0) return ErrnoStatus(errno, "cannot rename to", path);
  committed = true;
  if (options_.sync) return SyncDir(dir);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> DirectoryStore::Get(std::string_view key,
                                             absl::Span<const ByteSpan> pieces) {
  const std::string path = absl::StrCat(options_.path, "/", RelativePath(key));
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError("directory store: no blob under this key");
    return ErrnoStatus(errno, "cannot open", path);
  }
  absl::Cleanup close_fd = [fd] { close(fd); };
  struct stat st;
  if (fstat(fd, &st) != 0) return ErrnoStatus(errno, "cannot stat", path);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size != TotalBytes(pieces)) return size;
  uint64_t got = 0;  // a file never changes once renamed, but count anyway
  for (ByteSpan piece : pieces) {
    uint8_t* p = piece.data();
    for (size_t left = piece.size(); left > 0;) {
      const ssize_t n = pread(fd, p, left, static_cast<off_t>(got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoStatus(errno, "cannot read", path);
      if (n == 0) return got;
      p += n;
      got += static_cast<uint64_t>(n);
      left -= static_cast<size_t>(n);
    }
  }
  return got;
}

absl::StatusOr<bool> DirectoryStore::Exists(std::string_view key) {
  const std::string path = absl::StrCat(options_.path, "/", RelativePath(key));
  struct stat st;
  if (stat(path.c_str(), &st) == 0) return true;
  if (errno == ENOENT || errno == ENOTDIR) return false;
  return ErrnoStatus(errno, "cannot stat", path);
}

absl::Status DirectoryStore::Remove(std::string_view key) {
  const std::string path = absl::StrCat(options_.path, "/", RelativePath(key));
  if (unlink(path.c_str()) == 0) return absl::OkStatus();
  if (errno == ENOENT || errno == ENOTDIR)
    return absl::NotFoundError("directory store: no blob under this key");
  return ErrnoStatus(errno, "cannot remove", path);
}

}  // namespace swa
