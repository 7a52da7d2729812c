// The compression state in store blobs (swa_cache_set_save_compression,
// docs/store.md "Compression section"): a slot saved with its compressor
// rings (HCA, CSA and the CSA indexer's; stored layers only), restored into
// another slot, continues exactly: the entries it emits from then on, after a
// rewind over rejected drafts too, are bit for bit those of the sequence that
// never left. Every fault the store tests inject (failed get, truncated blob,
// a flipped byte in the section, another key's blob, a blob without the
// section for a cache that expects it, a failed put) is refused and leaves
// the target slot byte for byte unchanged; a checkpoint the compressor rings
// no longer hold is refused and stores nothing; with a store secret the HMAC
// tag covers the section.
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "api/test_util.h"
#include "swacache.h"

namespace {

constexpr uint32_t kN = 2;
constexpr uint32_t kD = 8;

enum class Fault { kNone, kFailGet, kTruncate, kFlipSection, kFailPut };

struct FaultStore {
  std::map<std::string, std::vector<uint8_t>> blobs;
  Fault fault = Fault::kNone;
  size_t flip_from_end = 0;  // byte of the section to flip, counted from the blob's end

  static swa_status_t Put(void* u, const uint8_t* k, size_t kl, const swa_iov_t* iov, size_t n,
                          char*, size_t) {
    auto* s = static_cast<FaultStore*>(u);
    if (s->fault == Fault::kFailPut) return SWA_UNAVAILABLE;
    std::vector<uint8_t> b;
    for (size_t i = 0; i < n; ++i) {
      const auto* p = static_cast<const uint8_t*>(iov[i].data);
      b.insert(b.end(), p, p + iov[i].size);
    }
    s->blobs[std::string(reinterpret_cast<const char*>(k), kl)] = std::move(b);
    return SWA_OK;
  }
  static swa_status_t Get(void* u, const uint8_t* k, size_t kl, const swa_iov_t* iov, size_t n,
                          uint64_t* size, char*, size_t) {
    auto* s = static_cast<FaultStore*>(u);
    if (s->fault == Fault::kFailGet) return SWA_UNAVAILABLE;
    auto it = s->blobs.find(std::string(reinterpret_cast<const char*>(k), kl));
    if (it == s->blobs.end()) return SWA_NOT_FOUND;
    std::vector<uint8_t> b = it->second;
    if (s->fault == Fault::kTruncate) b.pop_back();
    if (s->fault == Fault::kFlipSection) b[b.size() - 1 - s->flip_from_end] ^= 0x10;
    if (b.size() != *size) {
      *size = b.size();
      return SWA_OK;
    }
    size_t at = 0;
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(iov[i].data, b.data() + at, iov[i].size);
      at += iov[i].size;
    }
    return SWA_OK;
  }
};

float Row(int p, uint32_t layer, uint32_t comp, uint32_t i, bool gate, bool draft) {
  const float x = (draft ? 1.7f : 0.37f) * p + 0.11f * i + layer + 3.0f * comp + (gate ? 0.5f : 0);
  return gate ? 1.5f * std::sin(x) : std::cos(1.3f * x);
}

struct Rig {
  swa_layer_desc_t d[3];
  swa_cache_t* cache = nullptr;
  swa_plan_t* plan = nullptr;
  FaultStore store;
  uint8_t* pool = nullptr;
  swa_layout_t lay{sizeof(swa_layout_t)};
  // (layer, compressor, entry) -> the entry's values, as emitted last.
  using Entries = std::map<std::tuple<uint32_t, uint32_t, int32_t>, std::vector<float>>;

  explicit Rig(bool save_compression = true, uint32_t ring_len = 0, bool secret = false) {
    for (auto& l : d) {
      swa_layer_desc_init(&l);
      l.q_heads = 2;
      l.head_dim = 32;
      l.kv_format = SWA_FORMAT_BF16;
      l.compress_ratio = 4;
      l.compress_head_dim = kD;
      l.compress_rope_dims = 4;
      l.rope_theta = 160000.0f;
    }
    d[0].compress_kind = SWA_COMPRESS_HCA;
    d[1].compress_kind = SWA_COMPRESS_CSA;
    d[1].index_head_dim = 4;
    d[2].compress_kind = SWA_COMPRESS_CSA;  // dropped: not in the section
    d[2].role = SWA_LAYER_DROPPED;
    swa_config_t cfg;
    swa_config_init(&cfg);
    cfg.window = 4;
    cfg.draft_tokens = kN;
    cfg.ring_len = ring_len;
    static const uint8_t kSecret[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    if (secret) {
      cfg.store_secret = kSecret;
      cfg.store_secret_len = sizeof kSecret;
    }
    cfg.max_slots = 4;
    cfg.backend = SWA_BACKEND_CPU;
    cfg.num_threads = 1;
    cfg.num_layers = 3;
    cfg.layers = d;
    EXPECT_EQ(swa_cache_create(&cfg, &cache), SWA_OK) << swa_last_error();
    EXPECT_EQ(swa_plan_create(cache, &plan), SWA_OK);
    EXPECT_EQ(swa_cache_set_save_compression(cache, save_compression ? 1 : 0), SWA_OK);
    swa_kv_store_t s;
    swa_kv_store_init(&s);
    s.user_data = &store;
    s.put = FaultStore::Put;
    s.get = FaultStore::Get;
    EXPECT_EQ(swa_cache_set_store(cache, &s), SWA_OK) << swa_last_error();
    EXPECT_EQ(swa_cache_layout(cache, &lay), SWA_OK);
    pool = swa_test::PoolBase(cache);
    EXPECT_NE(pool, nullptr) << swa_last_error();
  }
  ~Rig() {
    swa_plan_destroy(plan);
    swa_cache_destroy(cache);
  }

  std::vector<uint8_t> Image(uint32_t slot) const {
    std::vector<uint8_t> b(pool + slot * lay.slot_bytes, pool + (slot + 1) * lay.slot_bytes);
    swa_slot_info_t info{sizeof info};
    EXPECT_EQ(swa_slot_info(cache, slot, &info), SWA_OK);
    for (int32_t v : {info.written_end, info.valid_start})
      b.insert(b.end(), reinterpret_cast<uint8_t*>(&v), reinterpret_cast<uint8_t*>(&v) + 4);
    return b;
  }

  // Positions q .. q + n - 1, the last `drafts` of them draft rows.
  void Step(uint32_t slot, int q, int n, int drafts, Entries* out) {
    swa_seq_t seq{slot, n, q + n, 0};
    ASSERT_EQ(swa_plan_build(plan, &seq, 1), SWA_OK) << swa_last_error();
    for (uint32_t layer = 0; layer < 3; ++layer) {
      size_t nw = 0;
      ASSERT_EQ(swa_plan_compress_windows(plan, layer, nullptr, 0, &nw), SWA_OK);
      std::vector<swa_compress_window_t> w(nw);
      if (nw) ASSERT_EQ(swa_plan_compress_windows(plan, layer, w.data(), nw, &nw), SWA_OK);
      for (uint32_t comp = 0; comp < (layer == 1 ? 2u : 1u); ++comp) {
        const uint32_t dim = comp == 0 ? kD : 4;
        const uint32_t width = 2 * dim;  // CSA rows; HCA: dim
        const uint32_t s = layer == 0 ? dim : width;
        std::vector<float> kv(n * s), gate(n * s), bias(4 * s), weight(dim), res(nw * dim + 1);
        for (int t = 0; t < n; ++t)
          for (uint32_t i = 0; i < s; ++i) {
            const bool draft = t >= n - drafts;
            kv[t * s + i] = Row(q + t, layer, comp, i, false, draft);
            gate[t * s + i] = Row(q + t, layer, comp, i, true, draft);
          }
        for (uint32_t i = 0; i < bias.size(); ++i) bias[i] = 0.1f * std::sin(1.0f * i);
        for (uint32_t i = 0; i < dim; ++i) weight[i] = 1.0f + 0.05f * i;
        swa_compress_args_t a;
        swa_compress_args_init(&a);
        a.layer = layer;
        a.compressor = comp;
        a.kv = kv.data();
        a.gate = gate.data();
        a.row_width = s;
        a.rows = n;
        a.position_bias = bias.data();
        a.norm_weight = weight.data();
        a.out = res.data();
        a.out_rows = nw;
        ASSERT_EQ(swa_compress_step(cache, plan, &a), SWA_OK) << swa_last_error();
        for (size_t k = 0; k < nw; ++k)
          (*out)[{layer, comp, w[k].entry}] =
              std::vector<float>(res.begin() + k * dim, res.begin() + (k + 1) * dim);
      }
    }
  }
};

// From position `from`: steps of 3 with 2 drafts, each rejected by the next.
void Continue(Rig& r, uint32_t slot, int from, int to, Rig::Entries* e) {
  for (int q = from; q < to; q += 1) r.Step(slot, q, 3, 2, e);
}

TEST(CompressStore, RestoredSlotContinuesExactly) {
  Rig r;
  ASSERT_GT(r.lay.compress_saved_bytes, 0u);
  uint32_t a, b;
  ASSERT_EQ(swa_slot_alloc(r.cache, &a), SWA_OK);
  ASSERT_EQ(swa_slot_alloc(r.cache, &b), SWA_OK);
  Rig::Entries ea, eb;
  r.Step(a, 0, 7, 0, &ea);
  r.Step(a, 7, 3, 2, &ea);  // ends with two drafts: E = 10, the next step starts at 8
  const uint8_t key[] = "seq-a";
  ASSERT_EQ(swa_slot_save(r.cache, a, key, 5), SWA_OK) << swa_last_error();
  ASSERT_EQ(r.store.blobs.size(), 1u);
  EXPECT_EQ(r.store.blobs.begin()->second.size(), 64 + r.lay.stored_bytes + r.lay.compress_saved_bytes);
  EXPECT_EQ(r.store.blobs.begin()->second[4], 4);  // format version 4
  std::memset(r.pool + b * r.lay.slot_bytes, 0x5a, r.lay.slot_bytes);
  ASSERT_EQ(swa_slot_restore(r.cache, b, key, 5), SWA_OK) << swa_last_error();
  Rig::Entries ca, cb;
  Continue(r, a, 8, 30, &ca);
  Continue(r, b, 8, 30, &cb);
  ASSERT_FALSE(ca.empty());
  ASSERT_EQ(ca.size(), cb.size());
  for (const auto& [k, v] : ca) {
    // The dropped layer's ring is not saved: only stored layers must match.
    if (std::get<0>(k) == 2) continue;
    ASSERT_EQ(std::memcmp(v.data(), cb.at(k).data(), v.size() * 4), 0)
        << "layer " << std::get<0>(k) << " compressor " << std::get<1>(k) << " entry "
        << std::get<2>(k);
  }
}

TEST(CompressStore, FaultsLeaveTheSlotUnchanged) {
  Rig r;
  uint32_t a, b;
  ASSERT_EQ(swa_slot_alloc(r.cache, &a), SWA_OK);
  ASSERT_EQ(swa_slot_alloc(r.cache, &b), SWA_OK);
  Rig::Entries e;
  r.Step(a, 0, 9, 0, &e);
  r.Step(b, 0, 5, 0, &e);
  const uint8_t key[] = "k";
  ASSERT_EQ(swa_slot_save(r.cache, a, key, 1), SWA_OK) << swa_last_error();
  const std::vector<uint8_t> before = r.Image(b);
  for (Fault f : {Fault::kFailGet, Fault::kTruncate, Fault::kFlipSection}) {
    for (size_t at : {size_t{0}, size_t{r.lay.compress_saved_bytes - 1}}) {
      r.store.fault = f;
      r.store.flip_from_end = at;  // the section's last byte, then its first
      EXPECT_NE(swa_slot_restore(r.cache, b, key, 1), SWA_OK) << static_cast<int>(f);
      EXPECT_EQ(r.Image(b), before) << static_cast<int>(f);
    }
  }
  r.store.fault = Fault::kNone;
  // Another key's blob copied over this one.
  const uint8_t other[] = "o";
  ASSERT_EQ(swa_slot_save(r.cache, b, other, 1), SWA_OK);
  std::string ka, kb;
  for (const auto& [k, v] : r.store.blobs) (k.back() == 'k' ? ka : kb) = k;
  r.store.blobs[ka] = r.store.blobs[kb];
  EXPECT_EQ(swa_slot_restore(r.cache, b, key, 1), SWA_DATA_LOSS) << swa_last_error();
  EXPECT_EQ(r.Image(b), before);
  // A failed put stores nothing.
  r.store.fault = Fault::kFailPut;
  const uint8_t third[] = "t";
  EXPECT_EQ(swa_slot_save(r.cache, a, third, 1), SWA_UNAVAILABLE);
  EXPECT_EQ(r.store.blobs.size(), 2u);
}

TEST(CompressStore, SettingMustMatchTheBlob) {
  Rig with(true), without(false);
  uint32_t s;
  ASSERT_EQ(swa_slot_alloc(without.cache, &s), SWA_OK);
  Rig::Entries e;
  without.Step(s, 0, 6, 0, &e);
  const uint8_t key[] = "k";
  ASSERT_EQ(swa_slot_save(without.cache, s, key, 1), SWA_OK);
  EXPECT_EQ(without.store.blobs.begin()->second[4], 3);  // no section: version 3 as before
  // The blob without the section, read by a cache that expects it: refused.
  with.store.blobs = without.store.blobs;
  uint32_t t;
  ASSERT_EQ(swa_slot_alloc(with.cache, &t), SWA_OK);
  const std::vector<uint8_t> before = with.Image(t);
  EXPECT_NE(swa_slot_restore(with.cache, t, key, 1), SWA_OK);
  EXPECT_EQ(with.Image(t), before);
  EXPECT_EQ(swa_cache_set_save_compression(with.cache, 2), SWA_INVALID_ARGUMENT);
}

TEST(CompressStore, CheckpointBeyondTheCompressorRing) {
  Rig r(true, 16);
  uint32_t a;
  ASSERT_EQ(swa_slot_alloc(r.cache, &a), SWA_OK);
  Rig::Entries e;
  r.Step(a, 0, 7, 0, &e);
  r.Step(a, 7, 7, 0, &e);  // E = 14; the HCA ring (L = 6) holds positions >= 8
  // The SWA ring (R = 16) reaches back to 0; the HCA window open at 7 starts at 4.
  const uint8_t key[] = "c";
  EXPECT_EQ(swa_slot_save_at(r.cache, a, 7, key, 1), SWA_OUT_OF_RANGE);
  EXPECT_NE(std::strstr(swa_last_error(), "compressor ring of layer"), nullptr)
      << swa_last_error();
  EXPECT_TRUE(r.store.blobs.empty());
  EXPECT_EQ(swa_slot_save_at(r.cache, a, 13, key, 1), SWA_OK) << swa_last_error();
}

// swa_slot_checkpoint_range() of a layout with typed compressors: every c in
// lo ... hi is accepted by swa_slot_save_at() (include/swacache.h), so the
// range ends where a compressor ring no longer holds the window open at c;
// c = lo - 1 is refused. The same without the section (the planner checks the
// rings' rewind rule on the restored slot either way).
TEST(CompressStore, CheckpointRangeIsWhatSaveAtAccepts) {
  for (const bool compression : {true, false}) {
    Rig r(compression, 16);
    uint32_t a;
    ASSERT_EQ(swa_slot_alloc(r.cache, &a), SWA_OK);
    Rig::Entries e;
    r.Step(a, 0, 7, 0, &e);
    r.Step(a, 7, 7, 0, &e);  // E = 14
    r.Step(a, 14, 3, 2, &e);  // E = 17, drafts up to 16
    r.Step(a, 15, 3, 2, &e);  // rewound over one: E = 18, ring_high 18
    int32_t lo = -1, hi = -1;
    ASSERT_EQ(swa_slot_checkpoint_range(r.cache, a, &lo, &hi), SWA_OK) << swa_last_error();
    EXPECT_EQ(hi, 18);
    // HCA (c = 4, L = 6): the window open at c starts at 4 floor(c / 4) >= 12;
    // CSA (L = 10): 4 (floor(c / 4) - 1) >= 8. The SWA ring alone: 18 - 16 + 3 = 5.
    // Without the section too: swa_plan_build applies the compressor rings'
    // rewind rule to the restored slot, so c < 12 could never be continued.
    EXPECT_EQ(lo, 12) << "compression " << compression;
    for (int32_t c = lo; c <= hi; ++c) {
      const std::string key = "c" + std::to_string(c);
      EXPECT_EQ(swa_slot_save_at(r.cache, a, c, reinterpret_cast<const uint8_t*>(key.data()),
                                 key.size()),
                SWA_OK)
          << "c = " << c << " compression " << compression << ": " << swa_last_error();
    }
    const size_t stored = r.store.blobs.size();
    EXPECT_EQ(swa_slot_save_at(r.cache, a, lo - 1, reinterpret_cast<const uint8_t*>("x"), 1),
              SWA_OUT_OF_RANGE)
        << "compression " << compression;
    EXPECT_EQ(r.store.blobs.size(), stored);
  }
}

// With a store secret the HMAC tag covers the section: a flipped section byte
// (re-checksummed or not) is DATA_LOSS before the slot is touched.
TEST(CompressStore, TaggedBlobsCoverTheSection) {
  Rig r(true, 0, true);
  uint32_t a, b;
  ASSERT_EQ(swa_slot_alloc(r.cache, &a), SWA_OK);
  ASSERT_EQ(swa_slot_alloc(r.cache, &b), SWA_OK);
  Rig::Entries e;
  r.Step(a, 0, 9, 0, &e);
  const uint8_t key[] = "k";
  ASSERT_EQ(swa_slot_save(r.cache, a, key, 1), SWA_OK) << swa_last_error();
  const auto& blob = r.store.blobs.begin()->second;
  EXPECT_EQ(blob.size(), 64 + r.lay.stored_bytes + r.lay.compress_saved_bytes + 32);
  const std::vector<uint8_t> before = r.Image(b);
  r.store.fault = Fault::kFlipSection;
  r.store.flip_from_end = 32;  // the section's last byte, just before the tag
  EXPECT_EQ(swa_slot_restore(r.cache, b, key, 1), SWA_DATA_LOSS) << swa_last_error();
  EXPECT_EQ(r.Image(b), before);
  r.store.fault = Fault::kNone;
  ASSERT_EQ(swa_slot_restore(r.cache, b, key, 1), SWA_OK) << swa_last_error();
  Rig::Entries ca, cb;
  Continue(r, a, 9, 20, &ca);
  Continue(r, b, 9, 20, &cb);
  for (const auto& [k, v] : ca)
    if (std::get<0>(k) != 2) EXPECT_EQ(v, cb.at(k));
}

}  // namespace
