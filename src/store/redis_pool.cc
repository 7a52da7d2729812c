#include "store/redis_pool.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace swa {

std::string_view ReplyText(const redisReply& r) {
  if (r.type == REDIS_REPLY_STATUS || r.type == REDIS_REPLY_ERROR || r.type == REDIS_REPLY_STRING)
    return std::string_view(r.str, r.len);
  return {};
}

bool IsTransientReply(std::string_view text) {
  return text.starts_with("CLUSTERDOWN") || text.starts_with("TRYAGAIN") ||
         text.starts_with("LOADING") || text.starts_with("MASTERDOWN") ||
         text.starts_with("READONLY") || text.starts_with("BUSY");
}

absl::Status ErrorReplyStatus(std::string_view text, std::string_view where) {
  const std::string message = absl::StrFormat("%s: server replied \"%s\"", where, text);
  if (text.starts_with("OOM")) return absl::ResourceExhaustedError(message);
  if (text.starts_with("NOPERM")) return absl::PermissionDeniedError(message);
  if (text.starts_with("NOAUTH") || text.starts_with("WRONGPASS") ||
      text.find("invalid password") != std::string_view::npos ||
      text.find("AUTH") != std::string_view::npos)
    return absl::UnauthenticatedError(message);
  if (IsTransientReply(text)) return absl::UnavailableError(message);
  return absl::UnknownError(message);
}

void RedisConnectionPool::DropIdle() {
  std::vector<Connection> drop;
  {
    absl::MutexLock lock(&mu_);
    drop.swap(idle_);
  }
}

absl::StatusOr<RedisConnectionPool::Connection> RedisConnectionPool::Connect(
    absl::Duration timeout) const {
  absl::StatusOr<Connection> opened =
      RedisConnection::Open(options_.host, options_.port, options_.tls, options_.name, timeout);
  if (!opened.ok()) {
    // A refused or timed-out connect is transient (UNAVAILABLE); a certificate
    // that fails verification is not (UNAUTHENTICATED).
    if (absl::IsDeadlineExceeded(opened.status()))
      return absl::UnavailableError(opened.status().message());
    return opened.status();
  }
  Connection c = std::move(*opened);
  auto setup = [&](const std::vector<std::string_view>& args,
                   std::string_view shown) -> absl::Status {
    // AUTH, SELECT, READONLY, PING: +OK, +PONG or an error reply.
    absl::StatusOr<RedisReply> r = c->Command(args, timeout, kRedisShortReply);
    if (!r.ok()) return r.status();
    if ((*r)->type != REDIS_REPLY_ERROR) return absl::OkStatus();
    absl::Status s = ErrorReplyStatus(ReplyText(**r), absl::StrFormat("%s: %s", options_.name, shown));
    if (args[0] == "AUTH") return absl::UnauthenticatedError(s.message());
    return s;
  };
  absl::Status s;
  const std::string db = absl::StrCat(options_.db);
  if (!options_.username.empty()) {
    s = setup({"AUTH", options_.username, options_.password},
              absl::StrFormat("AUTH (user \"%s\")", options_.username));
  } else if (!options_.password.empty()) {
    s = setup({"AUTH", options_.password}, "AUTH");
  }
  if (s.ok() && options_.db != 0) s = setup({"SELECT", db}, "SELECT");
  if (s.ok() && options_.readonly) s = setup({"READONLY"}, "READONLY");
  if (s.ok() && options_.ping) s = setup({"PING"}, "PING");
  if (!s.ok()) return s;
  return c;
}

void RedisConnectionPool::Return(Connection c) {
  {
    absl::MutexLock lock(&mu_);
    if (idle_.size() < options_.max_idle) {
      idle_.push_back(std::move(c));
      return;
    }
  }
  c.reset();  // closed outside the lock (a TLS close writes)
}

absl::Status RedisConnectionPool::Open(absl::Duration timeout) {
  absl::StatusOr<Connection> c = Connect(timeout);
  if (!c.ok()) return c.status();
  absl::MutexLock lock(&mu_);
  idle_.push_back(std::move(*c));
  return absl::OkStatus();
}

absl::StatusOr<RedisConnectionPool::Connection> RedisConnectionPool::Take(absl::Duration timeout) {
  std::vector<Connection> stale;  // closed outside the lock (a TLS close writes)
  {
    absl::MutexLock lock(&mu_);
    while (!idle_.empty()) {
      Connection c = std::move(idle_.back());
      idle_.pop_back();
      if (c->Idle()) return c;
      stale.push_back(std::move(c));
    }
  }
  stale.clear();
  return Connect(timeout);
}

absl::Status RedisConnectionPool::RunPipeline(
    const std::vector<std::vector<std::string_view>>& commands, absl::Duration timeout,
    const RedisReplyLimits& limits, std::vector<RedisReply>* replies) {
  replies->clear();
  if (commands.empty()) return absl::OkStatus();
  absl::StatusOr<Connection> taken = Take(std::min(timeout, limits.max_silence));
  if (!taken.ok()) return taken.status();
  Connection c = std::move(*taken);
  // A failure drops `c` (closed) with the status; the replies read before it stay.
  if (absl::Status s = c->Send(commands, timeout, limits.max_silence); !s.ok()) return s;
  replies->reserve(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    absl::StatusOr<RedisReply> r = c->Read(commands[i][0], timeout, limits);
    if (!r.ok()) return r.status();
    replies->push_back(std::move(*r));
  }
  Return(std::move(c));
  return absl::OkStatus();
}

absl::Status RedisConnectionPool::RunWith(
    const std::vector<std::string_view>& args, absl::Duration timeout,
    const std::function<absl::Status(RedisConnection&)>& read) {
  absl::StatusOr<Connection> taken = Take(timeout);
  if (!taken.ok()) return taken.status();
  Connection c = std::move(*taken);
  if (absl::Status s = c->Send({args}, timeout); !s.ok()) return s;
  if (absl::Status s = read(*c); !s.ok()) return s;  // the connection is dropped
  Return(std::move(c));
  return absl::OkStatus();
}

absl::StatusOr<RedisReply> RedisConnectionPool::Run(const std::vector<std::string_view>& args,
                                                    absl::Duration timeout,
                                                    const RedisReplyLimits& limits, bool asking) {
  // Connecting is a few short exchanges: a server silent for max_silence
  // would not finish it.
  absl::StatusOr<Connection> taken = Take(std::min(timeout, limits.max_silence));
  if (!taken.ok()) return taken.status();
  Connection c = std::move(*taken);
  if (asking) {
    // ASKING and the command in one write; ASKING's reply is read and dropped.
    const std::vector<std::vector<std::string_view>> both = {{"ASKING"}, args};
    if (absl::Status s = c->Send(both, timeout, limits.max_silence); !s.ok()) return s;
    RedisReplyLimits asking_limits = kRedisShortReply;
    asking_limits.max_silence = limits.max_silence;
    absl::StatusOr<RedisReply> ok = c->Read("ASKING", timeout, asking_limits);
    if (!ok.ok()) return ok.status();
    absl::StatusOr<RedisReply> r = c->Read(args[0], timeout, limits);
    if (!r.ok()) return r.status();
    Return(std::move(c));
    // ASKING refused: the command ran without it, so its reply (a MOVED back
    // to the node that sent the ASK, or worse) does not answer the redirect.
    if ((*ok)->type == REDIS_REPLY_ERROR) return ok;
    return r;
  }
  absl::StatusOr<RedisReply> r = c->Command(args, timeout, limits);
  if (!r.ok()) return r.status();  // the connection is unusable now: dropped
  Return(std::move(c));
  return r;
}

}  // namespace swa
