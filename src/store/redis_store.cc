#include "store/redis_store.h"

#include "store/redis_command.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace swa {
namespace {

timeval ToTimeval(uint32_t ms) {
  timeval tv;
  tv.tv_sec = ms / 1000;
  tv.tv_usec = (ms % 1000) * 1000;
  return tv;
}

// A broken connection: timeouts are DEADLINE_EXCEEDED, the rest UNAVAILABLE.
absl::Status ContextStatus(const redisContext* c, const std::string& where) {
  const std::string text = c != nullptr ? c->errstr : "cannot allocate a hiredis context";
  const bool timeout = c != nullptr && c->err == REDIS_ERR_IO &&
                       (errno == EAGAIN || errno == EWOULDBLOCK || errno == ETIMEDOUT ||
                        absl::StrContains(text, "temporarily unavailable") ||
                        absl::StrContains(text, "timed out"));
  const std::string message = absl::StrFormat("redis store %s: %s", where, text);
  return timeout ? absl::DeadlineExceededError(message) : absl::UnavailableError(message);
}

absl::Status ReplyErrorStatus(std::string_view text, const std::string& where) {
  const std::string message = absl::StrFormat("redis store %s: server replied \"%s\"", where, text);
  if (text.starts_with("OOM")) return absl::ResourceExhaustedError(message);
  if (text.starts_with("NOAUTH") || text.starts_with("WRONGPASS") ||
      (text.find("invalid password") != std::string_view::npos) || (text.find("AUTH") != std::string_view::npos))
    return absl::UnauthenticatedError(message);
  if (text.starts_with("LOADING") || text.starts_with("BUSY") ||
      text.starts_with("MASTERDOWN") || text.starts_with("TRYAGAIN") ||
      text.starts_with("READONLY"))
    return absl::UnavailableError(message);
  return absl::UnknownError(message);
}

}  // namespace

void RedisStore::ReplyDeleter::operator()(redisReply* r) const { freeReplyObject(r); }

absl::StatusOr<std::unique_ptr<RedisStore>> RedisStore::Connect(const RedisStoreOptions& options) {
  if (options.host.empty()) return absl::InvalidArgumentError("redis store: host is empty");
  if (options.port == 0 || options.port > 65535)
    return absl::InvalidArgumentError(
        absl::StrFormat("redis store: port = %u is not in 1 ... 65535", options.port));
  if (options.timeout_ms == 0)
    return absl::InvalidArgumentError("redis store: timeout_ms = 0 (use a positive timeout)");
  std::unique_ptr<RedisStore> store(new RedisStore(options));
  absl::StatusOr<redisContext*> first = store->NewConnection();
  if (!first.ok()) return first.status();
  absl::MutexLock lock(&store->mu_);
  store->idle_.push_back(*first);
  return store;
}

RedisStore::~RedisStore() {
  absl::MutexLock lock(&mu_);
  for (redisContext* c : idle_) redisFree(c);
}

absl::StatusOr<redisContext*> RedisStore::NewConnection() const {
  const std::string where = absl::StrFormat("connect to %s:%u", options_.host, options_.port);
  const timeval tv = ToTimeval(options_.timeout_ms);
  redisContext* c = redisConnectWithTimeout(options_.host.c_str(), static_cast<int>(options_.port), tv);
  if (c == nullptr || c->err != 0) {
    absl::Status s = ContextStatus(c, where);
    if (c != nullptr) redisFree(c);
    return absl::UnavailableError(s.message());  // a refused or timed-out connect is transient
  }
  redisSetTimeout(c, tv);
  auto setup = [&](std::vector<std::string> args, const char* what) -> absl::Status {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    Reply r(static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
    if (r == nullptr) return ContextStatus(c, what);
    if (r->type == REDIS_REPLY_ERROR) {
      absl::Status s = ReplyErrorStatus(std::string_view(r->str, r->len), what);
      if (std::string_view(what) == "AUTH") return absl::UnauthenticatedError(s.message());
      return s;
    }
    return absl::OkStatus();
  };
  absl::Status s;
  if (!options_.password.empty()) s = setup({"AUTH", options_.password}, "AUTH");
  if (s.ok() && options_.db != 0) s = setup({"SELECT", absl::StrCat(options_.db)}, "SELECT");
  if (s.ok()) s = setup({"PING"}, "PING");  // e.g. NOAUTH shows here, not on the first SET
  if (!s.ok()) {
    redisFree(c);
    return s;
  }
  return c;
}

absl::StatusOr<RedisStore::Reply> RedisStore::Command(const std::vector<std::string_view>& args) {
  redisContext* c = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (!idle_.empty()) {
      c = idle_.back();
      idle_.pop_back();
    }
  }
  if (c == nullptr) {
    absl::StatusOr<redisContext*> fresh = NewConnection();
    if (!fresh.ok()) return fresh.status();
    c = *fresh;
  }
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (std::string_view a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  Reply r(static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
  if (r == nullptr) {  // the connection is unusable now: drop it
    absl::Status s = ContextStatus(c, std::string(args[0]));
    redisFree(c);
    return s;
  }
  {
    absl::MutexLock lock(&mu_);
    if (idle_.size() < options_.max_connections) {
      idle_.push_back(c);
      c = nullptr;
    }
  }
  if (c != nullptr) redisFree(c);
  if (r->type == REDIS_REPLY_ERROR)
    return ReplyErrorStatus(std::string_view(r->str, r->len), std::string(args[0]));
  return r;
}

absl::Status RedisStore::Put(std::string_view key, absl::Span<const ConstByteSpan> pieces) {
  std::string joined, ttl;
  const std::vector<std::string_view> args =
      BlobSetCommand(key, pieces, options_.ttl_seconds, &joined, &ttl);
  absl::StatusOr<Reply> r = Command(args);
  return r.status();
}

absl::StatusOr<uint64_t> RedisStore::Get(std::string_view key,
                                         absl::Span<const ByteSpan> pieces) {
  absl::StatusOr<Reply> r = Command({"GET", key});
  if (!r.ok()) return r.status();
  const redisReply& reply = **r;
  if (reply.type == REDIS_REPLY_NIL) return absl::NotFoundError("redis store: no blob under this key");
  if (reply.type != REDIS_REPLY_STRING)
    return absl::UnknownError(absl::StrFormat("redis store GET: unexpected reply type %d", reply.type));
  if (reply.len == TotalBytes(pieces))
    ScatterFrom(reinterpret_cast<const uint8_t*>(reply.str), pieces);
  return uint64_t{reply.len};
}

absl::StatusOr<bool> RedisStore::Exists(std::string_view key) {
  absl::StatusOr<Reply> r = Command({"EXISTS", key});
  if (!r.ok()) return r.status();
  if ((*r)->type != REDIS_REPLY_INTEGER)
    return absl::UnknownError(absl::StrFormat("redis store EXISTS: unexpected reply type %d", (*r)->type));
  return (*r)->integer != 0;
}

absl::Status RedisStore::Remove(std::string_view key) {
  absl::StatusOr<Reply> r = Command({"DEL", key});
  if (!r.ok()) return r.status();
  if ((*r)->type != REDIS_REPLY_INTEGER)
    return absl::UnknownError(absl::StrFormat("redis store DEL: unexpected reply type %d", (*r)->type));
  if ((*r)->integer == 0) return absl::NotFoundError("redis store: no blob under this key");
  return absl::OkStatus();
}

}  // namespace swa
