// Store secret and namespace through the public C API (issue 33): argument
// checks on swa_config_t (each names the field), the secret copied at create
// (the caller's buffer overwritten afterwards changes nothing), and a tagged
// blob refused by a cache without the secret, on one directory store.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "swacache.h"

namespace {

swa_status_t Create(const uint8_t* secret, size_t secret_len, const uint8_t* ns, size_t ns_len,
                    swa_cache_t** out) {
  swa_layer_desc_t l;
  swa_layer_desc_init(&l);
  l.q_heads = 2;
  l.head_dim = 64;
  swa_config_t c;
  swa_config_init(&c);
  c.window = 16;
  c.max_slots = 2;
  c.backend = SWA_BACKEND_CPU;
  c.num_threads = 1;
  c.num_layers = 1;
  c.layers = &l;
  c.store_secret = secret;
  c.store_secret_len = secret_len;
  c.store_namespace = ns;
  c.store_namespace_len = ns_len;
  *out = nullptr;
  return swa_cache_create(&c, out);
}

void AttachDirectory(swa_cache_t* cache, const std::string& path) {
  swa_store_directory_config_t d;
  swa_store_directory_config_init(&d);
  d.path = path.c_str();
  d.sync = 0;
  swa_kv_store_t store;
  swa_kv_store_init(&store);
  ASSERT_EQ(swa_store_directory_create(&d, &store), SWA_OK) << swa_last_error();
  ASSERT_EQ(swa_cache_set_store(cache, &store), SWA_OK) << swa_last_error();
}

const uint8_t kKey[] = {'r', 'e', 'q'};

TEST(StoreSecurityApi, ArgumentChecksNameTheField) {
  std::vector<uint8_t> secret(32, 7);
  swa_cache_t* cache = nullptr;
  EXPECT_EQ(Create(nullptr, 32, nullptr, 0, &cache), SWA_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(swa_last_error(), "store_secret"), nullptr) << swa_last_error();
  EXPECT_EQ(Create(secret.data(), 0, nullptr, 0, &cache), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(Create(secret.data(), 15, nullptr, 0, &cache), SWA_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(swa_last_error(), "store_secret_len = 15"), nullptr) << swa_last_error();
  EXPECT_EQ(Create(nullptr, 0, nullptr, 3, &cache), SWA_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(swa_last_error(), "store_namespace"), nullptr) << swa_last_error();
  std::vector<uint8_t> ns(257, 'n');
  EXPECT_EQ(Create(nullptr, 0, ns.data(), ns.size(), &cache), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(cache, nullptr);
  EXPECT_EQ(Create(secret.data(), 1025, nullptr, 0, &cache), SWA_INVALID_ARGUMENT);
  ASSERT_EQ(Create(secret.data(), 16, ns.data(), 256, &cache), SWA_OK) << swa_last_error();
  swa_cache_destroy(cache);
}

TEST(StoreSecurityApi, SecretIsCopiedAndTaggedBlobsNeedIt) {
  char tmpl[] = "/tmp/swa_secapi_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::vector<uint8_t> secret(32);
  for (size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<uint8_t>(i * 37 + 1);
  const std::vector<uint8_t> copy = secret;
  swa_cache_t *tagged = nullptr, *reader = nullptr, *plain = nullptr;
  ASSERT_EQ(Create(secret.data(), secret.size(), nullptr, 0, &tagged), SWA_OK) << swa_last_error();
  std::memset(secret.data(), 0, secret.size());  // the library kept its own copy
  AttachDirectory(tagged, dir);
  uint32_t s = 0;
  ASSERT_EQ(swa_slot_alloc(tagged, &s), SWA_OK);
  ASSERT_EQ(swa_slot_set_valid_start(tagged, s, 3), SWA_OK) << swa_last_error();
  ASSERT_EQ(swa_slot_save(tagged, s, kKey, sizeof kKey), SWA_OK) << swa_last_error();
  // Another cache with the same secret (a fresh buffer) reads it.
  ASSERT_EQ(Create(copy.data(), copy.size(), nullptr, 0, &reader), SWA_OK);
  AttachDirectory(reader, dir);
  uint32_t r = 0;
  ASSERT_EQ(swa_slot_alloc(reader, &r), SWA_OK);
  ASSERT_EQ(swa_slot_restore(reader, r, kKey, sizeof kKey), SWA_OK) << swa_last_error();
  swa_slot_info_t info;
  info.struct_size = sizeof info;
  ASSERT_EQ(swa_slot_info(reader, r, &info), SWA_OK);
  EXPECT_EQ(info.valid_start, 3);
  // Without the secret: DATA_LOSS naming the reason, the slot unchanged.
  ASSERT_EQ(Create(nullptr, 0, nullptr, 0, &plain), SWA_OK);
  AttachDirectory(plain, dir);
  uint32_t p = 0;
  ASSERT_EQ(swa_slot_alloc(plain, &p), SWA_OK);
  EXPECT_EQ(swa_slot_restore(plain, p, kKey, sizeof kKey), SWA_DATA_LOSS);
  EXPECT_NE(std::strstr(swa_last_error(), "store secret"), nullptr) << swa_last_error();
  ASSERT_EQ(swa_slot_info(plain, p, &info), SWA_OK);
  EXPECT_EQ(info.valid_start, 0);
  swa_cache_destroy(plain);
  swa_cache_destroy(reader);
  swa_cache_destroy(tagged);
  std::filesystem::remove_all(dir);
}

}  // namespace
