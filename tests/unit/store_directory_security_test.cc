// The directory store's file modes and link handling (issue 33, item 3):
// files 0600 and folders 0700 whatever the umask; a link under the root (a
// shard folder, a key's folder or a blob file) is refused with
// PERMISSION_DENIED and never followed, so nothing outside the root is read
// or written; a link as the root itself is followed once, at Open; a FIFO in
// a blob's place is refused at once, not waited on.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "store/directory_store.h"

namespace swa {
namespace {

namespace fs = std::filesystem;

ConstByteSpan In(const std::string& s) {
  return ConstByteSpan(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

class DirectoryStoreSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/swa_dirsec_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    outside_ = base_ + "/outside";
    fs::create_directories(outside_);
  }
  void TearDown() override {
    umask(old_umask_);
    fs::remove_all(base_);
  }

  std::unique_ptr<DirectoryStore> Open(const std::string& path) {
    DirectoryStoreOptions o;
    o.path = path;
    o.sync = false;
    absl::StatusOr<std::unique_ptr<DirectoryStore>> s = DirectoryStore::Open(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }

  absl::Status Put(DirectoryStore& s, const std::string& key, const std::string& v) {
    const ConstByteSpan iov[1] = {In(v)};
    return s.Put(key, iov);
  }

  absl::StatusOr<std::string> Get(DirectoryStore& s, const std::string& key, size_t n) {
    std::string out(n, '\xCC');
    const ByteSpan iov[1] = {ByteSpan(reinterpret_cast<uint8_t*>(out.data()), n)};
    absl::StatusOr<uint64_t> size = s.Get(key, iov);
    if (!size.ok()) return size.status();
    if (*size != n) return absl::InternalError("size " + std::to_string(*size));
    return out;
  }

  std::vector<fs::path> Outside() const {
    std::vector<fs::path> v;
    for (auto& e : fs::recursive_directory_iterator(outside_)) v.push_back(e.path());
    return v;
  }

  mode_t old_umask_ = umask(022);
  std::string base_, outside_;
};

// Every mode bit checked, under a permissive and a strict umask.
TEST_F(DirectoryStoreSecurityTest, FilesAre0600AndFoldersAre0700WhateverTheUmask) {
  for (const mode_t mask : {mode_t{0}, mode_t{022}, mode_t{0277}}) {
    umask(mask);
    const std::string root = base_ + "/root" + std::to_string(mask) + "/a/b";
    auto s = Open(root);
    ASSERT_NE(s, nullptr);
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(Put(*s, "key" + std::to_string(i), "value").ok());
    ASSERT_TRUE(Put(*s, std::string(700, 'k'), "long key: nested folders").ok());
    int files = 0, dirs = 0;
    for (auto& e : fs::recursive_directory_iterator(base_ + "/root" + std::to_string(mask))) {
      struct stat st;
      ASSERT_EQ(lstat(e.path().c_str(), &st), 0);
      if (S_ISDIR(st.st_mode)) {
        EXPECT_EQ(st.st_mode & 07777, 0700u) << e.path() << " umask " << mask;
        ++dirs;
      } else {
        EXPECT_TRUE(S_ISREG(st.st_mode)) << e.path();
        EXPECT_EQ(st.st_mode & 07777, 0600u) << e.path() << " umask " << mask;
        ++files;
      }
    }
    EXPECT_EQ(files, 21);
    EXPECT_GE(dirs, 3);
  }
}

TEST_F(DirectoryStoreSecurityTest, ALinkedShardFolderIsRefusedNotFollowed) {
  auto s = Open(base_ + "/root");
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(Put(*s, "victim", "inside").ok());
  const std::string rel = DirectoryStore::RelativePath("victim");
  const std::string shard = base_ + "/root/" + rel.substr(0, rel.find('/'));
  // The shard folder replaced by a link to a folder outside the root that
  // holds a blob of the same name.
  fs::remove_all(shard);
  std::ofstream(outside_ + "/" + rel.substr(rel.find('/') + 1)) << "planted";
  fs::create_directory_symlink(outside_, shard);
  const std::vector<fs::path> before = Outside();
  EXPECT_EQ(Get(*s, "victim", 7).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(s->Exists("victim").status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Put(*s, "victim", "written").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(s->Remove("victim").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Outside(), before);
  EXPECT_EQ(ReadFile(outside_ + "/" + rel.substr(rel.find('/') + 1)), "planted");
}

TEST_F(DirectoryStoreSecurityTest, ALinkedBlobFileIsRefusedAndReplacedNotWrittenThrough) {
  auto s = Open(base_ + "/root");
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(Put(*s, "victim", "inside").ok());
  const std::string file = base_ + "/root/" + DirectoryStore::RelativePath("victim");
  const std::string secret = outside_ + "/secret";
  std::ofstream(secret) << "outside";
  fs::remove(file);
  fs::create_symlink(secret, file);
  absl::StatusOr<std::string> got = Get(*s, "victim", 7);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kPermissionDenied) << got.status();
  EXPECT_EQ(s->Exists("victim").status().code(), absl::StatusCode::kPermissionDenied);
  // A put replaces the link by a file of its own; the target keeps its bytes.
  ASSERT_TRUE(Put(*s, "victim", "new blob").ok());
  EXPECT_FALSE(fs::is_symlink(file));
  EXPECT_EQ(ReadFile(secret), "outside");
  EXPECT_EQ(*Get(*s, "victim", 8), "new blob");
  // A remove of a link removes the link only.
  fs::remove(file);
  fs::create_symlink(secret, file);
  EXPECT_TRUE(s->Remove("victim").ok());
  EXPECT_FALSE(fs::is_symlink(file));
  EXPECT_EQ(ReadFile(secret), "outside");
}

TEST_F(DirectoryStoreSecurityTest, ALinkedRootIsFollowedOnceAtOpen) {
  fs::create_directories(base_ + "/real");
  fs::create_directory_symlink(base_ + "/real", base_ + "/link");
  auto s = Open(base_ + "/link");
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(Put(*s, "k", "v").ok());
  EXPECT_TRUE(fs::exists(base_ + "/real/" + DirectoryStore::RelativePath("k")));
  // Pointing the link elsewhere afterwards does not move the open store.
  fs::remove(base_ + "/link");
  fs::create_directory_symlink(outside_, base_ + "/link");
  ASSERT_TRUE(Put(*s, "k2", "v2").ok());
  EXPECT_TRUE(fs::exists(base_ + "/real/" + DirectoryStore::RelativePath("k2")));
  EXPECT_TRUE(Outside().empty());
}

// A FIFO planted where a blob belongs: reading it must not wait for a writer
// (open(O_RDONLY) of a FIFO blocks until one comes); it is refused at once.
TEST_F(DirectoryStoreSecurityTest, AFifoInPlaceOfABlobIsRefusedWithoutBlocking) {
  auto s = Open(base_ + "/root");
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(Put(*s, "victim", "inside").ok());
  const std::string file = base_ + "/root/" + DirectoryStore::RelativePath("victim");
  fs::remove(file);
  ASSERT_EQ(mkfifo(file.c_str(), 0600), 0);
  std::future<absl::StatusOr<std::string>> got =
      std::async(std::launch::async, [&] { return Get(*s, "victim", 6); });
  const bool finished = got.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  if (!finished) {  // unblock the reader so that the test ends
    const int w = open(file.c_str(), O_WRONLY | O_NONBLOCK);
    if (w >= 0) close(w);
  }
  EXPECT_TRUE(finished) << "Get blocked on a FIFO";
  EXPECT_EQ(got.get().status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(s->Exists("victim").status().code(), absl::StatusCode::kPermissionDenied);
  // A put replaces the FIFO by a blob.
  ASSERT_TRUE(Put(*s, "victim", "again!").ok());
  EXPECT_EQ(*Get(*s, "victim", 6), "again!");
}

}  // namespace
}  // namespace swa
