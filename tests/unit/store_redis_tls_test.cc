// The Redis store over TLS and with ACL users, against a real redis-server
// started here with a TLS port and certificates made by the openssl CLI
// (unit/redis_tls_harness.h): round trips, a wrong CA, an expired server
// certificate, a wrong server name, a plain-TCP client on the TLS port and a
// TLS client on the plain port, a required client certificate, a server that
// drops the TLS connection, and ACL users with and without the permissions.
// Skipped only when the build has no Redis store, redis-server is missing, or
// redis-server was built without TLS.
#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "swacache.h"
#include "unit/redis_tls_harness.h"

#if defined(SWACACHE_HAVE_REDIS)

namespace swa {
namespace {

using swa::testing::TlsFiles;
using swa::testing::TlsRedisServer;

swa_iov_t Iov(const void* p, size_t n) { return {const_cast<void*>(p), n}; }

std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

class RedisTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!swa::testing::ExeOnPath("redis-server")) return;
    files_ = new TlsFiles();
    if (files_->ok()) server_ = new TlsRedisServer(*files_, {});
  }
  static void TearDownTestSuite() {
    delete server_;
    delete files_;
    server_ = nullptr;
    files_ = nullptr;
  }
  void SetUp() override {
    if (!swa::testing::ExeOnPath("redis-server")) GTEST_SKIP() << "redis-server is not on PATH";
    ASSERT_TRUE(files_->ok()) << files_->error();
    if (server_->LacksTls())
      GTEST_SKIP() << "this redis-server has no TLS support (--tls-port refused): " << server_->error();
    ASSERT_TRUE(server_->ok()) << server_->error();
  }

  // A TLS config for the shared server, verifying against the test CA.
  swa_store_redis_config_t Config(int port = -1) const {
    swa_store_redis_config_t c;
    swa_store_redis_config_init(&c);
    c.port = static_cast<uint32_t>(port < 0 ? server_->tls_port() : port);
    c.timeout_ms = 2000;
    c.tls = 1;
    ca_ = files_->path("ca.crt");
    c.tls_ca_file = ca_.c_str();
    return c;
  }
  // swa_store_redis_create: the status, the table in *t on success (released
  // by the caller), the message in *error otherwise.
  static swa_status_t Create(const swa_store_redis_config_t& c, swa_kv_store_t* t, std::string* error) {
    swa_kv_store_init(t);
    const swa_status_t s = swa_store_redis_create(&c, t);
    if (s != SWA_OK) *error = swa_last_error();
    return s;
  }
  // Create that must fail with `want`, its message naming the server's
  // address and containing `mentions`.
  void ExpectCreateFails(const swa_store_redis_config_t& c, swa_status_t want, const std::string& mentions) {
    swa_kv_store_t t;
    std::string error;
    const swa_status_t s = Create(c, &t, &error);
    if (s == SWA_OK) t.release(t.user_data);
    EXPECT_EQ(s, want) << error;
    EXPECT_NE(error.find("127.0.0.1:" + std::to_string(c.port)), std::string::npos) << error;
    EXPECT_NE(error.find(mentions), std::string::npos) << "expected \"" << mentions << "\" in: " << error;
  }
  // Put, exists, get (exact bytes), remove of random blobs through `t`.
  static void RoundTrip(const swa_kv_store_t& t, const std::string& key, uint64_t seed) {
    char msg[SWA_STORE_MESSAGE_BYTES];
    const auto* k = reinterpret_cast<const uint8_t*>(key.data());
    for (size_t bytes : {size_t{1}, size_t{4097}, size_t{1415104}}) {  // up to a DeepSeek-V4 blob
      const std::string head = RandomBytes(64, seed), body = RandomBytes(bytes, seed + bytes);
      const swa_iov_t put[2] = {Iov(head.data(), head.size()), Iov(body.data(), body.size())};
      ASSERT_EQ(t.put(t.user_data, k, key.size(), put, 2, msg, sizeof msg), SWA_OK) << msg;
      uint32_t exists = 7;
      ASSERT_EQ(t.exists(t.user_data, k, key.size(), &exists, msg, sizeof msg), SWA_OK) << msg;
      EXPECT_EQ(exists, 1u);
      std::string got(head.size() + body.size(), '\xA5');
      const swa_iov_t get[1] = {Iov(got.data(), got.size())};
      uint64_t size = got.size();
      ASSERT_EQ(t.get(t.user_data, k, key.size(), get, 1, &size, msg, sizeof msg), SWA_OK) << msg;
      EXPECT_EQ(size, got.size());
      EXPECT_TRUE(got == head + body) << "bytes differ after a round trip of " << bytes;
      ASSERT_EQ(t.remove(t.user_data, k, key.size(), msg, sizeof msg), SWA_OK) << msg;
      ASSERT_EQ(t.exists(t.user_data, k, key.size(), &exists, msg, sizeof msg), SWA_OK) << msg;
      EXPECT_EQ(exists, 0u);
    }
  }

  static TlsFiles* files_;
  static TlsRedisServer* server_;
  mutable std::string ca_;
};
TlsFiles* RedisTlsTest::files_ = nullptr;
TlsRedisServer* RedisTlsTest::server_ = nullptr;

TEST_F(RedisTlsTest, RoundTripsVerifiedByCaFileCaDirAndServerNames) {
  const std::string ca_dir = files_->path("cadir");
  struct Case {
    const char* what;
    bool use_dir;
    const char* server_name;
  } cases[] = {{"CA file, the IP SAN", false, nullptr},
               {"CA folder", true, nullptr},
               {"DNS SAN redis.test", false, "redis.test"},
               {"DNS SAN localhost", false, "localhost"}};
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    swa_store_redis_config_t c = Config();
    if (k.use_dir) {
      c.tls_ca_file = nullptr;
      c.tls_ca_dir = ca_dir.c_str();
    }
    c.tls_server_name = k.server_name;
    swa_kv_store_t t;
    std::string error;
    ASSERT_EQ(Create(c, &t, &error), SWA_OK) << error;
    RoundTrip(t, std::string("tls-key-") + k.what, 11);
    t.release(t.user_data);
  }
  // What the store wrote over TLS is a plain value on the server.
  swa_kv_store_t t;
  std::string error;
  ASSERT_EQ(Create(Config(), &t, &error), SWA_OK) << error;
  char msg[SWA_STORE_MESSAGE_BYTES];
  const std::string v = RandomBytes(777, 5);
  const swa_iov_t put[1] = {Iov(v.data(), v.size())};
  ASSERT_EQ(t.put(t.user_data, reinterpret_cast<const uint8_t*>("k1"), 2, put, 1, msg, sizeof msg), SWA_OK);
  EXPECT_EQ(server_->Command({"STRLEN", "k1"}).integer, 777);
  t.release(t.user_data);
}

TEST_F(RedisTlsTest, ConcurrentCallsShareTheTlsPool) {
  swa_store_redis_config_t c = Config();
  c.max_connections = 2;  // four threads: connections are also made and closed
  swa_kv_store_t t;
  std::string error;
  ASSERT_EQ(Create(c, &t, &error), SWA_OK) << error;
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      char msg[SWA_STORE_MESSAGE_BYTES];
      for (int i = 0; i < 50; ++i) {
        const std::string key = "conc-" + std::to_string(w) + "-" + std::to_string(i);
        const std::string v = RandomBytes(1000 + i * 37, w * 1000 + i);
        const swa_iov_t put[1] = {Iov(v.data(), v.size())};
        const auto* k = reinterpret_cast<const uint8_t*>(key.data());
        if (t.put(t.user_data, k, key.size(), put, 1, msg, sizeof msg) != SWA_OK) ++bad;
        std::string got(v.size(), '\0');
        const swa_iov_t get[1] = {Iov(got.data(), got.size())};
        uint64_t size = got.size();
        if (t.get(t.user_data, k, key.size(), get, 1, &size, msg, sizeof msg) != SWA_OK || got != v) ++bad;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  t.release(t.user_data);
}

// One caller, one pooled TLS connection: calls reuse it, none reconnects
// (the pool's idle check must not take post-handshake records, such as TLS
// 1.3 session tickets, for a closed or out-of-step connection).
TEST_F(RedisTlsTest, SequentialCallsReuseOnePooledTlsConnection) {
  auto connections = [&] {
    const std::string info = server_->Command({"INFO", "stats"}).str;
    const size_t at = info.find("total_connections_received:");
    return at == std::string::npos ? -1 : std::stoll(info.substr(at + 27));
  };
  swa_kv_store_t t;
  std::string error;
  ASSERT_EQ(Create(Config(), &t, &error), SWA_OK) << error;
  const long long before = connections();
  ASSERT_GE(before, 0);
  char msg[SWA_STORE_MESSAGE_BYTES];
  const std::string v = RandomBytes(5000, 3);
  const swa_iov_t put[1] = {Iov(v.data(), v.size())};
  for (int i = 0; i < 20; ++i) {
    const std::string key = "reuse-" + std::to_string(i);
    const auto* k = reinterpret_cast<const uint8_t*>(key.data());
    ASSERT_EQ(t.put(t.user_data, k, key.size(), put, 1, msg, sizeof msg), SWA_OK) << msg;
    uint32_t exists = 7;
    ASSERT_EQ(t.exists(t.user_data, k, key.size(), &exists, msg, sizeof msg), SWA_OK) << msg;
  }
  // The second INFO's own admin connection is the one new connection.
  EXPECT_EQ(connections() - before, 1);
  t.release(t.user_data);
}

TEST_F(RedisTlsTest, WrongCaIsUnauthenticated) {
  swa_store_redis_config_t c = Config();
  const std::string other = files_->path("otherca.crt");
  c.tls_ca_file = other.c_str();
  ExpectCreateFails(c, SWA_UNAUTHENTICATED, "certificate failed verification");
  // Without verification the same server is reachable (encrypted, not authenticated).
  c.tls_verify = 0;
  swa_kv_store_t t;
  std::string error;
  ASSERT_EQ(Create(c, &t, &error), SWA_OK) << error;
  RoundTrip(t, "noverify", 3);
  t.release(t.user_data);
}

TEST_F(RedisTlsTest, ExpiredServerCertificateIsUnauthenticated) {
  TlsRedisServer expired(*files_, {}, "expired");
  ASSERT_TRUE(expired.ok()) << expired.error();
  ExpectCreateFails(Config(expired.tls_port()), SWA_UNAUTHENTICATED, "certificate has expired");
}

TEST_F(RedisTlsTest, WrongServerNameIsUnauthenticated) {
  swa_store_redis_config_t c = Config();
  c.tls_server_name = "other.test";
  ExpectCreateFails(c, SWA_UNAUTHENTICATED, "other.test");
  ExpectCreateFails(c, SWA_UNAUTHENTICATED, "mismatch");
  c.tls_server_name = "127.0.0.2";  // an IP the certificate does not name
  ExpectCreateFails(c, SWA_UNAUTHENTICATED, "mismatch");
}

TEST_F(RedisTlsTest, PlainClientOnTheTlsPortAndTlsClientOnThePlainPort) {
  swa_store_redis_config_t plain = Config();
  plain.tls = 0;
  plain.tls_ca_file = nullptr;
  ExpectCreateFails(plain, SWA_UNAVAILABLE, "plain-TCP client");
  swa_store_redis_config_t tls = Config(server_->port());
  tls.timeout_ms = 1000;
  ExpectCreateFails(tls, SWA_UNAVAILABLE, "TLS handshake");
}

TEST_F(RedisTlsTest, RequiredClientCertificate) {
  TlsRedisServer strict(*files_, {}, "server", "yes");
  ASSERT_TRUE(strict.ok()) << strict.error();
  // Without one: the server refuses the connection.
  swa_store_redis_config_t c = Config(strict.tls_port());
  ExpectCreateFails(c, SWA_UNAUTHENTICATED, "client certificate");
  // With the client certificate and key: accepted.
  const std::string cert = files_->path("client.crt"), key = files_->path("client.key");
  c.tls_cert_file = cert.c_str();
  c.tls_key_file = key.c_str();
  swa_kv_store_t t;
  std::string error;
  ASSERT_EQ(Create(c, &t, &error), SWA_OK) << error;
  RoundTrip(t, "client-cert", 9);
  t.release(t.user_data);
}

TEST_F(RedisTlsTest, ServerDroppingTheConnectionIsUnavailableNamingIt) {
  swa_store_redis_config_t c = Config();
  c.max_connections = 1;
  swa_kv_store_t t;
  std::string error;
  ASSERT_EQ(Create(c, &t, &error), SWA_OK) << error;
  char msg[SWA_STORE_MESSAGE_BYTES];
  const std::string v = RandomBytes(200000, 1);
  const swa_iov_t put[1] = {Iov(v.data(), v.size())};
  const auto* k = reinterpret_cast<const uint8_t*>("drop");
  ASSERT_EQ(t.put(t.user_data, k, 4, put, 1, msg, sizeof msg), SWA_OK) << msg;
  // The server drops our TLS connection in the middle of a call: a reply over
  // the clients' output-buffer hard limit makes it close the client.
  ASSERT_TRUE(server_->Command({"CONFIG", "SET", "client-output-buffer-limit", "normal 4096 4096 0"}).ok());
  std::string got(v.size(), '\xA5');
  const swa_iov_t get[1] = {Iov(got.data(), got.size())};
  uint64_t size = got.size();
  const swa_status_t dropped = t.get(t.user_data, k, 4, get, 1, &size, msg, sizeof msg);
  ASSERT_TRUE(server_->Command({"CONFIG", "SET", "client-output-buffer-limit", "normal 0 0 0"}).ok());
  EXPECT_EQ(dropped, SWA_UNAVAILABLE) << msg;
  EXPECT_NE(std::string(msg).find("127.0.0.1:" + std::to_string(server_->tls_port())), std::string::npos) << msg;
  // The dead connection was dropped: the next call reconnects over TLS.
  uint32_t exists = 7;
  ASSERT_EQ(t.exists(t.user_data, k, 4, &exists, msg, sizeof msg), SWA_OK) << msg;
  EXPECT_EQ(exists, 1u);
  // The server closes our idle, pooled TLS connection: the next call notices
  // it when it takes the connection and reconnects instead of failing.
  ASSERT_GE(server_->Command({"CLIENT", "KILL", "TYPE", "normal"}).integer, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the close reaches us
  exists = 7;
  EXPECT_EQ(t.exists(t.user_data, k, 4, &exists, msg, sizeof msg), SWA_OK) << msg;
  EXPECT_EQ(exists, 1u);
  t.release(t.user_data);
}

TEST_F(RedisTlsTest, KilledServerIsUnavailableNamingIt) {
  TlsRedisServer doomed(*files_, {});
  ASSERT_TRUE(doomed.ok()) << doomed.error();
  swa_kv_store_t t;
  std::string error;
  ASSERT_EQ(Create(Config(doomed.tls_port()), &t, &error), SWA_OK) << error;
  doomed.Kill();
  char msg[SWA_STORE_MESSAGE_BYTES];
  uint32_t exists = 7;
  EXPECT_EQ(t.exists(t.user_data, reinterpret_cast<const uint8_t*>("x"), 1, &exists, msg, sizeof msg),
            SWA_UNAVAILABLE)
      << msg;
  EXPECT_NE(std::string(msg).find("127.0.0.1:" + std::to_string(doomed.tls_port())), std::string::npos) << msg;
  t.release(t.user_data);
}

TEST_F(RedisTlsTest, AclUsersWithAndWithoutPermissions) {
  ASSERT_EQ(server_->Command({"ACL", "SETUSER", "writer", "on", ">wpw", "~*", "+@all"}).str, "OK");
  ASSERT_EQ(server_->Command({"ACL", "SETUSER", "reader", "on", ">rpw", "~*", "-@all", "+get", "+exists",
                              "+ping"})
                .str,
            "OK");
  for (bool tls : {true, false}) {
    SCOPED_TRACE(tls ? "over TLS" : "plain TCP");
    swa_store_redis_config_t c = Config();
    if (!tls) {
      c = Config(server_->port());
      c.tls = 0;
      c.tls_ca_file = nullptr;
    }
    c.username = "writer";
    c.password = "wpw";
    swa_kv_store_t writer;
    std::string error;
    ASSERT_EQ(Create(c, &writer, &error), SWA_OK) << error;
    RoundTrip(writer, "acl-rt", 21);
    char msg[SWA_STORE_MESSAGE_BYTES];
    const std::string v = RandomBytes(300, 8);
    const swa_iov_t put[1] = {Iov(v.data(), v.size())};
    const auto* k = reinterpret_cast<const uint8_t*>("acl-key");
    ASSERT_EQ(writer.put(writer.user_data, k, 7, put, 1, msg, sizeof msg), SWA_OK) << msg;

    c.password = "not-the-password";
    ExpectCreateFails(c, SWA_UNAUTHENTICATED, "user \"writer\"");
    c.username = "nobody";
    ExpectCreateFails(c, SWA_UNAUTHENTICATED, "WRONGPASS");

    c.username = "reader";
    c.password = "rpw";
    swa_kv_store_t reader;
    ASSERT_EQ(Create(c, &reader, &error), SWA_OK) << error;
    std::string got(v.size(), '\0');
    const swa_iov_t get[1] = {Iov(got.data(), got.size())};
    uint64_t size = got.size();
    ASSERT_EQ(reader.get(reader.user_data, k, 7, get, 1, &size, msg, sizeof msg), SWA_OK) << msg;
    EXPECT_EQ(got, v);
    EXPECT_EQ(reader.put(reader.user_data, k, 7, put, 1, msg, sizeof msg), SWA_PERMISSION_DENIED) << msg;
    EXPECT_NE(std::string(msg).find("NOPERM"), std::string::npos) << msg;
    EXPECT_EQ(reader.remove(reader.user_data, k, 7, msg, sizeof msg), SWA_PERMISSION_DENIED) << msg;
    // The refused calls changed nothing.
    ASSERT_EQ(reader.get(reader.user_data, k, 7, get, 1, &size, msg, sizeof msg), SWA_OK) << msg;
    EXPECT_EQ(got, v);
    reader.release(reader.user_data);
    ASSERT_EQ(writer.remove(writer.user_data, k, 7, msg, sizeof msg), SWA_OK) << msg;
    writer.release(writer.user_data);
  }
  // A user lacking PING fails at create (the store pings to fail early).
  ASSERT_EQ(server_->Command({"ACL", "SETUSER", "mute", "on", ">mpw", "~*", "-@all", "+get"}).str, "OK");
  swa_store_redis_config_t c = Config();
  c.username = "mute";
  c.password = "mpw";
  ExpectCreateFails(c, SWA_PERMISSION_DENIED, "NOPERM");
}

TEST_F(RedisTlsTest, InvalidSettingsAreRefusedBeforeConnecting) {
  auto invalid = [&](swa_store_redis_config_t c, const std::string& mentions) {
    swa_kv_store_t t;
    std::string error;
    EXPECT_EQ(Create(c, &t, &error), SWA_INVALID_ARGUMENT) << error;
    EXPECT_NE(error.find(mentions), std::string::npos) << "expected \"" << mentions << "\" in: " << error;
  };
  swa_store_redis_config_t c = Config();
  c.tls_ca_file = "/nonexistent/ca.pem";
  invalid(c, "/nonexistent/ca.pem");
  c = Config();
  const std::string cert = files_->path("client.crt"), key = files_->path("server.key");
  c.tls_cert_file = cert.c_str();
  invalid(c, "tls_key_file");  // a certificate without its key
  c.tls_key_file = key.c_str();
  invalid(c, "server.key");  // the key of another certificate
  c = Config();
  c.tls = 0;
  invalid(c, "tls = 0");  // TLS files without TLS
  c = Config();
  c.tls = 2;
  invalid(c, "tls = 2");
  c = Config();
  c.tls_verify = 3;
  invalid(c, "tls_verify = 3");
  c = Config();
  c.username = "writer";
  invalid(c, "needs a password");
  c.username = "";
  c.password = "pw";
  invalid(c, "username is empty");
}

}  // namespace
}  // namespace swa

#else
TEST(RedisTlsTest, NeedsHiredis) { GTEST_SKIP() << "this build has no Redis store (hiredis not found)"; }
#endif
