//! The Redis store over TLS with ACL users: a redis-server started here with
//! `--tls-port` and certificates made by the `openssl` CLI. Skipped (with the
//! reason printed) when redis-server, redis-cli or openssl is missing, the
//! library has no Redis store, or redis-server was built without TLS.
mod common;
use common::*;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use swacache::*;

fn on_path(exe: &str) -> bool {
    std::env::var_os("PATH").map(|p| std::env::split_paths(&p).any(|d| d.join(exe).is_file())).unwrap_or(false)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").args(args).current_dir(dir).output().unwrap();
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn make_certs(dir: &Path) {
    for ca in ["ca", "otherca"] {
        let (key, crt, subj) = (format!("{ca}.key"), format!("{ca}.crt"), format!("/CN=swacache rust test {ca}"));
        openssl(
            dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                &key,
                "-out",
                &crt,
                "-days",
                "3",
                "-subj",
                &subj,
            ],
        );
    }
    std::fs::write(dir.join("server.ext"), "subjectAltName=DNS:redis.test,IP:127.0.0.1\n").unwrap();
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=redis.test",
        ],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "3",
            "-extfile",
            "server.ext",
        ],
    );
}

struct Server {
    child: Child,
    dir: PathBuf,
    port: u16,
    tls_port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Server {
    /// `Err(reason)` when the test should be skipped.
    fn start() -> std::result::Result<Server, String> {
        for exe in ["redis-server", "redis-cli", "openssl"] {
            if !on_path(exe) {
                return Err(format!("{exe} is not on PATH"));
            }
        }
        let probe = RedisConfig { port: 1, timeout_ms: 100, ..RedisConfig::default() };
        if let Err(e) = Store::redis(&probe) {
            if e.code == Code::Unimplemented {
                return Err("this build has no Redis store (hiredis not found)".into());
            }
        }
        let dir = std::env::temp_dir().join(format!("swacache-rust-redis-tls-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        make_certs(&dir);
        let (port, tls_port) = (free_port(), free_port());
        let p = |f: &str| dir.join(f).to_string_lossy().into_owned();
        let log = std::fs::File::create(dir.join("server.log")).unwrap();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--tls-port", &tls_port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--dir", &p(".")])
            .args(["--tls-cert-file", &p("server.crt"), "--tls-key-file", &p("server.key")])
            .args(["--tls-ca-cert-file", &p("ca.crt"), "--tls-auth-clients", "no"])
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap();
        let mut server = Server { child, dir, port, tls_port };
        for _ in 0..200 {
            if let Ok(Some(_)) = server.child.try_wait() {
                let text = std::fs::read_to_string(server.dir.join("server.log")).unwrap_or_default();
                if text.contains("TLS") || text.contains("tls") {
                    return Err(format!("this redis-server has no TLS support: {text}"));
                }
                panic!("redis-server exited: {text}");
            }
            if server.cli(&["PING"]) == "PONG" {
                return Ok(server);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("redis-server did not answer PING");
    }
    fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli").arg("-p").arg(self.port.to_string()).args(args).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
    fn path(&self, f: &str) -> Option<String> {
        Some(self.dir.join(f).to_string_lossy().into_owned())
    }
    fn config(&self, user: &str, password: &str) -> RedisConfig {
        RedisConfig {
            port: self.tls_port as u32,
            timeout_ms: 2000,
            password: Some(password.into()),
            security: RedisSecurity {
                username: Some(user.into()),
                tls: true,
                tls_ca_file: self.path("ca.crt"),
                ..RedisSecurity::default()
            },
            ..RedisConfig::default()
        }
    }
}

#[test]
fn redis_store_over_tls_with_acl_users() {
    let server = match Server::start() {
        Ok(s) => s,
        Err(reason) => {
            eprintln!("SKIP: redis_store_over_tls_with_acl_users: {reason}");
            return;
        }
    };
    assert_eq!(server.cli(&["ACL", "SETUSER", "writer", "on", ">wpw", "~*", "+@all"]), "OK");
    assert_eq!(
        server.cli(&["ACL", "SETUSER", "reader", "on", ">rpw", "~*", "-@all", "+get", "+exists", "+ping"]),
        "OK"
    );

    // Round trip through two caches: saved by the writer, restored by the reader.
    let cache = cache();
    let (a, b) = (cache.alloc_slot().unwrap(), cache.alloc_slot().unwrap());
    fill(&cache, a, 4, 9);
    let mut writer = server.config("writer", "wpw");
    writer.security.tls_server_name = Some("redis.test".into());
    cache.set_store(Store::redis(&writer).unwrap()).unwrap();
    cache.save(a, b"rust-tls").unwrap();
    let other = common::cache();
    other.set_store(Store::redis(&server.config("reader", "rpw")).unwrap()).unwrap();
    let c = other.alloc_slot().unwrap();
    other.restore(c, b"rust-tls").unwrap();
    assert_eq!(ring_bytes(&cache, a), ring_bytes(&other, c));
    // The reader may not write.
    let e = other.save(c, b"rust-tls-2").unwrap_err();
    assert_eq!(e.code, Code::PermissionDenied, "{e}");
    assert!(e.to_string().contains("NOPERM"), "{e}");
    cache.restore(b, b"rust-tls").unwrap();

    // Failures, each naming the server.
    let at = format!("127.0.0.1:{}", server.tls_port);
    let mut wrong_ca = server.config("writer", "wpw");
    wrong_ca.security.tls_ca_file = server.path("otherca.crt");
    let e = Store::redis(&wrong_ca).unwrap_err();
    assert_eq!(e.code, Code::Unauthenticated, "{e}");
    assert!(e.to_string().contains(&at) && e.to_string().contains("failed verification"), "{e}");
    let mut wrong_name = server.config("writer", "wpw");
    wrong_name.security.tls_server_name = Some("other.test".into());
    assert_eq!(Store::redis(&wrong_name).unwrap_err().code, Code::Unauthenticated);
    let e = Store::redis(&server.config("writer", "nope")).unwrap_err();
    assert_eq!(e.code, Code::Unauthenticated, "{e}");
    let plain = RedisConfig { port: server.tls_port as u32, timeout_ms: 1000, ..RedisConfig::default() };
    assert_eq!(Store::redis(&plain).unwrap_err().code, Code::Unavailable);
    let mut no_password = server.config("writer", "wpw");
    no_password.password = None;
    assert_eq!(Store::redis(&no_password).unwrap_err().code, Code::InvalidArgument);
    let mut cluster = RedisClusterConfig { nodes: at.clone(), timeout_ms: 1000, ..RedisClusterConfig::default() };
    cluster.security =
        RedisSecurity { tls: true, tls_cert_file: server.path("server.crt"), ..RedisSecurity::default() };
    assert_eq!(Store::redis_cluster(&cluster).unwrap_err().code, Code::InvalidArgument);
}
