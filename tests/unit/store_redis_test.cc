// The Redis store against a real redis-server started on a free loopback port
// (no persistence) for this test binary and stopped afterwards.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "store/blob.h"
#include "store/blob_auth.h"
#include "store/memory_store.h"
#if defined(SWACACHE_HAVE_REDIS)
#include "store/redis_store.h"
#endif
#include "capi/store_table.h"
#include "store/blob_store.h"
#include "swacache.h"
#include "unit/store_test_util.h"

extern char** environ;

namespace swa {
namespace {

bool OnPath(const char* exe) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::string p = path;
  for (size_t start = 0; start <= p.size();) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    const std::string candidate = p.substr(start, end - start) + "/" + exe;
    if (access(candidate.c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(fd);
    return -1;
  }
  close(fd);
  return ntohs(a.sin_port);
}

// A minimal RESP client, independent of hiredis: sends one command, returns
// the first reply line (e.g. "+PONG", ":42", "$5").
std::string RawCommand(int port, const std::vector<std::string>& args) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return "";
  }
  std::string cmd = "*" + std::to_string(args.size()) + "\r\n";
  for (const std::string& s : args) cmd += "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n";
  if (write(fd, cmd.data(), cmd.size()) != ssize_t(cmd.size())) {
    close(fd);
    return "";
  }
  std::string line;
  char c;
  while (read(fd, &c, 1) == 1 && c != '\n') line.push_back(c);
  close(fd);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

class RedisServer {
 public:
  // Starts redis-server; port() < 0 when it could not be started.
  explicit RedisServer(const std::string& password = "") {
    port_ = FreePort();
    if (port_ < 0) return;
    const std::string port = std::to_string(port_);
    std::vector<std::string> args = {"redis-server", "--port", port, "--bind", "127.0.0.1",
                                     "--save", "", "--appendonly", "no", "--daemonize", "no",
                                     "--loglevel", "warning", "--dir", "/tmp"};
    if (!password.empty()) {
      args.push_back("--requirepass");
      args.push_back(password);
    }
    std::vector<char*> argv;
    for (std::string& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    if (posix_spawnp(&pid_, "redis-server", nullptr, nullptr, argv.data(), environ) != 0) {
      pid_ = -1;
      port_ = -1;
      return;
    }
    for (int i = 0; i < 200; ++i) {  // up to 10 s to come up
      const std::string reply = RawCommand(port_, {"PING"});
      if (reply == "+PONG" || reply.rfind("-NOAUTH", 0) == 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    Stop();
    port_ = -1;
  }
  ~RedisServer() { Stop(); }
  void Stop() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int port_ = -1;
};

class RedisStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (OnPath("redis-server")) server_ = new RedisServer();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    swa_store_redis_config_t probe;
    swa_store_redis_config_init(&probe);
    probe.port = 1;  // never reached: only asks whether this build has the store
    swa_kv_store_t t;
    swa_kv_store_init(&t);
    if (swa_store_redis_create(&probe, &t) == SWA_UNIMPLEMENTED)
      GTEST_SKIP() << "this build has no Redis store (hiredis not found at configure time)";
    if (!OnPath("redis-server")) GTEST_SKIP() << "redis-server is not on PATH";
    if (server_ == nullptr || server_->port() < 0) GTEST_SKIP() << "redis-server did not start";
  }

  swa_kv_store_t Create(uint32_t ttl = 0) {
    swa_store_redis_config_t c;
    swa_store_redis_config_init(&c);
    c.port = static_cast<uint32_t>(server_->port());
    c.ttl_seconds = ttl;
    swa_kv_store_t t;
    swa_kv_store_init(&t);
    EXPECT_EQ(swa_store_redis_create(&c, &t), SWA_OK) << swa_last_error();
    return t;
  }

  static RedisServer* server_;
};
RedisServer* RedisStoreTest::server_ = nullptr;

swa_iov_t Iov(const void* p, size_t n) { return {const_cast<void*>(p), n}; }

// Attaches a table the way swa_cache_set_store does (a built-in table is used directly).
void Attach(Cache& cache, const swa_kv_store_t& table) {
  absl::StatusOr<std::unique_ptr<KvStore>> kv = capi::AdoptTable(table);
  ASSERT_TRUE(kv.ok()) << kv.status();
  cache.SetStore(std::make_shared<BlobStore>(std::move(*kv), cache.layout().fingerprint()));
}

TEST_F(RedisStoreTest, PutGetExistsRemove) {
  swa_kv_store_t t = Create();
  char msg[SWA_STORE_MESSAGE_BYTES];
  const uint8_t key[] = {'r', 'k', 0, 1};
  const std::string a = "header|", b = std::string(5000, 'p');
  const swa_iov_t put[2] = {Iov(a.data(), a.size()), Iov(b.data(), b.size())};
  ASSERT_EQ(t.put(t.user_data, key, sizeof key, put, 2, msg, sizeof msg), SWA_OK) << msg;
  std::string got(a.size() + b.size(), '\xCC');
  const swa_iov_t get[2] = {Iov(got.data(), 3), Iov(got.data() + 3, got.size() - 3)};
  uint64_t size = got.size();
  ASSERT_EQ(t.get(t.user_data, key, sizeof key, get, 2, &size, msg, sizeof msg), SWA_OK) << msg;
  EXPECT_EQ(got, a + b);
  EXPECT_EQ(size, a.size() + b.size());
  // Wrong size: true size reported.
  std::string small(10, '\xCC');
  const swa_iov_t get_small[1] = {Iov(small.data(), small.size())};
  size = 10;
  ASSERT_EQ(t.get(t.user_data, key, sizeof key, get_small, 1, &size, msg, sizeof msg), SWA_OK);
  EXPECT_EQ(size, a.size() + b.size());
  uint32_t exists = 7;
  ASSERT_EQ(t.exists(t.user_data, key, sizeof key, &exists, msg, sizeof msg), SWA_OK);
  EXPECT_EQ(exists, 1u);
  // The blob is one plain string value on the server.
  EXPECT_EQ(RawCommand(server_->port(), {"STRLEN", std::string("rk\0\1", 4)}),
            ":" + std::to_string(a.size() + b.size()));
  ASSERT_EQ(t.remove(t.user_data, key, sizeof key, msg, sizeof msg), SWA_OK);
  EXPECT_EQ(t.remove(t.user_data, key, sizeof key, msg, sizeof msg), SWA_NOT_FOUND);
  EXPECT_EQ(t.get(t.user_data, key, sizeof key, get, 2, &size, msg, sizeof msg), SWA_NOT_FOUND);
  ASSERT_EQ(t.exists(t.user_data, key, sizeof key, &exists, msg, sizeof msg), SWA_OK);
  EXPECT_EQ(exists, 0u);
  t.release(t.user_data);
}

TEST_F(RedisStoreTest, TtlIsApplied) {
  swa_kv_store_t t = Create(/*ttl=*/300);
  char msg[SWA_STORE_MESSAGE_BYTES];
  const uint8_t key[] = {'t', 't', 'l'};
  const std::string v = "value";
  const swa_iov_t put[1] = {Iov(v.data(), v.size())};
  ASSERT_EQ(t.put(t.user_data, key, 3, put, 1, msg, sizeof msg), SWA_OK) << msg;
  const std::string ttl = RawCommand(server_->port(), {"TTL", "ttl"});
  ASSERT_EQ(ttl.substr(0, 1), ":");
  const int seconds = std::stoi(ttl.substr(1));
  EXPECT_GT(seconds, 250);
  EXPECT_LE(seconds, 300);
  t.release(t.user_data);
}

TEST_F(RedisStoreTest, SlotRoundTripThroughCache) {
  auto cache = swa::testing::MakeCache();
  std::mt19937_64 rng(3);
  swa::testing::FillRandom(cache->pool(), cache->layout().pool_bytes(), rng);
  const uint32_t a = *cache->slots().Alloc(), b = *cache->slots().Alloc();
  ASSERT_TRUE(cache->slots().Set(a, {true, 4242, 4000}).ok());
  Attach(*cache, Create());
  ASSERT_TRUE(swa::testing::Save(*cache, a, "redis-seq").ok());
  std::vector<uint8_t> want = swa::testing::PoolBytes(*cache);
  std::copy(cache->slot_base(a), cache->slot_base(a) + cache->layout().stored_bytes(),
            want.begin() + cache->layout().SlotOffset(b));
  absl::Status st = swa::testing::Restore(*cache, b, "redis-seq");
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_TRUE(swa::testing::PoolBytes(*cache) == want);
  EXPECT_EQ(cache->slots().Get(b)->written_end, 4242);
  EXPECT_EQ(cache->slots().Get(b)->valid_start, 4000);
  EXPECT_TRUE(absl::IsNotFound(swa::testing::Restore(*cache, b, "no-such-seq")));
}

TEST_F(RedisStoreTest, ConcurrentCallsUsePooledConnections) {
  swa_kv_store_t t = Create();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int th = 0; th < 4; ++th) {
    threads.emplace_back([&, th] {
      char msg[SWA_STORE_MESSAGE_BYTES];
      for (int i = 0; i < 100; ++i) {
        const std::string key = "c" + std::to_string(th) + "-" + std::to_string(i % 7);
        const std::string v(1000 + i, static_cast<char>('a' + th));
        const swa_iov_t put[1] = {Iov(v.data(), v.size())};
        const auto* k = reinterpret_cast<const uint8_t*>(key.data());
        if (t.put(t.user_data, k, key.size(), put, 1, msg, sizeof msg) != SWA_OK) ++failures;
        std::string got(v.size(), '\0');
        const swa_iov_t get[1] = {Iov(got.data(), got.size())};
        uint64_t size = got.size();
        if (t.get(t.user_data, k, key.size(), get, 1, &size, msg, sizeof msg) != SWA_OK ||
            got != v)
          ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures, 0);
  t.release(t.user_data);
}

TEST_F(RedisStoreTest, UnreachableServerIsUnavailable) {
  swa_store_redis_config_t c;
  swa_store_redis_config_init(&c);
  c.port = static_cast<uint32_t>(FreePort());  // nothing listens there
  c.timeout_ms = 500;
  swa_kv_store_t t;
  swa_kv_store_init(&t);
  t.user_data = reinterpret_cast<void*>(0x1);  // must stay unchanged on failure
  EXPECT_EQ(swa_store_redis_create(&c, &t), SWA_UNAVAILABLE);
  EXPECT_NE(std::string(swa_last_error()).find("connect"), std::string::npos) << swa_last_error();
  EXPECT_EQ(t.user_data, reinterpret_cast<void*>(0x1));
  c.port = 70000;
  EXPECT_EQ(swa_store_redis_create(&c, &t), SWA_INVALID_ARGUMENT);
}

TEST_F(RedisStoreTest, ServerGoingAwayIsAStatusAndTheSlotIsUntouched) {
  RedisServer own;
  ASSERT_GT(own.port(), 0);
  swa_store_redis_config_t c;
  swa_store_redis_config_init(&c);
  c.port = static_cast<uint32_t>(own.port());
  c.timeout_ms = 1000;
  swa_kv_store_t t;
  swa_kv_store_init(&t);
  ASSERT_EQ(swa_store_redis_create(&c, &t), SWA_OK) << swa_last_error();
  auto cache = swa::testing::MakeCache();
  const uint32_t s = *cache->slots().Alloc();
  Attach(*cache, t);
  ASSERT_TRUE(swa::testing::Save(*cache, s, "k").ok());
  own.Stop();
  const std::vector<uint8_t> pool = swa::testing::PoolBytes(*cache);
  absl::Status st = swa::testing::Restore(*cache, s, "k");
  EXPECT_TRUE(absl::IsUnavailable(st) || absl::IsDeadlineExceeded(st)) << st;
  EXPECT_TRUE(absl::IsUnavailable(swa::testing::Save(*cache, s, "k")) ||
              absl::IsDeadlineExceeded(swa::testing::Save(*cache, s, "k")));
  EXPECT_TRUE(swa::testing::PoolBytes(*cache) == pool);
}

TEST_F(RedisStoreTest, PasswordIsUsedAndCheckedAtCreate) {
  RedisServer secured("s3cret");
  ASSERT_GT(secured.port(), 0);
  swa_store_redis_config_t c;
  swa_store_redis_config_init(&c);
  c.port = static_cast<uint32_t>(secured.port());
  swa_kv_store_t t;
  swa_kv_store_init(&t);
  EXPECT_EQ(swa_store_redis_create(&c, &t), SWA_UNAUTHENTICATED) << swa_last_error();
  c.password = "wrong";
  EXPECT_EQ(swa_store_redis_create(&c, &t), SWA_UNAUTHENTICATED) << swa_last_error();
  c.password = "s3cret";
  ASSERT_EQ(swa_store_redis_create(&c, &t), SWA_OK) << swa_last_error();
  char msg[SWA_STORE_MESSAGE_BYTES];
  uint32_t exists = 9;
  const uint8_t key[] = {'x'};
  EXPECT_EQ(t.exists(t.user_data, key, 1, &exists, msg, sizeof msg), SWA_OK) << msg;
  EXPECT_EQ(exists, 0u);
  t.release(t.user_data);
}

#if defined(SWACACHE_HAVE_REDIS)
std::unique_ptr<RedisStore> Direct(int port) {
  RedisStoreOptions o;
  o.host = "127.0.0.1";
  o.port = static_cast<uint32_t>(port);
  o.max_connections = 1;  // every call on the same connection: it must stay in step
  absl::StatusOr<std::unique_ptr<RedisStore>> s = RedisStore::Connect(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

// GetStreaming (the bulk reply read straight into the pieces): for a blob
// of 1.4 MB (many receives) and of 7 bytes (one), over pieces with an empty
// one in the middle, `landed(n)` never decreases, ends at the size, and each
// time the first n bytes are already the blob's. A blob of another size is
// read and dropped (size reported, no landed); a missing key is NOT_FOUND; a
// key of another type is the server's error; the one connection stays in
// step through all of it (each next call answers correctly).
TEST_F(RedisStoreTest, StreamingGetLandsBytesInOrderAndStaysInStep) {
  std::unique_ptr<RedisStore> store = Direct(server_->port());
  ASSERT_NE(store, nullptr);
  std::mt19937_64 rng(9);
  for (size_t bytes : {size_t{1415040 + 96}, size_t{7}}) {
    std::vector<uint8_t> blob(bytes);
    swa::testing::FillRandom(blob.data(), blob.size(), rng);
    const ConstByteSpan put[1] = {ConstByteSpan(blob.data(), blob.size())};
    ASSERT_TRUE(store->Put("stream", put).ok());
    std::vector<uint8_t> got(bytes, 0xEE);
    const size_t cut = std::min<size_t>(64, bytes / 2);
    const ByteSpan pieces[3] = {ByteSpan(got.data(), cut), ByteSpan(got.data() + cut, 0),
                                ByteSpan(got.data() + cut, bytes - cut)};
    std::vector<uint64_t> calls;
    bool prefix_ok = true;
    absl::StatusOr<uint64_t> size = store->GetStreaming("stream", pieces, [&](uint64_t n) {
      calls.push_back(n);
      prefix_ok = prefix_ok && std::memcmp(got.data(), blob.data(), n) == 0;
    });
    ASSERT_TRUE(size.ok()) << size.status();
    EXPECT_EQ(*size, bytes);
    EXPECT_EQ(got, blob);
    ASSERT_FALSE(calls.empty());
    EXPECT_EQ(calls.back(), bytes);
    EXPECT_TRUE(std::is_sorted(calls.begin(), calls.end()));
    EXPECT_TRUE(prefix_ok);
    if (bytes > 100000) EXPECT_GT(calls.size(), 2u) << "a 1.4 MB reply arrives in parts";
    // Another size: dropped, size reported, no landed.
    std::vector<uint8_t> small(3);
    const ByteSpan one[1] = {ByteSpan(small.data(), small.size())};
    calls.clear();
    size = store->GetStreaming("stream", one, [&](uint64_t n) { calls.push_back(n); });
    ASSERT_TRUE(size.ok()) << size.status();
    EXPECT_EQ(*size, bytes);
    EXPECT_TRUE(calls.empty());
    // Still in step: a plain Get of the right size.
    std::vector<uint8_t> again(bytes);
    const ByteSpan whole[1] = {ByteSpan(again.data(), again.size())};
    ASSERT_EQ(*store->Get("stream", whole), bytes);
    EXPECT_EQ(again, blob);
  }
  std::vector<uint8_t> buf(5);
  const ByteSpan five[1] = {ByteSpan(buf.data(), buf.size())};
  EXPECT_EQ(store->GetStreaming("no-such-key", five, nullptr).status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_EQ(RawCommand(server_->port(), {"RPUSH", "a-list", "x"}), ":1");
  const absl::StatusOr<uint64_t> wrong = store->GetStreaming("a-list", five, nullptr);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kUnknown) << wrong.status();
  EXPECT_NE(std::string(wrong.status().message()).find("WRONGTYPE"), std::string::npos);
  EXPECT_EQ(*store->Exists("stream"), true);  // still in step
}

// A cache with a store secret restores through Redis with the chunk digests
// hashed as the reply arrives (64-byte chunks: many per receive), and refuses
// altered blobs with the slot unchanged.
TEST_F(RedisStoreTest, TaggedRestoreHashesWhileTheBlobArrives) {
  for (uint8_t chunk_log2 : {uint8_t{6}, uint8_t{16}, uint8_t{0}}) {
    CacheOptions options;
    options.store_security.secret = *BlobSecret::Create(std::vector<uint8_t>(32, 0x3C), "secret");
    options.store_security.tag_chunk_log2 = chunk_log2;
    options.store_security.tag_threads = 2;
    std::unique_ptr<Cache> cache = std::move(*Cache::Create(swa::testing::SmallSpec(), options));
    std::unique_ptr<RedisStore> direct = Direct(server_->port());
    ASSERT_NE(direct, nullptr);
    RedisStore* raw = direct.get();
    cache->SetStore(std::make_shared<BlobStore>(std::move(direct), cache->layout().fingerprint(),
                                                cache->store_security()));
    std::mt19937_64 rng(chunk_log2);
    swa::testing::FillRandom(cache->pool(), cache->layout().pool_bytes(), rng);
    const uint32_t a = *cache->slots().Alloc(), b = *cache->slots().Alloc();
    ASSERT_TRUE(cache->slots().Set(a, {true, 40, 9, 41}).ok());
    ASSERT_TRUE(swa::testing::Save(*cache, a, "tagged").ok());
    ASSERT_TRUE(swa::testing::Restore(*cache, b, "tagged").ok());
    EXPECT_EQ(std::memcmp(cache->slot_base(a), cache->slot_base(b), cache->layout().stored_bytes()),
              0);
    // Flip bits across the blob (header, every chunk, tag): each refused.
    const std::string full = (*cache->store())->FullKey("tagged");
    std::vector<uint8_t> blob(kBlobHeaderBytes + cache->layout().stored_bytes() + kBlobTagBytes);
    const ByteSpan whole[1] = {ByteSpan(blob.data(), blob.size())};
    ASSERT_EQ(*raw->Get(full, whole), blob.size());
    const uint32_t c = *cache->slots().Alloc();
    for (size_t byte = 0; byte < blob.size(); byte += 61) {
      std::vector<uint8_t> bad = blob;
      bad[byte] ^= static_cast<uint8_t>(1u << (byte % 8));
      const ConstByteSpan put[1] = {ConstByteSpan(bad.data(), bad.size())};
      ASSERT_TRUE(raw->Put(full, put).ok());
      const std::vector<uint8_t> before = swa::testing::PoolBytes(*cache);
      const absl::Status st = swa::testing::Restore(*cache, c, "tagged");
      ASSERT_EQ(st.code(), absl::StatusCode::kDataLoss) << "byte " << byte << ": " << st;
      ASSERT_TRUE(swa::testing::PoolBytes(*cache) == before) << "byte " << byte;
    }
  }
}
#endif  // SWACACHE_HAVE_REDIS

}  // namespace
}  // namespace swa
