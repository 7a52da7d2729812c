// TLS settings of the Redis stores and the OpenSSL client context built from
// them once per store (CA, client certificate and key, verification). Debian
// bookworm's hiredis (0.14) has no hiredis_ssl, so the TLS transport is ours
// (store/redis_connection.h) on OpenSSL's SSL API; no cryptography is written
// here. docs/store.md, "Redis TLS and ACL users".
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

struct ssl_ctx_st;

namespace swa {

struct RedisTlsOptions {
  bool enabled = false;
  bool verify = true;       // chain to the CA and the server's name
  std::string ca_file;      // PEM bundle; empty: none
  std::string ca_dir;       // hashed folder; empty: none (both empty: system paths)
  std::string cert_file;    // client certificate (chain), with key_file
  std::string key_file;
  std::string server_name;  // SNI and the name checked; empty: the host connected to
};

// An SSL_CTX for clients: TLS 1.2 or later, peer verification on unless
// `verify` is false. Without a client certificate, a server's request for
// one sets the bool that the connection's SSL app data points to. Immutable after Create, so shared by every connection of
// a store (OpenSSL allows SSL_new on one context from several threads).
class RedisTlsContext {
 public:
  // INVALID_ARGUMENT naming the file and OpenSSL's reason when a CA,
  // certificate or key cannot be loaded, or the key does not match the
  // certificate; `what` starts the messages ("redis store").
  static absl::StatusOr<std::shared_ptr<const RedisTlsContext>> Create(const RedisTlsOptions& options,
                                                                       const std::string& what);
  ~RedisTlsContext();
  RedisTlsContext(const RedisTlsContext&) = delete;
  RedisTlsContext& operator=(const RedisTlsContext&) = delete;

  ssl_ctx_st* ctx() const { return ctx_; }
  bool verify() const { return verify_; }
  // The name to send and check for a server reached as `host`.
  const std::string& ServerName(const std::string& host) const {
    return server_name_.empty() ? host : server_name_;
  }

 private:
  RedisTlsContext(ssl_ctx_st* ctx, bool verify, std::string server_name)
      : ctx_(ctx), verify_(verify), server_name_(std::move(server_name)) {}
  ssl_ctx_st* ctx_;
  const bool verify_;
  const std::string server_name_;
};

// OpenSSL's queued errors as one line (and the queue cleared); "" when none.
std::string TakeOpenSslErrors();

}  // namespace swa
