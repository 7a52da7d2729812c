// The built-in Redis store (hiredis): SET/GET/EXISTS/DEL, one blob per key,
// a small pool of connections so that concurrent calls do not serialise.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "store/kv_store.h"

struct redisContext;
struct redisReply;

namespace swa {

struct RedisStoreOptions {
  std::string host = "127.0.0.1";
  uint32_t port = 6379;
  uint32_t db = 0;
  std::string password;  // empty = no AUTH
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
  absl::StatusOr<bool> Exists(std::string_view key) override;
  absl::Status Remove(std::string_view key) override;

 private:
  struct ReplyDeleter {
    void operator()(redisReply* r) const;
  };
  using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

  explicit RedisStore(RedisStoreOptions options) : options_(std::move(options)) {}
  absl::StatusOr<redisContext*> NewConnection() const;
  // Runs one command on a pooled connection; a server error reply is a status.
  absl::StatusOr<Reply> Command(const std::vector<std::string_view>& args);

  RedisStoreOptions options_;
  absl::Mutex mu_;
  std::vector<redisContext*> idle_ ABSL_GUARDED_BY(mu_);
};

}  // namespace swa
