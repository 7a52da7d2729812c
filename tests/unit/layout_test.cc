// Layout goldens computed by hand, and properties over random configurations.
#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "layout/layout.h"

namespace swa {
namespace {

// The ring rows of one layer over a pool at a fake base address.
uint8_t* const kBase = reinterpret_cast<uint8_t*>(uintptr_t{1} << 40);
RingRows RowsOf(const Layout& lay, uint32_t layer) {
  return RingRows{kBase + lay.layer(layer).ring_offset, lay.slot_bytes(),
                  lay.layer(layer).bytes_per_token, static_cast<int32_t>(lay.ring_len())};
}

LayerSpec Mla(Role role) {  // DeepSeek-V4-like: 64 q heads on one shared 512-wide MXFP8 vector
  LayerSpec l;
  l.role = role;
  l.q_heads = 64;
  l.kv_heads = 1;
  l.head_dim = 512;
  l.shared_kv = true;
  l.format = Format::kMxfp8;
  return l;
}

TEST(LayoutGolden, DeepSeekV4Like) {
  ModelSpec m;
  m.window = 128;
  m.draft_tokens = 5;
  m.max_slots = 8;
  for (int i = 0; i < 40; ++i) {  // stored and dropped interleaved in model order
    LayerSpec l = Mla(i % 2 == 0 ? Role::kStored : Role::kDropped);
    if (l.role == Role::kStored) {
      l.compress_ratio = 4;
      l.compress_entry_bytes = 4096;
    }
    m.layers.push_back(l);
  }
  auto lay = Layout::Create(m);
  ASSERT_TRUE(lay.ok()) << lay.status();
  EXPECT_EQ(lay->ring_len(), 134u);          // 128 + 5 + 1
  EXPECT_EQ(lay->max_ring_tokens(), 7u);     // 134 - 128 + 1
  EXPECT_EQ(lay->num_stored_layers(), 20u);
  const LayerLayout& l0 = lay->layer(0);
  EXPECT_EQ(l0.vec_bytes, 528u);             // 512 + 512/32
  EXPECT_EQ(l0.heads_per_token, 1u);
  EXPECT_EQ(l0.bytes_per_token, 528u);
  EXPECT_EQ(l0.ring_bytes, 70752u);          // 134 * 528 = 32 * 2211, no padding
  EXPECT_EQ(lay->stored_bytes(), 1415040u);  // 20 * 70752
  for (int i = 0; i < 40; ++i) {
    const int k = i / 2;
    const LayerLayout& l = lay->layer(i);
    if (i % 2 == 0) {
      EXPECT_EQ(l.ring_offset, uint64_t(k) * 70752) << i;
      EXPECT_EQ(l.compress_len, 9u);  // c + N = 4 + 5
      EXPECT_EQ(l.compress_bytes, 36864u);
      EXPECT_EQ(l.compress_offset, 2830080u + uint64_t(k) * 36864) << i;
    } else {
      EXPECT_EQ(l.ring_offset, 1415040u + uint64_t(k) * 70752) << i;
      EXPECT_EQ(l.compress_len, 0u);
      EXPECT_EQ(l.compress_bytes, 0u);
    }
  }
  EXPECT_EQ(lay->slot_bytes(), 3567360u);  // 40 * 70752 + 20 * 36864
  EXPECT_EQ(lay->pool_bytes(), 8u * 3567360u);
  // Ring row -> byte offset: slot 3, ring slot 100 of layer 1 (first dropped ring).
  EXPECT_EQ(RowsOf(*lay, 1).Row(3 * 134 + 100) - kBase, 1415040 + 3 * 3567360 + 100 * 528);
}

TEST(LayoutGolden, GptOssLike) {
  ModelSpec m;
  m.window = 128;
  m.draft_tokens = 0;
  m.max_slots = 4;
  for (int i = 0; i < 18; ++i) {
    LayerSpec l;
    l.q_heads = 64;
    l.kv_heads = 8;
    l.head_dim = 64;
    l.shared_kv = false;
    l.format = Format::kBf16;
    l.has_sinks = true;
    m.layers.push_back(l);
  }
  auto lay = Layout::Create(m);
  ASSERT_TRUE(lay.ok()) << lay.status();
  EXPECT_EQ(lay->ring_len(), 129u);
  const LayerLayout& l = lay->layer(5);
  EXPECT_EQ(l.vec_bytes, 128u);          // 2 * 64
  EXPECT_EQ(l.heads_per_token, 16u);     // 8 K + 8 V
  EXPECT_EQ(l.bytes_per_token, 2048u);
  EXPECT_EQ(l.ring_bytes, 264192u);      // 129 * 2048
  EXPECT_EQ(l.ring_offset, 5u * 264192u);
  EXPECT_EQ(lay->stored_bytes(), 18u * 264192u);
  EXPECT_EQ(lay->slot_bytes(), 4755456u);
}

TEST(LayoutGolden, Padding) {
  ModelSpec m;
  m.window = 5;
  m.draft_tokens = 1;
  m.alignment = 128;
  m.max_slots = 3;
  LayerSpec a;  // MXFP8, D 32: 33 bytes per vector
  a.q_heads = 2;
  a.kv_heads = 1;
  a.head_dim = 32;
  a.shared_kv = true;
  a.compress_ratio = 3;
  a.compress_entry_bytes = 7;
  LayerSpec b = a;  // FP32, separate K/V, 2 heads: 4 vectors of 128 bytes
  b.role = Role::kDropped;
  b.format = Format::kFp32;
  b.kv_heads = 2;
  b.q_heads = 4;
  b.shared_kv = false;
  b.compress_ratio = 0;
  b.compress_entry_bytes = 0;
  m.layers = {b, a};
  auto lay = Layout::Create(m);
  ASSERT_TRUE(lay.ok()) << lay.status();
  EXPECT_EQ(lay->ring_len(), 7u);
  EXPECT_EQ(lay->layer(1).ring_bytes, 256u);    // 7 * 33 = 231 -> 256
  EXPECT_EQ(lay->layer(1).ring_offset, 0u);     // the stored layer comes first
  EXPECT_EQ(lay->layer(0).bytes_per_token, 512u);
  EXPECT_EQ(lay->layer(0).ring_bytes, 3584u);   // 7 * 512, already aligned
  EXPECT_EQ(lay->layer(0).ring_offset, 256u);
  EXPECT_EQ(lay->layer(1).compress_len, 4u);    // 3 + 1
  EXPECT_EQ(lay->layer(1).compress_bytes, 128u);  // 28 -> 128
  EXPECT_EQ(lay->layer(1).compress_offset, 3840u);
  EXPECT_EQ(lay->slot_bytes(), 3968u);
  EXPECT_EQ(lay->stored_bytes(), 256u);

  m.ring_len = 10;  // explicit override
  auto lay2 = Layout::Create(m);
  ASSERT_TRUE(lay2.ok());
  EXPECT_EQ(lay2->ring_len(), 10u);
  EXPECT_EQ(lay2->layer(1).ring_bytes, 384u);  // 330 -> 384
  EXPECT_EQ(lay2->max_ring_tokens(), 6u);
  m.ring_len = 5;  // < W + N
  EXPECT_EQ(Layout::Create(m).status().code(), absl::StatusCode::kInvalidArgument);
  m.ring_len = 6;  // == W + N is allowed
  EXPECT_TRUE(Layout::Create(m).ok());
}

// ---- Properties over random configurations ------------------------------------

ModelSpec RandomSpec(std::mt19937_64& rng) {
  auto pick = [&](uint32_t lo, uint32_t hi) {
    return std::uniform_int_distribution<uint32_t>(lo, hi)(rng);
  };
  ModelSpec m;
  m.window = pick(1, 300);
  m.draft_tokens = pick(0, 8);
  m.ring_len = pick(0, 1) ? 0 : m.window + m.draft_tokens + pick(0, 5);
  m.alignment = 16u << pick(0, 4);
  m.max_slots = pick(1, 9);
  m.scale_mode = pick(0, 1) ? ScaleMode::kCeil : ScaleMode::kFloor;
  const uint32_t n = pick(1, 12);
  for (uint32_t i = 0; i < n; ++i) {
    LayerSpec l;
    l.role = pick(0, 1) ? Role::kStored : Role::kDropped;
    l.format = static_cast<Format>(pick(0, 2));
    l.head_dim = 32 * pick(1, 8);
    l.kv_heads = pick(1, 4);
    l.q_heads = l.kv_heads * pick(1, 4);
    l.shared_kv = pick(0, 1);
    if (pick(0, 2) == 0) {
      l.compress_ratio = pick(1, 8);
      l.compress_entry_bytes = pick(1, 300);
    }
    m.layers.push_back(l);
  }
  return m;
}

TEST(LayoutProperty, RegionsAlignedDisjointAndOrdered) {
  std::mt19937_64 rng(12345);
  for (int iter = 0; iter < 2000; ++iter) {
    const ModelSpec m = RandomSpec(rng);
    auto lay = Layout::Create(m);
    ASSERT_TRUE(lay.ok()) << lay.status();
    const uint64_t align = m.alignment;
    const uint32_t R = m.ring_len ? m.ring_len : m.window + m.draft_tokens + 1;
    ASSERT_EQ(lay->ring_len(), R);
    struct Region { uint64_t begin, end; int kind; };  // 0 stored, 1 dropped, 2 compression
    std::vector<Region> regions;
    uint64_t stored_sum = 0;
    for (uint32_t i = 0; i < m.layers.size(); ++i) {
      const LayerLayout& l = lay->layer(i);
      const LayerSpec& s = m.layers[i];
      const uint64_t vec = s.format == Format::kMxfp8 ? s.head_dim + s.head_dim / 32
                           : s.format == Format::kBf16 ? 2 * s.head_dim : 4 * s.head_dim;
      ASSERT_EQ(l.vec_bytes, vec);
      ASSERT_EQ(l.bytes_per_token, vec * s.kv_heads * (s.shared_kv ? 1 : 2));
      ASSERT_GE(l.ring_bytes, uint64_t{R} * l.bytes_per_token);
      ASSERT_LT(l.ring_bytes, uint64_t{R} * l.bytes_per_token + align);
      ASSERT_EQ(l.ring_offset % align, 0u);
      ASSERT_EQ(l.ring_bytes % align, 0u);
      regions.push_back({l.ring_offset, l.ring_offset + l.ring_bytes, int(s.role)});
      if (s.role == Role::kStored) stored_sum += l.ring_bytes;
      if (s.compress_ratio) {
        ASSERT_EQ(l.compress_len, s.compress_ratio + m.draft_tokens);
        ASSERT_EQ(l.compress_offset % align, 0u);
        ASSERT_GE(l.compress_bytes, uint64_t{l.compress_len} * s.compress_entry_bytes);
        regions.push_back({l.compress_offset, l.compress_offset + l.compress_bytes, 2});
      }
    }
    ASSERT_EQ(lay->stored_bytes(), stored_sum);
    ASSERT_EQ(lay->slot_bytes() % align, 0u);
    std::sort(regions.begin(), regions.end(),
              [](const Region& a, const Region& b) { return a.begin < b.begin; });
    uint64_t cursor = 0;
    int last_kind = 0;
    for (const Region& r : regions) {
      ASSERT_EQ(r.begin, cursor) << "gap or overlap";  // packed: padding is inside regions
      ASSERT_GE(r.kind, last_kind) << "stored -> dropped -> compression order broken";
      cursor = r.end;
      last_kind = r.kind;
    }
    ASSERT_LE(cursor, lay->slot_bytes());
    ASSERT_EQ(lay->slot_bytes(), (cursor + align - 1) / align * align);
    // Stored rings form the prefix [0, stored_bytes).
    for (const Region& r : regions) ASSERT_EQ(r.kind == 0, r.end <= lay->stored_bytes());
    // Row addressing: every (slot, ring slot) maps inside its layer's ring of that slot.
    for (uint32_t i = 0; i < m.layers.size(); ++i) {
      const LayerLayout& l = lay->layer(i);
      const uint32_t slot = m.max_slots - 1;
      const int64_t row = int64_t{slot} * R + (R - 1);
      const uint64_t off = uint64_t(RowsOf(*lay, i).Row(row) - kBase);
      ASSERT_EQ(off, slot * lay->slot_bytes() + l.ring_offset + uint64_t{R - 1} * l.bytes_per_token);
      ASSERT_LE(off + l.bytes_per_token, slot * lay->slot_bytes() + l.ring_offset + l.ring_bytes);
    }
  }
}

TEST(LayoutProperty, FingerprintTracksExactlyTheByteRelevantFields) {
  std::mt19937_64 rng(777);
  for (int iter = 0; iter < 300; ++iter) {
    ModelSpec m = RandomSpec(rng);
    m.ring_len = 0;
    const uint64_t base = Layout::Create(m)->fingerprint();
    ASSERT_EQ(Layout::Create(m)->fingerprint(), base);  // deterministic
    auto changed = [&](ModelSpec x) {
      auto l = Layout::Create(x);
      EXPECT_TRUE(l.ok()) << l.status();
      return l.ok() && l->fingerprint() != base;
    };
    const uint32_t i = std::uniform_int_distribution<uint32_t>(0, m.layers.size() - 1)(rng);
    { ModelSpec x = m; x.window += 1; EXPECT_TRUE(changed(x)); }
    { ModelSpec x = m; x.draft_tokens += 1; EXPECT_TRUE(changed(x)); }
    { ModelSpec x = m; x.ring_len = m.window + m.draft_tokens + 2; EXPECT_TRUE(changed(x)); }
    { ModelSpec x = m; x.alignment *= 2; EXPECT_TRUE(changed(x)); }
    { ModelSpec x = m; x.scale_mode = m.scale_mode == ScaleMode::kCeil ? ScaleMode::kFloor : ScaleMode::kCeil; EXPECT_TRUE(changed(x)); }
    { ModelSpec x = m; x.layers[i].head_dim += 32; EXPECT_TRUE(changed(x)); }
    { ModelSpec x = m; x.layers[i].kv_heads += 1; x.layers[i].q_heads = x.layers[i].kv_heads; EXPECT_TRUE(changed(x)); }
    { ModelSpec x = m; x.layers[i].shared_kv = !m.layers[i].shared_kv; EXPECT_TRUE(changed(x)); }
    { ModelSpec x = m; x.layers[i].format = static_cast<Format>((int(m.layers[i].format) + 1) % 3); EXPECT_TRUE(changed(x)); }
    { ModelSpec x = m; x.layers[i].role = m.layers[i].role == Role::kStored ? Role::kDropped : Role::kStored; EXPECT_TRUE(changed(x)); }
    { ModelSpec x = m; x.layers[i].compress_ratio += 1; x.layers[i].compress_entry_bytes += 1; EXPECT_TRUE(changed(x)); }
    { ModelSpec x = m; x.layers.push_back(m.layers[i]); EXPECT_TRUE(changed(x)); }
    // Not byte-relevant: unchanged.
    { ModelSpec x = m; x.max_slots += 3; EXPECT_FALSE(changed(x)); }
    { ModelSpec x = m; x.layers[i].q_heads *= 2; EXPECT_FALSE(changed(x)); }
    { ModelSpec x = m; x.layers[i].has_sinks = !m.layers[i].has_sinks; x.layers[i].rope.theta = 5e5f; x.layers[i].rope.style = RopeStyle::kNeox; x.layers[i].rope.dims = 32; x.layers[i].logit_softcap = 30; EXPECT_FALSE(changed(x)); }
  }
}

// FNV-1a 64 of the serialisation documented in docs/layout.md, computed
// independently (Python) for this configuration.
constexpr uint64_t kPinnedFingerprint = 0xb55037d81a2729b5ull;

TEST(LayoutFingerprint, StableAcrossBuildsAndMachines) {
  // Pinned value: a change here breaks every blob already in users' stores.
  ModelSpec m;
  m.window = 128;
  m.draft_tokens = 5;
  m.layers = {Mla(Role::kStored), Mla(Role::kDropped)};
  EXPECT_EQ(Layout::Create(m)->fingerprint(), LayoutFingerprint(m, 134));
  EXPECT_EQ(LayoutFingerprint(m, 134), kPinnedFingerprint);
}

}  // namespace
}  // namespace swa
