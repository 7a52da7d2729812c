// The Redis Cluster store over TLS and with ACL users, against a real cluster
// of 3 masters and 3 replicas whose client ports, bus and replication run
// over TLS (tls-cluster yes), with certificates made by the openssl CLI
// (unit/redis_tls_harness.h): the slot map read over TLS names TLS ports,
// MOVED and ASK are followed over TLS, a wrong CA, a wrong server name, a
// plain-TCP client and an ACL user lacking a permission each give their
// status, and a master killed mid-load fails over with every call served over
// TLS again. Skipped only when the build has no Redis store, redis-server is
// missing, or redis-server was built without TLS.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "store/cluster_hash_slot.h"
#include "swacache.h"
#include "unit/redis_tls_harness.h"

#if defined(SWACACHE_HAVE_REDIS)

#include "store/redis_cluster_store.h"

namespace swa {
namespace {

using testing::ClusterSpec;
using testing::RedisClusterProcess;
using testing::TlsFiles;
using testing::TlsRedisServer;

std::string Value(const std::string& key, uint64_t version, size_t size) {
  std::string v(std::max<size_t>(size, 16), '\0');
  const uint64_t h = std::hash<std::string>{}(key);
  std::memcpy(v.data(), &version, 8);
  std::memcpy(v.data() + 8, &h, 8);
  std::mt19937_64 rng(h ^ (version * 0x9E3779B97F4A7C15ull));
  for (size_t i = 16; i < v.size(); ++i) v[i] = static_cast<char>(rng());
  return v;
}

absl::Status Put(KvStore& s, std::string_view key, const std::string& v) {
  const ConstByteSpan one[1] = {ConstByteSpan(reinterpret_cast<const uint8_t*>(v.data()), v.size())};
  return s.Put(key, one);
}

absl::StatusOr<std::string> Get(KvStore& s, std::string_view key, size_t size) {
  std::string v(size, '\xA5');
  const ByteSpan one[1] = {ByteSpan(reinterpret_cast<uint8_t*>(v.data()), v.size())};
  absl::StatusOr<uint64_t> got = s.Get(key, one);
  if (!got.ok()) return got.status();
  if (*got != size) return absl::InternalError("size " + std::to_string(*got));
  return v;
}

// A key (hash tag) for `slot`.
std::string KeyInSlot(uint32_t slot, const std::string& suffix) {
  for (uint64_t n = 0;; ++n) {
    const std::string tag = "s" + std::to_string(n);
    if (ClusterKeySlot(tag) == slot) return "{" + tag + "}" + suffix;
  }
}

class RedisClusterTlsTest : public ::testing::Test {
 protected:
  static constexpr const char* kPassword = "cluster-tls-s3cret";
  void SetUp() override {
    if (!testing::ExeOnPath("redis-server")) GTEST_SKIP() << "redis-server is not on PATH";
    files_ = std::make_unique<TlsFiles>();
    ASSERT_TRUE(files_->ok()) << files_->error();
    {
      TlsRedisServer probe(*files_, {});
      if (probe.LacksTls())
        GTEST_SKIP() << "this redis-server has no TLS support (--tls-port refused): " << probe.error();
    }
    ClusterSpec spec{3, 1, kPassword, 1000};
    spec.tls_dir = files_->dir();
    cluster_ = std::make_unique<RedisClusterProcess>(spec);
    ASSERT_TRUE(cluster_->ok()) << cluster_->error();
  }
  void TearDown() override {
    if (HasFailure() && cluster_ != nullptr && cluster_->ok()) std::printf("%s", cluster_->Report().c_str());
  }
  RedisClusterOptions Options() const {
    RedisClusterOptions o;
    o.seeds = *ParseClusterNodes(cluster_->TlsSeeds());
    o.password = kPassword;
    o.timeout_ms = 3000;
    o.tls.enabled = true;
    o.tls.ca_file = files_->path("ca.crt");
    return o;
  }
  swa_store_redis_cluster_config_t Config() {
    swa_store_redis_cluster_config_t c;
    swa_store_redis_cluster_config_init(&c);
    seeds_ = cluster_->TlsSeeds();
    ca_ = files_->path("ca.crt");
    c.nodes = seeds_.c_str();
    c.password = kPassword;
    c.timeout_ms = 3000;
    c.tls = 1;
    c.tls_ca_file = ca_.c_str();
    return c;
  }
  // A master's index and the id of another master.
  std::string NodeIdOfMaster(size_t skip, size_t* index) const {
    for (size_t i = 0; i < cluster_->size(); ++i) {
      if (i != skip && cluster_->IsMaster(i)) {
        *index = i;
        return cluster_->NodeId(i);
      }
    }
    return "";
  }

  std::unique_ptr<TlsFiles> files_;
  std::unique_ptr<RedisClusterProcess> cluster_;
  std::string seeds_, ca_;
};

TEST_F(RedisClusterTlsTest, RoundTripsOnEveryMasterThroughTheCTable) {
  swa_store_redis_cluster_config_t c = Config();
  swa_kv_store_t t;
  swa_kv_store_init(&t);
  ASSERT_EQ(swa_store_redis_cluster_create(&c, &t), SWA_OK) << swa_last_error();
  char msg[SWA_STORE_MESSAGE_BYTES];
  std::vector<int> per_master(cluster_->size(), 0);
  for (uint32_t slot = 0; slot < kClusterSlots; slot += 331) {  // 50 slots over every master
    const std::string key = KeyInSlot(slot, "rt");
    const std::string v = Value(key, slot, 2000 + slot % 977);
    const swa_iov_t put[1] = {{const_cast<char*>(v.data()), v.size()}};
    const auto* k = reinterpret_cast<const uint8_t*>(key.data());
    ASSERT_EQ(t.put(t.user_data, k, key.size(), put, 1, msg, sizeof msg), SWA_OK) << msg;
    std::string got(v.size(), '\xA5');
    const swa_iov_t get[1] = {{got.data(), got.size()}};
    uint64_t size = got.size();
    ASSERT_EQ(t.get(t.user_data, k, key.size(), get, 1, &size, msg, sizeof msg), SWA_OK) << msg;
    ASSERT_EQ(got, v) << key;
    // The server holding it, asked on its plain admin port.
    for (size_t i = 0; i < cluster_->size(); ++i)
      if (cluster_->IsMaster(i) && cluster_->Command(i, {"EXISTS", key}).integer == 1) ++per_master[i];
  }
  int masters_used = 0;
  for (int n : per_master) masters_used += n > 0;
  EXPECT_EQ(masters_used, 3);
  t.release(t.user_data);
}

TEST_F(RedisClusterTlsTest, VerificationFailuresAndPortMixUps) {
  swa_store_redis_cluster_config_t c = Config();
  swa_kv_store_t t;
  swa_kv_store_init(&t);
  const std::string other = files_->path("otherca.crt");
  c.tls_ca_file = other.c_str();
  EXPECT_EQ(swa_store_redis_cluster_create(&c, &t), SWA_UNAUTHENTICATED) << swa_last_error();
  EXPECT_NE(std::string(swa_last_error()).find("redis cluster node 127.0.0.1:"), std::string::npos)
      << swa_last_error();
  EXPECT_NE(std::string(swa_last_error()).find("failed verification"), std::string::npos) << swa_last_error();
  c = Config();
  c.tls_server_name = "other.test";
  EXPECT_EQ(swa_store_redis_cluster_create(&c, &t), SWA_UNAUTHENTICATED) << swa_last_error();
  EXPECT_NE(std::string(swa_last_error()).find("mismatch"), std::string::npos) << swa_last_error();
  c.tls_server_name = "redis.test";  // the name every node's certificate carries
  ASSERT_EQ(swa_store_redis_cluster_create(&c, &t), SWA_OK) << swa_last_error();
  t.release(t.user_data);
  // Plain TCP to the TLS ports: no node answers.
  c = Config();
  c.tls = 0;
  c.tls_ca_file = nullptr;
  c.timeout_ms = 1500;
  EXPECT_EQ(swa_store_redis_cluster_create(&c, &t), SWA_UNAVAILABLE) << swa_last_error();
  EXPECT_NE(std::string(swa_last_error()).find("plain-TCP client"), std::string::npos) << swa_last_error();
  // TLS to the plain ports: no handshake completes.
  c = Config();
  const std::string plain_seeds = cluster_->Seeds();
  c.nodes = plain_seeds.c_str();
  c.timeout_ms = 1500;
  EXPECT_EQ(swa_store_redis_cluster_create(&c, &t), SWA_UNAVAILABLE) << swa_last_error();
  EXPECT_NE(std::string(swa_last_error()).find("TLS handshake"), std::string::npos) << swa_last_error();
  c = Config();
  c.password = "wrong";
  EXPECT_EQ(swa_store_redis_cluster_create(&c, &t), SWA_UNAUTHENTICATED) << swa_last_error();
}

TEST_F(RedisClusterTlsTest, MovedAndAskAreFollowedOverTls) {
  auto made = RedisClusterStore::Connect(Options());
  ASSERT_TRUE(made.ok()) << made.status();
  RedisClusterStore& store = **made;
  // An empty slot, moved from its master to another behind the store's back.
  const uint32_t slot = 1234;
  const std::string key = KeyInSlot(slot, "moved");
  const size_t from = cluster_->IndexOfPort(std::stoi(store.MasterOf(slot).substr(store.MasterOf(slot).rfind(':') + 1)));
  ASSERT_NE(from, size_t(-1));
  ASSERT_EQ(cluster_->Command(from, {"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}).integer, 0);
  size_t to = 0;
  const std::string to_id = NodeIdOfMaster(from, &to);
  ASSERT_FALSE(to_id.empty());
  const std::string from_id = cluster_->NodeId(from);
  // ASK first: `from` migrating, `to` importing; a new key is written on `to` after ASKING.
  ASSERT_TRUE(cluster_->Command(to, {"CLUSTER", "SETSLOT", std::to_string(slot), "IMPORTING", from_id}).ok());
  ASSERT_TRUE(cluster_->Command(from, {"CLUSTER", "SETSLOT", std::to_string(slot), "MIGRATING", to_id}).ok());
  const std::string v1 = Value(key, 1, 5000);
  ASSERT_TRUE(Put(store, key, v1).ok());
  EXPECT_GE(store.Stats().ask, 1u);
  EXPECT_EQ(cluster_->Command(to, {"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}).integer, 1);
  // Then the slot is handed over: the store's map is stale, the old owner answers MOVED.
  for (size_t i = 0; i < cluster_->size(); ++i)
    if (cluster_->IsMaster(i))
      ASSERT_TRUE(cluster_->Command(i, {"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", to_id}).ok());
  const uint64_t moved_before = store.Stats().moved;
  absl::StatusOr<std::string> got;
  for (int i = 0; i < 100; ++i) {  // until every node has the new owner
    got = Get(store, key, v1.size());
    if (got.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, v1);
  EXPECT_GT(store.Stats().moved, moved_before);
  // The new owner, as the store now sees it, is `to`'s TLS port.
  EXPECT_EQ(store.MasterOf(slot), "127.0.0.1:" + std::to_string(cluster_->tls_port(to)));
}

TEST_F(RedisClusterTlsTest, AclUsersOnEveryNode) {
  for (size_t i = 0; i < cluster_->size(); ++i) {
    ASSERT_TRUE(cluster_->Command(i, {"ACL", "SETUSER", "writer", "on", ">wpw", "~*", "+@all"}).ok());
    ASSERT_TRUE(cluster_->Command(i, {"ACL", "SETUSER", "reader", "on", ">rpw", "~*", "-@all", "+get",
                                      "+exists", "+cluster|slots", "+readonly", "+ping", "+asking"})
                    .ok());
  }
  RedisClusterOptions o = Options();
  o.username = "writer";
  o.password = "wpw";
  auto writer = RedisClusterStore::Connect(o);
  ASSERT_TRUE(writer.ok()) << writer.status();
  const std::string key = KeyInSlot(77, "acl");
  const std::string v = Value(key, 3, 3000);
  ASSERT_TRUE(Put(**writer, key, v).ok());
  o.username = "reader";
  o.password = "rpw";
  auto reader = RedisClusterStore::Connect(o);
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<std::string> got = Get(**reader, key, v.size());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, v);
  const absl::Status refused = Put(**reader, key, Value(key, 4, 3000));
  EXPECT_TRUE(absl::IsPermissionDenied(refused)) << refused;
  EXPECT_NE(refused.message().find("redis cluster node 127.0.0.1:"), std::string::npos) << refused;
  got = Get(**reader, key, v.size());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, v);  // unchanged
  o.password = "wrong";
  auto bad = RedisClusterStore::Connect(o);
  EXPECT_TRUE(absl::IsUnauthenticated(bad.status())) << bad.status();
  EXPECT_NE(bad.status().message().find("user \"reader\""), std::string::npos) << bad.status();
}

TEST_F(RedisClusterTlsTest, MasterKilledMidLoadFailsOverOverTls) {
  RedisClusterOptions o = Options();
  o.timeout_ms = 1500;
  auto made = RedisClusterStore::Connect(o);
  ASSERT_TRUE(made.ok()) << made.status();
  RedisClusterStore& store = **made;
  constexpr int kThreads = 4, kKeys = 48;
  auto key_of = [](int w, int i) { return KeyInSlot(static_cast<uint32_t>((w * kKeys + i) * 83 % kClusterSlots), "f"); };
  std::vector<std::vector<std::string>> keys(kThreads);
  for (int w = 0; w < kThreads; ++w)
    for (int i = 0; i < kKeys; ++i) {
      keys[w].push_back(key_of(w, i));
      ASSERT_TRUE(Put(store, keys[w][i], Value(keys[w][i], 1, 1000)).ok());
    }
  std::atomic<bool> stop{false};
  std::atomic<int> ok_calls{0}, failed_calls{0}, corrupt{0}, wrong_code{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < kThreads; ++w) {
    workers.emplace_back([&, w] {
      std::vector<uint64_t> latest(kKeys, 1);
      for (int n = 0; !stop; ++n) {
        const int i = n % kKeys;
        const std::string& k = keys[w][i];
        const absl::Status put = Put(store, k, Value(k, latest[i] + 1, 1000));
        if (put.ok()) ++latest[i];
        const absl::StatusOr<std::string> v = Get(store, k, 1000);
        for (const absl::Status& s : {put, v.status()}) {
          if (s.ok()) ++ok_calls; else ++failed_calls;
          if (!s.ok() && !absl::IsUnavailable(s) && !absl::IsDeadlineExceeded(s) && !absl::IsNotFound(s)) ++wrong_code;
        }
        // Async replication may lose the last writes, never mix keys or bytes.
        if (v.ok()) {
          uint64_t version;
          std::memcpy(&version, v->data(), 8);
          if (version < 1 || version > latest[i] + 1 || Value(k, version, 1000) != *v) ++corrupt;
        }
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
  for (int w = 0; w < kThreads; ++w) {
    for (int i = 0; i < kKeys; ++i) {
      const std::string& k = keys[w][i];
      ASSERT_TRUE(Put(store, k, Value(k, 1000, 1000)).ok()) << k;
      absl::StatusOr<std::string> v = Get(store, k, 1000);
      ASSERT_TRUE(v.ok()) << v.status();
      ASSERT_EQ(*v, Value(k, 1000, 1000));
    }
  }
  // Every master in the new map is reached on its TLS port.
  for (uint32_t slot = 0; slot < kClusterSlots; slot += 4096) {
    const std::string master = store.MasterOf(slot);
    const size_t i = cluster_->IndexOfPort(std::stoi(master.substr(master.rfind(':') + 1)));
    ASSERT_NE(i, size_t(-1)) << master;
    EXPECT_EQ(master, "127.0.0.1:" + std::to_string(cluster_->tls_port(i)));
  }
  std::printf("TLS failover: %d calls ok, %d failed with a status during it; %llu refreshes\n",
              ok_calls.load(), failed_calls.load(), (unsigned long long)store.Stats().refreshes);
}

}  // namespace
}  // namespace swa

#else
TEST(RedisClusterTlsTest, NeedsHiredis) { GTEST_SKIP() << "this build has no Redis store (hiredis not found)"; }
#endif
