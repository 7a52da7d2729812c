// Every Redis reply the stores read through hiredis is read within bounds
// (src/store/redis_reply_reader.h): for each command family (the setup
// commands AUTH, SELECT and PING, the single-server store's SET, EXISTS, DEL
// and EXISTS pipeline, the cluster store's CLUSTER SLOTS, SET, EXISTS, DEL
// and ASKING), a fake server answers with a hostile reply (a huge bulk, an
// array bomb header, an array count hiredis 0.14 reads as negative, deep
// nesting, element counts past the bound in all, an endless line without
// CRLF) and the call must be a prompt UNAVAILABLE protocol error naming the
// command and the size or count, in a forked child whose address space may
// grow by 1 GiB at most (RLIMIT_AS), and the next call must work on a new
// connection. The largest CLUSTER SLOTS reply the bounds are sized for
// (redis_cluster_store.cc) loads. Before the bounds: the array bomb asked
// hiredis for 16 GB (out of memory in the child), the count read as
// negative crashed it, the bulks and lines were buffered until the address
// space ran out or the deadline passed.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

#if defined(SWACACHE_HAVE_REDIS)
#include <hiredis/hiredis.h>

#include "store/redis_cluster_store.h"
#include "store/redis_store.h"
#include "unit/redis_fake_server.h"

namespace swa {
namespace {

using namespace fake_redis;

// Runs `client` in a forked child (no threads of its own: the fake server
// stays in this process) whose address space may grow by 1 GiB past its size
// at the fork; returns what `client` returned, or how the child died.
std::string InChild(const std::function<std::string()>& client) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  const pid_t pid = fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    close(fds[0]);
    long pages = 0;
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
      std::fclose(f);
    }
    const rlim_t now = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE));
    const rlimit limit{now + (rlim_t{1} << 30), now + (rlim_t{1} << 30)};
    std::string out = pages > 0 && setrlimit(RLIMIT_AS, &limit) == 0 ? client() : "no RLIMIT_AS";
    for (size_t done = 0; done < out.size();) {
      const ssize_t n = write(fds[1], out.data() + done, out.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    _exit(0);  // no destructors, no leak check: the parent owns the rest
  }
  close(fds[1]);
  std::string out;
  char chunk[4096];
  ssize_t n;
  while ((n = read(fds[0], chunk, sizeof chunk)) > 0) out.append(chunk, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return absl::StrCat("child killed by signal ", WTERMSIG(status), "; ", out);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return absl::StrCat("child exited with ", WEXITSTATUS(status), "; ", out);
  return out;
}

std::string Describe(const absl::Status& s) {
  return absl::StrCat(absl::StatusCodeToString(s.code()), " ", s.message());
}

// A hostile reply: `head`, then (when `endless`) 'x' until the client goes.
struct Hostile {
  const char* name;
  std::string head;
  bool endless = false;
  // What the refusal names, for a reply that may hold no array (short) and
  // for CLUSTER SLOTS; "a|b": either.
  std::string short_refusal, slots_refusal;
};

const std::vector<Hostile>& HostileReplies() {
  static const std::vector<Hostile> cases = [] {
    std::string deep;
    for (int i = 0; i < 64; ++i) deep += "*1\r\n";
    deep += ":1\r\n";
    return std::vector<Hostile>{
        {"huge bulk", "$1000000000\r\n", true, "a reply of more than 65536 bytes",
         "a reply of more than 67108864 bytes"},
        {"array bomb header", "*2000000000\r\n", false, "an array reply",
         "an array of 2000000000 elements"},
        // Debian's hiredis 0.14.1 refuses these two itself (CVE-2021-32765's
        // fix); the upstream 0.14.1 passes them on as negative counts.
        {"array count past 2^31 - 1", "*4294967295\r\n:1\r\n", false,
         "an array reply|Multi-bulk length out of range",
         "an array length of -1|Multi-bulk length out of range"},
        {"negative array count", "*-5\r\n", false, "an array reply|Multi-bulk length out of range",
         "an array length of -5|Multi-bulk length out of range"},
        {"deep nesting", deep, false, "an array reply", "arrays nested 5 deep"},
        {"elements past the bound in all", "*1048576\r\n*1\r\n", false, "an array reply",
         "arrays of 1048577 elements in all"},
        {"endless line without CRLF", "+", true, "a reply of more than 65536 bytes",
         "a reply of more than 67108864 bytes"},
    };
  }();
  return cases;
}

// A fake server for both stores: normal replies to every command, except
// that the first `target` command (over all connections) gets `hostile`;
// with `ask_first`, the first SET or GET is answered "-ASK" to this server
// and the ASKING after it is the target.
class HostileServer {
 public:
  HostileServer(std::string target, const Hostile& hostile, bool ask_first = false)
      : target_(std::move(target)),
        hostile_(hostile),
        ask_first_(ask_first),
        server_([this](int fd, int) { Run(fd); }) {
    port_ = server_.port();
  }
  uint32_t port() const { return server_.port(); }

 private:
  void Run(int fd) {
    ServeCommands(fd, [&](const std::vector<std::string>& a) {
      const std::string me = "127.0.0.1:" + std::to_string(port_.load());
      if ((a[0] == "SET" || a[0] == "GET") && ask_first_ && !asked_.exchange(true)) {
        return WriteAll(fd, "-ASK 1 " + me + "\r\n");
      }
      if (a[0] == target_ && !hit_.exchange(true)) {
        if (!WriteAll(fd, hostile_.head)) return false;
        if (hostile_.endless) {
          const std::string x(65536, 'x');
          while (WriteAll(fd, x)) {
          }
          return false;
        }
        return true;  // the client drops the connection
      }
      std::string reply;
      if (a[0] == "CLUSTER") {
        reply = OneNodeClusterSlots(port_.load());
      } else if (a[0] == "GET") {
        reply = Bulk("0123456789");
      } else if (a[0] == "EXISTS" || a[0] == "DEL") {
        reply = ":1\r\n";
      } else if (a[0] == "PING") {
        reply = "+PONG\r\n";
      } else {
        reply = "+OK\r\n";  // AUTH, SELECT, SET, ASKING
      }
      return WriteAll(fd, reply);
    });
  }

  const std::string target_;
  const Hostile hostile_;
  const bool ask_first_;
  std::atomic<bool> hit_{false}, asked_{false};
  std::atomic<uint32_t> port_{0};
  FakeServer server_;  // last: its threads use the members above
};

RedisStoreOptions StoreOn(const HostileServer& s) {
  RedisStoreOptions o;
  o.host = "127.0.0.1";
  o.port = s.port();
  o.timeout_ms = 5000;
  return o;
}

RedisClusterOptions ClusterOn(const HostileServer& s, uint32_t max_attempts = 1) {
  RedisClusterOptions o;
  o.seeds = {{"127.0.0.1", s.port()}};
  o.timeout_ms = 5000;
  o.max_attempts = max_attempts;  // 1: a refused reply is not retried
  return o;
}

const uint8_t kValue[10] = {};
absl::Status PutOne(KvStore& s) {
  const ConstByteSpan p[1] = {ConstByteSpan(kValue, sizeof kValue)};
  return s.Put("k", p);
}
absl::Status ExistsOne(KvStore& s) { return s.Exists("k").status(); }
absl::Status RemoveOne(KvStore& s) { return s.Remove("k"); }
absl::Status ProbeOne(KvStore& s) {
  const std::vector<std::string> keys = {"a", "b", "c"};
  size_t failed = 0;
  return s.FirstPresent(keys, &failed).status();
}
absl::Status GetOne(KvStore& s) {
  uint8_t b[10];
  const ByteSpan p[1] = {ByteSpan(b, sizeof b)};
  return s.Get("k", p).status();
}

// The first call's status and the next one's, "<first>\n<next>": two
// connects when `call` is null (the setup commands), else one store and
// `call` twice (the second on a new connection: the refused one is dropped).
template <typename Store, typename Options>
std::string TwoCalls(const Options& o, const std::function<absl::Status(KvStore&)>& call) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Connect(o);
  if (!call) return absl::StrCat(Describe(store.status()), "\n", Describe(Store::Connect(o).status()));
  if (!store.ok()) return absl::StrCat("connect: ", Describe(store.status()), "\n");
  const absl::Status first = call(**store);
  return absl::StrCat(Describe(first), "\n", Describe(call(**store)));
}

// One command family: the command the fake server answers with the hostile
// reply, and the client's two calls.
struct Family {
  const char* name;
  std::string target;
  bool slots = false;  // CLUSTER SLOTS's bounds, else kRedisShortReply
  bool ask_first = false;
  std::function<std::string(const HostileServer&)> run;
};

std::vector<Family> Families() {
  using Adjust = std::function<void(RedisStoreOptions&)>;
  using Call = std::function<absl::Status(KvStore&)>;
  auto store = [](Adjust adjust, Call call) {
    return [adjust, call](const HostileServer& s) {
      RedisStoreOptions o = StoreOn(s);
      if (adjust) adjust(o);
      return TwoCalls<RedisStore>(o, call);
    };
  };
  // ASK takes a second attempt: the first one is the redirect.
  auto cluster = [](Call call, uint32_t attempts = 1) {
    return [call, attempts](const HostileServer& s) {
      return TwoCalls<RedisClusterStore>(ClusterOn(s, attempts), call);
    };
  };
  const Adjust with_password = [](RedisStoreOptions& o) { o.password = "pw"; };
  const Adjust with_db = [](RedisStoreOptions& o) { o.db = 3; };
  return {
      {"redis store: PING at connect", "PING", false, false, store(nullptr, nullptr)},
      {"redis store: AUTH at connect", "AUTH", false, false, store(with_password, nullptr)},
      {"redis store: SELECT at connect", "SELECT", false, false, store(with_db, nullptr)},
      {"redis store: SET", "SET", false, false, store(nullptr, PutOne)},
      {"redis store: EXISTS", "EXISTS", false, false, store(nullptr, ExistsOne)},
      {"redis store: EXISTS pipeline", "EXISTS", false, false, store(nullptr, ProbeOne)},
      {"redis store: DEL", "DEL", false, false, store(nullptr, RemoveOne)},
      {"cluster store: CLUSTER SLOTS", "CLUSTER", true, false, cluster(nullptr)},
      {"cluster store: SET", "SET", false, false, cluster(PutOne)},
      {"cluster store: EXISTS", "EXISTS", false, false, cluster(ExistsOne)},
      {"cluster store: DEL", "DEL", false, false, cluster(RemoveOne)},
      {"cluster store: ASKING before SET", "ASKING", false, true, cluster(PutOne, 2)},
      {"cluster store: ASKING before GET", "ASKING", false, true, cluster(GetOne, 2)},
  };
}

TEST(RedisReplyBounds, EveryCommandFamilyRefusesAHostileReplyWithinBoundsAndTheNextCallWorks) {
  for (const Family& f : Families()) {
    for (const Hostile& h : HostileReplies()) {
      SCOPED_TRACE(absl::StrCat(f.name, ", ", h.name));
      HostileServer server(f.target, h, f.ask_first);
      const std::string out = InChild([&] { return f.run(server); });
      const size_t nl = out.find('\n');
      ASSERT_NE(nl, std::string::npos) << out;
      const std::string first = out.substr(0, nl), next = out.substr(nl + 1);
      EXPECT_EQ(first.rfind("UNAVAILABLE ", 0), 0u) << first;
      EXPECT_NE(first.find(f.target + ": protocol error: "), std::string::npos)
          << "the command is not named: " << first;
      const std::string& refusal = f.slots ? h.slots_refusal : h.short_refusal;
      bool named = false;
      const std::vector<std::string> alternatives = absl::StrSplit(refusal, '|');
      for (const std::string& one : alternatives)
        named = named || first.find(one) != std::string::npos;
      EXPECT_TRUE(named) << "expected \"" << refusal << "\": " << first;
      EXPECT_EQ(next, "OK ") << "the next call";
    }
  }
}

// The cluster store's EXISTS pipeline (the longest-prefix probe) takes a
// failed pipeline's keys through EXISTS one by one: a hostile pipeline reply
// is refused within bounds and the probe still answers.
TEST(RedisReplyBounds, AClusterProbePipelineRefusesAHostileReplyAndFallsBackPerKey) {
  for (const Hostile& h : HostileReplies()) {
    SCOPED_TRACE(h.name);
    HostileServer server("EXISTS", h);
    const std::string out = InChild([&] {
      absl::StatusOr<std::unique_ptr<RedisClusterStore>> store = RedisClusterStore::Connect(ClusterOn(server));
      if (!store.ok()) return Describe(store.status());
      const std::vector<std::string> keys = {"a", "b"};
      size_t failed = 0;
      absl::StatusOr<int64_t> found = (*store)->FirstPresent(keys, &failed);
      return found.ok() ? absl::StrCat("found ", *found) : Describe(found.status());
    });
    EXPECT_EQ(out, "found 0");
  }
}

// The largest CLUSTER SLOTS reply the bounds are sized for
// (kRedisClusterSlotsReply: 16384 one-slot ranges, a master and 5 replicas
// each, every node entry at its longest) is read whole; with a sixth replica
// per range it is refused at 64 MiB.
TEST(RedisReplyBounds, TheLargestClusterMapTheBoundsAreSizedForIsReadAndOneLargerIsRefused) {
  for (const int nodes : {6, 7}) {
    SCOPED_TRACE(nodes);
    const std::string host(255, 'h'), ip(45, '6'), id(40, 'f');
    const std::string entry = "*4\r\n" + Bulk(host) + ":65535\r\n" + Bulk(id) + "*4\r\n" + Bulk("ip") +
                              Bulk(ip) + Bulk("hostname") + Bulk(host);
    ASSERT_EQ(entry.size(), kRedisSlotsNodeEntryBytes);
    std::string reply = "*16384\r\n";
    reply.reserve(80 << 20);
    for (int slot = 0; slot < 16384; ++slot) {
      reply += "*" + std::to_string(2 + nodes) + "\r\n:16383\r\n:16383\r\n";
      for (int n = 0; n < nodes; ++n) reply += entry;
    }
    if (nodes == 6) ASSERT_EQ(reply.size(), kRedisSlotsReplyBytes);
    FakeServer server([&](int fd, int) {
      Serve(fd, [&](const std::vector<std::string>&) { return reply; });
    });
    RedisConnectionPool pool = Pool(server);
    absl::StatusOr<RedisReply> r =
        pool.Run({"CLUSTER", "SLOTS"}, absl::Seconds(60), kRedisClusterSlotsReply);
    if (nodes == 6) {
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_EQ((*r)->type, REDIS_REPLY_ARRAY);
      ASSERT_EQ((*r)->elements, 16384u);
      const redisReply& last = *(*r)->element[16383];
      ASSERT_EQ(last.elements, 8u);
      EXPECT_EQ(ReplyText(*last.element[7]->element[0]), host);
    } else {
      EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
      EXPECT_NE(r.status().message().find("CLUSTER: protocol error: a reply of more than 67108864 bytes"),
                std::string::npos)
          << r.status();
    }
  }
}

}  // namespace
}  // namespace swa

#else
TEST(RedisReplyBounds, NotBuilt) { GTEST_SKIP() << "built without hiredis"; }
#endif
