// The longest-prefix probe (KvStore::FirstPresent, BlobStore::FirstPresent;
// docs/store.md, "Longest-prefix probe") on every built-in store: memory,
// directory, tiered, Redis and Redis Cluster (both batched: one pipeline, one
// per master), with keys present and absent in every pattern of 5 keys, and
// stores that fail in the middle of a probe: a status, never a wrong index.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "api/redis_server.h"
#include "gtest/gtest.h"
#include "store/blob_store.h"
#include "store/cluster_hash_slot.h"
#include "store/directory_store.h"
#include "store/kv_store.h"
#include "store/memory_store.h"
#include "store/tiered_store.h"

#if defined(SWACACHE_HAVE_REDIS)
#include "store/redis_cluster_store.h"
#include "store/redis_store.h"
#include "unit/redis_cluster_harness.h"
#endif

namespace swa {
namespace {

constexpr uint64_t kFingerprint = 0x0123456789abcdefull;
constexpr int kKeys = 5;

// Engine keys of one request, longest prefix first: binary bytes, a brace
// (hash tags must not pin them), different lengths.
std::vector<std::string> RequestKeys(const std::string& tag) {
  std::vector<std::string> keys;
  for (int i = 0; i < kKeys; ++i) {
    std::string k = tag + "/prefix{" + std::to_string(kKeys - i) + "}";
    k.push_back('\0');
    k.append(size_t(3 * (kKeys - i)), char(0xF0 + i));
    keys.push_back(k);
  }
  return keys;
}

std::vector<std::string_view> Views(const std::vector<std::string>& keys) {
  return std::vector<std::string_view>(keys.begin(), keys.end());
}

int64_t Expected(int mask) {
  for (int i = 0; i < kKeys; ++i)
    if (mask & (1 << i)) return i;
  return -1;
}

// Puts or removes each key per `mask` through `put_into` (default: the blob
// store itself), then checks the probe's answer.
void CheckEveryPattern(BlobStore& bs, const std::string& tag,
                       std::function<void(const std::string& full, bool present)> place = {}) {
  const std::vector<std::string> keys = RequestKeys(tag);
  const uint8_t blob[7] = {1, 2, 3, 4, 5, 6, 7};
  const ConstByteSpan piece[1] = {ConstByteSpan(blob, sizeof blob)};
  for (int mask = 0; mask < (1 << kKeys); ++mask) {
    for (int i = 0; i < kKeys; ++i) {
      const bool present = mask & (1 << i);
      if (place) {
        place(bs.FullKey(keys[i]), present);
      } else if (present) {
        ASSERT_TRUE(bs.Put(keys[i], piece).ok());
      } else {
        absl::Status s = bs.Remove(keys[i]);
        ASSERT_TRUE(s.ok() || absl::IsNotFound(s)) << s;
      }
    }
    absl::StatusOr<int64_t> got = bs.FirstPresent(Views(keys));
    ASSERT_TRUE(got.ok()) << "mask " << mask << ": " << got.status();
    EXPECT_EQ(*got, Expected(mask)) << "mask " << mask;
    // Every suffix of the candidates too (the answer moves with them).
    for (int from = 1; from < kKeys; ++from) {
      std::vector<std::string_view> tail(keys.begin() + from, keys.end());
      got = bs.FirstPresent(tail);
      ASSERT_TRUE(got.ok()) << got.status();
      const int64_t e = Expected(mask >> from);
      EXPECT_EQ(*got, e) << "mask " << mask << " from " << from;
    }
  }
  absl::StatusOr<int64_t> none = bs.FirstPresent({});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, -1);
}

// Wraps a store: its n-th Exists call (0-based) fails with `code`.
class FailNthExists final : public KvStore {
 public:
  FailNthExists(std::unique_ptr<KvStore> inner, int fail_at, absl::StatusCode code)
      : inner_(std::move(inner)), fail_at_(fail_at), code_(code) {}
  absl::Status Put(std::string_view k, absl::Span<const ConstByteSpan> p) override {
    return inner_->Put(k, p);
  }
  absl::StatusOr<uint64_t> Get(std::string_view k, absl::Span<const ByteSpan> p) override {
    return inner_->Get(k, p);
  }
  absl::StatusOr<bool> Exists(std::string_view k) override {
    if (calls_++ == fail_at_) return absl::Status(code_, "injected exists failure");
    return inner_->Exists(k);
  }
  absl::Status Remove(std::string_view k) override { return inner_->Remove(k); }
  void Rearm() { calls_ = 0; }
  int calls() const { return calls_; }

 private:
  std::unique_ptr<KvStore> inner_;
  const int fail_at_;
  const absl::StatusCode code_;
  std::atomic<int> calls_{0};
};

TEST(StoreProbe, MemoryEveryPattern) {
  BlobStore bs(std::make_unique<MemoryStore>(1 << 20), kFingerprint);
  CheckEveryPattern(bs, "mem");
}

std::string TempDir(const char* name) {
  return (std::filesystem::temp_directory_path() /
          (std::string("swa_probe_") + name + "_" + std::to_string(getpid())))
      .string();
}

TEST(StoreProbe, DirectoryEveryPattern) {
  const std::string dir = TempDir("dir");
  {
    auto store = DirectoryStore::Open({dir, true, false});
    ASSERT_TRUE(store.ok()) << store.status();
    BlobStore bs(std::move(*store), kFingerprint);
    CheckEveryPattern(bs, "dir");
  }
  std::filesystem::remove_all(dir);
}

// Tiered: each key placed in the front tier, the back tier, both or none.
TEST(StoreProbe, TieredEveryPatternAndPlacement) {
  const std::string dir = TempDir("tier");
  {
    std::vector<std::unique_ptr<KvStore>> tiers;
    tiers.push_back(std::make_unique<MemoryStore>(1 << 20));
    auto back = DirectoryStore::Open({dir, true, false});
    ASSERT_TRUE(back.ok());
    tiers.push_back(std::move(*back));
    auto tiered = TieredStore::Create(std::move(tiers));
    ASSERT_TRUE(tiered.ok()) << tiered.status();
    TieredStore* t = tiered->get();
    BlobStore bs(std::move(*tiered), kFingerprint);
    const uint8_t blob[3] = {9, 9, 9};
    const ConstByteSpan piece[1] = {ConstByteSpan(blob, sizeof blob)};
    for (int placement = 0; placement < 3; ++placement) {
      int n = 0;
      CheckEveryPattern(bs, "tier" + std::to_string(placement),
                        [&](const std::string& full, bool present) {
                          for (size_t i = 0; i < 2; ++i) (void)t->tier(i).Remove(full);
                          if (!present) return;
                          // 0: front only, 1: back only, 2: alternate (both for odd n)
                          const int where = placement < 2 ? placement : n++ % 3;
                          if (where != 1) ASSERT_TRUE(t->tier(0).Put(full, piece).ok());
                          if (where != 0) ASSERT_TRUE(t->tier(1).Put(full, piece).ok());
                        });
    }
  }
  std::filesystem::remove_all(dir);
}

// A store whose k-th exists fails: the probe returns that status (naming key
// k) whenever no key before k is present, else the right index; never another.
TEST(StoreProbe, FailureMidProbeIsAStatusNeverAWrongAnswer) {
  const std::vector<std::string> keys = RequestKeys("fault");
  const uint8_t blob[4] = {4, 3, 2, 1};
  const ConstByteSpan piece[1] = {ConstByteSpan(blob, sizeof blob)};
  for (int fail_at = 0; fail_at < kKeys; ++fail_at) {
    auto wrapped = std::make_unique<FailNthExists>(std::make_unique<MemoryStore>(1 << 20),
                                                   fail_at, absl::StatusCode::kUnavailable);
    FailNthExists* f = wrapped.get();
    BlobStore bs(std::move(wrapped), kFingerprint);
    for (int mask = 0; mask < (1 << kKeys); ++mask) {
      for (int i = 0; i < kKeys; ++i) {
        if (mask & (1 << i))
          ASSERT_TRUE(bs.Put(keys[i], piece).ok());
        else
          (void)bs.Remove(keys[i]);
      }
      f->Rearm();
      absl::StatusOr<int64_t> got = bs.FirstPresent(Views(keys));
      const int64_t e = Expected(mask);
      if (e >= 0 && e < fail_at) {
        ASSERT_TRUE(got.ok()) << "mask " << mask << " fail_at " << fail_at << ": " << got.status();
        EXPECT_EQ(*got, e);
      } else {
        ASSERT_FALSE(got.ok()) << "mask " << mask << " fail_at " << fail_at << " answered " << *got;
        EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable);
        EXPECT_NE(got.status().message().find("key " + std::to_string(fail_at)),
                  std::string_view::npos)
            << got.status();
      }
    }
  }
}

TEST(StoreProbe, BadKeysAreRefusedBeforeAnyStoreCall) {
  auto wrapped = std::make_unique<FailNthExists>(std::make_unique<MemoryStore>(1 << 20), -1,
                                                 absl::StatusCode::kUnknown);
  FailNthExists* f = wrapped.get();
  BlobStore bs(std::move(wrapped), kFingerprint);
  std::vector<std::string> keys = {"a", "", "c"};
  absl::StatusOr<int64_t> got = bs.FirstPresent(Views(keys));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(got.status().message().find("probe key 1"), std::string_view::npos) << got.status();
  keys[1] = std::string(kMaxKeyBytes + 1, 'x');
  EXPECT_EQ(bs.FirstPresent(Views(keys)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f->calls(), 0);
}

#if defined(SWACACHE_HAVE_REDIS)
TEST(StoreProbe, RedisEveryPatternAndFailures) {
  if (!swa_test::RedisServerOnPath()) GTEST_SKIP() << "redis-server is not on PATH";
  swa_test::RedisServer server;
  ASSERT_GT(server.port(), 0) << "redis-server did not start";
  RedisStoreOptions o;
  o.port = uint32_t(server.port());
  o.timeout_ms = 2000;
  auto store = RedisStore::Connect(o);
  ASSERT_TRUE(store.ok()) << store.status();
  BlobStore bs(std::move(*store), kFingerprint);
  CheckEveryPattern(bs, "redis");
  const std::vector<std::string> keys = RequestKeys("redis-failures");
  // An error reply to EXISTS: a status naming key 0, not "absent".
  swa_test::RedisServer renamed({"--rename-command", "EXISTS", "EXISTS_RENAMED"});
  ASSERT_GT(renamed.port(), 0);
  o.port = uint32_t(renamed.port());
  auto store2 = RedisStore::Connect(o);
  ASSERT_TRUE(store2.ok()) << store2.status();
  BlobStore bs2(std::move(*store2), kFingerprint);
  absl::StatusOr<int64_t> got = bs2.FirstPresent(Views(keys));
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("key 0"), std::string_view::npos) << got.status();
  // The server gone mid-life: UNAVAILABLE, never -1.
  const uint8_t blob[2] = {1, 2};
  const ConstByteSpan piece[1] = {ConstByteSpan(blob, sizeof blob)};
  ASSERT_TRUE(bs.Put(keys[3], piece).ok());
  server.Kill();
  got = bs.FirstPresent(Views(keys));
  ASSERT_FALSE(got.ok()) << "answered " << *got;
  EXPECT_TRUE(absl::IsUnavailable(got.status()) || absl::IsDeadlineExceeded(got.status()))
      << got.status();
}

TEST(StoreProbe, RedisClusterEveryPatternAndADeadMaster) {
  if (!swa_test::RedisServerOnPath()) GTEST_SKIP() << "redis-server is not on PATH";
  testing::RedisClusterProcess cluster(testing::ClusterSpec{3, 0, "", 1000});
  if (!cluster.ok()) GTEST_SKIP() << "no test cluster: " << cluster.error();
  auto parsed = ParseClusterNodes(cluster.Seeds());
  ASSERT_TRUE(parsed.ok());
  RedisClusterOptions o;
  o.seeds = *parsed;
  o.timeout_ms = 400;
  o.max_attempts = 3;
  auto store = RedisClusterStore::Connect(o);
  ASSERT_TRUE(store.ok()) << store.status();
  RedisClusterStore* rc = store->get();
  BlobStore bs(std::move(*store), kFingerprint);
  CheckEveryPattern(bs, "cluster");
  // The keys of one request land on more than one master.
  const std::vector<std::string> keys = RequestKeys("cluster");
  std::vector<std::string> owner;
  for (const std::string& k : keys) owner.push_back(rc->MasterOf(ClusterKeySlot(bs.FullKey(k))));
  ASSERT_NE(std::count(owner.begin(), owner.end(), owner[0]), kKeys) << "all keys on one master";
  // Kill the master of the first key; keys present on the live masters only.
  const uint8_t blob[2] = {1, 2};
  const ConstByteSpan piece[1] = {ConstByteSpan(blob, sizeof blob)};
  for (int i = 0; i < kKeys; ++i)
    if (owner[i] != owner[0]) ASSERT_TRUE(bs.Put(keys[i], piece).ok());
  cluster.Kill(cluster.IndexOfPort(std::stoi(owner[0].substr(owner[0].rfind(':') + 1))));
  absl::StatusOr<int64_t> got = bs.FirstPresent(Views(keys));
  ASSERT_FALSE(got.ok()) << "answered " << *got << " without knowing key 0";
  EXPECT_NE(got.status().message().find("key 0"), std::string_view::npos) << got.status();
}
#endif

}  // namespace
}  // namespace swa
