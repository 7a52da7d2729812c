#include "store/redis_tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "absl/strings/str_format.h"

namespace swa {

std::string TakeOpenSslErrors() {
  std::string out;
  char buf[256];
  while (unsigned long e = ERR_get_error()) {
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

namespace {

// Called when the server asks for a client certificate and none is set: notes
// it on the connection (SSL app data: a bool), so that the server's refusal
// reads as UNAUTHENTICATED, and goes on without one.
int NoteCertificateRequest(SSL* ssl, X509** /*cert*/, EVP_PKEY** /*key*/) {
  if (auto* requested = static_cast<bool*>(SSL_get_app_data(ssl))) *requested = true;
  return 0;
}

}  // namespace

RedisTlsContext::~RedisTlsContext() { SSL_CTX_free(ctx_); }

absl::StatusOr<std::shared_ptr<const RedisTlsContext>> RedisTlsContext::Create(
    const RedisTlsOptions& options, const std::string& what) {
  if (options.cert_file.empty() != options.key_file.empty())
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: tls_cert_file and tls_key_file go together (cert \"%s\", key \"%s\")", what,
        options.cert_file, options.key_file));
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr)
    return absl::InternalError(
        absl::StrFormat("%s: SSL_CTX_new failed: %s", what, TakeOpenSslErrors()));
  std::shared_ptr<const RedisTlsContext> made(
      new RedisTlsContext(ctx, options.verify, options.server_name));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  auto bad_file = [&](const char* field, const std::string& path) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: %s \"%s\" cannot be loaded: %s", what,
                                                      field, path, TakeOpenSslErrors()));
  };
  if (!options.ca_file.empty() || !options.ca_dir.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, options.ca_file.empty() ? nullptr : options.ca_file.c_str(),
                                      options.ca_dir.empty() ? nullptr : options.ca_dir.c_str()) != 1)
      return bad_file(options.ca_file.empty() ? "tls_ca_dir" : "tls_ca_file",
                      options.ca_file.empty() ? options.ca_dir : options.ca_file);
  } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: no tls_ca_file or tls_ca_dir and the system's CA paths cannot be loaded: %s", what,
        TakeOpenSslErrors()));
  }
  if (!options.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, options.cert_file.c_str()) != 1)
      return bad_file("tls_cert_file", options.cert_file);
    if (SSL_CTX_use_PrivateKey_file(ctx, options.key_file.c_str(), SSL_FILETYPE_PEM) != 1)
      return bad_file("tls_key_file", options.key_file);
    if (SSL_CTX_check_private_key(ctx) != 1)
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tls_key_file \"%s\" does not match tls_cert_file \"%s\": %s", what,
          options.key_file, options.cert_file, TakeOpenSslErrors()));
  }
  if (options.cert_file.empty()) SSL_CTX_set_client_cert_cb(ctx, NoteCertificateRequest);
  SSL_CTX_set_verify(ctx, options.verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
  return made;
}

}  // namespace swa
