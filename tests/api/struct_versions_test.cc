// Every versioned struct of swacache.h at every size a release of the header
// declared: a caller with that struct_size gets SWA_OK, and the library
// writes nothing past the caller's size (poisoned there, checked after the
// call) and reads nothing there (the poison would be a garbage pointer, an
// invalid enum or a wrong value). A size the library does not know is
// SWA_INVALID_ARGUMENT naming the struct and the size, and changes nothing.
//
// The sizes are the x86-64 sizeof of each struct at every commit of
// include/swacache.h that changed it (`git log -p include/swacache.h`),
// oldest first; the last must be today's sizeof, so a struct that grows
// without its list growing here fails to compile.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "swacache.h"

namespace {

#if defined(__x86_64__) && defined(__LP64__)
constexpr bool kX86_64 = true;
#else
constexpr bool kX86_64 = false;
#endif

// Released sizes on x86-64, oldest first.
#define SIZES(T, ...)                                                                  \
  constexpr size_t kSizes_##T[] = {__VA_ARGS__};                                       \
  static_assert(!kX86_64 || kSizes_##T[sizeof kSizes_##T / sizeof(size_t) - 1] == sizeof(T), \
                #T " changed size: append the new size to its list here")
SIZES(swa_layer_desc_t, 56, 96, 104, 128);  // 0.1 (82e0b87); RoPE and soft-cap (cac1c0f);
                                            // softmax_scale and reserved (after 0.2.0);
                                            // typed compressors (after 0.2.0)
SIZES(swa_config_t, 72, 104);  // 0.2; store_secret, store_namespace (after 0.2.0)
SIZES(swa_layout_t, 80, 96);  // 0.2; compress_bytes, compress_saved_bytes (after 0.2.0)
SIZES(swa_layer_layout_t, 72, 112);  // 0.2; typed compressor fields (after 0.2.0)
SIZES(swa_tensor_view_t, 96);
SIZES(swa_slot_info_t, 32);
SIZES(swa_plan_options_t, 16);
SIZES(swa_plan_info_t, 72);
SIZES(swa_step_args_t, 96, 104, 112);  // 0.1 (ae3ec38); lse appended (cac1c0f);
                                       // positions (after 0.2.0)
SIZES(swa_cache_stats_t, 48);
SIZES(swa_merge_args_t, 80, 88);  // 0.2; device appended (after 0.2.0)
SIZES(swa_kv_store_t, 56);
SIZES(swa_store_memory_config_t, 16);  // also as swa_memory_store_config_t before the rename
SIZES(swa_store_memory_stats_t, 80);
SIZES(swa_store_directory_config_t, 24);
SIZES(swa_store_redis_config_t, 48, 104);  // 0.2; ACL user and TLS (after 0.2.0)
SIZES(swa_store_redis_cluster_config_t, 48, 104);  // 0.2; ACL user and TLS (after 0.2.0)
SIZES(swa_store_tiered_config_t, 24);
SIZES(swa_store_tier_stats_t, 64);
SIZES(swa_project_args_t, 72);
SIZES(swa_rope_info_t, 32);
SIZES(swa_rope_args_t, 64);
SIZES(swa_compress_args_t, 104);  // after 0.2.0
#undef SIZES

constexpr unsigned char kPoison = 0xA5;
constexpr size_t kSlack = 32;

// The caller's struct of `size` bytes in a buffer: the first bytes of
// `full` with struct_size = size, poison after them.
template <typename T>
std::vector<unsigned char> CallerBytes(T full, size_t size) {
  std::vector<unsigned char> b(sizeof(T) + kSlack, kPoison);
  full.struct_size = size;
  std::memcpy(b.data(), &full, std::min(std::max(size, sizeof(size_t)), sizeof(T)));
  return b;
}

// Sizes no release declared: below the first, between two, past the last.
template <size_t N>
std::vector<size_t> UnknownSizes(const size_t (&known)[N]) {
  std::vector<size_t> bad = {0, known[0] - 8, known[N - 1] + 8, known[N - 1] + 4096};
  // Between two: 8 past the older, or halfway where they are 8 apart.
  for (size_t i = 1; i < N; ++i)
    bad.push_back(known[i - 1] + 8 < known[i] ? known[i - 1] + 8
                                              : known[i - 1] + (known[i] - known[i - 1]) / 2);
  return bad;
}

// Runs `call` on the caller's struct at every released size and at unknown ones.
template <typename T, size_t N>
void CheckEverySize(const char* name, const size_t (&known)[N], const T& valid,
                    const std::function<swa_status_t(T*)>& call) {
  if (!kX86_64) GTEST_SKIP() << "the released sizes are x86-64's";
  for (size_t size : known) {
    SCOPED_TRACE(std::string(name) + " with struct_size " + std::to_string(size));
    std::vector<unsigned char> b = CallerBytes(valid, size);
    ASSERT_EQ(call(reinterpret_cast<T*>(b.data())), SWA_OK) << swa_last_error();
    size_t kept;
    std::memcpy(&kept, b.data(), sizeof kept);
    EXPECT_EQ(kept, size);
    size_t touched = 0;
    for (size_t i = size; i < b.size(); ++i) touched += b[i] != kPoison;
    EXPECT_EQ(touched, 0u) << "bytes past the caller's struct_size were written";
  }
  for (size_t size : UnknownSizes(known)) {
    SCOPED_TRACE(std::string(name) + " with unknown struct_size " + std::to_string(size));
    std::vector<unsigned char> b = CallerBytes(valid, size);
    const std::vector<unsigned char> before = b;
    ASSERT_EQ(call(reinterpret_cast<T*>(b.data())), SWA_INVALID_ARGUMENT);
    const std::string msg = swa_last_error();
    EXPECT_NE(msg.find(std::string(name) + ".struct_size = " + std::to_string(size)),
              std::string::npos)
        << msg;
    EXPECT_EQ(b, before) << "a refused call wrote into the caller's struct";
  }
}

// A CPU cache with two layers: 0 FP32 with K and V (q_heads 2, kv_heads 1,
// D 32); 1 BF16 with one shared vector and sinks.
class StructVersions : public ::testing::Test {
 protected:
  void SetUp() override {
    swa_layer_desc_init(&layers_[0]);
    layers_[0].q_heads = 2, layers_[0].kv_heads = 1, layers_[0].head_dim = 32;
    layers_[0].kv_format = SWA_FORMAT_FP32, layers_[0].shared_kv = 0;
    swa_layer_desc_init(&layers_[1]);
    layers_[1].q_heads = 2, layers_[1].kv_heads = 1, layers_[1].head_dim = 32;
    layers_[1].kv_format = SWA_FORMAT_BF16, layers_[1].shared_kv = 1, layers_[1].has_sinks = 1;
    swa_config_init(&config_);
    config_.backend = SWA_BACKEND_CPU, config_.max_slots = 4, config_.num_threads = 1;
    config_.num_layers = 2, config_.layers = layers_;
    ASSERT_EQ(swa_cache_create(&config_, &cache_), SWA_OK) << swa_last_error();
    ASSERT_EQ(swa_plan_create(cache_, &plan_), SWA_OK) << swa_last_error();
  }
  void TearDown() override {
    swa_plan_destroy(plan_);
    swa_cache_destroy(cache_);
  }

  // Layer 0's output for two new tokens of a fresh slot under `args`.
  swa_status_t Step(const swa_step_args_t* args) {
    uint32_t slot;
    EXPECT_EQ(swa_slot_alloc(cache_, &slot), SWA_OK);
    const swa_seq_t seq = {slot, 2, 2, 0};
    EXPECT_EQ(swa_plan_build(plan_, &seq, 1), SWA_OK) << swa_last_error();
    out_.assign(out_.size(), std::nanf(""));
    const swa_status_t st = swa_step(cache_, plan_, args);
    EXPECT_EQ(swa_slot_free(cache_, slot), SWA_OK);
    return st;
  }

  swa_layer_desc_t layers_[2];
  swa_config_t config_;
  swa_cache_t* cache_ = nullptr;
  swa_plan_t* plan_ = nullptr;
  std::vector<float> q_ = std::vector<float>(2 * 2 * 32), k_ = std::vector<float>(2 * 32),
                     v_ = std::vector<float>(2 * 32), out_ = std::vector<float>(2 * 2 * 32);
};

// ---- Input structs ----

TEST_F(StructVersions, LayerDescArray) {
  swa_layout_t want;
  want.struct_size = sizeof want;
  ASSERT_EQ(swa_layout_compute(&config_, &want), SWA_OK);
  // Both layers at the caller's stride, poison after the array.
  CheckEverySize<swa_layer_desc_t>(
      "swa_layer_desc_t", kSizes_swa_layer_desc_t, layers_[0], [&](swa_layer_desc_t* first) {
        const size_t stride = first->struct_size;
        const size_t room = std::max(stride, sizeof(swa_layer_desc_t));
        std::vector<unsigned char> array(2 * room + kSlack, kPoison);
        // 0.1's fields ended at rope_style, 0.2's at softmax_scale; their tail
        // padding is the caller's garbage (poison here), which must not be
        // read as a RoPE field or as the softmax scale.
        const size_t fields_end = stride == 56   ? offsetof(swa_layer_desc_t, rope_style)
                                  : stride == 96 ? offsetof(swa_layer_desc_t, softmax_scale)
                                                 : stride;
        for (int i = 0; i < 2; ++i) {
          swa_layer_desc_t d = layers_[i];
          d.struct_size = stride;
          std::memcpy(&array[i * stride], &d, std::min(std::max(stride, sizeof(size_t)), sizeof d));
          if (fields_end < stride && stride < sizeof d)
            std::memset(&array[i * stride + fields_end], kPoison, stride - fields_end);
        }
        swa_config_t c = config_;
        c.layers = reinterpret_cast<const swa_layer_desc_t*>(array.data());
        swa_layout_t got;
        got.struct_size = sizeof got;
        const swa_status_t st = swa_layout_compute(&c, &got);
        if (st == SWA_OK) EXPECT_EQ(got.fingerprint, want.fingerprint);  // defaults for the rest
        return st;
      });
}

TEST_F(StructVersions, Config) {
  swa_layout_t want;
  want.struct_size = sizeof want;
  ASSERT_EQ(swa_layout_compute(&config_, &want), SWA_OK);
  CheckEverySize<swa_config_t>("swa_config_t", kSizes_swa_config_t, config_, [&](swa_config_t* c) {
    swa_layout_t got;
    got.struct_size = sizeof got;
    const swa_status_t st = swa_layout_compute(c, &got);
    if (st == SWA_OK) EXPECT_EQ(got.pool_bytes, want.pool_bytes);
    return st;
  });
}

TEST_F(StructVersions, PlanOptions) {
  swa_plan_options_t o;
  swa_plan_options_init(&o);
  o.index_pad = SWA_INDEX_PAD_LAST_ROW;
  CheckEverySize<swa_plan_options_t>("swa_plan_options_t", kSizes_swa_plan_options_t, o,
                                     [&](swa_plan_options_t* opts) {
                                       swa_plan_t* p = nullptr;
                                       const swa_status_t st =
                                           swa_plan_create_with_options(cache_, opts, &p);
                                       swa_plan_destroy(p);
                                       return st;
                                     });
}

TEST_F(StructVersions, StepArgs) {
  for (size_t i = 0; i < q_.size(); ++i) q_[i] = 0.25f + 0.01f * float(i % 17);
  for (size_t i = 0; i < k_.size(); ++i) k_[i] = -0.5f + 0.02f * float(i % 13);
  for (size_t i = 0; i < v_.size(); ++i) v_[i] = 1.0f - 0.03f * float(i % 11);
  swa_step_args_t a;
  swa_step_args_init(&a);
  a.layer = 0, a.q = q_.data(), a.k_new = k_.data(), a.v_new = v_.data(), a.out = out_.data();
  ASSERT_EQ(Step(&a), SWA_OK) << swa_last_error();
  const std::vector<float> want = out_;
  // Given positions are checked (>= 0) whether the layer rotates or not.
  const std::vector<int32_t> positions(64, 3);
  a.positions = positions.data();
  // An older caller's lse and positions bytes are poison: read, they would be
  // wild pointers.
  CheckEverySize<swa_step_args_t>("swa_step_args_t", kSizes_swa_step_args_t, a,
                                  [&](swa_step_args_t* args) {
                                    const swa_status_t st = Step(args);
                                    if (st == SWA_OK) EXPECT_EQ(out_, want);
                                    return st;
                                  });
}

TEST_F(StructVersions, MergeArgs) {
  std::vector<float> oa = {1, 2, 3, 4}, ob = {5, 6, 7, 8}, out(4, std::nanf(""));
  float la = 0.5f, lb = -0.25f, lse = std::nanf("");
  swa_merge_args_t m;
  swa_merge_args_init(&m);
  m.rows = 1, m.head_dim = 4, m.out_a = oa.data(), m.lse_a = &la, m.out_b = ob.data();
  m.lse_b = &lb, m.out = out.data(), m.lse = &lse;
  CheckEverySize<swa_merge_args_t>("swa_merge_args_t", kSizes_swa_merge_args_t, m,
                                   [&](swa_merge_args_t* args) {
                                     return swa_attention_merge(cache_, args);
                                   });
  EXPECT_FALSE(std::isnan(out[0]));
}

TEST_F(StructVersions, ProjectArgs) {
  std::vector<uint16_t> hidden(2 * 4, 0x3F80), weight(3 * 4, 0x3F80);  // BF16 1.0
  std::vector<float> out(2 * 3, std::nanf(""));
  swa_project_args_t a;
  swa_project_args_init(&a);
  a.hidden = hidden.data(), a.weight = weight.data(), a.out = out.data();
  a.n_tokens = 2, a.hidden_dim = 4, a.q_dim = 2, a.kv_dim = 1;
  CheckEverySize<swa_project_args_t>("swa_project_args_t", kSizes_swa_project_args_t, a,
                                     [&](swa_project_args_t* args) {
                                       return swa_project(cache_, args);
                                     });
  EXPECT_EQ(out[0], 4.0f);
}

// A RoPE layer's table: the info is an output struct.
TEST_F(StructVersions, RopeInfo) {
  swa_layer_desc_t l;
  swa_layer_desc_init(&l);
  l.rope_style = SWA_ROPE_NEOX, l.rope_dims = 64;
  swa_rope_info_t info{};
  float freq[32];
  CheckEverySize<swa_rope_info_t>("swa_rope_info_t", kSizes_swa_rope_info_t, info,
                                  [&](swa_rope_info_t* out) {
                                    return swa_rope_table(&l, freq, 32, out);
                                  });
  EXPECT_EQ(freq[0], 1.0f);
}

TEST_F(StructVersions, RopeArgs) {
  swa_layer_desc_t l;
  swa_layer_desc_init(&l);
  l.head_dim = 32, l.rope_style = SWA_ROPE_GPTJ, l.rope_dims = 32;
  std::vector<float> x(2 * 32, 1.0f);
  const int32_t pos[2] = {0, 5};
  swa_rope_args_t a;
  swa_rope_args_init(&a);
  a.layer = &l, a.x = x.data(), a.tokens = 2, a.heads = 1, a.positions = pos;
  CheckEverySize<swa_rope_args_t>("swa_rope_args_t", kSizes_swa_rope_args_t, a,
                                  [&](swa_rope_args_t* args) { return swa_rope_apply(args); });
  EXPECT_NE(x[32], 1.0f);
}

// A fresh memory-store table, at the caller's size, handed to the cache.
TEST_F(StructVersions, KvStoreAsInput) {
  swa_store_memory_config_t mc;
  swa_store_memory_config_init(&mc);
  swa_kv_store_t proto;
  swa_kv_store_init(&proto);
  CheckEverySize<swa_kv_store_t>(
      "swa_kv_store_t", kSizes_swa_kv_store_t, proto, [&](swa_kv_store_t* t) {
        swa_kv_store_t fresh;
        swa_kv_store_init(&fresh);
        EXPECT_EQ(swa_store_memory_create(&mc, &fresh), SWA_OK);
        // The table's entries go into the caller's bytes, which are put back after.
        const size_t n = std::min(t->struct_size, sizeof fresh);
        unsigned char saved[sizeof(swa_kv_store_t)];
        std::memcpy(saved, t, n);
        fresh.struct_size = t->struct_size;
        std::memcpy(t, &fresh, n);
        const swa_status_t st = swa_cache_set_store(cache_, t);  // owns user_data on success
        if (st != SWA_OK) fresh.release(fresh.user_data);
        std::memcpy(t, saved, n);
        return st;
      });
  EXPECT_EQ(swa_cache_set_store(cache_, nullptr), SWA_OK);
}

TEST_F(StructVersions, StoreMemoryConfig) {
  swa_store_memory_config_t mc;
  swa_store_memory_config_init(&mc);
  mc.budget_bytes = 4096;
  CheckEverySize<swa_store_memory_config_t>(
      "swa_store_memory_config_t", kSizes_swa_store_memory_config_t, mc,
      [&](swa_store_memory_config_t* c) {
        swa_kv_store_t t;
        swa_kv_store_init(&t);
        const swa_status_t st = swa_store_memory_create(c, &t);
        if (st == SWA_OK) t.release(t.user_data);
        return st;
      });
}

TEST_F(StructVersions, StoreDirectoryConfig) {
  char dir[] = "/tmp/swa_struct_versions_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  swa_store_directory_config_t dc;
  swa_store_directory_config_init(&dc);
  dc.path = dir;
  dc.sync = 0;
  CheckEverySize<swa_store_directory_config_t>(
      "swa_store_directory_config_t", kSizes_swa_store_directory_config_t, dc,
      [&](swa_store_directory_config_t* c) {
        swa_kv_store_t t;
        swa_kv_store_init(&t);
        const swa_status_t st = swa_store_directory_create(c, &t);
        if (st == SWA_OK) t.release(t.user_data);
        return st;
      });
  rmdir(dir);
}

// No server listens: a known size passes the struct check and fails later
// (UNIMPLEMENTED without hiredis, UNAVAILABLE with it), never as
// INVALID_ARGUMENT; that is what "accepted" means here. A table made all the
// same is released.
swa_status_t AcceptedUnlessInvalid(swa_status_t st, swa_kv_store_t* t) {
  if (st == SWA_OK) t->release(t->user_data);
  return st == SWA_INVALID_ARGUMENT ? st : SWA_OK;
}

TEST_F(StructVersions, StoreRedisConfig) {
  swa_store_redis_config_t rc;
  swa_store_redis_config_init(&rc);
  rc.port = 1, rc.timeout_ms = 200, rc.max_connections = 1;
  CheckEverySize<swa_store_redis_config_t>(
      "swa_store_redis_config_t", kSizes_swa_store_redis_config_t, rc,
      [&](swa_store_redis_config_t* c) {
        swa_kv_store_t t;
        swa_kv_store_init(&t);
        return AcceptedUnlessInvalid(swa_store_redis_create(c, &t), &t);
      });
}

TEST_F(StructVersions, StoreRedisClusterConfig) {
  swa_store_redis_cluster_config_t rc;
  swa_store_redis_cluster_config_init(&rc);
  rc.nodes = "127.0.0.1:1", rc.timeout_ms = 200, rc.max_attempts = 1;
  CheckEverySize<swa_store_redis_cluster_config_t>(
      "swa_store_redis_cluster_config_t", kSizes_swa_store_redis_cluster_config_t, rc,
      [&](swa_store_redis_cluster_config_t* c) {
        swa_kv_store_t t;
        swa_kv_store_init(&t);
        return AcceptedUnlessInvalid(swa_store_redis_cluster_create(c, &t), &t);
      });
}

TEST_F(StructVersions, StoreTieredConfig) {
  swa_store_tiered_config_t tc;
  swa_store_tiered_config_init(&tc);
  CheckEverySize<swa_store_tiered_config_t>(
      "swa_store_tiered_config_t", kSizes_swa_store_tiered_config_t, tc,
      [&](swa_store_tiered_config_t* c) {
        swa_store_memory_config_t mc;
        swa_store_memory_config_init(&mc);
        swa_kv_store_t tier, t;
        swa_kv_store_init(&tier);
        swa_kv_store_init(&t);
        EXPECT_EQ(swa_store_memory_create(&mc, &tier), SWA_OK);
        const bool room = c->struct_size >= sizeof(swa_store_tiered_config_t);
        if (room) c->tiers = &tier, c->n_tiers = 1;
        const swa_status_t st = swa_store_tiered_create(c, &t);
        (st == SWA_OK ? t : tier).release((st == SWA_OK ? t : tier).user_data);
        if (room) c->tiers = nullptr, c->n_tiers = 0;  // as the caller gave them
        return st;
      });
}

// ---- Output structs ----

TEST_F(StructVersions, Layout) {
  CheckEverySize<swa_layout_t>("swa_layout_t", kSizes_swa_layout_t, swa_layout_t{},
                               [&](swa_layout_t* out) { return swa_cache_layout(cache_, out); });
  CheckEverySize<swa_layout_t>("swa_layout_t", kSizes_swa_layout_t, swa_layout_t{},
                               [&](swa_layout_t* out) {
                                 return swa_layout_compute(&config_, out);
                               });
}

TEST_F(StructVersions, LayerLayout) {
  CheckEverySize<swa_layer_layout_t>("swa_layer_layout_t", kSizes_swa_layer_layout_t,
                                     swa_layer_layout_t{}, [&](swa_layer_layout_t* out) {
                                       return swa_cache_layer_layout(cache_, 1, out);
                                     });
}

TEST_F(StructVersions, TensorView) {
  CheckEverySize<swa_tensor_view_t>("swa_tensor_view_t", kSizes_swa_tensor_view_t,
                                    swa_tensor_view_t{}, [&](swa_tensor_view_t* out) {
                                      return swa_cache_layer_view(cache_, 0, out);
                                    });
}

TEST_F(StructVersions, SlotInfo) {
  uint32_t slot;
  ASSERT_EQ(swa_slot_alloc(cache_, &slot), SWA_OK);
  CheckEverySize<swa_slot_info_t>("swa_slot_info_t", kSizes_swa_slot_info_t, swa_slot_info_t{},
                                  [&](swa_slot_info_t* out) {
                                    return swa_slot_info(cache_, slot, out);
                                  });
}

TEST_F(StructVersions, PlanInfo) {
  CheckEverySize<swa_plan_info_t>("swa_plan_info_t", kSizes_swa_plan_info_t, swa_plan_info_t{},
                                  [&](swa_plan_info_t* out) { return swa_plan_info(plan_, out); });
}

TEST_F(StructVersions, CacheStats) {
  CheckEverySize<swa_cache_stats_t>("swa_cache_stats_t", kSizes_swa_cache_stats_t,
                                    swa_cache_stats_t{}, [&](swa_cache_stats_t* out) {
                                      return swa_cache_stats(cache_, out);
                                    });
}

TEST_F(StructVersions, KvStoreAsOutput) {
  swa_store_memory_config_t mc;
  swa_store_memory_config_init(&mc);
  CheckEverySize<swa_kv_store_t>("swa_kv_store_t", kSizes_swa_kv_store_t, swa_kv_store_t{},
                                 [&](swa_kv_store_t* out) {
                                   const swa_status_t st = swa_store_memory_create(&mc, out);
                                   if (st == SWA_OK) out->release(out->user_data);
                                   return st;
                                 });
}

TEST_F(StructVersions, StoreMemoryStats) {
  swa_store_memory_config_t mc;
  swa_store_memory_config_init(&mc);
  swa_kv_store_t t;
  swa_kv_store_init(&t);
  ASSERT_EQ(swa_store_memory_create(&mc, &t), SWA_OK);
  CheckEverySize<swa_store_memory_stats_t>("swa_store_memory_stats_t",
                                           kSizes_swa_store_memory_stats_t,
                                           swa_store_memory_stats_t{},
                                           [&](swa_store_memory_stats_t* out) {
                                             return swa_store_memory_stats(&t, out);
                                           });
  t.release(t.user_data);
}

TEST_F(StructVersions, StoreTierStats) {
  swa_store_memory_config_t mc;
  swa_store_memory_config_init(&mc);
  swa_kv_store_t tier, t;
  swa_kv_store_init(&tier);
  swa_kv_store_init(&t);
  ASSERT_EQ(swa_store_memory_create(&mc, &tier), SWA_OK);
  swa_store_tiered_config_t tc;
  swa_store_tiered_config_init(&tc);
  tc.tiers = &tier, tc.n_tiers = 1;
  ASSERT_EQ(swa_store_tiered_create(&tc, &t), SWA_OK) << swa_last_error();
  CheckEverySize<swa_store_tier_stats_t>("swa_store_tier_stats_t", kSizes_swa_store_tier_stats_t,
                                         swa_store_tier_stats_t{},
                                         [&](swa_store_tier_stats_t* out) {
                                           return swa_store_tiered_stats(&t, 0, out);
                                         });
  t.release(t.user_data);
}

}  // namespace
