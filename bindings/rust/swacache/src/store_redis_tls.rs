//! ACL user and TLS settings shared by the Redis and Redis Cluster stores: the
//! fields appended to `swa_store_redis_config_t` and
//! `swa_store_redis_cluster_config_t` after 0.2 (docs/store.md, "Redis TLS and
//! ACL users").
use std::ffi::CString;
use std::os::raw::c_char;

use swacache_sys as sys;

use crate::error::Result;
use crate::store::cstring;

/// How a Redis store authenticates and protects its connections.
///
/// A certificate that fails verification, a refused client certificate or a
/// wrong user give `Unauthenticated`; an ACL user lacking a command gives
/// `PermissionDenied`; a plain/TLS port mix-up gives `Unavailable`; each
/// message names the server or node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisSecurity {
    /// ACL user (`AUTH username password`); needs the config's password.
    /// `None`: the default user.
    pub username: Option<String>,
    /// TLS on every connection (TLS 1.2 or later); `false`: plain TCP.
    pub tls: bool,
    /// Verify the server's certificate chain and name (default `true`);
    /// `false` encrypts without authenticating the server (tests only).
    pub tls_verify: bool,
    /// PEM file of trusted CA certificates; with `tls_ca_dir` `None` as well,
    /// the system's CA paths.
    pub tls_ca_file: Option<String>,
    /// Folder of hashed CA certificates (`openssl rehash`).
    pub tls_ca_dir: Option<String>,
    /// PEM client certificate (chain), with `tls_key_file`.
    pub tls_cert_file: Option<String>,
    /// PEM private key of `tls_cert_file`.
    pub tls_key_file: Option<String>,
    /// Name sent as SNI and checked against the certificate; `None`: the host
    /// connected to (each node's address for a cluster).
    pub tls_server_name: Option<String>,
}

impl Default for RedisSecurity {
    fn default() -> RedisSecurity {
        RedisSecurity {
            username: None,
            tls: false,
            tls_verify: true,
            tls_ca_file: None,
            tls_ca_dir: None,
            tls_cert_file: None,
            tls_key_file: None,
            tls_server_name: None,
        }
    }
}

/// The C strings of a [`RedisSecurity`]; they must outlive the create call.
pub(crate) struct SecurityStrings {
    username: Option<CString>,
    ca_file: Option<CString>,
    ca_dir: Option<CString>,
    cert_file: Option<CString>,
    key_file: Option<CString>,
    server_name: Option<CString>,
}

fn opt(what: &str, s: &Option<String>) -> Result<Option<CString>> {
    s.as_deref().map(|v| cstring(what, v)).transpose()
}

fn ptr(s: &Option<CString>) -> *const c_char {
    s.as_ref().map_or(std::ptr::null(), |c| c.as_ptr())
}

impl RedisSecurity {
    pub(crate) fn strings(&self) -> Result<SecurityStrings> {
        Ok(SecurityStrings {
            username: opt("username", &self.username)?,
            ca_file: opt("tls_ca_file", &self.tls_ca_file)?,
            ca_dir: opt("tls_ca_dir", &self.tls_ca_dir)?,
            cert_file: opt("tls_cert_file", &self.tls_cert_file)?,
            key_file: opt("tls_key_file", &self.tls_key_file)?,
            server_name: opt("tls_server_name", &self.tls_server_name)?,
        })
    }
}

/// Writes the ACL user and TLS fields of a C config.
pub(crate) trait ApplySecurity {
    fn apply(&mut self, security: &RedisSecurity, strings: &SecurityStrings);
}

macro_rules! apply_security {
    ($t:ty) => {
        impl ApplySecurity for $t {
            fn apply(&mut self, security: &RedisSecurity, strings: &SecurityStrings) {
                self.username = ptr(&strings.username);
                self.tls = security.tls as u32;
                self.tls_verify = security.tls_verify as u32;
                self.tls_ca_file = ptr(&strings.ca_file);
                self.tls_ca_dir = ptr(&strings.ca_dir);
                self.tls_cert_file = ptr(&strings.cert_file);
                self.tls_key_file = ptr(&strings.key_file);
                self.tls_server_name = ptr(&strings.server_name);
            }
        }
    };
}
apply_security!(sys::swa_store_redis_config_t);
apply_security!(sys::swa_store_redis_cluster_config_t);
