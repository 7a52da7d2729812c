// The longest-prefix probe of the Redis and Redis Cluster stores
// (RedisStore::FirstPresent, RedisClusterStore::FirstPresent; docs/store.md,
// "Longest-prefix probe") when the EXISTS pipeline breaks part way, against
// scripted fake nodes (no redis-server needed): a node answers the first
// `break_after` commands of the pipeline and then closes its side. The
// replies that arrived are answers: a present key behind keys answered
// absent is the probe's answer; a key whose reply is missing, before any
// present key, fails the probe naming that key; never another index. The
// pool's pipeline alone (replies read before a failure come back with it)
// is checked here too.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdint>
#include <atomic>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#if defined(SWACACHE_HAVE_REDIS)
#include <hiredis/hiredis.h>

#include "store/blob_store.h"
#include "store/cluster_hash_slot.h"
#include "store/redis_cluster_store.h"
#include "store/redis_pool.h"
#include "store/redis_store.h"
#include "unit/redis_fake_server.h"

namespace swa {
namespace {

using namespace fake_redis;

// What a fake node answers. EXISTS: ":1" for the keys in `present`, ":0"
// for the others, `error_reply` for `error_key`. The first connection that
// receives an EXISTS (the probe's pipeline) answers `break_after` of them
// and then closes its side: the client reads EOF where the next reply should
// be; the rest of the pipeline is read and dropped (kNoBreak: it answers
// every one, and later ones on that connection). After that break, with
// `later_down`, a connection that receives an EXISTS is closed unanswered
// (the node is gone for the retries). PING: +PONG; CLUSTER SLOTS: `slots()`.
constexpr size_t kNoBreak = SIZE_MAX;
struct NodeScript {
  std::set<std::string> present;
  size_t break_after = 0;
  bool later_down = false;
  std::string error_key;
  std::string error_reply;
  std::function<std::string()> slots;
};

class BreakingNode {
 public:
  explicit BreakingNode(NodeScript script)
      : script_(std::move(script)), server_([this](int fd, int) { Handle(fd); }) {}
  uint32_t port() const { return server_.port(); }
  bool broke() const { return broke_; }
  int exists_seen() const { return exists_seen_; }

 private:
  void Handle(int fd) {
    const int one = 1;  // one small write per reply: no wait for a delayed ACK
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    bool pipeline = false, half_closed = false;
    size_t answered = 0;
    ServeCommands(fd, [&](const std::vector<std::string>& a) {
      if (half_closed) return true;  // the rest of the pipeline, unanswered
      if (a[0] == "PING") return WriteAll(fd, "+PONG\r\n");
      if (a[0] == "CLUSTER" && script_.slots) return WriteAll(fd, script_.slots());
      if (a[0] != "EXISTS" || a.size() != 2) return WriteAll(fd, "-ERR unexpected command\r\n");
      ++exists_seen_;
      bool unclaimed = false;
      if (!pipeline && claimed_.compare_exchange_strong(unclaimed, true)) pipeline = true;
      if (pipeline && answered == script_.break_after) {
        broke_ = true;
        half_closed = true;
        shutdown(fd, SHUT_WR);
        return true;
      }
      if (!pipeline && broke_ && script_.later_down) return false;
      ++answered;
      if (a[1] == script_.error_key) return WriteAll(fd, script_.error_reply);
      return WriteAll(fd, script_.present.count(a[1]) ? ":1\r\n" : ":0\r\n");
    });
  }

  const NodeScript script_;
  std::atomic<bool> claimed_{false};  // the pipeline's connection is taken
  std::atomic<bool> broke_{false};
  std::atomic<int> exists_seen_{0};
  FakeServer server_;  // last: its threads use the members above
};

std::string Key(int i) { return "key" + std::to_string(i); }

// The first present key when keys answered[0 ... n) are known, else the
// first key not known: {index, ok}.
struct Expected {
  int64_t index;
  bool ok;
};
Expected Reference(const std::vector<bool>& present, const std::vector<bool>& answered) {
  for (size_t i = 0; i < present.size(); ++i) {
    if (!answered[i]) return {static_cast<int64_t>(i), false};
    if (present[i]) return {static_cast<int64_t>(i), true};
  }
  return {-1, true};
}

std::unique_ptr<RedisStore> ConnectStore(const BreakingNode& node) {
  RedisStoreOptions o;
  o.host = "127.0.0.1";
  o.port = node.port();
  o.timeout_ms = 2000;
  absl::StatusOr<std::unique_ptr<RedisStore>> store = RedisStore::Connect(o);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::move(*store) : nullptr;
}

TEST(RedisProbePipeline, TheRepliesReadBeforeAFailureComeBackWithIt) {
  for (size_t break_after = 0; break_after <= 4; ++break_after) {
    SCOPED_TRACE(break_after);
    BreakingNode node(NodeScript{.present = {"b", "d"}, .break_after = break_after < 4 ? break_after : kNoBreak});
    RedisConnectionPool p(RedisPoolOptions{.host = "127.0.0.1",
                                           .port = node.port(),
                                           .name = "fake redis",
                                           .max_idle = 2});
    const std::vector<std::vector<std::string_view>> commands = {
        {"EXISTS", "a"}, {"EXISTS", "b"}, {"EXISTS", "c"}, {"EXISTS", "d"}};
    std::vector<RedisReply> replies;
    replies.emplace_back();  // cleared by the call
    const absl::Status s = p.RunPipeline(commands, absl::Seconds(2), kRedisShortReply, &replies);
    if (break_after < commands.size()) {
      EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    } else {
      EXPECT_TRUE(s.ok()) << s;
    }
    ASSERT_EQ(replies.size(), std::min(break_after, commands.size()));
    for (size_t i = 0; i < replies.size(); ++i) {
      ASSERT_EQ(replies[i]->type, REDIS_REPLY_INTEGER);
      EXPECT_EQ(replies[i]->integer, i == 1 || i == 3 ? 1 : 0) << i;
    }
    // A broken connection is not reused: the next pipeline answers whole.
    const absl::Status again = p.RunPipeline(commands, absl::Seconds(2), kRedisShortReply, &replies);
    EXPECT_TRUE(again.ok()) << again;
    EXPECT_EQ(replies.size(), commands.size());
  }
}

// Every pattern of 4 keys present or absent, the pipeline broken before
// each of its replies (and not at all): the answer when a present key's
// reply arrived behind absent ones, else UNAVAILABLE naming the first key
// whose reply is missing (no retry: the store retries no call); the next
// probe, on a new connection, answers.
TEST(RedisStoreProbe, ABrokenPipelineAnswersWithTheRepliesThatArrived) {
  constexpr int kKeys = 4;
  std::vector<std::string> keys;
  for (int i = 0; i < kKeys; ++i) keys.push_back(Key(i));
  for (int mask = 0; mask < (1 << kKeys); ++mask) {
    for (size_t break_after = 0; break_after <= kKeys; ++break_after) {
      SCOPED_TRACE(absl::StrCat("mask ", mask, ", break after ", break_after));
      NodeScript script{.break_after = break_after < kKeys ? break_after : kNoBreak};
      std::vector<bool> present(kKeys), answered(kKeys);
      for (int i = 0; i < kKeys; ++i) {
        present[i] = mask & (1 << i);
        answered[i] = static_cast<size_t>(i) < break_after;
        if (present[i]) script.present.insert(keys[i]);
      }
      const Expected want = Reference(present, answered);
      const Expected whole = Reference(present, std::vector<bool>(kKeys, true));
      BreakingNode node(script);
      std::unique_ptr<RedisStore> store = ConnectStore(node);
      ASSERT_NE(store, nullptr);
      size_t failed = 99;
      absl::StatusOr<int64_t> got = store->FirstPresent(keys, &failed);
      if (want.ok) {
        ASSERT_TRUE(got.ok()) << got.status();
        EXPECT_EQ(*got, want.index);
        EXPECT_EQ(failed, 99u);
      } else {
        ASSERT_FALSE(got.ok()) << "answered " << *got;
        EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
        EXPECT_EQ(failed, static_cast<size_t>(want.index)) << got.status();
        EXPECT_NE(got.status().message().find(absl::StrCat("no reply for key ", want.index, " of 4")),
                  std::string_view::npos)
            << got.status();
      }
      got = store->FirstPresent(keys, &failed);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(*got, whole.index);
    }
  }
}

// An error reply that arrived before the break is that key's failure (its
// own status), not "absent" and not the break; after a present key it does
// not matter.
TEST(RedisStoreProbe, AnErrorReplyBeforeTheBreakIsTheFailure) {
  const std::vector<std::string> keys = {Key(0), Key(1), Key(2)};
  struct Case {
    std::set<std::string> present;
    std::string error_key, error_reply;
    size_t break_after;
    absl::StatusCode code;  // kOk: found 0
    size_t failed;
  };
  const std::vector<Case> cases = {
      {{}, Key(0), "-NOPERM no permissions to access a key\r\n", 1,
       absl::StatusCode::kPermissionDenied, 0},
      {{}, Key(1), "-ERR something\r\n", 2, absl::StatusCode::kUnknown, 1},
      {{}, Key(1), "$3\r\nabc\r\n", 2, absl::StatusCode::kUnknown, 1},  // not an integer
      {{Key(0)}, Key(1), "-ERR something\r\n", 2, absl::StatusCode::kOk, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.error_key, " ", c.error_reply));
    BreakingNode node(NodeScript{.present = c.present,
                                 .break_after = c.break_after,
                                 .error_key = c.error_key,
                                 .error_reply = c.error_reply});
    std::unique_ptr<RedisStore> store = ConnectStore(node);
    ASSERT_NE(store, nullptr);
    size_t failed = 99;
    absl::StatusOr<int64_t> got = store->FirstPresent(keys, &failed);
    if (c.code == absl::StatusCode::kOk) {
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(*got, 0);
      continue;
    }
    ASSERT_FALSE(got.ok()) << "answered " << *got;
    EXPECT_EQ(got.status().code(), c.code) << got.status();
    EXPECT_EQ(failed, c.failed) << got.status();
  }
}

// Through the blob store (the C API's path): the message names the key
// whose reply is missing, with its index.
TEST(RedisStoreProbe, TheBlobStoreMessageNamesTheKeyWithoutAReply) {
  const std::vector<std::string_view> keys = {"long", "medium", "short"};
  auto probe = [&](BlobStore* bs) { return bs->FirstPresent(keys); };
  // The full keys (namespace prefix) of a blob store on any Redis store.
  BlobStore naming(nullptr, 1);
  NodeScript script{.present = {naming.FullKey("short")}, .break_after = 1};
  BreakingNode node(script);
  std::unique_ptr<RedisStore> store = ConnectStore(node);
  ASSERT_NE(store, nullptr);
  BlobStore bs(std::move(store), 1);
  absl::StatusOr<int64_t> got = probe(&bs);
  ASSERT_FALSE(got.ok()) << "answered " << *got;
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable);
  const std::string m(got.status().message());
  EXPECT_NE(m.find("store probe: key 1 ("), std::string::npos) << m;
  EXPECT_NE(m.find("medium"), std::string::npos) << m;
  EXPECT_NE(m.find("no reply for key 1 of 3; key 0 absent"), std::string::npos) << m;
}

// The cluster store: two masters, A serving slots 0 ... 8191 and B the
// rest, the keys alternating between them (0, 2, 4 on A; 1, 3, 5 on B).
std::string NodeEntry(uint32_t port) {
  return "*2\r\n$9\r\n127.0.0.1\r\n:" + std::to_string(port) + "\r\n";
}

std::vector<std::string> AlternatingKeys(int n) {
  std::vector<std::string> keys;
  for (int i = 0, tag = 0; i < n; ++i) {
    const bool want_a = i % 2 == 0;
    for (;; ++tag) {
      std::string k = "{t" + std::to_string(tag) + "}" + Key(i);
      if ((ClusterKeySlot(k) < 8192) == want_a) {
        keys.push_back(std::move(k));
        ++tag;
        break;
      }
    }
  }
  return keys;
}

struct TwoMasters {
  std::atomic<uint32_t> port_a{0}, port_b{0};
  std::unique_ptr<BreakingNode> a, b;
  TwoMasters(NodeScript sa, NodeScript sb) {
    auto slots = [this] {
      return "*2\r\n*3\r\n:0\r\n:8191\r\n" + NodeEntry(port_a) + "*3\r\n:8192\r\n:16383\r\n" +
             NodeEntry(port_b);
    };
    sa.slots = slots;
    sb.slots = slots;
    a = std::make_unique<BreakingNode>(std::move(sa));
    b = std::make_unique<BreakingNode>(std::move(sb));
    port_a = a->port();
    port_b = b->port();
  }
};

std::unique_ptr<RedisClusterStore> ConnectCluster(const TwoMasters& m) {
  RedisClusterOptions o;
  o.seeds = {{"127.0.0.1", m.a->port()}};
  o.timeout_ms = 2000;
  o.max_attempts = 1;  // a key whose master is back answers at the first retry
  absl::StatusOr<std::unique_ptr<RedisClusterStore>> store = RedisClusterStore::Connect(o);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::move(*store) : nullptr;
}

// Every pattern of 4 keys (0, 2 on A; 1, 3 on B), each master's pipeline
// broken before each of its replies or not at all, the masters gone for the
// retries (`later_down`) or back: a present key is the answer only once
// every key before it is known absent, from either master's pipeline or a
// retry; a key nobody answered fails the probe naming it.
TEST(RedisClusterStoreProbe, ABrokenPipelineOnEitherMasterKeepsTheRepliesThatArrived) {
  constexpr int kKeys = 4;
  const std::vector<std::string> keys = AlternatingKeys(kKeys);
  for (const bool later_down : {true, false}) {
    for (int mask = 0; mask < (1 << kKeys); ++mask) {
      for (size_t break_a = 0; break_a <= 2; ++break_a) {
        for (size_t break_b = 0; break_b <= 2; ++break_b) {
          SCOPED_TRACE(absl::StrCat("later_down ", later_down, ", mask ", mask, ", A breaks after ",
                                    break_a, ", B after ", break_b));
          NodeScript sa{.break_after = break_a < 2 ? break_a : kNoBreak, .later_down = later_down};
          NodeScript sb{.break_after = break_b < 2 ? break_b : kNoBreak, .later_down = later_down};
          std::vector<bool> present(kKeys), answered(kKeys);
          for (int i = 0; i < kKeys; ++i) {
            present[i] = mask & (1 << i);
            const size_t position = static_cast<size_t>(i / 2);  // in its master's pipeline
            answered[i] = !later_down || position < (i % 2 == 0 ? break_a : break_b);
            if (present[i]) (i % 2 == 0 ? sa : sb).present.insert(keys[i]);
          }
          const Expected want = Reference(present, answered);
          TwoMasters masters(std::move(sa), std::move(sb));
          std::unique_ptr<RedisClusterStore> store = ConnectCluster(masters);
          ASSERT_NE(store, nullptr);
          size_t failed = 99;
          absl::StatusOr<int64_t> got = store->FirstPresent(keys, &failed);
          if (want.ok) {
            ASSERT_TRUE(got.ok()) << got.status();
            EXPECT_EQ(*got, want.index);
          } else {
            ASSERT_FALSE(got.ok()) << "answered " << *got;
            EXPECT_TRUE(absl::IsUnavailable(got.status()) || absl::IsDeadlineExceeded(got.status()))
                << got.status();
            EXPECT_EQ(failed, static_cast<size_t>(want.index)) << got.status();
          }
        }
      }
    }
  }
}

// A present key's reply that arrived before its master's pipeline broke is
// not asked again: with both masters gone after the pipelines, key 0 known
// absent (B) and key 1 present (A, before the break) answer 1.
TEST(RedisClusterStoreProbe, AnAnsweredKeyIsNotAskedAgain) {
  std::vector<std::string> keys = AlternatingKeys(4);  // 0, 2 on A; 1, 3 on B
  std::swap(keys[0], keys[1]);                         // 0, 2 on B; 1, 3 on A
  TwoMasters masters(NodeScript{.present = {keys[1]}, .break_after = 1, .later_down = true},
                     NodeScript{.break_after = 1, .later_down = true});
  std::unique_ptr<RedisClusterStore> store = ConnectCluster(masters);
  ASSERT_NE(store, nullptr);
  size_t failed = 99;
  absl::StatusOr<int64_t> got = store->FirstPresent(keys, &failed);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, 1);
  EXPECT_TRUE(masters.a->broke() && masters.b->broke());
  // One EXISTS each answered, one each unanswered (the break): no retry.
  EXPECT_EQ(masters.a->exists_seen(), 2);
  EXPECT_EQ(masters.b->exists_seen(), 2);
}

}  // namespace
}  // namespace swa
#else
TEST(RedisStoreProbe, NotBuilt) { GTEST_SKIP() << "built without hiredis"; }
#endif  // SWACACHE_HAVE_REDIS
