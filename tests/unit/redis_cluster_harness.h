// A throwaway Redis Cluster for tests and benchmarks: N masters (+ replicas)
// of Debian's redis-server on free loopback ports, joined with
// `redis-cli --cluster create`, in a temporary directory. The destructor
// kills every process it started and removes the directory. Admin commands
// go through hiredis (builds with the Redis store only). No gtest here.
#pragma once

#if defined(SWACACHE_HAVE_REDIS)

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace swa::testing {

inline bool ExeOnPath(const char* exe) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  const std::string p = path;
  for (size_t start = 0; start <= p.size();) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    if (access((p.substr(start, end - start) + "/" + exe).c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

inline bool PortFree(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

// The first port of the kernel's ephemeral range (outgoing connections'
// local ports, and port 0 binds such as store_redis_test's server).
inline int EphemeralPortsStart() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int lo = 0, hi = 0;
  return (in >> lo >> hi) && lo > 0 ? lo : 32768;
}

// A port p with p and its cluster bus port p + 10000 both free, both below
// the ephemeral range where the kernel can hand them to some connection
// between this check and the server's bind, and neither among `taken` (the
// ports and bus ports already given to this cluster's nodes, which may not
// have bound them yet: a later node picking one of them failed to start).
inline int FreeClusterPort(const std::vector<int>& taken = {}) {
  static std::mt19937 rng(std::random_device{}());
  const int top = EphemeralPortsStart() - 10000;  // p + 10000 stays below it
  const int lo = 10000, span = top - lo > 500 ? top - lo : 30000;
  auto is_taken = [&taken](int q) {
    for (int t : taken)
      if (t == q) return true;
    return false;
  };
  for (int i = 0; i < 1000; ++i) {
    const int p = lo + static_cast<int>(rng() % span);
    if (!is_taken(p) && !is_taken(p + 10000) && PortFree(p) && PortFree(p + 10000)) return p;
  }
  return -1;
}

// A reply copied out of hiredis.
struct AdminReply {
  int type = 0;  // REDIS_REPLY_*; 0 = no reply (connection failed)
  std::string str;
  long long integer = 0;
  std::vector<AdminReply> elements;
  bool ok() const { return type != 0 && type != REDIS_REPLY_ERROR; }
};

inline AdminReply CopyReply(const redisReply* r) {
  AdminReply out;
  out.type = r->type;
  if (r->str != nullptr) out.str.assign(r->str, r->len);
  out.integer = r->integer;
  for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(CopyReply(r->element[i]));
  return out;
}

inline AdminReply Admin(int port, const std::vector<std::string>& args,
                        const std::string& password = "", int timeout_ms = 2000) {
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
  AdminReply out;
  if (c == nullptr || c->err != 0) {
    if (c != nullptr) redisFree(c);
    return out;
  }
  redisSetTimeout(c, tv);
  auto run = [&](const std::vector<std::string>& a) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const std::string& s : a) {
      argv.push_back(s.data());
      lens.push_back(s.size());
    }
    auto* r = static_cast<redisReply*>(redisCommandArgv(c, int(a.size()), argv.data(), lens.data()));
    AdminReply copy;
    if (r != nullptr) {
      copy = CopyReply(r);
      freeReplyObject(r);
    }
    return copy;
  };
  if (!password.empty()) run({"AUTH", password});
  out = run(args);
  redisFree(c);
  return out;
}

// Spawns argv with stdout/stderr to `output` (appended); returns the pid or -1. The
// child dies with the thread that started it (PR_SET_PDEATHSIG), so a test
// binary that crashes leaves no server behind.
inline pid_t SpawnQuiet(std::vector<std::string> args, const std::string& output = "/dev/null") {
  std::vector<char*> argv;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid != 0) return pid;  // parent (or -1)
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);
  const int out = open(output.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  dup2(out, 1);
  dup2(out, 2);
  execvp(argv[0], argv.data());
  _exit(127);
}

struct ClusterSpec {
  int masters = 3;
  int replicas = 1;  // per master
  std::string password;
  int node_timeout_ms = 1000;
  // TLS (unit/redis_tls_harness.h): when `tls_dir` holds ca.crt, server.crt
  // and server.key, every node also listens on a TLS port and runs the cluster
  // bus and replication over TLS (tls-cluster, tls-replication), so CLUSTER
  // SLOTS and MOVED/ASK name TLS ports to TLS clients. The plain port stays
  // for the admin commands.
  std::string tls_dir;
};

class RedisClusterProcess {
 public:
  explicit RedisClusterProcess(ClusterSpec spec) : spec_(std::move(spec)) {
    error_ = Start();
    if (!error_.empty() && !ports_.empty()) error_ += "\n" + Report(15);
  }
  ~RedisClusterProcess() {
    for (size_t i = 0; i < pids_.size(); ++i) Kill(i);
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  RedisClusterProcess(const RedisClusterProcess&) = delete;
  RedisClusterProcess& operator=(const RedisClusterProcess&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  size_t size() const { return ports_.size(); }
  int port(size_t i) const { return ports_[i]; }
  std::string address(size_t i) const { return "127.0.0.1:" + std::to_string(ports_[i]); }
  std::string Seeds() const {
    std::string s;
    for (size_t i = 0; i < ports_.size(); ++i) s += (i ? "," : "") + address(i);
    return s;
  }
  // TLS clusters: node i's TLS port, and the seeds on the TLS ports.
  int tls_port(size_t i) const { return tls_ports_[i]; }
  std::string TlsSeeds() const {
    std::string s;
    for (size_t i = 0; i < tls_ports_.size(); ++i) s += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(tls_ports_[i]);
    return s;
  }
  AdminReply Command(size_t i, const std::vector<std::string>& args, int timeout_ms = 2000) const {
    return Admin(ports_[i], args, spec_.password, timeout_ms);
  }
  size_t IndexOfPort(int port) const {
    for (size_t i = 0; i < ports_.size(); ++i)
      if (ports_[i] == port || (i < tls_ports_.size() && tls_ports_[i] == port)) return i;
    return size_t(-1);
  }
  void Kill(size_t i) {
    if (pids_[i] > 0) {
      kill(pids_[i], SIGKILL);
      waitpid(pids_[i], nullptr, 0);
      pids_[i] = -1;
    }
  }
  bool alive(size_t i) const { return pids_[i] > 0; }
  std::string NodeId(size_t i) const { return Command(i, {"CLUSTER", "MYID"}).str; }
  bool IsMaster(size_t i) const {
    return Command(i, {"ROLE"}).elements.size() > 0 && Command(i, {"ROLE"}).elements[0].str == "master";
  }

  // Every live node says cluster_state:ok, all 16384 slots are served by live
  // masters, and every live replica's link is up.
  bool Healthy() const {
    for (size_t i = 0; i < ports_.size(); ++i) {
      if (!alive(i)) continue;
      if (Command(i, {"CLUSTER", "INFO"}).str.find("cluster_state:ok") == std::string::npos) return false;
      const AdminReply repl = Command(i, {"INFO", "replication"});
      if (repl.str.find("role:slave") != std::string::npos &&
          repl.str.find("master_link_status:up") == std::string::npos)
        return false;
      const AdminReply slots = Command(i, {"CLUSTER", "SLOTS"});
      long long covered = 0;
      for (const AdminReply& r : slots.elements) {
        if (r.elements.size() < 3) return false;
        const size_t m = IndexOfPort(int(r.elements[2].elements[1].integer));
        if (m == size_t(-1) || !alive(m)) return false;
        covered += r.elements[1].integer - r.elements[0].integer + 1;
      }
      if (covered != 16384) return false;
    }
    return true;
  }
  // Every live master's replicas have acknowledged its whole replication
  // stream (each `slaveN:...offset=` of INFO replication reaches the
  // master's `master_repl_offset`): what a test waits for before it reads
  // its own writes from replicas, instead of sleeping for a guessed time.
  bool WaitReplicated(int timeout_ms) const {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < end) {
      bool all = true;
      for (size_t i = 0; i < ports_.size() && all; ++i) {
        if (!alive(i)) continue;
        const std::string info = Command(i, {"INFO", "replication"}).str;
        if (info.find("role:master") == std::string::npos) continue;
        const size_t at = info.find("master_repl_offset:");
        if (at == std::string::npos) { all = false; break; }
        const long long want = std::atoll(info.c_str() + at + 19);
        for (size_t s = info.find("\nslave"); s != std::string::npos; s = info.find("\nslave", s + 1)) {
          const size_t line_end = info.find('\r', s);
          const size_t off = info.find("offset=", s);
          if (off == std::string::npos || off > line_end || std::atoll(info.c_str() + off + 7) < want) all = false;
        }
      }
      if (all) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  // What a failing test prints: each node's port, process, role and view
  // of the cluster, and the last lines of its log (notice level: failure
  // detection, elections, slot changes). Run on a failure only.
  std::string Report(int log_lines = 40) const {
    std::string out = "---- redis cluster report (" + dir_ + ") ----\n";
    for (size_t i = 0; i < ports_.size(); ++i) {
      out += "node " + std::to_string(i) + " port " + std::to_string(ports_[i]) +
             (alive(i) ? " pid " + std::to_string(pids_[i]) : std::string(" killed by the test")) + "\n";
      if (!alive(i)) continue;
      const AdminReply info = Command(i, {"CLUSTER", "INFO"}, 500);
      if (info.type == 0) out += "  (no answer to CLUSTER INFO within 500 ms)\n";
      for (const char* field : {"cluster_state:", "cluster_current_epoch:"}) {
        const size_t at = info.str.find(field);
        if (at != std::string::npos) out += "  " + info.str.substr(at, info.str.find('\r', at) - at) + "\n";
      }
      const AdminReply nodes = Command(i, {"CLUSTER", "NODES"}, 500);
      out += "  CLUSTER NODES:\n";
      for (size_t a = 0, b; a < nodes.str.size(); a = b + 1) {
        b = nodes.str.find('\n', a);
        if (b == std::string::npos) b = nodes.str.size();
        out += "    " + nodes.str.substr(a, b - a) + "\n";
      }
    }
    for (size_t i = 0; i < ports_.size(); ++i)
      out += "log of node " + std::to_string(i) + " (last " + std::to_string(log_lines) + " lines):\n" +
             LogTail(i, log_lines);
    return out + "---- end of report ----\n";
  }
  std::string LogTail(size_t i, int lines) const {
    std::ifstream in(dir_ + "/log-" + std::to_string(ports_[i]) + ".txt");
    std::deque<std::string> tail;
    for (std::string line; std::getline(in, line);) {
      tail.push_back(line);
      if (static_cast<int>(tail.size()) > lines) tail.pop_front();
    }
    std::string out;
    for (const std::string& line : tail) out += "    " + line + "\n";
    return out.empty() ? "    (empty or missing)\n" : out;
  }

  bool WaitHealthy(int timeout_ms) const {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < end) {
      if (Healthy()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

 private:
  std::string Start() {
    if (!ExeOnPath("redis-server") || !ExeOnPath("redis-cli")) return "redis-server or redis-cli is not on PATH";
    char tmpl[] = "/tmp/swa-redis-cluster-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return "mkdtemp failed";
    dir_ = tmpl;
    const int n = spec_.masters * (1 + spec_.replicas);
    std::vector<int> taken;  // every port and bus port given out so far
    for (int i = 0; i < n; ++i) {
      const int port = FreeClusterPort(taken);
      if (port < 0) return "no free port pair";
      taken.insert(taken.end(), {port, port + 10000});
      const bool tls = !spec_.tls_dir.empty();
      const int tls_port = tls ? FreeClusterPort(taken) : -1;  // its bus port, + 10000, is free too
      if (tls && tls_port < 0) return "no free port pair";
      if (tls) taken.insert(taken.end(), {tls_port, tls_port + 10000});
      std::vector<std::string> args = {
          "redis-server", "--port", std::to_string(port), "--bind", "127.0.0.1",
          "--cluster-enabled", "yes", "--cluster-config-file", dir_ + "/nodes-" + std::to_string(port) + ".conf",
          "--cluster-node-timeout", std::to_string(spec_.node_timeout_ms),
          "--cluster-replica-validity-factor", "0", "--dir", dir_, "--save", "", "--appendonly", "no",
          "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0", "--daemonize", "no",
          "--loglevel", "notice", "--logfile", dir_ + "/log-" + std::to_string(port) + ".txt"};
      if (tls) {
        const std::string& d = spec_.tls_dir;
        args.insert(args.end(), {"--tls-port", std::to_string(tls_port), "--tls-cluster", "yes",
                                 "--tls-replication", "yes", "--tls-cert-file", d + "/server.crt",
                                 "--tls-key-file", d + "/server.key", "--tls-ca-cert-file", d + "/ca.crt",
                                 "--tls-auth-clients", "optional"});
        tls_ports_.push_back(tls_port);
      }
      if (!spec_.password.empty()) {
        for (const char* a : {"--requirepass", "--masterauth"}) {
          args.push_back(a);
          args.push_back(spec_.password);
        }
      }
      const pid_t pid = SpawnQuiet(args);
      if (pid < 0) return "cannot start redis-server";
      pids_.push_back(pid);
      ports_.push_back(port);
    }
    for (size_t i = 0; i < ports_.size(); ++i) {
      bool up = false;
      for (int t = 0; t < 200 && !up; ++t) {
        up = Command(i, {"PING"}).str == "PONG";
        if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(25));
      }
      if (!up) {
        const bool exited = waitpid(pids_[i], nullptr, WNOHANG) == pids_[i];
        if (exited) pids_[i] = -1;
        return "redis-server on port " + std::to_string(ports_[i]) + " did not come up" +
               (exited ? " (it exited: see its log below)" : "");
      }
    }
    std::vector<std::string> create = {"redis-cli"};
    if (!spec_.tls_dir.empty())  // the bus runs on the TLS ports: introduce the nodes there
      create.insert(create.end(), {"--tls", "--cacert", spec_.tls_dir + "/ca.crt", "--cert",
                                   spec_.tls_dir + "/server.crt", "--key", spec_.tls_dir + "/server.key"});
    create.insert(create.end(), {"--cluster", "create"});
    for (size_t i = 0; i < ports_.size(); ++i)
      create.push_back(spec_.tls_dir.empty() ? address(i) : "127.0.0.1:" + std::to_string(tls_ports_[i]));
    create.insert(create.end(), {"--cluster-replicas", std::to_string(spec_.replicas), "--cluster-yes"});
    if (!spec_.password.empty()) create.insert(create.end(), {"-a", spec_.password, "--no-auth-warning"});
    const std::string cli_log = dir_ + "/cluster-create.txt";
    const pid_t cli = SpawnQuiet(create, cli_log);
    int status = 0;
    if (cli < 0 || waitpid(cli, &status, 0) != cli || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::ifstream in(cli_log);
      const std::string said((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      return "redis-cli --cluster create failed; it said:\n" + said.substr(said.size() > 3000 ? said.size() - 3000 : 0);
    }
    if (!WaitHealthy(20000)) return "the cluster did not become healthy within 20 s";
    return "";
  }

  ClusterSpec spec_;
  std::string dir_;
  std::vector<pid_t> pids_;
  std::vector<int> ports_;
  std::vector<int> tls_ports_;  // TLS clusters only
  std::string error_;
};

}  // namespace swa::testing

#endif  // SWACACHE_HAVE_REDIS
