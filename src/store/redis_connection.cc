#include "store/redis_connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace swa {
namespace {

constexpr size_t kReadChunk = 64 * 1024;

// OpenSSL writes with write(2): a peer that closed would raise SIGPIPE. Block
// it on this thread for the call and swallow one that the call raised.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeBlock() {
    if (!was_pending_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec zero{};
        while (sigtimedwait(&pipe_, nullptr, &zero) == -1 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t pipe_, old_;
  bool was_pending_ = false;
};

bool IsIpLiteral(const std::string& host) {
  in6_addr a6;
  in_addr a4;
  return inet_pton(AF_INET, host.c_str(), &a4) == 1 || inet_pton(AF_INET6, host.c_str(), &a6) == 1;
}

// Alerts with which a server refuses the client's certificate (or its lack).
bool IsClientCertificateRefusal(int reason) {
  switch (reason) {
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_TLSV1_ALERT_ACCESS_DENIED:
      return true;
    default:
      return false;
  }
}

std::string Millis(absl::Duration d) { return absl::StrCat(absl::ToInt64Milliseconds(d), " ms"); }

}  // namespace

RedisConnection::RedisConnection(int fd, std::string name)
    : fd_(fd), name_(std::move(name)), buf_(kReadChunk) {}

RedisConnection::~RedisConnection() {
  if (ssl_ != nullptr) {
    // One close_notify, not waiting for the server's, and only on a
    // connection in good order: after a failed handshake or a fatal error
    // SSL_shutdown fails and queues an error. Nothing that closing queues is
    // left on this thread's error queue (SSL_get_error needs it empty, ours
    // and the application's alike).
    ERR_set_mark();
    if (SSL_is_init_finished(ssl_)) {
      SigpipeBlock block;
      SSL_shutdown(ssl_);
    }
    SSL_free(ssl_);
    ERR_pop_to_mark();
  }
  if (fd_ >= 0) close(fd_);
}

bool RedisConnection::Wait(bool write, absl::Time deadline) const {
  for (;;) {
    const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (ms <= 0) return false;
    pollfd p{fd_, static_cast<short>(write ? POLLOUT : POLLIN), 0};
    const int n = poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, 1 << 30)));
    if (n > 0) return true;  // ready, or an error/hangup the next call reports
    if (n == 0) return false;
    if (errno != EINTR) return true;
  }
}

absl::Status RedisConnection::WaitFor(std::string_view op, bool write, std::string_view what,
                                      absl::Duration timeout, absl::Time deadline,
                                      absl::Duration max_silence) const {
  // A new silence starts at every wait: each one follows bytes moved (or the
  // call's start), and a TLS record that trickles in wakes it at every piece.
  const absl::Time until = std::min(deadline, absl::Now() + max_silence);
  if (Wait(write, until)) return absl::OkStatus();
  if (until < deadline)
    return absl::UnavailableError(absl::StrFormat("%s: %s: no byte %sfor %s", name_, what,
                                                  op == "write" ? "taken " : "", Millis(max_silence)));
  return absl::DeadlineExceededError(
      absl::StrFormat("%s: %s: %s timed out after %s", name_, what, op, Millis(timeout)));
}

bool RedisConnection::ReadableNow() const {
  if (ssl_ != nullptr && SSL_pending(ssl_) > 0) return true;
  pollfd p{fd_, POLLIN, 0};
  int n;
  while ((n = poll(&p, 1, 0)) < 0 && errno == EINTR) {
  }
  return n > 0;
}

bool RedisConnection::Idle() const {
  if (reader_.Pending()) return false;  // reply bytes nobody read
  if (ssl_ != nullptr && SSL_pending(ssl_) > 0) return false;
  pollfd p{fd_, POLLIN, 0};
  int n;
  while ((n = poll(&p, 1, 0)) < 0 && errno == EINTR) {
  }
  return n == 0;  // readable: closed or reset by the server, or bytes nobody asked for
}

absl::Status RedisConnection::RefusedBeforeAnyReply(absl::Status s) const {
  if (s.ok() || !absl::IsUnavailable(s) || replies_read_ != 0) return s;
  if (ssl_ != nullptr && client_cert_requested_)
    return absl::UnauthenticatedError(absl::StrCat(
        s.message(), " (the server asked for a client certificate and none is set: tls_cert_file, "
                     "tls_key_file)"));
  if (ssl_ == nullptr)
    return absl::UnavailableError(absl::StrCat(
        s.message(), " (closed before any reply: a TLS-only port does this to a plain-TCP client)"));
  return s;
}

absl::Status RedisConnection::TlsFailure(int ret, std::string_view what) const {
  const int code = SSL_get_error(ssl_, ret);
  const int saved_errno = errno;
  const unsigned long e = ERR_peek_error();
  const std::string errors = TakeOpenSslErrors();
  if (code == SSL_ERROR_ZERO_RETURN || (code == SSL_ERROR_SYSCALL && e == 0 && saved_errno == 0))
    return absl::UnavailableError(
        absl::StrFormat("%s: %s: the server closed the TLS connection", name_, what));
  if (code == SSL_ERROR_SYSCALL && e == 0)
    return absl::UnavailableError(
        absl::StrFormat("%s: %s: TLS connection lost: %s", name_, what, std::strerror(saved_errno)));
  if (e != 0 && ERR_GET_LIB(e) == ERR_LIB_SSL && IsClientCertificateRefusal(ERR_GET_REASON(e)))
    return absl::UnauthenticatedError(absl::StrFormat(
        "%s: %s: the server refused the client certificate (tls_cert_file): %s", name_, what, errors));
  // Unexpected EOF inside a record counts as a dropped connection too.
  return absl::UnavailableError(absl::StrFormat("%s: %s: TLS error: %s", name_, what,
                                                errors.empty() ? "unknown" : errors));
}

absl::StatusOr<std::unique_ptr<RedisConnection>> RedisConnection::Open(
    const std::string& host, uint32_t port, std::shared_ptr<const RedisTlsContext> tls,
    std::string name, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = absl::StrCat(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0)
    return absl::UnavailableError(
        absl::StrFormat("%s: connect: cannot resolve \"%s\": %s", name, host, gai_strerror(rc)));
  std::string last = "no address";
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    int s = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (s < 0) {
      last = std::strerror(errno);
      continue;
    }
    int rc = connect(s, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{s, POLLOUT, 0};
      const int64_t ms = std::max<int64_t>(absl::ToInt64Milliseconds(deadline - absl::Now()), 0);
      int n;
      while ((n = poll(&p, 1, static_cast<int>(ms))) < 0 && errno == EINTR) {
      }
      if (n == 0) {
        last = absl::StrCat("timed out after ", Millis(timeout));
        close(s);
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc != 0) {
      last = std::strerror(errno);
      close(s);
      continue;
    }
    fd = s;
  }
  freeaddrinfo(found);
  if (fd < 0) {
    // A refused or timed-out connect is transient: UNAVAILABLE either way.
    return absl::UnavailableError(absl::StrFormat("%s: connect: %s", name, last));
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::unique_ptr<RedisConnection> c(new RedisConnection(fd, std::move(name)));
  if (!c->reader_.ok()) return absl::ResourceExhaustedError("cannot allocate a redisReader");
  if (tls != nullptr) {
    if (absl::Status s = c->Handshake(std::move(tls), host, deadline); !s.ok()) return s;
  }
  return c;
}

absl::Status RedisConnection::Handshake(std::shared_ptr<const RedisTlsContext> tls,
                                        const std::string& host, absl::Time deadline) {
  ERR_clear_error();
  tls_ = std::move(tls);
  ssl_ = SSL_new(tls_->ctx());
  if (ssl_ == nullptr)
    return absl::InternalError(absl::StrFormat("%s: SSL_new: %s", name_, TakeOpenSslErrors()));
  server_name_ = tls_->ServerName(host);
  const bool ip = IsIpLiteral(server_name_);
  if (!ip) SSL_set_tlsext_host_name(ssl_, server_name_.c_str());  // SNI carries no address
  if (tls_->verify()) {
    const int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), server_name_.c_str())
                      : SSL_set1_host(ssl_, server_name_.c_str());
    if (ok != 1)
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tls_server_name \"%s\" cannot be checked: %s", name_, server_name_, TakeOpenSslErrors()));
  }
  SSL_set_app_data(ssl_, &client_cert_requested_);
  SSL_set_fd(ssl_, fd_);
  SigpipeBlock block;
  for (;;) {
    errno = 0;
    const int ret = SSL_connect(ssl_);
    if (ret == 1) return absl::OkStatus();
    const int code = SSL_get_error(ssl_, ret);
    if (code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE) {
      if (!Wait(code == SSL_ERROR_WANT_WRITE, deadline))
        return absl::UnavailableError(
            absl::StrFormat("%s: TLS handshake: timed out (is the port a TLS port?)", name_));
      continue;
    }
    const long verify = SSL_get_verify_result(ssl_);
    if (tls_->verify() && verify != X509_V_OK) {
      ERR_clear_error();
      return absl::UnauthenticatedError(absl::StrFormat(
          "%s: TLS handshake: the server's certificate failed verification: %s (server name "
          "\"%s\")",
          name_, X509_verify_cert_error_string(verify), server_name_));
    }
    absl::Status s = TlsFailure(ret, "TLS handshake");
    if (absl::IsUnavailable(s))
      return absl::UnavailableError(
          absl::StrCat(s.message(), " (a plain-TCP port answers a TLS client like this)"));
    return s;
  }
}

absl::Status RedisConnection::Send(absl::Span<const std::vector<std::string_view>> commands,
                                   absl::Duration timeout, absl::Duration max_silence) {
  const absl::Time deadline = absl::Now() + timeout;
  std::string out;
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  // hiredis 0.14's redisFormatCommandArgv sums the encoded length in an int:
  // past INT_MAX it wraps, allocates too little and copies past the end. So
  // no command that large reaches it (framing: under 32 bytes per argument).
  for (const std::vector<std::string_view>& args : commands) {
    uint64_t encoded = 32;
    for (std::string_view a : args) encoded += a.size() + 32;
    if (encoded > static_cast<uint64_t>(INT_MAX))
      return absl::ResourceExhaustedError(absl::StrFormat(
          "%s: %s: arguments of %u bytes in all; one Redis command carries at most %d bytes "
          "here",
          name_, args[0], encoded - 32 * (args.size() + 1), INT_MAX));
  }
  for (const std::vector<std::string_view>& args : commands) {
    argv.clear();
    lens.clear();
    for (std::string_view a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    char* cmd = nullptr;
    const int n = redisFormatCommandArgv(&cmd, static_cast<int>(argv.size()), argv.data(), lens.data());
    if (n < 0 || cmd == nullptr)
      return absl::ResourceExhaustedError(absl::StrFormat("%s: %s: cannot encode the command", name_, args[0]));
    out.append(cmd, static_cast<size_t>(n));
    redisFreeCommand(cmd);
  }
  const std::string_view what = commands.empty() ? "" : commands[0][0];
  size_t done = 0;
  SigpipeBlock block;
  while (done < out.size()) {
    const size_t left = out.size() - done;
    if (ssl_ != nullptr) {
      ERR_clear_error();
      errno = 0;
      const int n = SSL_write(ssl_, out.data() + done, static_cast<int>(std::min<size_t>(left, 1 << 30)));
      if (n > 0) {
        done += static_cast<size_t>(n);
        continue;
      }
      const int code = SSL_get_error(ssl_, n);
      if (code != SSL_ERROR_WANT_READ && code != SSL_ERROR_WANT_WRITE)
        return RefusedBeforeAnyReply(TlsFailure(n, what));
      if (absl::Status s =
              WaitFor("write", code == SSL_ERROR_WANT_WRITE, what, timeout, deadline, max_silence);
          !s.ok())
        return s;
      continue;
    }
    const ssize_t n = send(fd_, out.data() + done, left, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (absl::Status s = WaitFor("write", true, what, timeout, deadline, max_silence); !s.ok())
        return s;
      continue;
    }
    return RefusedBeforeAnyReply(absl::UnavailableError(
        absl::StrFormat("%s: %s: %s", name_, what, n == 0 ? "connection lost" : std::strerror(errno))));
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> RedisConnection::Receive(uint8_t* dst, size_t cap, std::string_view what,
                                                absl::Duration timeout, absl::Time deadline,
                                                absl::Duration max_silence) {
  for (;;) {
    if (ssl_ != nullptr) {
      ERR_clear_error();
      errno = 0;
      SigpipeBlock block;  // a read can write (key updates)
      const int n = SSL_read(ssl_, dst, static_cast<int>(std::min<size_t>(cap, INT_MAX)));
      if (n <= 0) {
        const int code = SSL_get_error(ssl_, n);
        if (code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE) {
          // WANT_READ again after a wait: part of a record came; the
          // silence starts anew with the next wait.
          if (absl::Status s = WaitFor("read", code == SSL_ERROR_WANT_WRITE, what, timeout,
                                       deadline, max_silence);
              !s.ok())
            return s;
          continue;
        }
        return RefusedBeforeAnyReply(TlsFailure(n, what));
      }
      return static_cast<size_t>(n);
    }
    const ssize_t n = recv(fd_, dst, cap, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (absl::Status s = WaitFor("read", false, what, timeout, deadline, max_silence); !s.ok())
        return s;
      continue;
    }
    if (n == 0)
      return RefusedBeforeAnyReply(
          absl::UnavailableError(absl::StrFormat("%s: %s: the server closed the connection", name_, what)));
    if (n < 0)
      return RefusedBeforeAnyReply(
          absl::UnavailableError(absl::StrFormat("%s: %s: %s", name_, what, std::strerror(errno))));
    return static_cast<size_t>(n);
  }
}

}  // namespace swa
