// Test fixtures for Redis over TLS: a CA and certificates made with the
// openssl CLI in a temporary folder (a server certificate for redis.test,
// localhost and 127.0.0.1; a client certificate; a second, unrelated CA; an
// expired server certificate made with `openssl ca -startdate/-enddate`), and
// a redis-server with a plain admin port and a TLS port. Every process is
// killed and reaped by its destructor (and dies with the test process,
// PR_SET_PDEATHSIG). No gtest here.
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/redis_cluster_harness.h"

#if defined(SWACACHE_HAVE_REDIS)

namespace swa::testing {

// The openssl commands; $1 is the folder.
inline constexpr const char kMakeTlsFiles[] = R"SH(set -eu
cd "$1"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "$1" 2>/dev/null; }
ca() {  # name
  key $1.key
  openssl req -x509 -new -key $1.key -out $1.crt -days 3 -subj "/CN=swacache test $1" 2>/dev/null
}
ca ca
ca otherca
printf 'subjectAltName=DNS:redis.test,DNS:localhost,IP:127.0.0.1\n' > server.ext
printf 'extendedKeyUsage=clientAuth\n' > client.ext
leaf() {  # name subject ext
  key $1.key
  openssl req -new -key $1.key -out $1.csr -subj "$2" 2>/dev/null
  openssl x509 -req -in $1.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out $1.crt -days 3 -extfile $3 2>/dev/null
}
leaf server /CN=redis.test server.ext
leaf client /CN=swacache-client client.ext
# An expired server certificate (valid in January 2020 only), from `openssl ca`.
mkdir -p newcerts; : > index.txt; echo 1000 > serial
cat > ca.cnf <<CNF
[ca]
default_ca = tca
[tca]
dir = .
database = index.txt
new_certs_dir = newcerts
serial = serial
default_md = sha256
policy = pol
unique_subject = no
[pol]
commonName = supplied
CNF
key expired.key
openssl req -new -key expired.key -out expired.csr -subj /CN=redis.test 2>/dev/null
openssl ca -batch -notext -config ca.cnf -cert ca.crt -keyfile ca.key -in expired.csr -out expired.crt \
  -startdate 20200101000000Z -enddate 20200102000000Z -extfile server.ext 2>/dev/null
# The CA as a hashed folder (tls_ca_dir).
mkdir -p cadir; cp ca.crt cadir/; openssl rehash cadir
chmod 600 *.key
)SH";

class TlsFiles {
 public:
  TlsFiles() {
    char tmpl[] = "/tmp/swa-redis-tls-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      error_ = "mkdtemp failed";
      return;
    }
    dir_ = tmpl;
    if (!ExeOnPath("openssl")) {
      error_ = "the openssl command is not on PATH";
      return;
    }
    const std::string script = dir_ + "/make.sh";
    std::ofstream(script) << kMakeTlsFiles;
    const pid_t pid = SpawnQuiet({"bash", script, dir_}, dir_ + "/make.log");
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::ifstream in(dir_ + "/make.log");
      error_ = "making the test certificates failed: " +
               std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    }
  }
  ~TlsFiles() {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  TlsFiles(const TlsFiles&) = delete;
  TlsFiles& operator=(const TlsFiles&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::string error_;
};

// The redis-server arguments of a TLS port serving `cert`/`key` (files of
// `files`), trusting the test CA for client certificates.
inline std::vector<std::string> TlsServerArgs(const TlsFiles& files, const std::string& cert = "server",
                                              const std::string& auth_clients = "optional") {
  return {"--tls-cert-file", files.path(cert + ".crt"), "--tls-key-file", files.path(cert + ".key"),
          "--tls-ca-cert-file", files.path("ca.crt"), "--tls-auth-clients", auth_clients};
}

// A free loopback port below the ephemeral range.
inline int FreeTlsPort() {
  const int p = FreeClusterPort();
  return p;
}

// redis-server with a plain port (admin) and a TLS port.
class TlsRedisServer {
 public:
  TlsRedisServer(const TlsFiles& files, std::vector<std::string> extra, const std::string& cert = "server",
                 const std::string& auth_clients = "optional") {
    for (int attempt = 0; attempt < 5 && pid_ < 0; ++attempt) {
      port_ = FreeTlsPort();
      tls_port_ = FreeTlsPort();
      if (port_ < 0 || tls_port_ < 0 || port_ == tls_port_) continue;
      log_ = files.path("server-" + std::to_string(tls_port_) + ".log");
      std::vector<std::string> args = {"redis-server", "--port", std::to_string(port_), "--tls-port",
                                       std::to_string(tls_port_), "--bind", "127.0.0.1", "--save", "",
                                       "--appendonly", "no", "--daemonize", "no", "--loglevel", "notice",
                                       "--dir", files.dir()};
      const std::vector<std::string> tls = TlsServerArgs(files, cert, auth_clients);
      args.insert(args.end(), tls.begin(), tls.end());
      args.insert(args.end(), extra.begin(), extra.end());
      pid_ = SpawnQuiet(args, log_);
      if (pid_ < 0) continue;
      bool up = false;
      for (int i = 0; i < 200 && !up; ++i) {
        up = Admin(port_, {"PING"}).str == "PONG";
        if (!up) {
          if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
            pid_ = -1;
            break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(25));
        }
      }
      if (!up) {
        std::ifstream in(log_);
        error_ = std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        Kill();
      }
    }
    if (pid_ < 0 && error_.empty()) error_ = "redis-server did not start";
  }
  ~TlsRedisServer() { Kill(); }
  TlsRedisServer(const TlsRedisServer&) = delete;
  TlsRedisServer& operator=(const TlsRedisServer&) = delete;

  bool ok() const { return pid_ > 0; }
  // Why it did not start (its log); mentions TLS when redis-server lacks it.
  const std::string& error() const { return error_; }
  bool LacksTls() const {
    return !ok() && (error_.find("TLS") != std::string::npos || error_.find("tls") != std::string::npos);
  }
  int port() const { return port_; }
  int tls_port() const { return tls_port_; }
  AdminReply Command(const std::vector<std::string>& args) const { return Admin(port_, args); }
  void Kill() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

 private:
  pid_t pid_ = -1;
  int port_ = -1, tls_port_ = -1;
  std::string log_, error_;
};

}  // namespace swa::testing

#endif  // SWACACHE_HAVE_REDIS
