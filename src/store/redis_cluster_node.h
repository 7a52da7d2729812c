// One Redis Cluster node as the cluster store sees it: a pool of hiredis
// connections (AUTH and, for replica reads, READONLY run at connect), and a
// command runner with a per-call timeout and optional ASKING prefix.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "store/cluster_hash_slot.h"

struct redisContext;
struct redisReply;

namespace swa {

struct RedisReplyDeleter {
  void operator()(redisReply* r) const;
};
using RedisReply = std::unique_ptr<redisReply, RedisReplyDeleter>;

struct RedisNodeOptions {
  std::string password;    // empty = no AUTH
  uint32_t max_idle = 4;   // idle connections kept
  bool readonly = false;   // send READONLY on connect (reads from a replica)
};

// Thread-safe.
class RedisNode {
 public:
  RedisNode(ClusterNodeAddress address, RedisNodeOptions options)
      : address_(std::move(address)), options_(std::move(options)) {}
  ~RedisNode();
  RedisNode(const RedisNode&) = delete;
  RedisNode& operator=(const RedisNode&) = delete;

  // Runs `args` on a pooled (or new) connection, preceded by ASKING when
  // `asking`, with at most `timeout` per socket operation. Returns the reply,
  // error replies included (the caller reads MOVED/ASK/...). A connection
  // that fails is closed: refused, reset or closed are UNAVAILABLE, a timeout
  // DEADLINE_EXCEEDED, a failed AUTH UNAUTHENTICATED; each names the node.
  absl::StatusOr<RedisReply> Run(const std::vector<std::string_view>& args, bool asking,
                                 absl::Duration timeout);

  // Closes every idle connection (after the node failed once, the others are
  // likely dead too).
  void DropIdle();

  const ClusterNodeAddress& address() const { return address_; }

 private:
  absl::StatusOr<redisContext*> Connect(absl::Duration timeout) const;
  void Return(redisContext* c);

  const ClusterNodeAddress address_;
  const RedisNodeOptions options_;
  absl::Mutex mu_;
  std::vector<redisContext*> idle_ ABSL_GUARDED_BY(mu_);
};

// A reply's text (status, error or string replies), else empty.
std::string_view ReplyText(const redisReply& r);

}  // namespace swa
