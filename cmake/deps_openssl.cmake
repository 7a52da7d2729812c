# Required dependency: OpenSSL's libcrypto, for the HMAC-SHA-256 tags of
# authenticated blobs (src/store/blob_auth.cc, docs/store.md "Threat model").
# Debian: libssl-dev.
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
message(STATUS "swacache: OpenSSL libcrypto ${OPENSSL_VERSION} (authenticated blobs)")
list(APPEND SWA_EXTRA_LIBS OpenSSL::Crypto)
