// The directory store under real-world faults: a full file system (a small
// tmpfs), a read-only one, blob files truncated or replaced between put and
// get, another key's file copied or renamed over a blob, and keys that try to
// escape the root. Each gets a precise status, the
// slot stays untouched, and no file appears outside the root.
//
// The tmpfs tests need CAP_SYS_ADMIN (root); they run in a private mount
// namespace of this process, so the mounts vanish with it even if it crashes,
// and are unmounted by the fixture otherwise. Without the capability they
// skip, saying why.
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "api/store_fault_util.h"
#include "gtest/gtest.h"

namespace {

namespace fs = std::filesystem;
using swa_test::SlotFixture;

// A fresh temporary directory, removed with everything in it.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/swa_fault_XXXXXX";
    path = mkdtemp(tmpl) ? tmpl : "";
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Whether tmpfs can be mounted here: unshare a private mount namespace once
// (must happen before this process starts threads).
const char* MountUnavailable() {
  static const char* reason = [] () -> const char* {
    if (geteuid() != 0) return "not root: cannot mount a tmpfs";
    if (unshare(CLONE_NEWNS) != 0) return "unshare(CLONE_NEWNS) refused (no CAP_SYS_ADMIN)";
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
      return "cannot make / a private mount";
    return nullptr;
  }();
  return reason;
}

struct Tmpfs {
  std::string dir;
  bool mounted = false;
  Tmpfs(const std::string& d, size_t bytes) : dir(d) {
    mounted = mount("tmpfs", dir.c_str(), "tmpfs", 0, ("size=" + std::to_string(bytes)).c_str()) == 0;
  }
  bool Remount(unsigned long flags) {
    return mount(nullptr, dir.c_str(), nullptr, MS_REMOUNT | flags, nullptr) == 0;
  }
  ~Tmpfs() {
    if (mounted) umount2(dir.c_str(), MNT_DETACH);
  }
};

swa_kv_store_t DirectoryStore(const std::string& root) {
  swa_store_directory_config_t dc;
  swa_store_directory_config_init(&dc);
  dc.path = root.c_str();
  swa_kv_store_t t;
  swa_kv_store_init(&t);
  EXPECT_EQ(swa_store_directory_create(&dc, &t), SWA_OK) << swa_last_error();
  return t;
}

std::vector<fs::path> Files(const std::string& root) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file()) out.push_back(e.path());
  return out;
}

TEST(DirectoryStoreFaults, FullFileSystem) {
  if (const char* why = MountUnavailable()) GTEST_SKIP() << why;
  TempDir tmp;
  Tmpfs t(tmp.path, 256 * 1024);
  ASSERT_TRUE(t.mounted) << std::strerror(errno);
  SlotFixture f;
  const swa_kv_store_t store = DirectoryStore(tmp.path + "/root");
  ASSERT_EQ(swa_cache_set_store(f.cache, &store), SWA_OK);
  f.Fill(f.a, 1);
  ASSERT_EQ(f.Save(f.a, "kept"), SWA_OK) << swa_last_error();
  // Fill the file system to the last byte.
  {
    std::ofstream filler(tmp.path + "/filler", std::ios::binary);
    const std::vector<char> chunk(4096, 'f');
    while (filler.write(chunk.data(), chunk.size())) filler.flush();
  }
  EXPECT_EQ(f.Save(f.a, "new"), SWA_RESOURCE_EXHAUSTED) << swa_last_error();
  for (const fs::path& p : Files(tmp.path + "/root"))
    EXPECT_EQ(p.string().find(".tmp-"), std::string::npos) << "temporary file left: " << p;
  // A restore still works on a full disk, and a failed one changes nothing.
  const swa_test::SlotImage before = f.Image(f.b);
  EXPECT_EQ(f.Restore(f.b, "new"), SWA_NOT_FOUND);
  EXPECT_TRUE(f.Image(f.b) == before);
  ASSERT_EQ(f.Restore(f.b, "kept"), SWA_OK) << swa_last_error();
  EXPECT_TRUE(f.Holds(f.b, 1));
  // Room again: saves work.
  fs::resize_file(tmp.path + "/filler", 0);
  EXPECT_EQ(f.Save(f.a, "new"), SWA_OK) << swa_last_error();
  swa_cache_destroy(f.cache);
  f.cache = nullptr;
}

TEST(DirectoryStoreFaults, ReadOnlyFileSystem) {
  if (const char* why = MountUnavailable()) GTEST_SKIP() << why;
  TempDir tmp;
  Tmpfs t(tmp.path, 1 << 20);
  ASSERT_TRUE(t.mounted) << std::strerror(errno);
  SlotFixture f;
  const swa_kv_store_t store = DirectoryStore(tmp.path + "/root");
  ASSERT_EQ(swa_cache_set_store(f.cache, &store), SWA_OK);
  f.Fill(f.a, 2);
  ASSERT_EQ(f.Save(f.a, "old"), SWA_OK);
  ASSERT_TRUE(t.Remount(MS_RDONLY)) << std::strerror(errno);
  // EROFS maps to PERMISSION_DENIED (absl::ErrnoToStatus), as EACCES does;
  // the message says "Read-only file system".
  EXPECT_EQ(f.Save(f.a, "new"), SWA_PERMISSION_DENIED) << swa_last_error();
  EXPECT_NE(std::string(swa_last_error()).find("Read-only"), std::string::npos);
  EXPECT_EQ(f.Save(f.a, "old"), SWA_PERMISSION_DENIED) << swa_last_error();
  EXPECT_EQ(f.Restore(f.b, "old"), SWA_OK) << swa_last_error();  // reads still work
  EXPECT_TRUE(f.Holds(f.b, 2));
  const uint8_t k[] = {'o', 'l', 'd'};
  EXPECT_EQ(swa_cache_store_remove(f.cache, k, 3), SWA_PERMISSION_DENIED) << swa_last_error();
  // Opening a store on it is refused up front.
  swa_store_directory_config_t dc;
  swa_store_directory_config_init(&dc);
  const std::string root = tmp.path + "/root";
  dc.path = root.c_str();
  swa_kv_store_t t2;
  swa_kv_store_init(&t2);
  EXPECT_EQ(swa_store_directory_create(&dc, &t2), SWA_PERMISSION_DENIED) << swa_last_error();
  EXPECT_TRUE(t.Remount(0));
  swa_cache_destroy(f.cache);
  f.cache = nullptr;
}

TEST(DirectoryStoreFaults, ReadOnlyDirectoryAsUser) {
  if (geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions (see ReadOnlyFileSystem)";
  TempDir tmp;
  SlotFixture f;
  const std::string root = tmp.path + "/root";
  const swa_kv_store_t store = DirectoryStore(root);
  ASSERT_EQ(swa_cache_set_store(f.cache, &store), SWA_OK);
  fs::permissions(root, fs::perms::owner_read | fs::perms::owner_exec);
  EXPECT_EQ(f.Save(f.a, "k"), SWA_PERMISSION_DENIED) << swa_last_error();
  fs::permissions(root, fs::perms::owner_all);
}

TEST(DirectoryStoreFaults, FileTruncatedOrReplacedBetweenPutAndGet) {
  TempDir tmp;
  SlotFixture f;
  const std::string root = tmp.path + "/root";
  const swa_kv_store_t store = DirectoryStore(root);
  ASSERT_EQ(swa_cache_set_store(f.cache, &store), SWA_OK);
  f.Fill(f.a, 3);
  ASSERT_EQ(f.Save(f.a, "x"), SWA_OK);
  ASSERT_EQ(Files(root).size(), 1u);
  const std::string px = Files(root)[0];
  f.Fill(f.a, 4);
  ASSERT_EQ(f.Save(f.a, "y"), SWA_OK);
  std::string py;
  for (const fs::path& p : Files(root))
    if (p != px) py = p;
  ASSERT_FALSE(py.empty());
  const uintmax_t size = fs::file_size(px);
  f.Fill(f.b, 5);
  const swa_test::SlotImage before = f.Image(f.b);
  for (uintmax_t cut : {uintmax_t{0}, uintmax_t{10}, uintmax_t{64}, size / 2, size - 1}) {
    fs::copy_file(py, px, fs::copy_options::overwrite_existing);
    fs::resize_file(px, cut);
    EXPECT_EQ(f.Restore(f.b, "x"), SWA_DATA_LOSS) << "cut to " << cut << ": " << swa_last_error();
    EXPECT_TRUE(f.Image(f.b) == before);
  }
  // Replaced by garbage of the right size, or grown by a byte.
  {
    std::ofstream g(px, std::ios::binary | std::ios::trunc);
    g << std::string(size, 'G');
  }
  EXPECT_EQ(f.Restore(f.b, "x"), SWA_DATA_LOSS) << swa_last_error();
  fs::copy_file(py, px, fs::copy_options::overwrite_existing);
  { std::ofstream(px, std::ios::binary | std::ios::app) << 'Z'; }
  // Larger than any blob of this layout: refused unread, as another layout's.
  EXPECT_EQ(f.Restore(f.b, "x"), SWA_FAILED_PRECONDITION) << swa_last_error();
  EXPECT_TRUE(f.Image(f.b) == before);
  // Replaced by a directory, or unreadable: an error, never a crash or a write.
  fs::remove(px);
  fs::create_directory(px);
  EXPECT_NE(f.Restore(f.b, "x"), SWA_OK);
  EXPECT_TRUE(f.Image(f.b) == before);
  fs::remove(px);
  // Another key's valid blob: the blob records its key (AnotherKeysFile... below).
  fs::copy_file(py, px);
  EXPECT_EQ(f.Restore(f.b, "x"), SWA_DATA_LOSS) << swa_last_error();
  EXPECT_TRUE(f.Image(f.b) == before);
}

// Slot a saved under "a", slot b under "b"; then b's file is copied over a's,
// and later renamed onto it. Each blob is sound and of this layout, but was
// saved under another key: DATA_LOSS naming the key, the slot untouched.
TEST(DirectoryStoreFaults, AnotherKeysFileCopiedOrRenamedOverThisOne) {
  TempDir tmp;
  SlotFixture f;
  const std::string root = tmp.path + "/root";
  const swa_kv_store_t store = DirectoryStore(root);
  ASSERT_EQ(swa_cache_set_store(f.cache, &store), SWA_OK);
  f.Fill(f.a, 31);
  ASSERT_EQ(f.Save(f.a, "a"), SWA_OK);
  ASSERT_EQ(Files(root).size(), 1u);
  const std::string pa = Files(root)[0];
  f.Fill(f.b, 32);
  ASSERT_EQ(f.Save(f.b, "b"), SWA_OK);
  std::string pb;
  for (const fs::path& p : Files(root))
    if (p != pa) pb = p;
  ASSERT_FALSE(pb.empty());
  const swa_test::SlotImage image_a = f.Image(f.a), image_b = f.Image(f.b);

  fs::copy_file(pb, pa, fs::copy_options::overwrite_existing);
  EXPECT_EQ(f.Restore(f.a, "a"), SWA_DATA_LOSS) << swa_last_error();
  const std::string message = swa_last_error();
  EXPECT_NE(message.find("another key"), std::string::npos) << message;
  EXPECT_NE(message.find(f.StoreKey("a")), std::string::npos) << message;
  EXPECT_TRUE(f.Image(f.a) == image_a);
  EXPECT_EQ(f.Restore(f.b, "a"), SWA_DATA_LOSS) << swa_last_error();
  EXPECT_TRUE(f.Image(f.b) == image_b);
  // b's own file still restores.
  f.Fill(f.b, 33);
  ASSERT_EQ(f.Restore(f.b, "b"), SWA_OK) << swa_last_error();
  EXPECT_TRUE(f.Holds(f.b, 32));

  // Saved again, then renamed over: "b" is gone, "a" holds b's blob.
  ASSERT_EQ(f.Save(f.a, "a"), SWA_OK);
  fs::rename(pb, pa);
  const swa_test::SlotImage image_b2 = f.Image(f.b);
  EXPECT_EQ(f.Restore(f.b, "b"), SWA_NOT_FOUND) << swa_last_error();
  EXPECT_EQ(f.Restore(f.b, "a"), SWA_DATA_LOSS) << swa_last_error();
  EXPECT_TRUE(f.Image(f.b) == image_b2);
  // Saving "a" again replaces the stray blob.
  ASSERT_EQ(f.Save(f.a, "a"), SWA_OK);
  ASSERT_EQ(f.Restore(f.b, "a"), SWA_OK) << swa_last_error();
  EXPECT_TRUE(f.Holds(f.b, 31));
}

TEST(DirectoryStoreFaults, KeysNeverEscapeTheRoot) {
  TempDir tmp;
  SlotFixture f;
  const std::string root = tmp.path + "/root";
  const swa_kv_store_t store = DirectoryStore(root);
  ASSERT_EQ(swa_cache_set_store(f.cache, &store), SWA_OK);
  const std::vector<std::string> keys = {
      "..", "../..", "../../../../../../tmp/escaped", "/etc/passwd", "/", ".",
      std::string("a\0b", 3), std::string("\0", 1), std::string("..\0/..", 6),
      std::string(1024, '/'), std::string(1024, '.'), "x/../../y", "\\..\\..", "~root"};
  uint64_t seed = 10;
  for (const std::string& key : keys) {
    f.Fill(f.a, ++seed);
    ASSERT_EQ(f.Save(f.a, key), SWA_OK) << swa_last_error();
    f.Fill(f.b, 0);
    ASSERT_EQ(f.Restore(f.b, key), SWA_OK) << swa_last_error();
    EXPECT_TRUE(f.Holds(f.b, seed));
  }
  // Too long and empty keys are refused before the store sees them.
  const std::string too_long(SWA_STORE_MAX_KEY_BYTES + 1, '.');
  const swa_test::SlotImage before = f.Image(f.b);
  EXPECT_EQ(f.Save(f.a, too_long), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(f.Restore(f.b, too_long), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(f.Restore(f.b, ""), SWA_INVALID_ARGUMENT);
  EXPECT_TRUE(f.Image(f.b) == before);
  // Nothing but the root in the temporary directory, and every file under the
  // root is a blob named by hex digits.
  std::vector<std::string> top;
  for (const auto& e : fs::directory_iterator(tmp.path)) top.push_back(e.path().filename());
  EXPECT_EQ(top, std::vector<std::string>{"root"});
  EXPECT_FALSE(fs::exists("/tmp/escaped"));
  size_t blobs = 0;
  for (const fs::path& p : Files(root)) {
    ++blobs;
    EXPECT_EQ(p.extension(), ".blob") << p;
    EXPECT_EQ(p.stem().string().find_first_not_of("0123456789abcdef"), std::string::npos) << p;
  }
  EXPECT_EQ(blobs, keys.size());
}

}  // namespace
