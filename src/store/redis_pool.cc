#include "store/redis_pool.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace swa {
namespace {

timeval SocketTimeout(absl::Duration d) {
  const int64_t us = std::max<int64_t>(absl::ToInt64Microseconds(d), 1000);  // >= 1 ms
  timeval tv;
  tv.tv_sec = us / 1000000;
  tv.tv_usec = us % 1000000;
  return tv;
}

// A broken connection (errno saved right after the failing call): timeouts
// are DEADLINE_EXCEEDED, the rest UNAVAILABLE.
absl::Status ConnectionStatus(const redisContext* c, int saved_errno, std::string_view name,
                              std::string_view what) {
  const std::string text = c != nullptr ? c->errstr : "cannot allocate a hiredis context";
  const bool timeout = c != nullptr && c->err == REDIS_ERR_IO &&
                       (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK ||
                        saved_errno == ETIMEDOUT ||
                        absl::StrContains(text, "temporarily unavailable") ||
                        absl::StrContains(text, "timed out"));
  const std::string message =
      absl::StrFormat("%s: %s: %s", name, what, text.empty() ? "connection lost" : text);
  return timeout ? absl::DeadlineExceededError(message) : absl::UnavailableError(message);
}

redisReply* RunArgv(redisContext* c, const std::vector<std::string_view>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  argv.reserve(args.size());
  lens.reserve(args.size());
  for (std::string_view a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  return static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
}

}  // namespace

void RedisReplyDeleter::operator()(redisReply* r) const { freeReplyObject(r); }

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
  if (text.starts_with("NOAUTH") || text.starts_with("WRONGPASS") ||
      text.find("invalid password") != std::string_view::npos ||
      text.find("AUTH") != std::string_view::npos)
    return absl::UnauthenticatedError(message);
  if (IsTransientReply(text)) return absl::UnavailableError(message);
  return absl::UnknownError(message);
}

void RedisConnectionPool::DropIdle() {
  std::vector<redisContext*> drop;
  {
    absl::MutexLock lock(&mu_);
    drop.swap(idle_);
  }
  for (redisContext* c : drop) redisFree(c);
}

absl::StatusOr<redisContext*> RedisConnectionPool::Connect(absl::Duration timeout) const {
  const timeval tv = SocketTimeout(timeout);
  redisContext* c =
      redisConnectWithTimeout(options_.host.c_str(), static_cast<int>(options_.port), tv);
  if (c == nullptr || c->err != 0) {
    absl::Status s = ConnectionStatus(c, errno, options_.name, "connect");
    if (c != nullptr) redisFree(c);
    return absl::UnavailableError(s.message());  // a refused or timed-out connect is transient
  }
  redisSetTimeout(c, tv);
  auto setup = [&](const std::vector<std::string_view>& args) -> absl::Status {
    RedisReply r(RunArgv(c, args));
    if (r == nullptr) return ConnectionStatus(c, errno, options_.name, args[0]);
    if (r->type != REDIS_REPLY_ERROR) return absl::OkStatus();
    absl::Status s =
        ErrorReplyStatus(ReplyText(*r), absl::StrFormat("%s: %s", options_.name, args[0]));
    if (args[0] == "AUTH") return absl::UnauthenticatedError(s.message());
    return s;
  };
  absl::Status s;
  const std::string db = absl::StrCat(options_.db);
  if (!options_.password.empty()) s = setup({"AUTH", options_.password});
  if (s.ok() && options_.db != 0) s = setup({"SELECT", db});
  if (s.ok() && options_.readonly) s = setup({"READONLY"});
  if (s.ok() && options_.ping) s = setup({"PING"});
  if (!s.ok()) {
    redisFree(c);
    return s;
  }
  return c;
}

void RedisConnectionPool::Return(redisContext* c) {
  {
    absl::MutexLock lock(&mu_);
    if (idle_.size() < options_.max_idle) {
      idle_.push_back(c);
      return;
    }
  }
  redisFree(c);
}

absl::Status RedisConnectionPool::Open(absl::Duration timeout) {
  absl::StatusOr<redisContext*> c = Connect(timeout);
  if (!c.ok()) return c.status();
  absl::MutexLock lock(&mu_);
  idle_.push_back(*c);
  return absl::OkStatus();
}

absl::StatusOr<redisContext*> RedisConnectionPool::Take(absl::Duration timeout) {
  redisContext* c = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (!idle_.empty()) {
      c = idle_.back();
      idle_.pop_back();
    }
  }
  if (c == nullptr) return Connect(timeout);
  redisSetTimeout(c, SocketTimeout(timeout));
  return c;
}

absl::StatusOr<std::vector<RedisReply>> RedisConnectionPool::RunPipeline(
    const std::vector<std::vector<std::string_view>>& commands, absl::Duration timeout) {
  std::vector<RedisReply> replies;
  if (commands.empty()) return replies;
  absl::StatusOr<redisContext*> taken = Take(timeout);
  if (!taken.ok()) return taken.status();
  redisContext* c = *taken;
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const std::vector<std::string_view>& args : commands) {
    argv.clear();
    lens.clear();
    for (std::string_view a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    if (redisAppendCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()) !=
        REDIS_OK) {
      absl::Status s = ConnectionStatus(c, errno, options_.name, args[0]);
      redisFree(c);
      return s;
    }
  }
  replies.reserve(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(c, &raw) != REDIS_OK || raw == nullptr) {
      absl::Status s = ConnectionStatus(c, errno, options_.name, commands[i][0]);
      redisFree(c);
      return s;
    }
    replies.emplace_back(static_cast<redisReply*>(raw));
  }
  Return(c);
  return replies;
}

absl::StatusOr<RedisReply> RedisConnectionPool::Run(const std::vector<std::string_view>& args,
                                                    absl::Duration timeout, bool asking) {
  absl::StatusOr<redisContext*> taken = Take(timeout);
  if (!taken.ok()) return taken.status();
  redisContext* c = *taken;
  if (asking) {
    RedisReply ok(RunArgv(c, {"ASKING"}));
    if (ok == nullptr) {
      absl::Status s = ConnectionStatus(c, errno, options_.name, "ASKING");
      redisFree(c);
      return s;
    }
  }
  RedisReply r(RunArgv(c, args));
  if (r == nullptr) {  // the connection is unusable now: drop it
    absl::Status s = ConnectionStatus(c, errno, options_.name, args[0]);
    redisFree(c);
    return s;
  }
  Return(c);
  return r;
}

}  // namespace swa
