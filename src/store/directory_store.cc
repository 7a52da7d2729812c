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

// Creates every missing directory of `dir` (like mkdir -p); those it creates
// get mode 0700 whatever the umask. Existing ones are left as they are.
absl::Status MakeDirs(const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string prefix = dir.substr(0, pos);
    if (mkdir(prefix.c_str(), 0700) == 0) {
      if (chmod(prefix.c_str(), 0700) != 0) return ErrnoStatus(errno, "cannot chmod 0700", prefix);
    } else if (errno != EEXIST) {
      return ErrnoStatus(errno, "cannot create directory", prefix);
    }
  }
  return absl::OkStatus();
}

absl::Status LinkRefused(const std::string& root, const std::string& rel) {
  return absl::PermissionDeniedError(absl::StrFormat(
      "directory store: \"%s/%s\" is a symbolic link (or not what the store made): links under "
      "the store's root are never followed",
      root, rel));
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
  // The root itself may be a link (an operator's choice): it is resolved here,
  // once; everything below is reached from this descriptor.
  const int root_fd = open(opts.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) return ErrnoStatus(errno, "cannot open", opts.path);
  return std::unique_ptr<DirectoryStore>(new DirectoryStore(std::move(opts), root_fd));
}

DirectoryStore::~DirectoryStore() {
  if (root_fd_ >= 0) close(root_fd_);
}

absl::StatusOr<int> DirectoryStore::OpenParent(const std::string& rel, bool create,
                                               std::string* leaf) const {
  const size_t last = rel.rfind('/');
  *leaf = rel.substr(last + 1);
  int dir = dup(root_fd_);
  if (dir < 0) return ErrnoStatus(errno, "cannot dup the root of", options_.path);
  if (last == std::string::npos) return dir;
  for (size_t pos = 0; pos <= last;) {
    const size_t slash = rel.find('/', pos);
    const std::string name = rel.substr(pos, slash - pos);
    const std::string so_far = rel.substr(0, slash);
    pos = slash + 1;
    int next = openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0 && errno == ENOENT && create) {
      if (mkdirat(dir, name.c_str(), 0700) == 0) {
        next = openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next >= 0 && fchmod(next, 0700) != 0) {
          const int err = errno;
          close(next);
          close(dir);
          return ErrnoStatus(err, "cannot chmod 0700", options_.path + "/" + so_far);
        }
      } else if (errno == EEXIST) {  // another writer made it meanwhile
        next = openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      } else {
        const int err = errno;
        close(dir);
        return ErrnoStatus(err, "cannot create directory", options_.path + "/" + so_far);
      }
    }
    const int err = errno;
    close(dir);
    if (next < 0) {
      if (err == ENOENT) return absl::NotFoundError("directory store: no blob under this key");
      if (err == ELOOP || err == ENOTDIR) return LinkRefused(options_.path, so_far);
      return ErrnoStatus(err, "cannot open directory", options_.path + "/" + so_far);
    }
    dir = next;
  }
  return dir;
}

absl::Status DirectoryStore::Put(std::string_view key, absl::Span<const ConstByteSpan> pieces) {
  const std::string rel = RelativePath(key);
  const std::string path = absl::StrCat(options_.path, "/", rel);
  std::string leaf;
  absl::StatusOr<int> dir_fd = OpenParent(rel, /*create=*/true, &leaf);
  if (!dir_fd.ok()) return dir_fd.status();
  const int dir = *dir_fd;
  absl::Cleanup close_dir = [dir] { close(dir); };
  // The temp name is unique per process and call, in the final directory so
  // that rename() is atomic.
  const std::string temp_leaf = absl::StrFormat("%s.tmp-%d-%u", leaf, getpid(), temp_counter_++);
  const std::string temp = absl::StrCat(DirName(path), "/", temp_leaf);
  const int fd =
      openat(dir, temp_leaf.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus(errno, "cannot create", temp);
  bool committed = false;
  absl::Cleanup drop_temp = [&] {
    if (!committed) unlinkat(dir, temp_leaf.c_str(), 0);
  };
  {
    absl::Cleanup close_fd = [fd] { close(fd); };
    if (fchmod(fd, 0600) != 0) return ErrnoStatus(errno, "cannot chmod 0600", temp);  // umask aside
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
  // rename replaces whatever the name held, a link too, without following it.
  if (renameat(dir, temp_leaf.c_str(), dir, leaf.c_str()) != 0)
    return ErrnoStatus(errno, "cannot rename to", path);
  committed = true;
  if (options_.sync && fsync(dir) != 0)
    return ErrnoStatus(errno, "cannot fsync directory", DirName(path));
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> DirectoryStore::Get(std::string_view key,
                                             absl::Span<const ByteSpan> pieces) {
  const std::string rel = RelativePath(key);
  const std::string path = absl::StrCat(options_.path, "/", rel);
  std::string leaf;
  absl::StatusOr<int> dir_fd = OpenParent(rel, /*create=*/false, &leaf);
  if (!dir_fd.ok()) return dir_fd.status();
  // O_NONBLOCK: a FIFO in a blob's place would block the open until a writer
  // comes; it is refused below, like any file that is not regular.
  const int fd = openat(*dir_fd, leaf.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  const int open_err = errno;
  close(*dir_fd);
  if (fd < 0) {
    if (open_err == ENOENT) return absl::NotFoundError("directory store: no blob under this key");
    if (open_err == ELOOP) return LinkRefused(options_.path, rel);
    return ErrnoStatus(open_err, "cannot open", path);
  }
  absl::Cleanup close_fd = [fd] { close(fd); };
  struct stat st;
  if (fstat(fd, &st) != 0) return ErrnoStatus(errno, "cannot stat", path);
  if (!S_ISREG(st.st_mode)) return LinkRefused(options_.path, rel);
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
  const std::string rel = RelativePath(key);
  std::string leaf;
  absl::StatusOr<int> dir_fd = OpenParent(rel, /*create=*/false, &leaf);
  if (absl::IsNotFound(dir_fd.status())) return false;
  if (!dir_fd.ok()) return dir_fd.status();
  struct stat st;
  const int rc = fstatat(*dir_fd, leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW);
  const int err = errno;
  close(*dir_fd);
  if (rc == 0) {
    if (!S_ISREG(st.st_mode)) return LinkRefused(options_.path, rel);
    return true;
  }
  if (err == ENOENT || err == ENOTDIR) return false;
  return ErrnoStatus(err, "cannot stat", absl::StrCat(options_.path, "/", rel));
}

absl::Status DirectoryStore::Remove(std::string_view key) {
  const std::string rel = RelativePath(key);
  std::string leaf;
  absl::StatusOr<int> dir_fd = OpenParent(rel, /*create=*/false, &leaf);
  if (!dir_fd.ok()) return dir_fd.status();
  // unlinkat removes a link itself, never its target.
  const int rc = unlinkat(*dir_fd, leaf.c_str(), 0);
  const int err = errno;
  close(*dir_fd);
  if (rc == 0) return absl::OkStatus();
  if (err == ENOENT || err == ENOTDIR)
    return absl::NotFoundError("directory store: no blob under this key");
  return ErrnoStatus(err, "cannot remove", absl::StrCat(options_.path, "/", rel));
}

}  // namespace swa
