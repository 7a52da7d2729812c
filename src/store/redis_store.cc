#include "store/redis_store.h"

#include "store/redis_command.h"

#include <hiredis/hiredis.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace swa {

absl::StatusOr<std::unique_ptr<RedisStore>> RedisStore::Connect(const RedisStoreOptions& options) {
  if (options.host.empty()) return absl::InvalidArgumentError("redis store: host is empty");
  if (options.port == 0 || options.port > 65535)
    return absl::InvalidArgumentError(
        absl::StrFormat("redis store: port = %u is not in 1 ... 65535", options.port));
  if (options.timeout_ms == 0)
    return absl::InvalidArgumentError("redis store: timeout_ms = 0 (use a positive timeout)");
  if (!options.username.empty() && options.password.empty())
    return absl::InvalidArgumentError(absl::StrFormat(
        "redis store: username \"%s\" without a password (AUTH username password)", options.username));
  const std::string name = absl::StrFormat("redis store %s:%u", options.host, options.port);
  std::shared_ptr<const RedisTlsContext> tls;
  if (options.tls.enabled) {
    SWA_ASSIGN_OR_RETURN(tls, RedisTlsContext::Create(options.tls, name));
  }
  RedisPoolOptions pool{.host = options.host,
                        .port = options.port,
                        .name = name,
                        .username = options.username,
                        .password = options.password,
                        .tls = std::move(tls),
                        .db = options.db,
                        .ping = true,
                        .max_idle = options.max_connections};
  std::unique_ptr<RedisStore> store(new RedisStore(options, std::move(pool)));
  if (absl::Status s = store->pool_.Open(store->timeout()); !s.ok()) return s;
  return store;
}

RedisStore::~RedisStore() = default;

absl::StatusOr<RedisReply> RedisStore::Command(const std::vector<std::string_view>& args,
                                               const RedisReplyLimits& limits) {
  absl::StatusOr<RedisReply> r = pool_.Run(args, timeout(), limits);
  if (r.ok() && (*r)->type == REDIS_REPLY_ERROR)
    return ErrorReplyStatus(ReplyText(**r), absl::StrFormat("%s: %s", pool_.name(), args[0]));
  return r;
}

absl::Status RedisStore::Put(std::string_view key, absl::Span<const ConstByteSpan> pieces) {
  std::string joined, ttl;
  const std::vector<std::string_view> args =
      BlobSetCommand(key, pieces, options_.ttl_seconds, &joined, &ttl);
  absl::StatusOr<RedisReply> r = Command(args, kRedisShortReply);  // +OK
  return r.status();
}

absl::StatusOr<uint64_t> RedisStore::Get(std::string_view key,
                                         absl::Span<const ByteSpan> pieces) {
  return GetStreaming(key, pieces, nullptr);
}

absl::StatusOr<uint64_t> RedisStore::GetStreaming(std::string_view key,
                                                  absl::Span<const ByteSpan> pieces,
                                                  const std::function<void(uint64_t)>& landed) {
  RedisConnection::BulkRead got;
  absl::Status s = pool_.RunWith({"GET", key}, timeout(), [&](RedisConnection& c) {
    absl::StatusOr<RedisConnection::BulkRead> r = c.ReadBulkInto("GET", timeout(), pieces, landed);
    if (!r.ok()) return r.status();
    got = std::move(*r);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  if (got.kind == RedisConnection::BulkRead::kNil)
    return absl::NotFoundError("redis store: no blob under this key");
  if (got.kind == RedisConnection::BulkRead::kBulk) return got.size;
  const redisReply& reply = *got.other;  // read by hiredis
  if (reply.type == REDIS_REPLY_ERROR)
    return ErrorReplyStatus(ReplyText(reply), absl::StrFormat("%s: GET", pool_.name()));
  if (reply.type == REDIS_REPLY_NIL) return absl::NotFoundError("redis store: no blob under this key");
  if (reply.type != REDIS_REPLY_STRING)
    return absl::UnknownError(absl::StrFormat("redis store GET: unexpected reply type %d", reply.type));
  if (reply.len == TotalBytes(pieces)) {
    ScatterFrom(reinterpret_cast<const uint8_t*>(reply.str), pieces);
    if (landed) landed(reply.len);
  }
  return uint64_t{reply.len};
}

absl::StatusOr<bool> RedisStore::Exists(std::string_view key) {
  absl::StatusOr<RedisReply> r = Command({"EXISTS", key}, kRedisShortReply);  // :0 or :1
  if (!r.ok()) return r.status();
  if ((*r)->type != REDIS_REPLY_INTEGER)
    return absl::UnknownError(absl::StrFormat("redis store EXISTS: unexpected reply type %d", (*r)->type));
  return (*r)->integer != 0;
}

absl::StatusOr<int64_t> RedisStore::FirstPresent(absl::Span<const std::string> keys,
                                                 size_t* failed_key) {
  std::vector<std::vector<std::string_view>> commands;
  commands.reserve(keys.size());
  for (const std::string& k : keys) commands.push_back({"EXISTS", k});
  std::vector<RedisReply> replies;  // :0 or :1 each; those before a failure when it fails
  const absl::Status pipeline = pool_.RunPipeline(commands, timeout(), kRedisShortReply, &replies);
  // A reply that arrived answers its key even when the pipeline broke after
  // it: a present key behind keys answered absent is the probe's answer.
  for (size_t i = 0; i < replies.size(); ++i) {
    const redisReply& r = *replies[i];
    if (r.type == REDIS_REPLY_ERROR) {
      *failed_key = i;
      return ErrorReplyStatus(ReplyText(r), "redis store EXISTS");
    }
    if (r.type != REDIS_REPLY_INTEGER) {
      *failed_key = i;
      return absl::UnknownError(
          absl::StrFormat("redis store EXISTS: unexpected reply type %d", r.type));
    }
    if (r.integer != 0) return static_cast<int64_t>(i);
  }
  if (!pipeline.ok()) {
    // Every key before the first unanswered one is absent: that key's answer
    // is missing (no retry, as every call of this store).
    const size_t missing = replies.size();
    *failed_key = missing;
    const std::string before = missing == 0   ? ""
                               : missing == 1 ? "; key 0 absent"
                                              : absl::StrFormat("; keys 0 ... %zu absent", missing - 1);
    return absl::Status(pipeline.code(),
                        absl::StrFormat("%s (EXISTS pipeline: no reply for key %zu of %zu%s)",
                                        pipeline.message(), missing, keys.size(), before));
  }
  return int64_t{-1};
}

absl::Status RedisStore::Remove(std::string_view key) {
  absl::StatusOr<RedisReply> r = Command({"DEL", key}, kRedisShortReply);  // :0 or :1
  if (!r.ok()) return r.status();
  if ((*r)->type != REDIS_REPLY_INTEGER)
    return absl::UnknownError(absl::StrFormat("redis store DEL: unexpected reply type %d", (*r)->type));
  if ((*r)->integer == 0) return absl::NotFoundError("redis store: no blob under this key");
  return absl::OkStatus();
}

}  // namespace swa
