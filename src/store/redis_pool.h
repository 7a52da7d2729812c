// A pool of connections (store/redis_connection.h: plain TCP or TLS) to one
// Redis server: the one piece of connection handling behind the single-server
// store (redis_store) and every node of the cluster store
// (redis_cluster_node). A new connection runs its setup (AUTH [user]
// password, SELECT, READONLY, PING, as configured) once; at most `max_idle`
// idle connections are kept; a connection that fails is closed, and so is an
// idle one that the server closed or that holds bytes nobody asked for
// (RedisConnection::Idle), when it is next taken. Every reply is read within
// bounds its caller names (RedisReplyLimits; the setup commands' are
// kRedisShortReply). Failures and
// error replies become statuses that name the server.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "store/redis_connection.h"
#include "store/redis_tls.h"

namespace swa {

// A reply's text (status, error or string replies), else empty.
std::string_view ReplyText(const redisReply& r);

// Error replies that mean "the server or cluster is changing, try again":
// CLUSTERDOWN, TRYAGAIN, LOADING, MASTERDOWN, READONLY, BUSY.
bool IsTransientReply(std::string_view text);

// A final error reply as a status, "<where>: server replied "<text>"": OOM is
// RESOURCE_EXHAUSTED, NOAUTH / WRONGPASS / an AUTH complaint UNAUTHENTICATED,
// a transient reply UNAVAILABLE, NOPERM (an ACL user lacking the command or
// key) PERMISSION_DENIED, anything else UNKNOWN.
absl::Status ErrorReplyStatus(std::string_view text, std::string_view where);

struct RedisPoolOptions {
  std::string host;
  uint32_t port = 0;
  // Starts every message, e.g. "redis store 127.0.0.1:6379".
  std::string name;
  std::string username;   // non-empty: AUTH username password (an ACL user)
  std::string password;   // empty: no AUTH
  std::shared_ptr<const RedisTlsContext> tls;  // null: plain TCP
  uint32_t db = 0;        // != 0: SELECT db
  bool readonly = false;  // READONLY (reads from a cluster replica)
  bool ping = false;      // PING last, so that e.g. NOAUTH shows at connect
  uint32_t max_idle = 4;  // idle connections kept
};

// Thread-safe.
class RedisConnectionPool {
 public:
  explicit RedisConnectionPool(RedisPoolOptions options) : options_(std::move(options)) {}
  ~RedisConnectionPool() { DropIdle(); }
  RedisConnectionPool(const RedisConnectionPool&) = delete;
  RedisConnectionPool& operator=(const RedisConnectionPool&) = delete;

  // Opens one connection and keeps it idle: a bad address or password fails here.
  absl::Status Open(absl::Duration timeout);

  // Runs `args` on an idle (or new) connection, preceded by ASKING when
  // `asking`, with at most `timeout` for connecting, for sending and for
  // reading each reply, its reply read within `limits` (the command's:
  // RedisConnection::Read; ASKING's within kRedisShortReply). With a
  // limits.max_silence, a new connection is opened (connect, TLS handshake,
  // setup commands) within it, and sending and reading fail when the server
  // is silent that long (UNAVAILABLE, "no byte for <ms>"). Returns the reply,
  // error replies included (ASKING's error reply when the server refuses
  // ASKING: the command's own reply, read to stay in step, is dropped). A connection that fails is closed: refused,
  // reset or closed are UNAVAILABLE, a timeout DEADLINE_EXCEEDED, a failed
  // AUTH UNAUTHENTICATED.
  absl::StatusOr<RedisReply> Run(const std::vector<std::string_view>& args, absl::Duration timeout,
                                 const RedisReplyLimits& limits, bool asking = false);

  // Sends `args` on an idle (or new) connection and lets `read` read the
  // reply; the connection goes back to the pool when `read` returns OK and is
  // closed otherwise (as Run).
  absl::Status RunWith(const std::vector<std::string_view>& args, absl::Duration timeout,
                       const std::function<absl::Status(RedisConnection&)>& read);

  // Sends every command of `commands` on one connection before reading any
  // reply (a pipeline: one round trip) and puts the replies in `*replies`, in
  // order, error replies included, each read within `limits`
  // (limits.max_silence as Run). A failure (UNAVAILABLE / DEADLINE_EXCEEDED
  // as Run; a reply refused by its bounds) is returned with the replies read
  // whole before it, one per command up to the one whose reply is missing,
  // and closes the connection. OK: one reply per command.
  absl::Status RunPipeline(const std::vector<std::vector<std::string_view>>& commands,
                           absl::Duration timeout, const RedisReplyLimits& limits,
                           std::vector<RedisReply>* replies);

  // Closes every idle connection.
  void DropIdle();

  const std::string& name() const { return options_.name; }

 private:
  using Connection = std::unique_ptr<RedisConnection>;
  absl::StatusOr<Connection> Connect(absl::Duration timeout) const;
  // An idle connection, or a new one.
  absl::StatusOr<Connection> Take(absl::Duration timeout);
  void Return(Connection c);

  const RedisPoolOptions options_;
  absl::Mutex mu_;
  std::vector<Connection> idle_ ABSL_GUARDED_BY(mu_);
};

}  // namespace swa
