// The Redis connection and its pool (src/store/redis_connection.h,
// redis_pool.h) against a scripted fake server on a loopback socket (no
// redis-server needed): replies larger than a read, pipelines, a reply that
// trickles past the deadline or stops halfway, a server that closes an idle
// pooled connection or sends a reply nobody asked for (the pool must not hand
// that connection out again: the next request would read the wrong reply),
// OpenSSL's error queue left empty after a failed TLS handshake (a dirty
// queue makes later SSL_get_error calls on the thread, ours or the
// application's, misread their results), the streaming GET's hostile
// replies, and the silence cap (RedisReplyLimits::max_silence) on reads,
// plain and TLS, and on writes. The cluster client against a fake node:
// store_redis_cluster_client_test.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#if defined(SWACACHE_HAVE_REDIS)
#include <hiredis/hiredis.h>
#include <openssl/err.h>

#include <openssl/ssl.h>

#include "store/redis_cluster_store.h"
#include "store/redis_pool.h"
#include "store/redis_tls.h"
#include "unit/redis_fake_server.h"
#include "unit/redis_tls_harness.h"

namespace swa {
namespace {

using namespace fake_redis;

TEST(RedisConnection, RepliesLargerThanAReadAndLongPipelinesArriveWholeAndInOrder) {
  std::mt19937_64 rng(7);
  std::string big(3 * 1024 * 1024 + 17, '\0');
  for (char& c : big) c = static_cast<char>(rng());
  FakeServer server([&](int fd, int) {
    Serve(fd, [&](const std::vector<std::string>& a) {
      if (a[0] == "GET" && a[1] == "big") return Bulk(big);
      return Bulk(a[0] + ":" + a[1] + ":" + std::string(70000, a[1].back()));
    });
  });
  RedisConnectionPool pool = Pool(server);
  // Bounds that fit these replies (a GET through hiredis, EXISTS answered by
  // 70,000-byte strings).
  const RedisReplyLimits fits{4 << 20, 0, 0};
  absl::StatusOr<RedisReply> r = pool.Run({"GET", "big"}, absl::Seconds(10), fits);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(ReplyText(**r) == big);
  std::vector<std::string> keys;
  for (int i = 0; i < 300; ++i) keys.push_back("k" + std::to_string(i));
  std::vector<std::vector<std::string_view>> commands;
  for (const std::string& k : keys) commands.push_back({"EXISTS", k});
  std::vector<RedisReply> replies;
  const absl::Status piped = pool.RunPipeline(commands, absl::Seconds(10), fits, &replies);
  ASSERT_TRUE(piped.ok()) << piped;
  ASSERT_EQ(replies.size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i)
    EXPECT_EQ(ReplyText(*replies[i]), "EXISTS:" + keys[i] + ":" + std::string(70000, keys[i].back()));
  EXPECT_EQ(server.accepted(), 1);
}

TEST(RedisConnection, AReplyTricklingPastTheDeadlineTimesOutAndTheConnectionIsNotReused) {
  FakeServer server([&](int fd, int index) {
    if (index == 0) {  // one byte every 30 ms, then a stale reply for the next command
      std::string buf;
      if (ReadCommand(fd, &buf).empty()) return;
      for (char c : Bulk(std::string(40, 'x'))) {
        if (!WriteAll(fd, std::string(1, c))) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
      }
      Serve(fd, [](const std::vector<std::string>&) { return std::string("+STALE\r\n"); });
      return;
    }
    Serve(fd, [](const std::vector<std::string>&) { return std::string("+FRESH\r\n"); });
  });
  RedisConnectionPool pool = Pool(server);
  const absl::Time start = absl::Now();
  absl::StatusOr<RedisReply> r = pool.Run({"GET", "slow"}, absl::Milliseconds(300), kRedisShortReply);
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << Text(r);
  EXPECT_LT(took, absl::Milliseconds(1000)) << "the deadline did not bound the read";
  EXPECT_NE(r.status().message().find("fake redis 127.0.0.1:"), std::string::npos) << r.status();
  EXPECT_EQ(Text(pool.Run({"GET", "next"}, absl::Seconds(2), kRedisShortReply)), "FRESH");
}

TEST(RedisConnection, AServerClosingMidReplyIsUnavailableAndTheNextCallReconnects) {
  FakeServer server([&](int fd, int index) {
    if (index == 0) {
      std::string buf;
      if (ReadCommand(fd, &buf).empty()) return;
      WriteAll(fd, "$100\r\nonly part of it");
      return;  // closed
    }
    Serve(fd, [](const std::vector<std::string>&) { return std::string("+FRESH\r\n"); });
  });
  RedisConnectionPool pool = Pool(server);
  absl::StatusOr<RedisReply> r = pool.Run({"GET", "k"}, absl::Seconds(2), kRedisShortReply);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << Text(r);
  EXPECT_NE(r.status().message().find("closed"), std::string::npos) << r.status();
  EXPECT_EQ(Text(pool.Run({"GET", "k"}, absl::Seconds(2), kRedisShortReply)), "FRESH");
}

// The server answers one command with two replies: the connection is out of
// step, and the pool must not hand it out again (the next caller would get
// "EXTRA" for its own request).
TEST(RedisConnection, AConnectionWithAnUnaskedReplyIsNotReused) {
  FakeServer server([&](int fd, int index) {
    if (index == 0) {
      Serve(fd, [](const std::vector<std::string>&) { return std::string("+ONE\r\n+EXTRA\r\n"); });
      return;
    }
    Serve(fd, [](const std::vector<std::string>&) { return std::string("+FRESH\r\n"); });
  });
  RedisConnectionPool pool = Pool(server);
  EXPECT_EQ(Text(pool.Run({"GET", "a"}, absl::Seconds(2), kRedisShortReply)), "ONE");
  EXPECT_EQ(Text(pool.Run({"GET", "b"}, absl::Seconds(2), kRedisShortReply)), "FRESH");
}

// The server closes an idle pooled connection (Redis's `timeout`, a restart,
// CLIENT KILL): the next call notices and connects anew instead of failing.
TEST(RedisConnection, AnIdleConnectionTheServerClosedIsNotHandedOut) {
  std::atomic<bool> closed{false};
  FakeServer server([&](int fd, int index) {
    if (index == 0) {
      std::string buf;
      if (ReadCommand(fd, &buf).empty()) return;
      WriteAll(fd, "+ONE\r\n");
      shutdown(fd, SHUT_RDWR);
      closed = true;
      return;
    }
    Serve(fd, [](const std::vector<std::string>&) { return std::string("+FRESH\r\n"); });
  });
  RedisConnectionPool pool = Pool(server);
  EXPECT_EQ(Text(pool.Run({"GET", "a"}, absl::Seconds(2), kRedisShortReply)), "ONE");
  while (!closed) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the FIN reaches us
  EXPECT_EQ(Text(pool.Run({"GET", "b"}, absl::Seconds(2), kRedisShortReply)), "FRESH");
}

// hiredis 0.14 sums a command's encoded length in an int: a value of 2 GiB or
// more must be refused before it is formatted (else it allocates a wrapped,
// too small buffer and copies past its end). The views claim lengths that
// nothing backs: they must not be read.
TEST(RedisConnection, ACommandPastTwoGibibytesIsRefusedBeforeItIsEncoded) {
  FakeServer server([&](int fd, int) {
    Serve(fd, [](const std::vector<std::string>&) { return std::string("+OK\r\n"); });
  });
  RedisConnectionPool pool = Pool(server);
  const std::string small(64, 'v');
  for (const uint64_t claimed : {(uint64_t{1} << 31) + 16, (uint64_t{1} << 32) + 16, (uint64_t{1} << 32) - 36}) {
    const std::string_view huge(small.data(), static_cast<size_t>(claimed));
    absl::StatusOr<RedisReply> r = pool.Run({"SET", "k", huge}, absl::Seconds(2), kRedisShortReply);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << claimed << ": " << Text(r);
    EXPECT_NE(r.status().message().find("SET"), std::string::npos) << r.status();
    EXPECT_NE(r.status().message().find("fake redis 127.0.0.1:"), std::string::npos) << r.status();
  }
  EXPECT_EQ(Text(pool.Run({"SET", "k", small}, absl::Seconds(2), kRedisShortReply)), "OK");
}

// A TLS client against a server that does not speak TLS: the handshake fails
// (UNAVAILABLE), and OpenSSL's error queue of this thread is empty afterwards.
TEST(RedisConnection, AFailedTlsHandshakeLeavesNoOpenSslErrorQueued) {
  RedisTlsOptions o;
  o.enabled = true;
  o.verify = false;
  ERR_clear_error();
  absl::StatusOr<std::shared_ptr<const RedisTlsContext>> tls = RedisTlsContext::Create(o, "test");
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_EQ(ERR_peek_error(), 0ul) << "after Create (the system's CA paths): " << TakeOpenSslErrors();
  for (const bool answer : {false, true}) {
    FakeServer server([&](int fd, int) {
      char hello[4096];
      if (recv(fd, hello, sizeof hello, 0) <= 0) return;  // the ClientHello
      if (answer) WriteAll(fd, "-ERR Protocol error: expected '*', got '\x16'\r\n");
    });
    RedisConnectionPool pool = Pool(server, *tls);
    ERR_clear_error();
    absl::StatusOr<RedisReply> r = pool.Run({"PING"}, absl::Seconds(2), kRedisShortReply);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << Text(r);
    EXPECT_EQ(ERR_peek_error(), 0ul) << (answer ? "plain reply: " : "closed: ") << TakeOpenSslErrors();
    ERR_clear_error();
  }
}

// One GET read by ReadBulkInto into a 10-byte buffer in three pieces (4, an
// empty one, 6), poisoned first, with what `landed` reported.
struct BulkGet {
  absl::Status status;
  RedisConnection::BulkRead read;
  std::string bytes;  // the pieces afterwards
  uint64_t last_landed = 0;
  bool landed_in_order = true;
  absl::Duration took;
};

BulkGet GetInto(RedisConnectionPool& pool, absl::Duration timeout) {
  BulkGet g;
  std::vector<uint8_t> a(4, '#'), b(6, '#');
  const ByteSpan pieces[3] = {ByteSpan(a.data(), a.size()), ByteSpan(), ByteSpan(b.data(), b.size())};
  const absl::Time start = absl::Now();
  g.status = pool.RunWith({"GET", "k"}, timeout, [&](RedisConnection& c) {
    absl::StatusOr<RedisConnection::BulkRead> r =
        c.ReadBulkInto("GET", timeout, pieces, [&](uint64_t n) {
          g.landed_in_order = g.landed_in_order && n > g.last_landed && n <= 10;
          g.last_landed = n;
        });
    if (!r.ok()) return r.status();
    g.read = std::move(*r);
    return absl::OkStatus();
  });
  g.took = absl::Now() - start;
  g.bytes = std::string(a.begin(), a.end()) + std::string(b.begin(), b.end());
  return g;
}

// A streaming GET against a broken or hostile server: every reply that is not
// a well-formed bulk string, nil or other reply followed by nothing is a
// prompt UNAVAILABLE (DEADLINE_EXCEEDED when the server goes quiet) and the
// connection is not used again; a bulk of another size is read and dropped
// with the buffer untouched and the connection kept; a failed read never
// reports the whole size as landed; a length no store holds allocates
// nothing; a non-bulk reply is buffered up to 1 MiB only. (Before the fix:
// "$/" and "$0/" read as nil, bytes after a nil waited for the timeout, and
// the whole size was reported as landed before the bulk's CRLF was checked.)
TEST(RedisConnection, AStreamingGetOfAHostileReplyIsAPreciseStatusAndNeverAnOutOfStepConnection) {
  enum Outcome { kProtocolError, kTimeout, kNil, kOther, kOtherSize, kWhole };
  struct Case {
    const char* name;
    std::string reply;
    bool close_after;  // the server closes once it has written `reply`
    Outcome outcome;
    uint64_t size = 0;  // kOtherSize
  };
  const std::vector<Case> cases = {
      {"good", "$10\r\n0123456789\r\n", false, kWhole},
      {"nil", "$-1\r\n", false, kNil},
      {"error reply", "-ERR wrong\r\n", false, kOther},
      {"integer", ":5\r\n", false, kOther},
      {"array", "*1\r\n$1\r\nx\r\n", false, kProtocolError},
      {"array of 2^31 - 1 elements", "*2147483647\r\n", false, kProtocolError},
      {"array header in parts", "*21", false, kProtocolError},
      {"longer bulk", "$12\r\nabcdefghijkl\r\n", false, kOtherSize, 12},
      {"shorter bulk", "$3\r\nabc\r\n", false, kOtherSize, 3},
      {"empty bulk", "$0\r\n\r\n", false, kOtherSize, 0},
      {"slash length (reads as -1 digit by digit)", "$/\r\n", false, kProtocolError},
      {"zero-slash length", "$0/\r\n", false, kProtocolError},
      {"nil then bytes", "$-1\r\n+EXTRA\r\n", false, kProtocolError},
      {"-2", "$-2\r\n", false, kProtocolError},
      {"plus sign", "$+10\r\n0123456789\r\n", false, kProtocolError},
      {"no length", "$\r\n", false, kProtocolError},
      {"2^55", "$36028797018963968\r\n", false, kProtocolError},
      {"overflowing length", "$99999999999999999999999\r\n", false, kProtocolError},
      {"CR without LF", "$1\r0\r\n", false, kProtocolError},
      {"length line without end", "$1" + std::string(40, '0'), false, kProtocolError},
      {"bytes after the bulk", "$10\r\n0123456789\r\nEXTRA", false, kProtocolError},
      {"no CRLF after the bulk", "$10\r\n0123456789XY", false, kProtocolError},
      {"endless simple string", "+" + std::string(2 << 20, 'x'), false, kProtocolError},
      {"closed mid-bulk", "$10\r\n01234", true, kProtocolError},
      {"closed mid-header", "$1", true, kProtocolError},
      {"closed before the CRLF", "$10\r\n0123456789", true, kProtocolError},
      {"quiet mid-bulk", "$10\r\n01234", false, kTimeout},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    FakeServer server([&](int fd, int index) {
      std::string buf;
      if (index == 0) {
        if (ReadCommand(fd, &buf).empty()) return;
        if (!WriteAll(fd, c.reply) || c.close_after) return;
      }
      // Later commands: a 10-byte value naming the connection.
      Serve(fd, [index](const std::vector<std::string>&) {
        return Bulk(index == 0 ? "FIRST-CONN" : "NEXT--CONN");
      });
    });
    RedisConnectionPool pool = Pool(server);
    const absl::Duration timeout = c.outcome == kTimeout ? absl::Milliseconds(300) : absl::Seconds(5);
    BulkGet g = GetInto(pool, timeout);
    EXPECT_LT(g.took, absl::Seconds(3)) << "not prompt";
    EXPECT_TRUE(g.landed_in_order);
    const bool in_step = c.outcome == kNil || c.outcome == kOther || c.outcome == kOtherSize ||
                         c.outcome == kWhole;
    if (in_step) {
      ASSERT_TRUE(g.status.ok()) << g.status;
    } else {
      EXPECT_EQ(g.status.code(), c.outcome == kTimeout ? absl::StatusCode::kDeadlineExceeded
                                                       : absl::StatusCode::kUnavailable)
          << g.status;
      EXPECT_NE(g.status.message().find("fake redis 127.0.0.1:"), std::string::npos) << g.status;
      EXPECT_LT(g.last_landed, 10u) << "a failed read reported the whole blob as landed";
    }
    switch (c.outcome) {
      case kWhole:
        EXPECT_EQ(g.read.kind, RedisConnection::BulkRead::kBulk);
        EXPECT_EQ(g.read.size, 10u);
        EXPECT_EQ(g.bytes, "0123456789");
        EXPECT_EQ(g.last_landed, 10u);
        break;
      case kNil:
        EXPECT_EQ(g.read.kind, RedisConnection::BulkRead::kNil);
        break;
      case kOther:
        EXPECT_EQ(g.read.kind, RedisConnection::BulkRead::kOther);
        break;
      case kOtherSize:
        EXPECT_EQ(g.read.kind, RedisConnection::BulkRead::kBulk);
        EXPECT_EQ(g.read.size, c.size);
        break;
      default:
        break;
    }
    if (in_step && c.outcome != kWhole) {
      EXPECT_EQ(g.bytes, "##########") << "the buffer was written";
      EXPECT_EQ(g.last_landed, 0u);
    }
    // The next GET gets its own reply: on the same connection when the last
    // one left it in step, else on a new one.
    BulkGet next = GetInto(pool, absl::Seconds(5));
    ASSERT_TRUE(next.status.ok()) << next.status;
    EXPECT_EQ(next.bytes, in_step ? "FIRST-CONN" : "NEXT--CONN");
  }
}

// RedisReplyLimits::max_silence, plain and TLS: a reply whose bytes (over
// TLS: the bytes of its one TLS record, so that OpenSSL sees a partial record
// at each piece) come in 8 pieces 200 ms apart is read whole under a 1000 ms
// silence cap although it takes 1.4 s; the next command, never answered, is
// UNAVAILABLE "no byte for 300 ms" long before the 10 s timeout, naming the
// server.
TEST(RedisConnection, ASilenceCapCutsOffASilentServerButNotOneThatKeepsSending) {
  testing::TlsFiles files;
  ASSERT_TRUE(files.ok()) << files.error();
  SSL_CTX* server_ctx = SSL_CTX_new(TLS_server_method());
  ASSERT_NE(server_ctx, nullptr);
  ASSERT_EQ(SSL_CTX_use_certificate_chain_file(server_ctx, files.path("server.crt").c_str()), 1);
  ASSERT_EQ(SSL_CTX_use_PrivateKey_file(server_ctx, files.path("server.key").c_str(), SSL_FILETYPE_PEM), 1);
  std::mt19937_64 rng(11);
  std::string payload(3000, '\0');
  for (char& c : payload) c = static_cast<char>('a' + rng() % 26);
  for (const bool tls : {false, true}) {
    SCOPED_TRACE(tls ? "TLS" : "plain");
    FakeServer server([&](int fd, int) {
      SSL* ssl = nullptr;
      BIO* out = nullptr;  // TLS: the records SSL_write makes, sent by hand
      std::string buf;
      auto next_command = [&] {
        if (!tls) return !ReadCommand(fd, &buf).empty();
        char b[4096];
        return SSL_read(ssl, b, sizeof b) > 0;  // a command is one short record
      };
      if (tls) {
        ssl = SSL_new(server_ctx);
        SSL_set_fd(ssl, fd);
        if (SSL_accept(ssl) != 1) return SSL_free(ssl);
        out = BIO_new(BIO_s_mem());
        SSL_set0_wbio(ssl, out);  // owned by ssl now
      }
      if (next_command()) {
        std::string wire = Bulk(payload);
        if (tls) {
          SSL_write(ssl, wire.data(), static_cast<int>(wire.size()));
          wire.clear();
          char b[4096];
          for (int n; (n = BIO_read(out, b, sizeof b)) > 0;) wire.append(b, static_cast<size_t>(n));
        }
        const size_t piece = wire.size() / 8 + 1;
        for (size_t at = 0; at < wire.size(); at += piece) {
          if (at > 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
          if (!WriteAll(fd, std::string_view(wire).substr(at, piece))) break;
        }
        while (next_command()) {
        }  // never answered
      }
      if (ssl != nullptr) SSL_free(ssl);
    });
    std::shared_ptr<const RedisTlsContext> client_tls;
    if (tls) {
      RedisTlsOptions o;
      o.enabled = true;
      o.ca_file = files.path("ca.crt");
      absl::StatusOr<std::shared_ptr<const RedisTlsContext>> made = RedisTlsContext::Create(o, "test");
      ASSERT_TRUE(made.ok()) << made.status();
      client_tls = *made;
    }
    RedisConnectionPool pool = Pool(server, client_tls);
    RedisReplyLimits limits{1 << 20, 0, 0};
    limits.max_silence = absl::Milliseconds(1000);
    absl::Time start = absl::Now();
    absl::StatusOr<RedisReply> r = pool.Run({"GET", "slow"}, absl::Seconds(10), limits);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(ReplyText(**r) == payload);
    EXPECT_GE(absl::Now() - start, absl::Milliseconds(1400)) << "the reply came faster than it was sent";
    limits.max_silence = absl::Milliseconds(300);
    start = absl::Now();
    r = pool.Run({"GET", "never"}, absl::Seconds(10), limits);
    EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << "the silence cap did not cut the read off";
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << Text(r);
    EXPECT_NE(r.status().message().find("fake redis 127.0.0.1:" + std::to_string(server.port()) +
                                        ": GET: no byte for 300 ms"),
              std::string::npos)
        << r.status();
    EXPECT_EQ(server.accepted(), 1);
  }
  SSL_CTX_free(server_ctx);
}

// A server that takes no byte of a command (it never reads: a 32 MiB SET
// fills the socket buffers) is UNAVAILABLE "no byte taken for 300 ms" under a
// 300 ms silence cap, not after the 10 s timeout.
TEST(RedisConnection, ASilenceCapCutsOffAServerThatTakesNoByteOfTheCommand) {
  std::atomic<bool> done{false};
  FakeServer server([&](int, int) {
    // Never reads (the client's close cannot reach it: its FIN waits behind
    // the bytes the server does not take).
    for (int i = 0; i < 1000 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  });
  RedisConnectionPool pool = Pool(server);
  const std::string value(32 << 20, 'v');
  RedisReplyLimits limits = kRedisShortReply;
  limits.max_silence = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  absl::StatusOr<RedisReply> r = pool.Run({"SET", "k", value}, absl::Seconds(10), limits);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << "the silence cap did not cut the write off";
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << Text(r);
  EXPECT_NE(r.status().message().find("SET: no byte taken for 300 ms"), std::string::npos) << r.status();
  done = true;
}

}  // namespace
}  // namespace swa

#else
TEST(RedisConnection, NotBuilt) { GTEST_SKIP() << "built without hiredis"; }
#endif
