// The ACL user and TLS fields that swa_store_redis_config_t and
// swa_store_redis_cluster_config_t share (username, tls, tls_verify, tls_*),
// checked and copied into the store's options (RedisStoreOptions,
// RedisClusterOptions: both have `username` and a RedisTlsOptions `tls`).
#pragma once

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace swa::capi {

template <typename Config, typename Options>
absl::Status ReadRedisSecurity(const Config& c, Options* options) {
  if (c.tls > 1) return absl::InvalidArgumentError(absl::StrFormat("tls = %u: must be 0 or 1", c.tls));
  if (c.tls_verify > 1)
    return absl::InvalidArgumentError(
        absl::StrFormat("tls_verify = %u: must be 0 or 1", c.tls_verify));
  if (c.username != nullptr) {
    if (c.username[0] == '\0')
      return absl::InvalidArgumentError("username is empty (NULL means the default user)");
    if (c.password == nullptr || c.password[0] == '\0')
      return absl::InvalidArgumentError(absl::StrFormat(
          "username \"%s\" needs a password (AUTH username password)", c.username));
    options->username = c.username;
  }
  const bool tls_fields = c.tls_ca_file != nullptr || c.tls_ca_dir != nullptr ||
                          c.tls_cert_file != nullptr || c.tls_key_file != nullptr ||
                          c.tls_server_name != nullptr;
  if (c.tls == 0 && tls_fields)
    return absl::InvalidArgumentError(
        "a tls_* file or tls_server_name is set but tls = 0 (set tls = 1, or clear them)");
  options->tls.enabled = c.tls != 0;
  options->tls.verify = c.tls_verify != 0;
  if (c.tls_ca_file != nullptr) options->tls.ca_file = c.tls_ca_file;
  if (c.tls_ca_dir != nullptr) options->tls.ca_dir = c.tls_ca_dir;
  if (c.tls_cert_file != nullptr) options->tls.cert_file = c.tls_cert_file;
  if (c.tls_key_file != nullptr) options->tls.key_file = c.tls_key_file;
  if (c.tls_server_name != nullptr) options->tls.server_name = c.tls_server_name;
  return absl::OkStatus();
}

}  // namespace swa::capi
