// A scripted fake Redis server on a loopback socket, for the connection,
// pool and cluster-client tests (store_redis_connection_test,
// store_redis_cluster_client_test): no redis-server needed.
#ifndef SWACACHE_TESTS_UNIT_REDIS_FAKE_SERVER_H_
#define SWACACHE_TESTS_UNIT_REDIS_FAKE_SERVER_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "store/redis_pool.h"
#include "store/redis_tls.h"

namespace swa::fake_redis {

// Writes all of `s` (blocking socket); false when the peer is gone.
inline bool WriteAll(int fd, std::string_view s) {
  while (!s.empty()) {
    const ssize_t n = send(fd, s.data(), s.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    s.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Reads one RESP command (an array of bulk strings) from `fd`, keeping extra
// bytes in *buf; empty on EOF.
inline std::vector<std::string> ReadCommand(int fd, std::string* buf) {
  for (;;) {
    // Try to parse what is buffered.
    size_t pos = 0;
    auto line = [&](std::string* out) {
      const size_t e = buf->find("\r\n", pos);
      if (e == std::string::npos) return false;
      *out = buf->substr(pos, e - pos);
      pos = e + 2;
      return true;
    };
    std::string head;
    if (line(&head) && !head.empty() && head[0] == '*') {
      const int n = std::stoi(head.substr(1));
      std::vector<std::string> args;
      bool complete = true;
      for (int i = 0; i < n && complete; ++i) {
        std::string len;
        if (!line(&len)) {
          complete = false;
          break;
        }
        const size_t l = std::stoul(len.substr(1));
        if (buf->size() < pos + l + 2) {
          complete = false;
          break;
        }
        args.push_back(buf->substr(pos, l));
        pos += l + 2;
      }
      if (complete) {
        buf->erase(0, pos);
        return args;
      }
    }
    char chunk[65536];
    const ssize_t n = recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) return {};
    buf->append(chunk, static_cast<size_t>(n));
  }
}

inline std::string Bulk(const std::string& s) { return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n"; }

// A loopback server: each accepted connection runs `handler(fd, index)` on a
// thread of its own (index: 0 for the first connection, 1 for the next...).
class FakeServer {
 public:
  using Handler = std::function<void(int fd, int index)>;
  explicit FakeServer(Handler handler) : handler_(std::move(handler)) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(listen_fd_, 16) != 0 ||
        getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      return;
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] {
      for (int index = 0;; ++index) {
        const int c = accept(listen_fd_, nullptr, nullptr);
        if (c < 0) return;
        accepted_ = index + 1;
        std::lock_guard<std::mutex> lock(mu_);
        threads_.emplace_back([this, c, index] {
          handler_(c, index);
          close(c);
        });
      }
    });
  }
  ~FakeServer() {
    shutdown(listen_fd_, SHUT_RDWR);  // accept returns
    if (acceptor_.joinable()) acceptor_.join();
    close(listen_fd_);
    std::lock_guard<std::mutex> lock(mu_);
    for (std::thread& t : threads_) t.join();
  }
  uint32_t port() const { return static_cast<uint32_t>(port_); }
  int accepted() const { return accepted_; }

 private:
  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<int> accepted_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> threads_;
};

inline RedisConnectionPool Pool(const FakeServer& server, std::shared_ptr<const RedisTlsContext> tls = nullptr) {
  return RedisConnectionPool(RedisPoolOptions{.host = "127.0.0.1",
                                              .port = server.port(),
                                              .name = "fake redis 127.0.0.1:" + std::to_string(server.port()),
                                              .tls = std::move(tls),
                                              .max_idle = 2});
}

inline std::string Text(const absl::StatusOr<RedisReply>& r) {
  if (!r.ok()) return std::string(r.status().ToString());
  return std::string(ReplyText(**r));
}

// The CLUSTER SLOTS reply of a one-node cluster on 127.0.0.1:port that
// serves every slot.
inline std::string OneNodeClusterSlots(uint32_t port) {
  return "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:" + std::to_string(port) + "\r\n";
}

// Hands every command to `handle(args)` until the client goes away or
// `handle` returns false (it writes its own reply, if any, to fd).
inline void ServeCommands(int fd, const std::function<bool(const std::vector<std::string>&)>& handle) {
  std::string buf;
  for (;;) {
    const std::vector<std::string> args = ReadCommand(fd, &buf);
    if (args.empty() || !handle(args)) return;
  }
}

// Answers every command with `reply(args)` until the client goes away.
inline void Serve(int fd, const std::function<std::string(const std::vector<std::string>&)>& reply) {
  ServeCommands(fd, [&](const std::vector<std::string>& args) { return WriteAll(fd, reply(args)); });
}

}  // namespace swa::fake_redis

#endif  // SWACACHE_TESTS_UNIT_REDIS_FAKE_SERVER_H_
