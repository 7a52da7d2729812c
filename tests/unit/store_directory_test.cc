// The built-in directory store: sharded layout, atomic replace, reopen.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "store/directory_store.h"

namespace swa {
namespace {

namespace fs = std::filesystem;

ConstByteSpan In(const void* p, size_t n) { return ConstByteSpan(static_cast<const uint8_t*>(p), n); }
ByteSpan Out(void* p, size_t n) { return ByteSpan(static_cast<uint8_t*>(p), n); }

class DirectoryStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/swa_dirstore_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { fs::remove_all(root_); }

  std::unique_ptr<DirectoryStore> Open(bool create = true, std::string path = "") {
    DirectoryStoreOptions o;
    o.path = path.empty() ? root_ + "/store" : path;
    o.create = create;
    absl::StatusOr<std::unique_ptr<DirectoryStore>> s = DirectoryStore::Open(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }

  static std::string Get(DirectoryStore& s, std::string_view key, size_t size, absl::Status* st,
                         uint64_t* reported = nullptr) {
    std::string out(size, '\xCC');
    const size_t cut = size / 2;
    const ByteSpan iov[2] = {Out(out.data(), cut), Out(out.data() + cut, size - cut)};
    absl::StatusOr<uint64_t> blob_size = s.Get(key, iov);
    *st = blob_size.status();
    if (reported != nullptr) *reported = blob_size.ok() ? *blob_size : 0;
    return out;
  }

  std::vector<std::string> AllFiles() const {
    std::vector<std::string> files;
    for (auto& e : fs::recursive_directory_iterator(root_))
      if (e.is_regular_file()) files.push_back(fs::relative(e.path(), root_).string());
    return files;
  }

  std::string root_;
};

TEST_F(DirectoryStoreTest, RoundTripShardedNoTempFilesLeft) {
  auto s = Open();
  const std::string a = "first part|", b = "second part";
  const ConstByteSpan iov[2] = {In(a.data(), a.size()), In(b.data(), b.size())};
  ASSERT_TRUE(s->Put("key-1", iov).ok());
  absl::Status st;
  EXPECT_EQ(Get(*s, "key-1", a.size() + b.size(), &st), a + b);
  EXPECT_TRUE(st.ok()) << st;
  // One file: <2 hex shard>/<hex of the key>.blob, nothing else.
  const std::vector<std::string> files = AllFiles();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0], "store/" + DirectoryStore::RelativePath("key-1"));
  EXPECT_EQ(DirectoryStore::RelativePath("key-1").substr(2), "/6b65792d31.blob");
  EXPECT_TRUE(*s->Exists("key-1"));
  EXPECT_FALSE(*s->Exists("key-2"));
  EXPECT_TRUE(absl::IsNotFound((Get(*s, "key-2", 4, &st), st)));
}

TEST_F(DirectoryStoreTest, KeysSpreadOverShards) {
  std::set<std::string> shards;
  for (int i = 0; i < 200; ++i)
    shards.insert(DirectoryStore::RelativePath("k" + std::to_string(i)).substr(0, 2));
  EXPECT_GT(shards.size(), 100u);  // 200 keys into 256 shards
}

TEST_F(DirectoryStoreTest, SizeMismatchIsReported) {
  auto s = Open();
  const std::string v = "0123456789";
  const ConstByteSpan iov[1] = {In(v.data(), v.size())};
  ASSERT_TRUE(s->Put("k", iov).ok());
  absl::Status st;
  uint64_t reported = 0;
  EXPECT_EQ(Get(*s, "k", 4, &st, &reported), std::string(4, '\xCC'));
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(reported, 10u);
}

TEST_F(DirectoryStoreTest, OverwriteRemoveAndReopen) {
  {
    auto s = Open();
    for (int i = 0; i < 20; ++i) {
      const std::string v = "value-" + std::to_string(i);
      const ConstByteSpan iov[1] = {In(v.data(), v.size())};
      ASSERT_TRUE(s->Put("k" + std::to_string(i), iov).ok());
    }
    const std::string v = "replaced";
    const ConstByteSpan iov[1] = {In(v.data(), v.size())};
    ASSERT_TRUE(s->Put("k3", iov).ok());
    ASSERT_TRUE(s->Remove("k4").ok());
    EXPECT_TRUE(absl::IsNotFound(s->Remove("k4")));
  }
  // A new store on the same directory (create = 0) finds everything.
  auto s = Open(/*create=*/false);
  absl::Status st;
  for (int i = 0; i < 20; ++i) {
    const std::string want = i == 3 ? "replaced" : "value-" + std::to_string(i);
    if (i == 4) {
      EXPECT_FALSE(*s->Exists("k4"));
      continue;
    }
    EXPECT_EQ(Get(*s, "k" + std::to_string(i), want.size(), &st), want);
    EXPECT_TRUE(st.ok()) << st;
  }
}

TEST_F(DirectoryStoreTest, LongBinaryKeysUseNestedNames) {
  auto s = Open();
  std::string key(1100, '\0');
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<char>(i * 7);
  const std::string v = "long key value";
  const ConstByteSpan iov[1] = {In(v.data(), v.size())};
  ASSERT_TRUE(s->Put(key, iov).ok());
  absl::Status st;
  EXPECT_EQ(Get(*s, key, v.size(), &st), v);
  EXPECT_TRUE(st.ok()) << st;
  key.back() ^= 1;
  EXPECT_FALSE(*s->Exists(key));
  for (const std::string& f : AllFiles())
    for (const auto& part : fs::path(f)) EXPECT_LE(part.string().size(), 255u);
}

TEST_F(DirectoryStoreTest, OpenErrors) {
  DirectoryStoreOptions o;
  o.path = root_ + "/missing";
  o.create = false;
  EXPECT_TRUE(absl::IsNotFound(DirectoryStore::Open(o).status()));
  std::ofstream(root_ + "/file") << "x";
  o.path = root_ + "/file";
  o.create = true;
  EXPECT_TRUE(absl::IsFailedPrecondition(DirectoryStore::Open(o).status()));
  o.path = root_ + "/file/sub";
  EXPECT_FALSE(DirectoryStore::Open(o).ok());
  o.path = "";
  EXPECT_TRUE(absl::IsInvalidArgument(DirectoryStore::Open(o).status()));
}

TEST_F(DirectoryStoreTest, ConcurrentWritersNeverExposePartialBlobs) {
  auto s = Open();
  std::atomic<bool> bad{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        if ((i + t) % 2 == 0) {
          const std::string v(8192, static_cast<char>('a' + (i + t) % 26));
          const ConstByteSpan iov[1] = {In(v.data(), v.size())};
          if (!s->Put("shared", iov).ok()) bad = true;
        } else {
          absl::Status st;
          const std::string got = Get(*s, "shared", 8192, &st);
          if (st.ok() && got.find_first_not_of(got[0]) != std::string::npos) bad = true;
          if (!st.ok() && !absl::IsNotFound(st)) bad = true;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_FALSE(bad);
  EXPECT_EQ(AllFiles().size(), 1u);  // no temp file left behind
}

}  // namespace
}  // namespace swa
