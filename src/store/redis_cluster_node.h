// One Redis Cluster node as the cluster store sees it: its address and a
// connection pool (store/redis_pool.h: plain TCP or TLS; AUTH [user] password
// and, for replica reads, READONLY run at connect). Thread-safe.
#pragma once

#include <hiredis/hiredis.h>

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "store/cluster_hash_slot.h"
#include "store/redis_pool.h"

namespace swa {

class RedisNode {
 public:
  // `max_idle` idle connections kept; `readonly`: READONLY on connect; `tls`
  // null: plain TCP.
  RedisNode(ClusterNodeAddress address, std::string username, std::string password,
            std::shared_ptr<const RedisTlsContext> tls, uint32_t max_idle, bool readonly)
      : address_(std::move(address)),
        pool_(RedisPoolOptions{.host = address_.host,
                               .port = address_.port,
                               .name = absl::StrCat("redis cluster node ", address_.ToString()),
                               .username = std::move(username),
                               .password = std::move(password),
                               .tls = std::move(tls),
                               .readonly = readonly,
                               .max_idle = max_idle}) {}

  // RedisConnectionPool::Run: the reply, read within `limits`, error replies
  // included (the caller reads MOVED/ASK/...); failures name the node.
  absl::StatusOr<RedisReply> Run(const std::vector<std::string_view>& args, bool asking,
                                 absl::Duration timeout, const RedisReplyLimits& limits) {
    return pool_.Run(args, timeout, limits, asking);
  }

  // Sends `args` (ASKING first when `asking`: its reply is read, within
  // kRedisShortReply, before the command is sent, and an error reply to it
  // is returned without sending the command) and lets `read` read the
  // reply: a reply it returns (an error
  // reply, e.g. MOVED), or null when it took the reply itself (the streaming
  // GET). The connection goes back to the pool only when `read` succeeds
  // (RedisConnectionPool::RunWith); failures name the node.
  absl::StatusOr<RedisReply> RunRead(
      const std::vector<std::string_view>& args, bool asking, absl::Duration timeout,
      const std::function<absl::StatusOr<RedisReply>(RedisConnection&)>& read) {
    RedisReply out;
    const std::vector<std::string_view> asking_args = {"ASKING"};
    absl::Status s =
        pool_.RunWith(asking ? asking_args : args, timeout, [&](RedisConnection& c) -> absl::Status {
          if (asking) {
            // +OK or an error reply, never a bulk string or nil.
            absl::StatusOr<RedisReply> ok = c.Read("ASKING", timeout, kRedisShortReply);
            if (!ok.ok()) return ok.status();
            if ((*ok)->type == REDIS_REPLY_STRING || (*ok)->type == REDIS_REPLY_NIL)
              return absl::UnavailableError(
                  absl::StrCat(name(), ": ASKING: protocol error: a bulk string or nil reply"));
            if ((*ok)->type == REDIS_REPLY_ERROR) {  // refused: the command is not sent
              out = std::move(*ok);
              return absl::OkStatus();
            }
            if (absl::Status sent = c.Send({args}, timeout); !sent.ok()) return sent;
          }
          absl::StatusOr<RedisReply> r = read(c);
          if (!r.ok()) return r.status();
          out = std::move(*r);
          return absl::OkStatus();
        });
    if (!s.ok()) return s;
    return out;
  }

  // RedisConnectionPool::RunPipeline: every command sent before any reply is
  // read (one round trip), each reply within `limits`, the replies read
  // before a failure kept in `*replies`; failures name the node.
  absl::Status RunPipeline(const std::vector<std::vector<std::string_view>>& commands,
                           absl::Duration timeout, const RedisReplyLimits& limits,
                           std::vector<RedisReply>* replies) {
    return pool_.RunPipeline(commands, timeout, limits, replies);
  }
  // Closes every idle connection (after the node failed once, the others are
  // likely dead too).
  void DropIdle() { pool_.DropIdle(); }

  const ClusterNodeAddress& address() const { return address_; }
  // "redis cluster node host:port", as the node's messages start.
  const std::string& name() const { return pool_.name(); }

 private:
  const ClusterNodeAddress address_;
  RedisConnectionPool pool_;
};

}  // namespace swa
