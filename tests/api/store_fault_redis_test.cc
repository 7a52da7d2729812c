// The Redis store under real-world faults, against real redis-server
// processes (tests/api/redis_server.h: killed with the test, even on a crash):
// the server killed and restarted during a save/restore loop, a stalled
// server (SIGSTOP), a blob replaced by garbage or by another key's blob, AUTH
// with a wrong password, and maxmemory with noeviction. Every call gets a
// precise status and a failed restore leaves the slot untouched.
#include <chrono>
#include <string>
#include <thread>

#include "api/redis_server.h"
#include "api/store_fault_util.h"
#include "gtest/gtest.h"

namespace {

using Clock = std::chrono::steady_clock;
using swa_test::RedisServer;
using swa_test::SlotFixture;

class RedisFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!swa_test::BuildHasRedisStore()) GTEST_SKIP() << "this build has no Redis store";
    if (!swa_test::RedisServerOnPath()) GTEST_SKIP() << "redis-server is not on PATH";
  }
  static swa_status_t Attach(SlotFixture& f, int port, uint32_t timeout_ms = 2000,
                             const char* password = nullptr) {
    swa_store_redis_config_t rc;
    swa_store_redis_config_init(&rc);
    rc.port = static_cast<uint32_t>(port);
    rc.timeout_ms = timeout_ms;
    rc.password = password;
    swa_kv_store_t t;
    swa_kv_store_init(&t);
    const swa_status_t s = swa_store_redis_create(&rc, &t);
    if (s != SWA_OK) return s;
    return swa_cache_set_store(f.cache, &t);
  }
};

TEST_F(RedisFaults, KilledAndRestartedDuringSaveRestoreLoop) {
  RedisServer server;
  ASSERT_GT(server.port(), 0);
  SlotFixture f;
  ASSERT_EQ(Attach(f, server.port(), 500), SWA_OK) << swa_last_error();
  int ok_before = 0, unavailable = 0, ok_after = 0;
  for (int it = 0; it < 60; ++it) {
    if (it == 20) server.Kill();
    if (it == 40) ASSERT_TRUE(server.Restart());
    const std::string key = "k" + std::to_string(it);
    f.Fill(f.a, it);
    f.Fill(f.b, 1000 + it);
    const swa_test::SlotImage before = f.Image(f.b);
    const swa_status_t save = f.Save(f.a, key);
    const swa_status_t restore = f.Restore(f.b, key);
    if (it < 20 || it >= 40) {
      // Once the server is back every call succeeds: a connection that died
      // with the old server is dropped and replaced, not reported.
      EXPECT_EQ(save, SWA_OK) << "iteration " << it << ": " << swa_last_error();
      EXPECT_EQ(restore, SWA_OK) << "iteration " << it << ": " << swa_last_error();
      EXPECT_TRUE(f.Holds(f.b, it));
      (it < 20 ? ok_before : ok_after) += save == SWA_OK && restore == SWA_OK;
    } else {
      EXPECT_EQ(save, SWA_UNAVAILABLE) << "iteration " << it << ": " << swa_last_error();
      EXPECT_EQ(restore, SWA_UNAVAILABLE) << "iteration " << it << ": " << swa_last_error();
      EXPECT_TRUE(f.Image(f.b) == before);
      unavailable += save == SWA_UNAVAILABLE && restore == SWA_UNAVAILABLE;
    }
  }
  EXPECT_EQ(ok_before, 20);
  EXPECT_EQ(unavailable, 20);
  EXPECT_EQ(ok_after, 20);
}

TEST_F(RedisFaults, StalledServerMeetsTheDeadline) {
  RedisServer server;
  ASSERT_GT(server.port(), 0);
  SlotFixture f;
  constexpr uint32_t kTimeoutMs = 300;
  ASSERT_EQ(Attach(f, server.port(), kTimeoutMs), SWA_OK) << swa_last_error();
  f.Fill(f.a, 7);
  ASSERT_EQ(f.Save(f.a, "k"), SWA_OK) << swa_last_error();
  f.Fill(f.b, 8);
  const swa_test::SlotImage before = f.Image(f.b);
  server.Pause();
  for (int i = 0; i < 3; ++i) {
    const auto t0 = Clock::now();
    const swa_status_t s = i == 1 ? f.Save(f.a, "k2") : f.Restore(f.b, "k");
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
    // The pooled connection times out on its reply; a fresh one on connect.
    EXPECT_EQ(s, SWA_DEADLINE_EXCEEDED) << "call " << i << ": " << swa_last_error();
    EXPECT_GE(ms, kTimeoutMs / 2);
    EXPECT_LT(ms, 4 * kTimeoutMs + 500) << "call " << i;
    EXPECT_TRUE(f.Image(f.b) == before);
  }
  server.Resume();
  EXPECT_EQ(f.Restore(f.b, "k"), SWA_OK) << swa_last_error();
  EXPECT_TRUE(f.Holds(f.b, 7));
}

TEST_F(RedisFaults, StalledByDebugSleep) {
  RedisServer server({"--enable-debug-command", "yes"});
  ASSERT_GT(server.port(), 0);
  SlotFixture f;
  ASSERT_EQ(Attach(f, server.port(), 300), SWA_OK) << swa_last_error();
  f.Fill(f.a, 9);
  ASSERT_EQ(f.Save(f.a, "k"), SWA_OK);
  std::string slept;
  std::thread sleeper([&] { slept = server.Command({"DEBUG", "SLEEP", "1.5"}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const swa_test::SlotImage before = f.Image(f.b);
  EXPECT_EQ(f.Restore(f.b, "k"), SWA_DEADLINE_EXCEEDED) << swa_last_error();
  EXPECT_TRUE(f.Image(f.b) == before);
  sleeper.join();
  EXPECT_EQ(slept, "+OK");
  EXPECT_EQ(f.Restore(f.b, "k"), SWA_OK) << swa_last_error();
}

TEST_F(RedisFaults, BlobReplacedByGarbageOrAnotherKeysBlob) {
  RedisServer server;
  ASSERT_GT(server.port(), 0);
  SlotFixture f;
  ASSERT_EQ(Attach(f, server.port()), SWA_OK) << swa_last_error();
  f.Fill(f.a, 11);
  ASSERT_EQ(f.Save(f.a, "x"), SWA_OK);
  f.Fill(f.a, 12);
  ASSERT_EQ(f.Save(f.a, "y"), SWA_OK);
  f.Fill(f.b, 13);
  const swa_test::SlotImage before = f.Image(f.b);
  const std::string kx = f.StoreKey("x"), ky = f.StoreKey("y");
  ASSERT_EQ(server.Command({"SET", kx, "garbage"}), "+OK");
  EXPECT_EQ(f.Restore(f.b, "x"), SWA_DATA_LOSS) << swa_last_error();
  EXPECT_TRUE(f.Image(f.b) == before);
  // Same length as a blob, wrong bytes.
  ASSERT_EQ(server.Command({"STRLEN", ky}).substr(0, 1), ":");
  const size_t len = std::stoul(server.Command({"STRLEN", ky}).substr(1));
  ASSERT_EQ(server.Command({"SET", kx, std::string(len, 'G')}), "+OK");
  EXPECT_EQ(f.Restore(f.b, "x"), SWA_DATA_LOSS) << swa_last_error();
  EXPECT_TRUE(f.Image(f.b) == before);
  // A key of another type: an error from the server, a clear status here.
  ASSERT_EQ(server.Command({"DEL", kx}), ":1");
  ASSERT_EQ(server.Command({"LPUSH", kx, "a"}), ":1");
  const swa_status_t wrongtype = f.Restore(f.b, "x");
  EXPECT_NE(wrongtype, SWA_OK);
  EXPECT_NE(std::string(swa_last_error()).find("WRONGTYPE"), std::string::npos) << swa_last_error();
  EXPECT_TRUE(f.Image(f.b) == before);
  // A blob of another key under the same name (COPY, then RENAME): sound and
  // of this layout, but saved under "y". The blob records its key.
  ASSERT_EQ(server.Command({"DEL", kx}), ":1");
  ASSERT_EQ(server.Command({"COPY", ky, kx}), ":1");
  EXPECT_EQ(f.Restore(f.b, "x"), SWA_DATA_LOSS) << swa_last_error();
  const std::string message = swa_last_error();
  EXPECT_NE(message.find("another key"), std::string::npos) << message;
  EXPECT_NE(message.find(kx), std::string::npos) << message;
  EXPECT_TRUE(f.Image(f.b) == before);
  ASSERT_EQ(server.Command({"RENAME", ky, kx}), "+OK");
  EXPECT_EQ(f.Restore(f.b, "x"), SWA_DATA_LOSS) << swa_last_error();
  EXPECT_EQ(f.Restore(f.b, "y"), SWA_NOT_FOUND) << swa_last_error();
  EXPECT_TRUE(f.Image(f.b) == before);
  // Saved again under "x", it restores.
  f.Fill(f.a, 14);
  ASSERT_EQ(f.Save(f.a, "x"), SWA_OK) << swa_last_error();
  ASSERT_EQ(f.Restore(f.b, "x"), SWA_OK) << swa_last_error();
  EXPECT_TRUE(f.Holds(f.b, 14));
}

TEST_F(RedisFaults, WrongPassword) {
  RedisServer server({"--requirepass", "right"}, "right");
  ASSERT_GT(server.port(), 0);
  SlotFixture f;
  EXPECT_EQ(Attach(f, server.port(), 2000, "wrong"), SWA_UNAUTHENTICATED) << swa_last_error();
  EXPECT_EQ(Attach(f, server.port(), 2000, nullptr), SWA_UNAUTHENTICATED) << swa_last_error();
  ASSERT_EQ(Attach(f, server.port(), 2000, "right"), SWA_OK) << swa_last_error();
  f.Fill(f.a, 21);
  EXPECT_EQ(f.Save(f.a, "k"), SWA_OK) << swa_last_error();
  // The password changes on the server: a store created with the old one is refused.
  ASSERT_EQ(server.Command({"CONFIG", "SET", "requirepass", "changed"}), "+OK");
  SlotFixture g;
  EXPECT_EQ(Attach(g, server.port(), 2000, "right"), SWA_UNAUTHENTICATED) << swa_last_error();
}

TEST_F(RedisFaults, MaxmemoryNoeviction) {
  RedisServer server({"--maxmemory", "3mb", "--maxmemory-policy", "noeviction"});
  ASSERT_GT(server.port(), 0);
  SlotFixture f;
  ASSERT_EQ(Attach(f, server.port()), SWA_OK) << swa_last_error();
  f.Fill(f.a, 31);
  swa_status_t s = SWA_OK;
  int saved = 0;
  for (; saved < 20000 && s == SWA_OK; ++saved) s = f.Save(f.a, "fill" + std::to_string(saved));
  EXPECT_EQ(s, SWA_RESOURCE_EXHAUSTED) << "after " << saved << " saves: " << swa_last_error();
  EXPECT_NE(std::string(swa_last_error()).find("OOM"), std::string::npos) << swa_last_error();
  // Reads still work when the server is full, and removing makes room.
  ASSERT_EQ(f.Restore(f.b, "fill0"), SWA_OK) << swa_last_error();
  EXPECT_TRUE(f.Holds(f.b, 31));
  for (int i = 0; i < 50; ++i) {
    const std::string k = "fill" + std::to_string(i);
    EXPECT_EQ(swa_cache_store_remove(f.cache, reinterpret_cast<const uint8_t*>(k.data()), k.size()),
              SWA_OK);
  }
  EXPECT_EQ(f.Save(f.a, "again"), SWA_OK) << swa_last_error();
}

}  // namespace
