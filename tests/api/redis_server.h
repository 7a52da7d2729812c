// A throwaway redis-server for the concurrency and fault tests: a free
// loopback port, no persistence, killed by the kernel if the test process
// dies (PR_SET_PDEATHSIG), and killed and reaped by the destructor. It can be
// killed and restarted on the same port, paused (SIGSTOP) and resumed.
// Admin commands use a minimal RESP client, independent of hiredis.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "swacache.h"

namespace swa_test {

inline bool RedisServerOnPath() {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  const std::string p = path;
  for (size_t start = 0; start <= p.size();) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    if (access((p.substr(start, end - start) + "/redis-server").c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

// Whether this build has the Redis store (hiredis found at configure time).
inline bool BuildHasRedisStore() {
  swa_store_redis_config_t probe;
  swa_store_redis_config_init(&probe);
  probe.port = 1;  // never reached when the store is missing
  probe.timeout_ms = 100;
  swa_kv_store_t t;
  swa_kv_store_init(&t);
  const swa_status_t s = swa_store_redis_create(&probe, &t);
  if (s == SWA_OK && t.release != nullptr) t.release(t.user_data);
  return s != SWA_UNIMPLEMENTED;
}

// Sends one command; returns the first reply line ("+OK", ":1", "$5", "-ERR ..."),
// or "" when the server cannot be reached within 2 s.
inline std::string RedisCommand(int port, const std::vector<std::string>& args,
                                const std::string& password = "") {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return "";
  }
  auto encode = [](const std::vector<std::string>& cmd) {
    std::string out = "*" + std::to_string(cmd.size()) + "\r\n";
    for (const std::string& s : cmd) out += "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n";
    return out;
  };
  auto read_line = [fd] {
    std::string line;
    char c;
    while (read(fd, &c, 1) == 1 && c != '\n') line.push_back(c);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return line;
  };
  std::string line;
  bool ok = true;
  if (!password.empty()) {
    const std::string auth = encode({"AUTH", password});
    ok = write(fd, auth.data(), auth.size()) == ssize_t(auth.size()) && read_line() == "+OK";
  }
  const std::string cmd = encode(args);
  if (ok && write(fd, cmd.data(), cmd.size()) == ssize_t(cmd.size())) line = read_line();
  close(fd);
  return line;
}

class RedisServer {
 public:
  // Starts redis-server with `extra` arguments (e.g. {"--requirepass", "pw"});
  // port() < 0 when it could not be started.
  explicit RedisServer(std::vector<std::string> extra = {}, std::string password = "")
      : extra_(std::move(extra)), password_(std::move(password)) {
    for (int attempt = 0; attempt < 5 && pid_ < 0; ++attempt) {
      port_ = FreePort();
      if (port_ > 0 && !Start()) port_ = -1;
    }
  }
  ~RedisServer() { Kill(); }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return pid_ > 0 ? port_ : -1; }
  std::string Command(const std::vector<std::string>& args) const {
    return RedisCommand(port_, args, password_);
  }

  // SIGKILL: no goodbye to the clients, like a crashed or unplugged server.
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGCONT);
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // Starts again on the same port (after Kill); false when it does not come up.
  bool Restart() {
    Kill();
    return Start();
  }
  void Pause() { kill(pid_, SIGSTOP); }
  void Resume() { kill(pid_, SIGCONT); }

 private:
  static int FreePort() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
    close(fd);
    return ok ? ntohs(a.sin_port) : -1;
  }

  bool Start() {
    std::vector<std::string> args = {"redis-server", "--port", std::to_string(port_),
                                     "--bind", "127.0.0.1", "--save", "", "--appendonly",
                                     "no", "--daemonize", "no", "--loglevel", "warning",
                                     "--dir", "/tmp"};
    args.insert(args.end(), extra_.begin(), extra_.end());
    std::vector<char*> argv;
    for (std::string& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a crashed test
      if (getppid() != parent) _exit(1);
      execvp("redis-server", argv.data());
      _exit(127);
    }
    pid_ = pid;
    for (int i = 0; i < 200; ++i) {  // up to 10 s to come up
      const std::string reply = Command({"PING"});
      if (reply == "+PONG") return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    Kill();
    return false;
  }

  std::vector<std::string> extra_;
  std::string password_;
  pid_t pid_ = -1;
  int port_ = -1;
};

}  // namespace swa_test
