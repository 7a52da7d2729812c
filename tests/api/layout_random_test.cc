// Random configurations with every ring format (FP8_DS_MLA included) and every
// compression kind (opaque, HCA, CSA with and without the indexer), through the
// C API only: swa_layout_compute(), the created cache's swa_cache_layout() and
// its per-layer layouts against an independent computation of docs/layout.md,
// and the pool the cache really takes (a caller pool one byte short is refused).
#include <cstdint>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "api/test_util.h"
#include "gtest/gtest.h"

namespace {

using swa_test::LastError;

uint64_t Pad(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Bytes of one vector of D values (docs/layout.md, "Bytes").
uint64_t VecBytes(swa_format_t f, uint64_t d) {
  switch (f) {
    case SWA_FORMAT_MXFP8: return d + d / 32;
    case SWA_FORMAT_BF16: return 2 * d;
    case SWA_FORMAT_FP32: return 4 * d;
    case SWA_FORMAT_FP8_DS_MLA: return 584;
  }
  return 0;
}

struct Expected {
  uint64_t ring_len = 0, slot = 0, stored = 0, compress = 0, saved = 0;
  std::vector<uint64_t> ring_offset, ring_bytes, comp_offset, comp_bytes, comp_len, entry,
      index_offset, index_bytes, index_row;
};

Expected Compute(const swa_config_t& c, const std::vector<swa_layer_desc_t>& ls) {
  Expected e;
  const uint64_t a = c.alignment;
  e.ring_len = c.ring_len ? c.ring_len : c.window + c.draft_tokens + 1;
  const size_t n = ls.size();
  e.ring_offset.assign(n, 0);
  e.ring_bytes.assign(n, 0);
  e.comp_offset.assign(n, 0);
  e.comp_bytes.assign(n, 0);
  e.comp_len.assign(n, 0);
  e.entry.assign(n, 0);
  e.index_offset.assign(n, 0);
  e.index_bytes.assign(n, 0);
  e.index_row.assign(n, 0);
  uint64_t off = 0;
  for (int role = 0; role < 2; ++role) {
    for (size_t i = 0; i < n; ++i) {
      const swa_layer_desc_t& l = ls[i];
      if (int(l.role) != role) continue;
      const uint64_t per_token = uint64_t{l.kv_heads} * (l.shared_kv ? 1 : 2) *
                                 VecBytes(l.kv_format, l.head_dim);
      e.ring_offset[i] = off;
      e.ring_bytes[i] = Pad(per_token * e.ring_len, a);
      off += e.ring_bytes[i];
    }
    if (role == 0) e.stored = off;
  }
  const uint64_t comp_start = off;
  for (size_t i = 0; i < n; ++i) {
    const swa_layer_desc_t& l = ls[i];
    if (l.compress_ratio == 0) continue;
    const uint64_t vb = l.compress_row_format == SWA_FORMAT_BF16 ? 2 : 4;
    if (l.compress_kind == SWA_COMPRESS_OPAQUE) {
      e.comp_len[i] = l.compress_ratio + c.draft_tokens;
      e.entry[i] = l.compress_entry_bytes;
    } else if (l.compress_kind == SWA_COMPRESS_HCA) {
      e.comp_len[i] = l.compress_ratio + c.draft_tokens;
      e.entry[i] = 2 * l.compress_head_dim * vb;
    } else {
      e.comp_len[i] = 2 * l.compress_ratio + c.draft_tokens;
      e.entry[i] = 2 * 2 * l.compress_head_dim * vb;
      e.index_row[i] = 2 * 2 * l.index_head_dim * vb;
    }
    e.comp_offset[i] = off;
    e.comp_bytes[i] = Pad(e.comp_len[i] * e.entry[i], a);
    off += e.comp_bytes[i];
    if (e.index_row[i] != 0) {
      e.index_offset[i] = off;
      e.index_bytes[i] = Pad(e.comp_len[i] * e.index_row[i], a);
      off += e.index_bytes[i];
    }
    if (l.compress_kind != SWA_COMPRESS_OPAQUE && l.role == SWA_LAYER_STORED)
      e.saved += e.comp_len[i] * (e.entry[i] + e.index_row[i]);
  }
  e.compress = off - comp_start;
  e.slot = Pad(off, a);
  return e;
}

TEST(LayoutRandom, EveryFormatAndCompressorMatchesTheIndependentSizes) {
  std::mt19937_64 rng(20261207);
  auto pick = [&](uint32_t lo, uint32_t hi) {
    return std::uniform_int_distribution<uint32_t>(lo, hi)(rng);
  };
  int created = 0;
  for (int iter = 0; iter < 300; ++iter) {
    swa_config_t c;
    swa_config_init(&c);
    c.backend = SWA_BACKEND_CPU;
    c.window = pick(1, 200);
    c.draft_tokens = pick(0, 7);
    c.ring_len = pick(0, 1) ? 0 : c.window + c.draft_tokens + pick(0, 9);
    c.alignment = 16u << pick(0, 8);
    c.max_slots = pick(1, 5);
    std::vector<swa_layer_desc_t> ls(pick(1, 8));
    for (swa_layer_desc_t& l : ls) {
      swa_layer_desc_init(&l);
      l.role = pick(0, 1) ? SWA_LAYER_STORED : SWA_LAYER_DROPPED;
      l.kv_format = static_cast<swa_format_t>(pick(0, 3));
      l.head_dim = l.kv_format == SWA_FORMAT_FP8_DS_MLA ? 512 : 32 * pick(1, 8);
      l.kv_heads = pick(1, 3);
      l.q_heads = l.kv_heads * pick(1, 3);
      l.shared_kv = pick(0, 1);
      switch (pick(0, 3)) {
        case 0: break;
        case 1:
          l.compress_ratio = pick(1, 40);
          l.compress_entry_bytes = pick(1, 999);
          break;
        default:
          l.compress_kind = pick(0, 1) ? SWA_COMPRESS_HCA : SWA_COMPRESS_CSA;
          l.compress_ratio = pick(1, 130);
          l.compress_head_dim = pick(1, 300);
          l.compress_row_format = pick(0, 1) ? SWA_FORMAT_BF16 : SWA_FORMAT_FP32;
          if (l.compress_kind == SWA_COMPRESS_CSA && pick(0, 1)) l.index_head_dim = pick(1, 200);
      }
    }
    c.num_layers = uint32_t(ls.size());
    c.layers = ls.data();
    const Expected e = Compute(c, ls);
    const std::string what = "iteration " + std::to_string(iter);

    swa_layout_t lay;
    std::memset(&lay, 0xA5, sizeof lay);
    lay.struct_size = sizeof lay;
    ASSERT_EQ(swa_layout_compute(&c, &lay), SWA_OK) << what << ": " << LastError();
    EXPECT_EQ(lay.ring_len, e.ring_len) << what;
    EXPECT_EQ(lay.slot_bytes, e.slot) << what;
    EXPECT_EQ(lay.stored_bytes, e.stored) << what;
    EXPECT_EQ(lay.compress_bytes, e.compress) << what;
    EXPECT_EQ(lay.compress_saved_bytes, e.saved) << what;
    EXPECT_EQ(lay.pool_bytes, e.slot * c.max_slots) << what;
    EXPECT_EQ(lay.max_ring_tokens, e.ring_len - c.window + 1) << what;
    EXPECT_EQ(lay.num_layers, c.num_layers) << what;

    // The cache: its layout is the computed one, each layer where the
    // reference puts it, and it really takes pool_bytes (one byte less: refused).
    std::vector<unsigned char> pool_mem(lay.pool_bytes + 8192);
    void* base = pool_mem.data() + (c.alignment - reinterpret_cast<uintptr_t>(pool_mem.data()) %
                                                      c.alignment) % c.alignment;
    swa_config_t short_pool = c;
    short_pool.pool = base;
    short_pool.pool_bytes = lay.pool_bytes - 1;
    swa_cache_t* cache = nullptr;
    EXPECT_EQ(swa_cache_create(&short_pool, &cache), SWA_INVALID_ARGUMENT) << what;
    EXPECT_EQ(cache, nullptr);
    swa_config_t exact_pool = c;
    exact_pool.pool = base;
    exact_pool.pool_bytes = lay.pool_bytes;
    const swa_status_t st = swa_cache_create(&exact_pool, &cache);
    if (st == SWA_UNIMPLEMENTED) continue;  // a layer the CPU kernels do not run
    ASSERT_EQ(st, SWA_OK) << what << ": " << LastError();
    ++created;
    swa_layout_t got;
    got.struct_size = sizeof got;
    ASSERT_EQ(swa_cache_layout(cache, &got), SWA_OK);
    EXPECT_EQ(std::memcmp(&got, &lay, sizeof got), 0) << what;
    uint64_t ring_sum = 0, comp_sum = 0;
    for (uint32_t i = 0; i < c.num_layers; ++i) {
      swa_layer_layout_t ll;
      ll.struct_size = sizeof ll;
      ASSERT_EQ(swa_cache_layer_layout(cache, i, &ll), SWA_OK);
      EXPECT_EQ(ll.ring_offset, e.ring_offset[i]) << what << " layer " << i;
      EXPECT_EQ(ll.ring_bytes, e.ring_bytes[i]) << what << " layer " << i;
      EXPECT_EQ(ll.compress_len, e.comp_len[i]) << what << " layer " << i;
      EXPECT_EQ(ll.compress_entry_bytes, e.entry[i]) << what << " layer " << i;
      EXPECT_EQ(ll.compress_offset, e.comp_offset[i]) << what << " layer " << i;
      EXPECT_EQ(ll.compress_bytes, e.comp_bytes[i]) << what << " layer " << i;
      EXPECT_EQ(ll.index_row_bytes, e.index_row[i]) << what << " layer " << i;
      EXPECT_EQ(ll.index_offset, e.index_offset[i]) << what << " layer " << i;
      EXPECT_EQ(ll.index_bytes, e.index_bytes[i]) << what << " layer " << i;
      ring_sum += ll.ring_bytes;
      comp_sum += ll.compress_bytes + ll.index_bytes;
      swa_tensor_view_t v;
      v.struct_size = sizeof v;
      ASSERT_EQ(swa_cache_layer_view(cache, i, &v), SWA_OK);
      // The view's last byte of the last slot lies inside the pool.
      const unsigned char* last = static_cast<const unsigned char*>(v.data) +
                                  (v.shape[0] - 1) * v.strides[0] + (v.shape[1] - 1) * v.strides[1] +
                                  (v.shape[2] - 1) * v.strides[2] + (v.shape[3] - 1);
      EXPECT_LT(last, static_cast<const unsigned char*>(base) + lay.pool_bytes) << what;
      EXPECT_EQ(v.data, static_cast<unsigned char*>(base) + ll.ring_offset) << what;
    }
    EXPECT_EQ(Pad(ring_sum + comp_sum, c.alignment), lay.slot_bytes) << what;
    EXPECT_EQ(comp_sum, lay.compress_bytes) << what;
    swa_cache_destroy(cache);
  }
  EXPECT_GT(created, 100);
}

}  // namespace

namespace {

// Configurations at the bounds of docs/layout.md, "Limits", that are valid:
// each creates, steps (every output finite, the ring holds the new keys) and
// comes back bit for bit from a save / reset / restore round trip.
struct Extreme {
  const char* name;
  uint32_t window, draft, ring_len, alignment, max_slots;
  swa_format_t format;
  uint32_t q_heads, kv_heads, head_dim, shared_kv;
  uint32_t tokens;  // new tokens of the one step
};

const Extreme kExtremes[] = {
    {"window 1, largest alignment", 1, 0, 0, 4096, 2, SWA_FORMAT_MXFP8, 1, 1, 32, 1, 1},
    {"1024 drafts, ring W + N", 1, 1024, 1025, 16, 2, SWA_FORMAT_FP32, 2, 1, 32, 0, 1025},
    {"largest CPU head_dim", 4, 1, 0, 32, 1, SWA_FORMAT_MXFP8, 2, 1, 1024, 0, 2},
    {"4096 heads", 2, 0, 0, 64, 1, SWA_FORMAT_BF16, 4096, 4096, 32, 0, 1},
    {"GQA 4096 / 1", 3, 2, 7, 128, 1, SWA_FORMAT_BF16, 4096, 1, 64, 1, 3},
    {"FP8_DS_MLA, 2 heads", 5, 1, 0, 2048, 3, SWA_FORMAT_FP8_DS_MLA, 4, 2, 512, 0, 2},
};

TEST(LayoutExtremes, ValidBoundsStepAndRoundTrip) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  for (const Extreme& x : kExtremes) {
    SCOPED_TRACE(x.name);
    swa_layer_desc_t l;
    swa_layer_desc_init(&l);
    l.kv_format = x.format;
    l.q_heads = x.q_heads;
    l.kv_heads = x.kv_heads;
    l.head_dim = x.head_dim;
    l.shared_kv = x.shared_kv;
    swa_config_t c;
    swa_config_init(&c);
    c.backend = SWA_BACKEND_CPU;
    c.window = x.window;
    c.draft_tokens = x.draft;
    c.ring_len = x.ring_len;
    c.alignment = x.alignment;
    c.max_slots = x.max_slots;
    c.num_layers = 1;
    c.layers = &l;
    swa_cache_t* cache = nullptr;
    ASSERT_EQ(swa_cache_create(&c, &cache), SWA_OK) << LastError();
    swa_kv_store_t store;
    swa_kv_store_init(&store);
    swa_store_memory_config_t mc;
    swa_store_memory_config_init(&mc);
    ASSERT_EQ(swa_store_memory_create(&mc, &store), SWA_OK) << LastError();
    ASSERT_EQ(swa_cache_set_store(cache, &store), SWA_OK) << LastError();
    swa_plan_t* plan = nullptr;
    ASSERT_EQ(swa_plan_create(cache, &plan), SWA_OK) << LastError();
    uint32_t slot = 0;
    ASSERT_EQ(swa_slot_alloc(cache, &slot), SWA_OK);
    const swa_seq_t seq = {slot, int32_t(x.tokens), int32_t(x.tokens), 0};
    ASSERT_EQ(swa_plan_build(plan, &seq, 1), SWA_OK) << LastError();
    const size_t qn = size_t(x.tokens) * x.q_heads * x.head_dim;
    const size_t kn = size_t(x.tokens) * x.kv_heads * x.head_dim;
    std::vector<float> q(qn), k(kn), v(kn), out(qn, std::nanf(""));
    for (float& f : q) f = u(rng);
    for (float& f : k) f = u(rng);
    for (float& f : v) f = u(rng);
    swa_step_args_t a;
    swa_step_args_init(&a);
    a.q = q.data();
    a.k_new = k.data();
    a.v_new = x.shared_kv ? nullptr : v.data();
    a.out = out.data();
    ASSERT_EQ(swa_step(cache, plan, &a), SWA_OK) << LastError();
    size_t bad = 0;
    for (float f : out) bad += !std::isfinite(f);
    EXPECT_EQ(bad, 0u);

    swa_layout_t lay;
    lay.struct_size = sizeof lay;
    ASSERT_EQ(swa_cache_layout(cache, &lay), SWA_OK);
    swa_tensor_view_t view;
    view.struct_size = sizeof view;
    ASSERT_EQ(swa_cache_layer_view(cache, 0, &view), SWA_OK);
    const unsigned char* s0 =
        static_cast<const unsigned char*>(view.data) + size_t(slot) * lay.slot_bytes;
    const std::vector<unsigned char> before(s0, s0 + lay.stored_bytes);
    size_t nonzero = 0;
    for (unsigned char b : before) nonzero += b != 0;
    EXPECT_GT(nonzero, 0u) << "the step wrote nothing into the ring";
    const uint8_t key[] = "extreme";
    ASSERT_EQ(swa_slot_save(cache, slot, key, sizeof key), SWA_OK) << LastError();
    ASSERT_EQ(swa_slot_reset(cache, slot), SWA_OK);
    std::memset(const_cast<unsigned char*>(s0), 0x5A, lay.stored_bytes);
    ASSERT_EQ(swa_slot_restore(cache, slot, key, sizeof key), SWA_OK) << LastError();
    EXPECT_EQ(std::memcmp(before.data(), s0, lay.stored_bytes), 0);
    swa_slot_info_t info;
    info.struct_size = sizeof info;
    ASSERT_EQ(swa_slot_info(cache, slot, &info), SWA_OK);
    EXPECT_EQ(info.written_end, int64_t(x.tokens));
    swa_plan_destroy(plan);
    swa_cache_destroy(cache);
  }
}

}  // namespace
