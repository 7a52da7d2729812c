// The cache and configuration half of the public C API: validation, layout, views.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "api/test_util.h"
#include "gtest/gtest.h"

namespace {

using swa_test::LastError;
using swa_test::Model;

TEST(Version, MatchesHeader) {
  EXPECT_EQ(swa_version_number(), uint32_t{SWA_VERSION_NUMBER});
  const std::string expect = std::to_string(SWA_VERSION_MAJOR) + "." +
                             std::to_string(SWA_VERSION_MINOR) + "." +
                             std::to_string(SWA_VERSION_PATCH);
  EXPECT_EQ(std::string(swa_version_string()), expect);
}

TEST(Status, PinnedValuesAndNames) {
  // absl::StatusCode numbering; bindings depend on these values.
  EXPECT_EQ(SWA_OK, 0);
  EXPECT_EQ(SWA_INVALID_ARGUMENT, 3);
  EXPECT_EQ(SWA_NOT_FOUND, 5);
  EXPECT_EQ(SWA_RESOURCE_EXHAUSTED, 8);
  EXPECT_EQ(SWA_FAILED_PRECONDITION, 9);
  EXPECT_EQ(SWA_OUT_OF_RANGE, 11);
  EXPECT_EQ(SWA_UNIMPLEMENTED, 12);
  EXPECT_EQ(SWA_DATA_LOSS, 15);
  EXPECT_EQ(SWA_UNAUTHENTICATED, 16);
  EXPECT_STREQ(swa_status_string(SWA_OK), "OK");
  EXPECT_STREQ(swa_status_string(SWA_FAILED_PRECONDITION), "FAILED_PRECONDITION");
  EXPECT_STREQ(swa_status_string(SWA_DATA_LOSS), "DATA_LOSS");
  EXPECT_STREQ(swa_status_string(static_cast<swa_status_t>(99)), "UNRECOGNIZED_STATUS");
}

// Each invalid configuration fails with the expected code and a message that
// names the field and the value.
struct BadConfig {
  const char* name;
  void (*mutate)(Model&);
  swa_status_t code;
  const char* must_mention;
};

const BadConfig kBadConfigs[] = {
    {"zero window", [](Model& m) { m.config.window = 0; }, SWA_INVALID_ARGUMENT, "window = 0"},
    {"huge window", [](Model& m) { m.config.window = 1u << 30; }, SWA_INVALID_ARGUMENT,
     "window = 1073741824"},
    {"ring too small", [](Model& m) { m.config.ring_len = 132; }, SWA_INVALID_ARGUMENT,
     "ring_len = 132"},
    {"alignment not pow2", [](Model& m) { m.config.alignment = 48; }, SWA_INVALID_ARGUMENT,
     "alignment = 48"},
    {"alignment too small", [](Model& m) { m.config.alignment = 8; }, SWA_INVALID_ARGUMENT,
     "alignment = 8"},
    {"zero slots", [](Model& m) { m.config.max_slots = 0; }, SWA_INVALID_ARGUMENT,
     "max_slots = 0"},
    {"too many slots", [](Model& m) { m.config.max_slots = 268435455; }, SWA_INVALID_ARGUMENT,
     "max_slots = 268435455 exceeds 1048576"},
    {"slot rows overflow int32", [](Model& m) {
       m.config.max_slots = 1u << 20;
       m.config.ring_len = 4096;
     },
     SWA_INVALID_ARGUMENT, "max_slots * ring_len"},
    {"zero layers", [](Model& m) { m.config.num_layers = 0; }, SWA_INVALID_ARGUMENT,
     "num_layers = 0"},
    {"null layers", [](Model& m) { m.config.layers = nullptr; }, SWA_INVALID_ARGUMENT,
     "layers is NULL"},
    {"head dim not multiple of 32", [](Model& m) { m.layers[1].head_dim = 100; },
     SWA_INVALID_ARGUMENT, "layers[1].head_dim = 100"},
    {"zero head dim", [](Model& m) { m.layers[0].head_dim = 0; }, SWA_INVALID_ARGUMENT,
     "layers[0].head_dim = 0"},
    {"q heads not multiple", [](Model& m) { m.layers[0].kv_heads = 3; }, SWA_INVALID_ARGUMENT,
     "q_heads = 64 is not a multiple of kv_heads = 3"},
    {"unknown format", [](Model& m) { m.layers[1].kv_format = static_cast<swa_format_t>(7); },
     SWA_INVALID_ARGUMENT, "layers[1].kv_format = 7"},
    {"unknown role", [](Model& m) { m.layers[0].role = static_cast<swa_layer_role_t>(5); },
     SWA_INVALID_ARGUMENT, "layers[0].role = 5"},
    {"unknown scale mode", [](Model& m) { m.config.scale_mode = static_cast<swa_scale_mode_t>(3); },
     SWA_INVALID_ARGUMENT, "scale_mode = 3"},
    {"unknown backend", [](Model& m) { m.config.backend = static_cast<swa_backend_t>(9); },
     SWA_INVALID_ARGUMENT, "backend = 9"},
    {"half compression", [](Model& m) { m.layers[0].compress_ratio = 4; }, SWA_INVALID_ARGUMENT,
     "compress_ratio = 4"},
    {"config struct_size", [](Model& m) { m.config.struct_size = 12; }, SWA_INVALID_ARGUMENT,
     "swa_config_t.struct_size = 12"},
    {"layer struct_size", [](Model& m) { m.layers[0].struct_size = 4; }, SWA_INVALID_ARGUMENT,
     "swa_layer_desc_t.struct_size = 4"},
    {"pool without size", [](Model& m) { m.config.pool = &m; }, SWA_INVALID_ARGUMENT,
     "pool_bytes = 0"},
    {"overflowing pool", [](Model& m) {
       m.config.max_slots = 1u << 20;
       m.layers[0].head_dim = 16384;
       m.layers[0].kv_heads = 4096;
       m.layers[0].q_heads = 4096;
       m.config.window = 1u << 20;
       m.config.ring_len = 0;
     }, SWA_INVALID_ARGUMENT, "overflow"},
};

TEST(Config, EveryInvalidFieldIsNamed) {
  for (const BadConfig& bad : kBadConfigs) {
    Model m(2, 1);
    bad.mutate(m);
    swa_cache_t* cache = reinterpret_cast<swa_cache_t*>(0x1);  // must stay untouched
    EXPECT_EQ(swa_cache_create(&m.config, &cache), bad.code) << bad.name;
    EXPECT_EQ(cache, reinterpret_cast<swa_cache_t*>(0x1)) << bad.name;
    EXPECT_NE(LastError().find(bad.must_mention), std::string::npos)
        << bad.name << ": message was '" << LastError() << "'";
    swa_layout_t layout;
    layout.struct_size = sizeof layout;
    EXPECT_EQ(swa_layout_compute(&m.config, &layout), bad.code) << bad.name;
  }
}

// A pool the machine cannot hold is refused at once, naming the bytes, not
// after seconds of allocating slot state (max_slots is bounded too).
TEST(Config, PoolLargerThanTheMachineIsRefused) {
  Model m(4, 0, 1u << 20);  // 1 Mi slots of 4 DeepSeek-V4-like rings: ~5.6 TB
  swa_cache_t* cache = nullptr;
  EXPECT_EQ(swa_cache_create(&m.config, &cache), SWA_RESOURCE_EXHAUSTED);
  EXPECT_EQ(cache, nullptr);
  EXPECT_NE(LastError().find("bytes"), std::string::npos) << LastError();
}

TEST(Config, NullPointers) {
  Model m(1, 0);
  EXPECT_EQ(swa_cache_create(nullptr, nullptr), SWA_INVALID_ARGUMENT);
  swa_cache_t* cache = nullptr;
  EXPECT_EQ(swa_cache_create(nullptr, &cache), SWA_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("config is NULL"), std::string::npos) << LastError();
  EXPECT_EQ(swa_cache_create(&m.config, nullptr), SWA_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("out is NULL"), std::string::npos) << LastError();
  swa_layout_t layout;
  layout.struct_size = sizeof layout;
  EXPECT_EQ(swa_cache_layout(nullptr, &layout), SWA_INVALID_ARGUMENT);
  swa_config_init(nullptr);       // ignored, no crash
  swa_layer_desc_init(nullptr);
  swa_cache_destroy(nullptr);
}

// A CPU-only build answers UNIMPLEMENTED; a CUDA build without a usable
// device answers UNAVAILABLE; with a device the cache is created.
TEST(Config, CudaBackendWithoutDeviceOrBuildIsRejected) {
  Model m(1, 0);
  m.config.backend = SWA_BACKEND_CUDA;
  swa_cache_t* cache = nullptr;
  const swa_status_t st = swa_cache_create(&m.config, &cache);
  if (st == SWA_OK) {
    swa_cache_destroy(cache);
    GTEST_SKIP() << "a CUDA device is present: nothing to reject";
  }
  EXPECT_TRUE(st == SWA_UNIMPLEMENTED || st == SWA_UNAVAILABLE) << st;
  EXPECT_NE(LastError().find("SWA_BACKEND_CUDA"), std::string::npos) << LastError();
  EXPECT_EQ(cache, nullptr);
}

TEST(Cache, LayoutAndViewsAddressTheRings) {
  Model m(3, 2, 5);
  m.layers[4].kv_format = SWA_FORMAT_BF16;
  m.layers[4].head_dim = 64;
  m.layers[4].kv_heads = 8;
  m.layers[4].shared_kv = 0;
  swa_cache_t* cache = nullptr;
  ASSERT_EQ(swa_cache_create(&m.config, &cache), SWA_OK) << LastError();
  swa_layout_t lay;
  lay.struct_size = sizeof lay;
  ASSERT_EQ(swa_cache_layout(cache, &lay), SWA_OK);
  EXPECT_EQ(lay.ring_len, 134u);
  EXPECT_EQ(lay.num_layers, 5u);
  EXPECT_EQ(lay.num_stored_layers, 3u);
  EXPECT_EQ(lay.stored_bytes, 3u * 70752u);
  EXPECT_EQ(lay.slot_bytes, 4u * 70752u + 134u * 16u * 128u);
  EXPECT_EQ(lay.pool_bytes, 5u * lay.slot_bytes);
  swa_layout_t computed;
  computed.struct_size = sizeof computed;
  ASSERT_EQ(swa_layout_compute(&m.config, &computed), SWA_OK);
  EXPECT_EQ(std::memcmp(&computed, &lay, sizeof lay), 0);

  // Write a distinct byte pattern through every view, then check that every
  // byte of every slot was covered exactly once by some ring.
  std::string seen(lay.pool_bytes, '\0');
  swa_tensor_view_t v0;
  v0.struct_size = sizeof v0;
  ASSERT_EQ(swa_cache_layer_view(cache, 0, &v0), SWA_OK);
  auto* pool = static_cast<uint8_t*>(v0.data);  // layer 0 ring is at offset 0
  for (uint32_t layer = 0; layer < 5; ++layer) {
    swa_tensor_view_t v;
    v.struct_size = sizeof v;
    ASSERT_EQ(swa_cache_layer_view(cache, layer, &v), SWA_OK);
    swa_layer_layout_t ll;
    ll.struct_size = sizeof ll;
    ASSERT_EQ(swa_cache_layer_layout(cache, layer, &ll), SWA_OK);
    EXPECT_EQ(v.ndim, 4u);
    EXPECT_EQ(v.backend, SWA_BACKEND_CPU);
    EXPECT_EQ(v.device, -1);
    EXPECT_EQ(v.shape[0], 5);
    EXPECT_EQ(v.shape[1], 134);
    EXPECT_EQ(v.shape[2], ll.heads_per_token);
    EXPECT_EQ(v.shape[3], ll.vec_bytes);
    EXPECT_EQ(v.strides[0], static_cast<int64_t>(lay.slot_bytes));
    EXPECT_EQ(v.strides[1], ll.bytes_per_token);
    EXPECT_EQ(v.strides[2], ll.vec_bytes);
    EXPECT_EQ(v.strides[3], 1);
    EXPECT_EQ(static_cast<uint8_t*>(v.data), pool + ll.ring_offset);
    for (int64_t s = 0; s < v.shape[0]; ++s)
      for (int64_t r = 0; r < v.shape[1]; ++r)
        for (int64_t h = 0; h < v.shape[2]; ++h)
          for (int64_t b = 0; b < v.shape[3]; ++b) {
            const int64_t off = s * v.strides[0] + r * v.strides[1] + h * v.strides[2] + b;
            uint8_t* p = static_cast<uint8_t*>(v.data) + off;
            ASSERT_EQ(seen[p - pool], 0) << "byte addressed twice";
            seen[p - pool] = 1;
            *p = static_cast<uint8_t>(layer * 31 + r);
          }
  }
  size_t covered = 0;
  for (char c : seen) covered += c;
  EXPECT_EQ(covered, 5u * (4u * 134u * 528u + 134u * 2048u));

  swa_tensor_view_t bad;
  bad.struct_size = sizeof bad;
  EXPECT_EQ(swa_cache_layer_view(cache, 5, &bad), SWA_OUT_OF_RANGE);
  EXPECT_NE(LastError().find("layer = 5"), std::string::npos) << LastError();
  bad.struct_size = 3;
  EXPECT_EQ(swa_cache_layer_view(cache, 0, &bad), SWA_INVALID_ARGUMENT);
  swa_layer_layout_t ll;
  ll.struct_size = sizeof ll + 8;
  EXPECT_EQ(swa_cache_layer_layout(cache, 0, &ll), SWA_INVALID_ARGUMENT);
  swa_cache_destroy(cache);
}

TEST(Cache, CallerProvidedPool) {
  Model m(1, 1, 3);
  swa_layout_t lay;
  lay.struct_size = sizeof lay;
  ASSERT_EQ(swa_layout_compute(&m.config, &lay), SWA_OK);
  void* mem = std::aligned_alloc(64, lay.pool_bytes + 64);
  swa_cache_t* cache = nullptr;

  m.config.pool = static_cast<char*>(mem) + 16;  // misaligned for alignment 32
  m.config.pool_bytes = lay.pool_bytes;
  EXPECT_EQ(swa_cache_create(&m.config, &cache), SWA_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("not aligned"), std::string::npos) << LastError();

  m.config.pool = mem;
  m.config.pool_bytes = lay.pool_bytes - 1;
  EXPECT_EQ(swa_cache_create(&m.config, &cache), SWA_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("pool_bytes = " + std::to_string(lay.pool_bytes - 1)),
            std::string::npos)
      << LastError();

  m.config.pool_bytes = lay.pool_bytes;
  ASSERT_EQ(swa_cache_create(&m.config, &cache), SWA_OK) << LastError();
  swa_tensor_view_t v;
  v.struct_size = sizeof v;
  ASSERT_EQ(swa_cache_layer_view(cache, 1, &v), SWA_OK);
  EXPECT_EQ(v.data, static_cast<char*>(mem) + 70752);
  swa_cache_destroy(cache);  // must not free the caller's memory
  std::memset(mem, 0xAB, lay.pool_bytes);
  std::free(mem);
}

TEST(LastError, IsThreadLocal) {
  swa_cache_t* cache = nullptr;
  ASSERT_EQ(swa_cache_create(nullptr, &cache), SWA_INVALID_ARGUMENT);
  const std::string mine = LastError();
  std::string other;
  std::thread([&] {
    other = LastError();
    Model m(1, 0);
    m.config.window = 0;
    swa_cache_t* c = nullptr;
    swa_cache_create(&m.config, &c);
  }).join();
  EXPECT_EQ(other, "");
  EXPECT_EQ(LastError(), mine);
}

}  // namespace
