// Store secret, namespace and key at their bounds through the public C API:
// a 1024-byte secret, a 256-byte namespace and a SWA_STORE_MAX_KEY_BYTES key
// save, probe, restore and remove on a directory store (the longest
// file path the store builds) and a memory store; a namespace of 1 byte
// isolates as well; a non-NULL namespace or secret with length 0 is refused
// naming the field, and so are lengths one past the bounds.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "swacache.h"

namespace {

swa_status_t Create(const std::vector<uint8_t>& secret, const uint8_t* ns, size_t ns_len,
                    swa_cache_t** out) {
  swa_layer_desc_t l;
  swa_layer_desc_init(&l);
  l.q_heads = 2;
  l.head_dim = 64;
  swa_config_t c;
  swa_config_init(&c);
  c.window = 8;
  c.max_slots = 2;
  c.backend = SWA_BACKEND_CPU;
  c.num_threads = 1;
  c.num_layers = 1;
  c.layers = &l;
  c.store_secret = secret.empty() ? nullptr : secret.data();
  c.store_secret_len = secret.size();
  c.store_namespace = ns;
  c.store_namespace_len = ns_len;
  *out = nullptr;
  return swa_cache_create(&c, out);
}

void Attach(swa_cache_t* cache, const std::string& dir) {
  swa_kv_store_t store;
  swa_kv_store_init(&store);
  if (dir.empty()) {
    swa_store_memory_config_t m;
    swa_store_memory_config_init(&m);
    ASSERT_EQ(swa_store_memory_create(&m, &store), SWA_OK) << swa_last_error();
  } else {
    swa_store_directory_config_t d;
    swa_store_directory_config_init(&d);
    d.path = dir.c_str();
    d.sync = 0;
    ASSERT_EQ(swa_store_directory_create(&d, &store), SWA_OK) << swa_last_error();
  }
  ASSERT_EQ(swa_cache_set_store(cache, &store), SWA_OK) << swa_last_error();
}

TEST(StoreBoundsApi, LengthsPastTheBoundsAndEmptyNonNull) {
  const std::vector<uint8_t> ns(257, 'n');
  swa_cache_t* cache = nullptr;
  EXPECT_EQ(Create({}, ns.data(), 0, &cache), SWA_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(swa_last_error(), "store_namespace_len = 0"), nullptr) << swa_last_error();
  EXPECT_EQ(Create({}, ns.data(), 257, &cache), SWA_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(swa_last_error(), "store_namespace_len = 257"), nullptr)
      << swa_last_error();
  EXPECT_EQ(Create({}, ns.data(), SIZE_MAX, &cache), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(Create(std::vector<uint8_t>(1025, 3), nullptr, 0, &cache), SWA_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(swa_last_error(), "store_secret_len = 1025"), nullptr) << swa_last_error();
  EXPECT_EQ(cache, nullptr);
}

TEST(StoreBoundsApi, LongestSecretNamespaceAndKeyRoundTrip) {
  char tmpl[] = "/tmp/swa_bounds_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::vector<uint8_t> secret(1024), ns(256), key(SWA_STORE_MAX_KEY_BYTES);
  for (size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<uint8_t>(i * 31 + 7);
  for (size_t i = 0; i < ns.size(); ++i) ns[i] = static_cast<uint8_t>(255 - i);  // '/' and 0 too
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>(i * 13 + 1);
  for (const std::string& where : {dir, std::string()}) {
    SCOPED_TRACE(where.empty() ? "memory store" : "directory store");
    swa_cache_t *a = nullptr, *one = nullptr;
    ASSERT_EQ(Create(secret, ns.data(), ns.size(), &a), SWA_OK) << swa_last_error();
    ASSERT_EQ(Create(secret, ns.data(), 1, &one), SWA_OK) << swa_last_error();
    Attach(a, where);
    uint32_t s = 0, t = 0;
    ASSERT_EQ(swa_slot_alloc(a, &s), SWA_OK);
    ASSERT_EQ(swa_slot_alloc(a, &t), SWA_OK);
    ASSERT_EQ(swa_slot_set_valid_start(a, s, 5), SWA_OK);
    ASSERT_EQ(swa_slot_save(a, s, key.data(), key.size()), SWA_OK) << swa_last_error();
    const uint8_t* keys[2] = {key.data(), key.data()};
    const size_t lens[2] = {key.size() - 1, key.size()};
    int32_t found = -7;
    ASSERT_EQ(swa_cache_store_probe(a, keys, lens, 2, &found), SWA_OK) << swa_last_error();
    EXPECT_EQ(found, 1);
    ASSERT_EQ(swa_slot_restore(a, t, key.data(), key.size()), SWA_OK) << swa_last_error();
    swa_slot_info_t info{sizeof info};
    ASSERT_EQ(swa_slot_info(a, t, &info), SWA_OK);
    EXPECT_EQ(info.valid_start, 5);
    // A namespace of its first byte only is another tenant (same directory).
    if (!where.empty()) {
      Attach(one, where);
      found = -7;
      ASSERT_EQ(swa_cache_store_probe(one, keys, lens, 2, &found), SWA_OK) << swa_last_error();
      EXPECT_EQ(found, -1);
      uint32_t exists = 7;
      ASSERT_EQ(swa_cache_store_exists(one, key.data(), key.size(), &exists), SWA_OK);
      EXPECT_EQ(exists, 0u);
    }
    EXPECT_EQ(swa_cache_store_remove(a, key.data(), key.size()), SWA_OK) << swa_last_error();
    ASSERT_EQ(swa_cache_store_probe(a, keys, lens, 2, &found), SWA_OK);
    EXPECT_EQ(found, -1);
    swa_cache_destroy(one);
    swa_cache_destroy(a);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
