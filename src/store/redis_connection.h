// One connection to a Redis server, plain TCP or TLS, on our own socket:
// commands are encoded with hiredis's redisFormatCommandArgv and replies
// parsed with its redisReader (read.h) within the bounds each call names
// (store/redis_reply_reader.h), so the two transports behave the same
// (timeouts, error statuses). TLS is OpenSSL's SSL API over a non-blocking
// socket (store/redis_tls.h). Not thread-safe: one user at a time (the pool
// hands it out). The transport is redis_connection.cc, the reading of
// replies redis_connection_read.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "store/kv_store.h"
#include "store/redis_reply_reader.h"
#include "store/redis_tls.h"

struct ssl_st;

namespace swa {

class RedisConnection {
 public:
  // TCP connect to host:port (every address it resolves to), then the TLS
  // handshake when `tls` is set, within `timeout` in all (name resolution
  // aside: getaddrinfo takes as long as the resolver does). Failures name
  // `name`: UNAVAILABLE (refused, unreachable, timed out, a handshake that
  // fails or times out, e.g. against a plain-TCP port), UNAUTHENTICATED (the
  // server's certificate fails verification, or the server refuses ours).
  static absl::StatusOr<std::unique_ptr<RedisConnection>> Open(
      const std::string& host, uint32_t port, std::shared_ptr<const RedisTlsContext> tls,
      std::string name, absl::Duration timeout);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Writes every command (one buffer: a pipeline when several) within
  // `timeout`, and UNAVAILABLE ("no byte taken for <ms>") when the server
  // takes no byte for `max_silence` (RedisReplyLimits::max_silence);
  // messages name the first command.
  absl::Status Send(absl::Span<const std::vector<std::string_view>> commands,
                    absl::Duration timeout,
                    absl::Duration max_silence = absl::InfiniteDuration());
  // Reads the next reply (error replies are replies) within `timeout` and
  // `limits` (those of the command `what`: RedisReplyLimits). UNAVAILABLE
  // when the server closes the connection or TLS fails mid-stream, when no
  // byte arrives for limits.max_silence ("no byte for <ms>"; the timer
  // restarts with every byte, of a TLS record too), and a protocol error for
  // a reply hiredis cannot parse or one past `limits` (naming the bytes, the
  // element count or the depth); DEADLINE_EXCEEDED when `timeout` passes.
  // The connection is unusable after any of them.
  absl::StatusOr<RedisReply> Read(std::string_view what, absl::Duration timeout,
                                  const RedisReplyLimits& limits);

  // The next reply, read without hiredis when it is a bulk string: one of
  // exactly TotalBytes(pieces) bytes goes straight from the socket into the
  // pieces, `landed(n)` (when set) called each time the first n bytes are in
  // (n = the whole size only once the closing CRLF has been checked;
  // KvStore::GetStreaming); one of another length is read and dropped (its
  // length returned). A nil bulk is kNil; any other reply (an error reply
  // included) is read through hiredis and returned as kOther. Errors and the
  // unusable connection after them as Read. UNAVAILABLE (protocol error)
  // for: a bulk string not followed by CRLF alone, bytes after a nil, a bulk
  // length that is not "-1" or decimal digits below 2^55, an array reply
  // (never a GET's; hiredis would allocate what its header counts), and
  // another reply past 1 MiB (a GET's error reply is short).
  struct BulkRead {
    enum Kind { kBulk, kNil, kOther } kind = kOther;
    uint64_t size = 0;  // kBulk
    RedisReply other;   // kOther
  };
  absl::StatusOr<BulkRead> ReadBulkInto(std::string_view what, absl::Duration timeout,
                                        absl::Span<const ByteSpan> pieces,
                                        const std::function<void(uint64_t)>& landed);

  // Send of one command (within limits.max_silence too), then Read.
  absl::StatusOr<RedisReply> Command(const std::vector<std::string_view>& args,
                                     absl::Duration timeout, const RedisReplyLimits& limits);

  bool tls() const { return ssl_ != nullptr; }

  // True when nothing is pending on the connection: no reply bytes buffered
  // and the socket neither readable nor closed. An idle connection that fails
  // this was closed by the server (its `timeout`, a restart, CLIENT KILL) or
  // is out of step with it (a reply nobody asked for would answer the next
  // request): not to be used again.
  bool Idle() const;

 private:
  RedisConnection(int fd, std::string name);
  // Receives 1 ... cap bytes into dst (TLS or plain), waiting until
  // `deadline`, and each wait for the socket at most `max_silence`; errors
  // as Read's.
  absl::StatusOr<size_t> Receive(uint8_t* dst, size_t cap, std::string_view what,
                                 absl::Duration timeout, absl::Time deadline,
                                 absl::Duration max_silence = absl::InfiniteDuration());
  // True when a read would not wait: bytes (or a close) on the socket, or
  // decrypted bytes in OpenSSL's buffer.
  bool ReadableNow() const;
  // Waits until fd_ is readable (or writable) or `deadline`: false on timeout.
  bool Wait(bool write, absl::Time deadline) const;
  // Send's and Receive's wait: Wait until `deadline`, but at most
  // `max_silence` from now. OK when ready, else the failure of `op` ("read"
  // or "write") of `what`: DEADLINE_EXCEEDED "<op> timed out after
  // <timeout>" at `deadline`, UNAVAILABLE "no byte for <max_silence>" (a
  // write: "no byte taken for") when the silence ended first.
  absl::Status WaitFor(std::string_view op, bool write, std::string_view what,
                       absl::Duration timeout, absl::Time deadline,
                       absl::Duration max_silence) const;
  absl::Status Handshake(std::shared_ptr<const RedisTlsContext> tls, const std::string& host,
                         absl::Time deadline);
  // The status of a failed TLS call (ret from SSL_*) or socket call.
  absl::Status TlsFailure(int ret, std::string_view what) const;
  // A connection closed or reset before the first reply: the usual refusal
  // of a missing client certificate (TLS 1.3: after the handshake) or of a
  // plain-TCP client on a TLS port; says which.
  absl::Status RefusedBeforeAnyReply(absl::Status s) const;

  int fd_;
  ssl_st* ssl_ = nullptr;
  std::shared_ptr<const RedisTlsContext> tls_;  // keeps the SSL_CTX alive
  RedisReplyReader reader_;
  std::string name_;
  std::string server_name_;  // the name verified (TLS)
  uint64_t replies_read_ = 0;
  bool client_cert_requested_ = false;  // set by OpenSSL's callback (redis_tls.cc)
  std::vector<char> buf_;
};

}  // namespace swa
