// The one Redis connection pool (src/store/redis_pool.h) behind the Redis and
// Redis Cluster stores, without a server: how error replies and failed
// connects become statuses, and that every message names the server. The
// stores' tests (store_redis_test, store_redis_cluster_test) run it against
// real redis-server processes.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#if defined(SWACACHE_HAVE_REDIS)
#include "store/redis_pool.h"

namespace swa {
namespace {

TEST(RedisPool, ErrorRepliesMapToCodesAndNameTheServer) {
  struct Row {
    const char* text;
    absl::StatusCode code;
  };
  const Row rows[] = {
      {"OOM command not allowed when used memory > 'maxmemory'", absl::StatusCode::kResourceExhausted},
      {"NOAUTH Authentication required.", absl::StatusCode::kUnauthenticated},
      {"WRONGPASS invalid username-password pair", absl::StatusCode::kUnauthenticated},
      {"ERR invalid password", absl::StatusCode::kUnauthenticated},
      {"LOADING Redis is loading the dataset in memory", absl::StatusCode::kUnavailable},
      {"BUSY Redis is busy running a script", absl::StatusCode::kUnavailable},
      {"MASTERDOWN Link with MASTER is down", absl::StatusCode::kUnavailable},
      {"TRYAGAIN Multiple keys request during rehashing", absl::StatusCode::kUnavailable},
      {"READONLY You can't write against a read only replica.", absl::StatusCode::kUnavailable},
      {"CLUSTERDOWN The cluster is down", absl::StatusCode::kUnavailable},
      {"ERR wrong number of arguments for 'get' command", absl::StatusCode::kUnknown},
      {"WRONGTYPE Operation against a key holding the wrong kind of value",
       absl::StatusCode::kUnknown},
  };
  for (const Row& r : rows) {
    const absl::Status s = ErrorReplyStatus(r.text, "redis store 10.0.0.1:7000: GET");
    EXPECT_EQ(s.code(), r.code) << r.text;
    EXPECT_EQ(std::string(s.message()),
              std::string("redis store 10.0.0.1:7000: GET: server replied \"") + r.text + "\"");
    EXPECT_EQ(IsTransientReply(r.text), r.code == absl::StatusCode::kUnavailable) << r.text;
  }
}

// A loopback port with nothing listening (bound, then closed).
int ClosedPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

TEST(RedisPool, RefusedConnectIsUnavailableNamingTheServer) {
  const int port = ClosedPort();
  ASSERT_GT(port, 0);
  const std::string name = "redis cluster node 127.0.0.1:" + std::to_string(port);
  RedisConnectionPool pool(RedisPoolOptions{
      .host = "127.0.0.1", .port = static_cast<uint32_t>(port), .name = name, .max_idle = 2});
  const absl::Status open = pool.Open(absl::Milliseconds(500));
  EXPECT_EQ(open.code(), absl::StatusCode::kUnavailable) << open;
  EXPECT_EQ(std::string(open.message()).rfind(name + ": connect: ", 0), 0u) << open;
  // Run connects anew (nothing idle) and fails the same way, twice in a row.
  for (int i = 0; i < 2; ++i) {
    const absl::StatusOr<RedisReply> r = pool.Run({"GET", "k"}, absl::Milliseconds(500), kRedisShortReply);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
    EXPECT_EQ(std::string(r.status().message()).rfind(name + ": connect: ", 0), 0u)
        << r.status();
  }
  pool.DropIdle();  // nothing idle: a no-op
}

}  // namespace
}  // namespace swa

#else
TEST(RedisPool, NotBuilt) { GTEST_SKIP() << "built without hiredis"; }
#endif
