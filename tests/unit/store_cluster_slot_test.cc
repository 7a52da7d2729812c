// Cluster key routing arithmetic: CRC16/XMODEM against a bitwise reference and
// the published check value, the hash-tag rule (examples of the Redis Cluster
// specification), and the seed list parser. The live cluster checks
// ClusterKeySlot against the server's own CLUSTER KEYSLOT too
// (store_redis_cluster_test).
#include <random>
#include <string>

#include "gtest/gtest.h"
#include "store/cluster_hash_slot.h"

namespace swa {
namespace {

uint16_t ReferenceCrc16(const std::string& s) {
  uint32_t crc = 0;
  for (unsigned char b : s) {
    for (int k = 7; k >= 0; --k) {
      const bool top = ((crc >> 15) & 1) != (((b >> k) & 1) != 0);
      crc = (crc << 1) & 0xFFFF;
      if (top) crc ^= 0x1021;
    }
  }
  return static_cast<uint16_t>(crc);
}

TEST(ClusterHashSlot, Crc16CheckValueAndReference) {
  EXPECT_EQ(Crc16Xmodem("123456789"), 0x31C3);
  EXPECT_EQ(Crc16Xmodem(""), 0);
  std::mt19937_64 rng(5);
  for (int i = 0; i < 2000; ++i) {
    std::string s(rng() % 64, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    ASSERT_EQ(Crc16Xmodem(s), ReferenceCrc16(s)) << i;
  }
}

TEST(ClusterHashSlot, HashTagRule) {
  EXPECT_EQ(ClusterHashTag("{user1000}.following"), "user1000");
  EXPECT_EQ(ClusterKeySlot("{user1000}.following"), ClusterKeySlot("{user1000}.followers"));
  EXPECT_EQ(ClusterHashTag("foo{}{bar}"), "foo{}{bar}");  // empty first tag: whole key
  EXPECT_EQ(ClusterHashTag("foo{{bar}}zap"), "{bar");
  EXPECT_EQ(ClusterHashTag("foo{bar}{zap}"), "bar");
  EXPECT_EQ(ClusterHashTag("no-tag"), "no-tag");
  EXPECT_EQ(ClusterHashTag("open{only"), "open{only");
  EXPECT_EQ(ClusterHashTag(std::string("a{\0b}c", 6)), std::string("\0b", 2));
  EXPECT_EQ(ClusterKeySlot("123456789"), 0x31C3u % 16384);
  for (int i = 0; i < 1000; ++i) EXPECT_LT(ClusterKeySlot("k" + std::to_string(i)), kClusterSlots);
}

TEST(ClusterHashSlot, ParseNodes) {
  auto n = ParseClusterNodes(" 127.0.0.1:7000, redis-a:7001 ,[::1]:7002,");
  ASSERT_TRUE(n.ok()) << n.status();
  ASSERT_EQ(n->size(), 3u);
  EXPECT_EQ((*n)[0].host, "127.0.0.1");
  EXPECT_EQ((*n)[0].port, 7000u);
  EXPECT_EQ((*n)[1].ToString(), "redis-a:7001");
  EXPECT_EQ((*n)[2].host, "::1");
  EXPECT_EQ((*n)[2].ToString(), "[::1]:7002");
  for (const char* bad : {"", " , ", "host", "host:", ":7000", "host:0", "host:70000", "host:12x", "[::1",
                          "[::1:7000", "::1:7000", "[::1]]:7000", "a[b]:7000", "[]:7000", "]:7000"}) {
    auto r = ParseClusterNodes(bad);
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << "\"" << bad << "\"";
  }
}

}  // namespace
}  // namespace swa
