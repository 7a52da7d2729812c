// The Redis Cluster store against a real 3-master + 3-replica cluster started
// by the test (tests/unit/redis_cluster_harness.h) on loopback: routing over
// every slot (checked against the server's CLUSTER KEYSLOT), a live
// resharding under load (ASK and MOVED), replica reads and a dead seed, a
// paused node (deadline), the fault wrapper; and, on a second cluster with
// AUTH, a master killed mid-load.
#include <atomic>
#include <chrono>
#include <functional>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "capi/store_table.h"
#include "gtest/gtest.h"
#include "store/cluster_hash_slot.h"
#include "swacache.h"
#include "unit/store_test_util.h"

#if defined(SWACACHE_HAVE_REDIS)
#include "store/redis_cluster_store.h"
#include "unit/redis_cluster_harness.h"

namespace swa {
namespace {

using testing::AdminReply;
using testing::ClusterSpec;
using testing::RedisClusterProcess;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizerBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitizerBuild = true;
#else
constexpr bool kSanitizerBuild = false;
#endif
#else
constexpr bool kSanitizerBuild = false;
#endif

// A self-checking value: version, key hash, then bytes derived from both.
std::string MakeValue(const std::string& key, uint64_t version, size_t size) {
  std::string v(std::max<size_t>(size, 16), '\0');
  const uint64_t h = std::hash<std::string>{}(key);
  std::memcpy(v.data(), &version, 8);
  std::memcpy(v.data() + 8, &h, 8);
  std::mt19937_64 rng(h ^ (version * 0x9E3779B97F4A7C15ull));
  for (size_t i = 16; i < v.size(); ++i) v[i] = static_cast<char>(rng());
  return v;
}

// The version a value was made with for `key`, or -1 when it is not one.
int64_t ValueVersion(const std::string& key, const std::string& v) {
  if (v.size() < 16) return -1;
  uint64_t version;
  std::memcpy(&version, v.data(), 8);
  return MakeValue(key, version, v.size()) == v ? static_cast<int64_t>(version) : -1;
}

absl::Status PutString(KvStore& s, std::string_view key, const std::string& v) {
  const ConstByteSpan one[1] = {ConstByteSpan(reinterpret_cast<const uint8_t*>(v.data()), v.size())};
  return s.Put(key, one);
}

// Reads a blob whole (two tries when the size guess is wrong).
absl::StatusOr<std::string> GetString(KvStore& s, std::string_view key, size_t guess = 64) {
  std::string v(guess, '\xCC');
  for (int i = 0; i < 2; ++i) {
    const ByteSpan one[1] = {ByteSpan(reinterpret_cast<uint8_t*>(v.data()), v.size())};
    absl::StatusOr<uint64_t> size = s.Get(key, one);
    if (!size.ok()) return size.status();
    if (*size == v.size()) return v;
    v.assign(*size, '\xCC');
  }
  return absl::InternalError("size changed between two reads");
}

// A hash tag for every slot: "{t<n>}" with the smallest n that lands there.
const std::vector<std::string>& TagPerSlot() {
  static const std::vector<std::string> tags = [] {
    std::vector<std::string> t(kClusterSlots);
    size_t filled = 0;
    for (uint64_t n = 0; filled < kClusterSlots; ++n) {
      const std::string tag = "t" + std::to_string(n);
      std::string& slot = t[ClusterKeySlot(tag)];
      if (slot.empty()) {
        slot = "{" + tag + "}";
        ++filled;
      }
    }
    return t;
  }();
  return tags;
}

std::unique_ptr<RedisClusterStore> Connect(const std::string& seeds, RedisClusterOptions o = {}) {
  auto parsed = ParseClusterNodes(seeds);
  EXPECT_TRUE(parsed.ok());
  o.seeds = *parsed;
  auto s = RedisClusterStore::Connect(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

bool HasRedisStore() {
  swa_store_redis_cluster_config_t c;
  swa_store_redis_cluster_config_init(&c);
  c.nodes = "127.0.0.1:1";
  swa_kv_store_t t;
  swa_kv_store_init(&t);
  return swa_store_redis_cluster_create(&c, &t) != SWA_UNIMPLEMENTED;
}

class RedisClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (HasRedisStore()) cluster_ = new RedisClusterProcess(ClusterSpec{});
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    if (!HasRedisStore()) GTEST_SKIP() << "this build has no Redis store (hiredis not found)";
    if (!cluster_->ok()) GTEST_SKIP() << "no test cluster: " << cluster_->error();
  }
  // A failure keeps what explains it: every node's view and log.
  void TearDown() override {
    if (HasFailure() && cluster_ != nullptr && cluster_->ok()) std::printf("%s", cluster_->Report().c_str());
  }
  static size_t Index(const std::string& address) {
    return cluster_->IndexOfPort(std::stoi(address.substr(address.rfind(':') + 1)));
  }
  static RedisClusterProcess* cluster_;
};
RedisClusterProcess* RedisClusterTest::cluster_ = nullptr;

TEST_F(RedisClusterTest, KeySlotMatchesTheServer) {
  std::mt19937_64 rng(11);
  for (int i = 0; i < 300; ++i) {
    std::string key(1 + rng() % 40, '\0');
    for (char& c : key) c = static_cast<char>(rng() % 8 == 0 ? '{' : rng() % 8 == 0 ? '}' : rng());
    const AdminReply r = cluster_->Command(0, {"CLUSTER", "KEYSLOT", key});
    ASSERT_EQ(r.type, REDIS_REPLY_INTEGER) << r.str;
    ASSERT_EQ(ClusterKeySlot(key), static_cast<uint32_t>(r.integer)) << i;
  }
}

TEST_F(RedisClusterTest, RoundTripOverEverySlotThroughTheCTable) {
  swa_store_redis_cluster_config_t c;
  swa_store_redis_cluster_config_init(&c);
  const std::string seeds = cluster_->Seeds();
  c.nodes = seeds.c_str();
  swa_kv_store_t t;
  swa_kv_store_init(&t);
  ASSERT_EQ(swa_store_redis_cluster_create(&c, &t), SWA_OK) << swa_last_error();
  auto* store = dynamic_cast<RedisClusterStore*>(capi::StoreFromTable(t));
  ASSERT_NE(store, nullptr);
  const auto& tags = TagPerSlot();
  // Under a sanitizer every 16th slot and the first and last slot of each
  // master's range: the client runs the same code for every slot (the key's
  // hash, the map's entry, that master's connection), which the plain trees
  // check slot by slot; there 32,768 loopback round trips were 8 s of the
  // ASan suite and checked no further memory access.
  std::vector<bool> take(kClusterSlots, true);
  if (kSanitizerBuild) {
    for (uint32_t s = 0; s < kClusterSlots; ++s) {
      const bool first = s == 0 || store->MasterOf(s) != store->MasterOf(s - 1);
      const bool last = s + 1 == kClusterSlots || store->MasterOf(s) != store->MasterOf(s + 1);
      take[s] = s % 16 == 0 || first || last;
    }
  }
  std::mt19937_64 rng(2);
  for (uint32_t s = 0; s < kClusterSlots; ++s) {
    const std::string key = tags[s] + "k";
    const size_t size = 16 + rng() % 300;  // drawn for every slot: the same sizes in every tree
    if (!take[s]) continue;
    ASSERT_TRUE(PutString(*store, key, MakeValue(key, s, size)).ok()) << s;
  }
  for (uint32_t s = 0; s < kClusterSlots; ++s) {
    if (!take[s]) continue;
    const std::string key = tags[s] + "k";
    absl::StatusOr<std::string> v = GetString(*store, key);
    ASSERT_TRUE(v.ok()) << s << ": " << v.status();
    ASSERT_EQ(ValueVersion(key, *v), int64_t{s});
    if (s % 1024 == 0) {  // the blob is on the master the map names
      EXPECT_EQ(cluster_->Command(Index(store->MasterOf(s)), {"EXISTS", key}).integer, 1);
    }
  }
  // Whole 1.4 MB blobs, binary keys, remove, exists, through the C table.
  char msg[SWA_STORE_MESSAGE_BYTES];
  for (int i = 0; i < 6; ++i) {
    const std::string key = std::string("big\0", 4) + std::to_string(i);
    const std::string v = MakeValue(key, i, 1415040 + 64);
    const swa_iov_t put[2] = {{const_cast<char*>(v.data()), 64}, {const_cast<char*>(v.data() + 64), v.size() - 64}};
    const auto* k = reinterpret_cast<const uint8_t*>(key.data());
    ASSERT_EQ(t.put(t.user_data, k, key.size(), put, 2, msg, sizeof msg), SWA_OK) << msg;
    std::string got(v.size(), '\0');
    const swa_iov_t get[1] = {{got.data(), got.size()}};
    uint64_t size = got.size();
    ASSERT_EQ(t.get(t.user_data, k, key.size(), get, 1, &size, msg, sizeof msg), SWA_OK) << msg;
    EXPECT_TRUE(got == v);
    uint32_t exists = 0;
    ASSERT_EQ(t.exists(t.user_data, k, key.size(), &exists, msg, sizeof msg), SWA_OK);
    EXPECT_EQ(exists, 1u);
    ASSERT_EQ(t.remove(t.user_data, k, key.size(), msg, sizeof msg), SWA_OK);
    EXPECT_EQ(t.remove(t.user_data, k, key.size(), msg, sizeof msg), SWA_NOT_FOUND);
    EXPECT_EQ(t.get(t.user_data, k, key.size(), get, 1, &size, msg, sizeof msg), SWA_NOT_FOUND);
  }
  EXPECT_EQ(store->Stats().moved, 0u);
  t.release(t.user_data);
}

// Moves `slots` from master `from` to master `to` as redis-cli does (keys in
// two halves with a pause between: the ASK window), then assigns each slot,
// telling the source 30 ms before the target and the other masters: in that
// window the source answers MOVED to the target and the target, still
// importing, MOVED back (nodes that disagree, as while an assignment spreads).
// `hold(window)`, when given, is called inside each window (0: ASK, between
// the halves; 1: MOVED, after the source's assignment) after the fixed pause,
// and may keep the window open until the test's clients have seen it.
void MigrateSlots(const RedisClusterProcess& c, size_t from, size_t to, const std::vector<uint32_t>& slots,
                  const std::function<void(int)>& hold = nullptr) {
  const std::string from_id = c.NodeId(from), to_id = c.NodeId(to);
  for (uint32_t s : slots) {
    const std::string slot = std::to_string(s);
    ASSERT_TRUE(c.Command(to, {"CLUSTER", "SETSLOT", slot, "IMPORTING", from_id}).ok());
    ASSERT_TRUE(c.Command(from, {"CLUSTER", "SETSLOT", slot, "MIGRATING", to_id}).ok());
    for (int half = 0; half < 2; ++half) {
      const AdminReply keys = c.Command(from, {"CLUSTER", "GETKEYSINSLOT", slot, "1000"});
      const size_t n = half == 0 ? keys.elements.size() / 2 : keys.elements.size();
      if (n > 0) {
        std::vector<std::string> m = {"MIGRATE", "127.0.0.1", std::to_string(c.port(to)), "", "0", "5000", "KEYS"};
        for (size_t i = 0; i < n; ++i) m.push_back(keys.elements[i].str);
        const AdminReply r = c.Command(from, m, 10000);
        ASSERT_TRUE(r.ok()) << r.str;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(40));
      if (half == 0 && hold) hold(0);
    }
    ASSERT_TRUE(c.Command(from, {"CLUSTER", "SETSLOT", slot, "NODE", to_id}).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    if (hold) hold(1);
    for (size_t i = 0; i < c.size(); ++i)
      if (c.IsMaster(i) && i != from) c.Command(i, {"CLUSTER", "SETSLOT", slot, "NODE", to_id});
  }
}

TEST_F(RedisClusterTest, LiveReshardingUnderLoadFollowsAskAndMoved) {
  auto store = Connect(cluster_->Seeds());
  ASSERT_NE(store, nullptr);
  const uint32_t first = 100;  // move 6 slots of the master serving slot 100
  const size_t from = Index(store->MasterOf(first));
  size_t to = from;
  for (uint32_t s = 0; s < kClusterSlots && to == from; s += 1000) to = Index(store->MasterOf(s));
  ASSERT_NE(to, from);
  std::vector<uint32_t> slots;
  for (uint32_t s = first; s < first + 6; ++s) slots.push_back(s);
  std::vector<std::string> keys;
  for (uint32_t s : slots)
    for (int i = 0; i < 30; ++i) keys.push_back(TagPerSlot()[s] + "r" + std::to_string(i));
  for (const auto& k : keys) ASSERT_TRUE(PutString(*store, k, MakeValue(k, 0, 2000)).ok());

  std::atomic<bool> stop{false};
  std::atomic<int> bad{0}, calls{0};
  std::mutex mu;
  std::string first_bad;
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&, w] {
      std::vector<uint64_t> version(keys.size(), 0);
      for (size_t i = w; !stop; i = (i + 4) % keys.size()) {
        const std::string& k = keys[i];
        absl::Status put = absl::OkStatus();
        if ((i / 4) % 2 == 0) put = PutString(*store, k, MakeValue(k, ++version[i] * 4 + w, 2000));
        absl::StatusOr<std::string> v = GetString(*store, k, 2000);
        ++calls;
        const int64_t got = v.ok() ? ValueVersion(k, *v) : -1;
        const bool mine = got >= 0 && (version[i] == 0 || got == int64_t(version[i] * 4 + w));
        if (!put.ok() || !v.ok() || got < 0 || !mine) {
          std::lock_guard<std::mutex> lock(mu);
          if (bad++ == 0) first_bad = k + ": " + put.ToString() + " / " + v.status().ToString();
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // Each window stays open until a client call has gone through it (at most
  // 3 s): on a loaded machine the workers may not run inside a fixed 40 ms
  // window at all, and the ASK/MOVED counts below would then be 0 with no
  // fault in the store.
  auto hold = [&](int window) {
    const auto count = [&] { return window == 0 ? store->Stats().ask : store->Stats().moved; };
    const auto seen = count();
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (count() == seen && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  };
  MigrateSlots(*cluster_, from, to, slots, hold);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  stop = true;
  for (auto& t : workers) t.join();
  EXPECT_EQ(bad, 0) << first_bad;
  EXPECT_GT(calls, 100);
  const RedisClusterStats st = store->Stats();
  const std::string stats = absl::StrFormat("calls %d, ask %u, moved %u, refreshes %u, retries %u",
                                            calls.load(), st.ask, st.moved, st.refreshes, st.retries);
  EXPECT_GT(st.ask, 0u) << stats;
  EXPECT_GT(st.moved, 0u) << stats;
  EXPECT_GT(st.refreshes, 1u) << stats;
  for (uint32_t s : slots) EXPECT_EQ(Index(store->MasterOf(s)), to);
  for (const auto& k : keys) EXPECT_EQ(cluster_->Command(to, {"EXISTS", k}).integer, 1) << k;
}

TEST_F(RedisClusterTest, PausedNodeGivesDeadlineExceededNamingIt) {
  RedisClusterOptions o;
  o.timeout_ms = 300;
  auto store = Connect(cluster_->Seeds(), o);
  ASSERT_NE(store, nullptr);
  const std::string slow_key = TagPerSlot()[7000] + "slow";
  ASSERT_TRUE(PutString(*store, slow_key, MakeValue(slow_key, 1, 100)).ok());
  const std::string node = store->MasterOf(7000);
  std::string other_key;
  for (uint32_t s = 0; s < kClusterSlots && other_key.empty(); s += 500)
    if (store->MasterOf(s) != node) other_key = TagPerSlot()[s] + "fast";
  ASSERT_TRUE(cluster_->Command(Index(node), {"CLIENT", "PAUSE", "1200", "ALL"}).ok());
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<std::string> v = GetString(*store, slow_key, 100);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(absl::IsDeadlineExceeded(v.status())) << v.status();
  EXPECT_TRUE(absl::StrContains(v.status().message(), node)) << v.status();
  EXPECT_LT(ms, 900);
  EXPECT_TRUE(PutString(*store, other_key, MakeValue(other_key, 1, 100)).ok());  // others unaffected
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));
  v = GetString(*store, slow_key, 100);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(ValueVersion(slow_key, *v), 1);
}

TEST_F(RedisClusterTest, FaultWrapperAndBlobChecksOverTheCluster) {
  auto faults = std::make_shared<testing::Faults>();
  auto cache = testing::MakeCache();
  std::mt19937_64 rng(3);
  testing::FillRandom(cache->pool(), cache->layout().pool_bytes(), rng);
  const uint32_t a = *cache->slots().Alloc(), b = *cache->slots().Alloc();
  ASSERT_TRUE(cache->slots().Set(a, {true, 777, 700}).ok());
  cache->SetStore(std::make_shared<BlobStore>(
      std::make_unique<testing::FaultStore>(Connect(cluster_->Seeds()), faults), cache->layout().fingerprint()));
  ASSERT_TRUE(testing::Save(*cache, a, "fault-seq").ok());
  const std::vector<uint8_t> before = testing::PoolBytes(*cache);
  faults->flip_bit = 64 * 8 + 12345;  // a payload bit: the CRC32C catches it
  EXPECT_TRUE(absl::IsDataLoss(testing::Restore(*cache, b, "fault-seq")));
  faults->flip_bit = -1;
  faults->fail_get = static_cast<int>(absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::IsUnavailable(testing::Restore(*cache, b, "fault-seq")));
  faults->fail_get = 0;
  EXPECT_TRUE(testing::PoolBytes(*cache) == before);
  ASSERT_TRUE(testing::Restore(*cache, b, "fault-seq").ok());
  EXPECT_TRUE(std::equal(cache->slot_base(a), cache->slot_base(a) + cache->layout().stored_bytes(),
                         cache->slot_base(b)));
  EXPECT_EQ(cache->slots().Get(b)->written_end, 777);
}

TEST_F(RedisClusterTest, CreateErrors) {
  swa_store_redis_cluster_config_t c;
  swa_store_redis_cluster_config_init(&c);
  swa_kv_store_t t;
  swa_kv_store_init(&t);
  c.nodes = "127.0.0.1";
  EXPECT_EQ(swa_store_redis_cluster_create(&c, &t), SWA_INVALID_ARGUMENT);
  const std::string dead = "127.0.0.1:" + std::to_string(testing::FreeClusterPort());
  c.nodes = dead.c_str();
  c.timeout_ms = 300;
  EXPECT_EQ(swa_store_redis_cluster_create(&c, &t), SWA_UNAVAILABLE);
  EXPECT_TRUE(absl::StrContains(swa_last_error(), dead)) << swa_last_error();
  c.read_from_replicas = 2;
  EXPECT_EQ(swa_store_redis_cluster_create(&c, &t), SWA_INVALID_ARGUMENT);
}

// Last in this suite: it kills a replica.
TEST_F(RedisClusterTest, ReplicaReadsAndADeadSeed) {
  size_t seed = 0;
  while (cluster_->IsMaster(seed)) ++seed;
  RedisClusterOptions o;
  o.read_from_replicas = true;
  auto store = Connect(cluster_->address(seed), o);  // the only seed is a replica
  ASSERT_NE(store, nullptr);
  std::vector<std::string> keys;
  for (uint32_t s = 0; s < kClusterSlots; s += 97) keys.push_back(TagPerSlot()[s] + "rep");
  for (const auto& k : keys) ASSERT_TRUE(PutString(*store, k, MakeValue(k, 5, 300)).ok());
  // Replication is asynchronous: a replica read of a key its master has not
  // yet streamed is NOT_FOUND. Wait for the replicas to acknowledge (a fixed
  // 300 ms sleep here was a timing assumption that a loaded machine breaks).
  ASSERT_TRUE(cluster_->WaitReplicated(20000)) << "the replicas did not catch up within 20 s";
  for (const auto& k : keys) {
    absl::StatusOr<std::string> v = GetString(*store, k, 300);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(ValueVersion(k, *v), 5);
  }
  EXPECT_GE(store->Stats().replica_reads, keys.size());
  cluster_->Kill(seed);
  ASSERT_TRUE(store->Refresh().ok());  // the seed is not needed any more
  for (const auto& k : keys) {
    ASSERT_TRUE(PutString(*store, k, MakeValue(k, 6, 300)).ok());
    absl::StatusOr<std::string> v = GetString(*store, k, 300);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_GE(ValueVersion(k, *v), 5);  // a replica may lag; never another key's bytes
  }
  EXPECT_GT(store->Stats().replica_fallbacks, 0u);
}

class RedisClusterFailoverTest : public ::testing::Test {
 protected:
  static constexpr const char* kPassword = "cluster-s3cret";
  void SetUp() override {
    if (!HasRedisStore()) GTEST_SKIP() << "this build has no Redis store (hiredis not found)";
    cluster_ = std::make_unique<RedisClusterProcess>(ClusterSpec{3, 1, kPassword, 1000});
    if (!cluster_->ok()) GTEST_SKIP() << "no test cluster: " << cluster_->error();
  }
  void TearDown() override {
    if (HasFailure() && cluster_ != nullptr && cluster_->ok()) std::printf("%s", cluster_->Report().c_str());
  }
  std::unique_ptr<RedisClusterProcess> cluster_;
};

TEST_F(RedisClusterFailoverTest, AuthThenMasterKilledMidLoad) {
  swa_store_redis_cluster_config_t c;
  swa_store_redis_cluster_config_init(&c);
  const std::string seeds = cluster_->Seeds();
  c.nodes = seeds.c_str();
  swa_kv_store_t t;
  swa_kv_store_init(&t);
  EXPECT_EQ(swa_store_redis_cluster_create(&c, &t), SWA_UNAUTHENTICATED) << swa_last_error();
  c.password = "wrong";
  EXPECT_EQ(swa_store_redis_cluster_create(&c, &t), SWA_UNAUTHENTICATED) << swa_last_error();

  RedisClusterOptions o;
  o.password = kPassword;
  o.timeout_ms = 1500;
  auto store = Connect(seeds, o);
  ASSERT_NE(store, nullptr);
  constexpr int kThreads = 4, kKeys = 64;
  auto key_of = [](int w, int i) { return TagPerSlot()[(w * kKeys + i) * 61 % kClusterSlots] + "f"; };
  for (int w = 0; w < kThreads; ++w)
    for (int i = 0; i < kKeys; ++i) ASSERT_TRUE(PutString(*store, key_of(w, i), MakeValue(key_of(w, i), 1, 1000)).ok());
  std::atomic<bool> stop{false};
  std::atomic<int> ok_calls{0}, failed_calls{0}, corrupt{0}, wrong_code{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < kThreads; ++w) {
    workers.emplace_back([&, w] {
      std::vector<int64_t> latest(kKeys, 1);
      for (int n = 0; !stop; ++n) {
        const int i = n % kKeys;
        const std::string k = key_of(w, i);
        absl::Status put = PutString(*store, k, MakeValue(k, latest[i] + 1, 1000));
        if (put.ok()) ++latest[i];
        absl::StatusOr<std::string> v = GetString(*store, k, 1000);
        for (const absl::Status& s : {put, v.status()}) {
          if (s.ok()) ++ok_calls; else ++failed_calls;
          if (!s.ok() && !absl::IsUnavailable(s) && !absl::IsDeadlineExceeded(s) && !absl::IsNotFound(s)) ++wrong_code;
        }
        // Async replication may lose the last acknowledged writes, never mix keys or bytes.
        if (v.ok() && (ValueVersion(k, *v) < 1 || ValueVersion(k, *v) > latest[i] + 1)) ++corrupt;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  size_t victim = 0;
  while (!cluster_->IsMaster(victim)) ++victim;
  cluster_->Kill(victim);
  const bool healed = cluster_->WaitHealthy(20000);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop = true;
  for (auto& th : workers) th.join();
  ASSERT_TRUE(healed) << "no failover within 20 s";
  EXPECT_EQ(corrupt, 0);
  EXPECT_EQ(wrong_code, 0);
  EXPECT_GT(ok_calls, 0);
  // After the failover every call succeeds again, with exact bytes.
  for (int w = 0; w < kThreads; ++w) {
    for (int i = 0; i < kKeys; ++i) {
      const std::string k = key_of(w, i);
      ASSERT_TRUE(PutString(*store, k, MakeValue(k, 1000, 1000)).ok()) << k;
      absl::StatusOr<std::string> v = GetString(*store, k, 1000);
      ASSERT_TRUE(v.ok()) << v.status();
      ASSERT_EQ(ValueVersion(k, *v), 1000);
    }
  }
  std::printf("failover: %d calls ok, %d failed with a status during it; %llu refreshes\n",
              ok_calls.load(), failed_calls.load(), (unsigned long long)store->Stats().refreshes);
}

}  // namespace
}  // namespace swa

#else
TEST(RedisClusterTest, NeedsHiredis) { GTEST_SKIP() << "this build has no Redis store"; }
#endif
