// The built-in Redis store (hiredis): SET/GET/EXISTS/DEL, one blob per key,
// a pool of connections (store/redis_pool.h) so that concurrent calls do not
// serialise.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "store/kv_store.h"
#include "store/redis_pool.h"
#include "store/redis_tls.h"

namespace swa {

struct RedisStoreOptions {
  std::string host = "127.0.0.1";
  uint32_t port = 6379;
  uint32_t db = 0;
  std::string username;  // non-empty: AUTH username password (an ACL user); needs password
  std::string password;  // empty = no AUTH
  RedisTlsOptions tls;   // tls.enabled = false: plain TCP
  uint32_t ttl_seconds = 0;
  uint32_t timeout_ms = 5000;
  uint32_t max_connections = 8;  // idle connections kept
};

class RedisStore final : public KvStore {
 public:
  // Connects once (and keeps that connection) so that a bad address fails here.
  static absl::StatusOr<std::unique_ptr<RedisStore>> Connect(const RedisStoreOptions& options);
  ~RedisStore() override;

  absl::Status Put(std::string_view key, absl::Span<const ConstByteSpan> pieces) override;
  absl::StatusOr<uint64_t> Get(std::string_view key, absl::Span<const ByteSpan> pieces) override;
  // The blob goes from the socket straight into the pieces, `landed` called
  // as it arrives (RedisConnection::ReadBulkInto).
  absl::StatusOr<uint64_t> GetStreaming(std::string_view key, absl::Span<const ByteSpan> pieces,
                                        const std::function<void(uint64_t)>& landed) override;
  absl::StatusOr<bool> Exists(std::string_view key) override;
  absl::Status Remove(std::string_view key) override;
  // One pipeline of EXISTS commands (one round trip; docs/store.md,
  // "Longest-prefix probe").
  absl::StatusOr<int64_t> FirstPresent(absl::Span<const std::string> keys,
                                       size_t* failed_key) override;

 private:
  RedisStore(RedisStoreOptions options, RedisPoolOptions pool)
      : options_(std::move(options)), pool_(std::move(pool)) {}
  // Runs one command on a pooled connection, its reply read within `limits`;
  // a server error reply is a status.
  absl::StatusOr<RedisReply> Command(const std::vector<std::string_view>& args,
                                     const RedisReplyLimits& limits);
  absl::Duration timeout() const { return absl::Milliseconds(options_.timeout_ms); }

  const RedisStoreOptions options_;
  RedisConnectionPool pool_;
};

}  // namespace swa
