// The compressor ring's plan (docs/semantics.md, "Compression state") through
// the public C API: exact integer goldens worked out by hand from the rules
// (windows, slot splits, store runs), including a window closed by a draft
// that the next step rejects and closes again under the same entry; the
// compressor's rewind rule (a rewind the SWA ring allows but the compressor
// ring does not is refused, nothing changes); the layout of typed
// compressors; and bad descriptions.
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "swacache.h"

namespace {

constexpr uint32_t kC = 4;  // rate
constexpr uint32_t kN = 2;  // drafts: L = 6 (HCA), 10 (CSA)

struct Rig {
  swa_layer_desc_t d[3];
  swa_cache_t* cache = nullptr;
  swa_plan_t* plan = nullptr;

  explicit Rig(uint32_t ring_len = 64) {
    for (auto& l : d) {
      swa_layer_desc_init(&l);
      l.q_heads = 2;
      l.head_dim = 32;
      l.kv_format = SWA_FORMAT_FP32;
    }
    d[0].compress_kind = SWA_COMPRESS_HCA;
    d[0].compress_ratio = kC;
    d[0].compress_head_dim = 8;
    d[1].compress_kind = SWA_COMPRESS_CSA;
    d[1].compress_ratio = kC;
    d[1].compress_head_dim = 8;
    d[1].index_head_dim = 4;
    d[1].compress_row_format = SWA_FORMAT_BF16;
    swa_config_t cfg;
    swa_config_init(&cfg);
    cfg.window = 4;
    cfg.draft_tokens = kN;
    cfg.ring_len = ring_len;  // large: the SWA ring allows deep rewinds
    cfg.max_slots = 4;
    cfg.backend = SWA_BACKEND_CPU;
    cfg.num_threads = 1;
    cfg.num_layers = 3;
    cfg.layers = d;
    EXPECT_EQ(swa_cache_create(&cfg, &cache), SWA_OK) << swa_last_error();
    EXPECT_EQ(swa_plan_create(cache, &plan), SWA_OK) << swa_last_error();
  }
  ~Rig() {
    swa_plan_destroy(plan);
    swa_cache_destroy(cache);
  }
  std::vector<swa_compress_window_t> Windows(uint32_t layer) {
    size_t n = 0;
    EXPECT_EQ(swa_plan_compress_windows(plan, layer, nullptr, 0, &n), SWA_OK) << swa_last_error();
    std::vector<swa_compress_window_t> w(n);
    if (n > 0) {
      EXPECT_EQ(swa_plan_compress_windows(plan, layer, w.data(), n, &n), SWA_OK);
    }
    return w;
  }
  std::vector<swa_segment_t> Store(uint32_t layer) {
    size_t n = 0;
    EXPECT_EQ(swa_plan_compress_store_segments(plan, layer, nullptr, 0, &n), SWA_OK)
        << swa_last_error();
    std::vector<swa_segment_t> s(n);
    if (n > 0) {
      EXPECT_EQ(swa_plan_compress_store_segments(plan, layer, s.data(), n, &n), SWA_OK);
    }
    return s;
  }
  swa_status_t Build(std::vector<swa_seq_t> seqs) {
    return swa_plan_build(plan, seqs.data(), static_cast<uint32_t>(seqs.size()));
  }
};

// seq, slot, entry, position, first_position, n_missing, n_ring, ring_row, n_new, new_row
using W = swa_compress_window_t;

void ExpectWindows(const std::vector<W>& got, const std::vector<W>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(std::memcmp(&got[i], &want[i], sizeof(W)), 0)
        << "window " << i << ": got entry " << got[i].entry << " first " << got[i].first_position
        << " missing " << got[i].n_missing << " ring " << got[i].n_ring << "@" << got[i].ring_row
        << " new " << got[i].n_new << "@" << got[i].new_row;
}

void ExpectSegments(const std::vector<swa_segment_t>& got, const std::vector<swa_segment_t>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].dst_row, want[i].dst_row) << i;
    EXPECT_EQ(got[i].src_row, want[i].src_row) << i;
    EXPECT_EQ(got[i].count, want[i].count) << i;
  }
}

TEST(CompressPlan, Layout) {
  Rig r;
  swa_layer_layout_t l;
  l.struct_size = sizeof l;
  ASSERT_EQ(swa_cache_layer_layout(r.cache, 0, &l), SWA_OK);
  EXPECT_EQ(l.compress_kind, SWA_COMPRESS_HCA);
  EXPECT_EQ(l.compress_len, kC + kN);            // 6
  EXPECT_EQ(l.compress_entry_bytes, 2u * 8 * 4);  // kv + gate, 8 FP32 values each
  EXPECT_EQ(l.compress_bytes, 6u * 64);
  EXPECT_EQ(l.index_row_bytes, 0u);
  ASSERT_EQ(swa_cache_layer_layout(r.cache, 1, &l), SWA_OK);
  EXPECT_EQ(l.compress_kind, SWA_COMPRESS_CSA);
  EXPECT_EQ(l.compress_len, 2 * kC + kN);          // 10
  EXPECT_EQ(l.compress_row_values, 16u);           // 2d
  EXPECT_EQ(l.compress_entry_bytes, 2u * 16 * 2);  // BF16
  EXPECT_EQ(l.compress_bytes, 10u * 64);
  EXPECT_EQ(l.index_row_bytes, 2u * 8 * 2);
  EXPECT_EQ(l.index_offset, l.compress_offset + 640);
  EXPECT_EQ(l.index_bytes, 10u * 32);
  swa_layout_t lay;
  lay.struct_size = sizeof lay;
  ASSERT_EQ(swa_cache_layout(r.cache, &lay), SWA_OK);
  EXPECT_EQ(lay.compress_bytes, 384u + 640u + 320u);
  EXPECT_EQ(lay.compress_saved_bytes, 384u + 640u + 320u);  // both layers are stored
  swa_tensor_view_t v;
  v.struct_size = sizeof v;
  ASSERT_EQ(swa_cache_compress_view(r.cache, 1, 1, &v), SWA_OK);
  EXPECT_EQ(v.shape[1], 10);
  EXPECT_EQ(v.shape[2], 2);
  EXPECT_EQ(v.shape[3], 16);
  EXPECT_EQ(v.strides[1], 32);
  EXPECT_EQ(swa_cache_compress_view(r.cache, 0, 1, &v), SWA_INVALID_ARGUMENT);  // no indexer
  EXPECT_EQ(swa_cache_compress_view(r.cache, 2, 0, &v), SWA_INVALID_ARGUMENT);  // no compressor
}

// HCA, c = 4, L = 6, slot 1: a prefill of 6, a step of 3 (2 drafts) that
// closes entry 1, a step at 7 that rejects the drafts and closes entry 1 again.
TEST(CompressPlan, HcaGoldensWithRejectedDraft) {
  Rig r;
  uint32_t s0, s1;
  ASSERT_EQ(swa_slot_alloc(r.cache, &s0), SWA_OK);
  ASSERT_EQ(swa_slot_alloc(r.cache, &s1), SWA_OK);
  ASSERT_EQ(r.Build({{s1, 6, 6, 0}}), SWA_OK) << swa_last_error();
  ExpectWindows(r.Windows(0), {W{0, s1, 0, 0, 0, 0, 0, 0, 4, 0}});
  ExpectSegments(r.Store(0), {{int32_t(s1 * 6), 0, 6}});
  // Positions 6, 7, 8: entry 1 = positions 4..7: 4, 5 from rows 4, 5; 6, 7 new.
  ASSERT_EQ(r.Build({{s1, 3, 9, 0}}), SWA_OK) << swa_last_error();
  ExpectWindows(r.Windows(0), {W{0, s1, 1, 4, 4, 0, 2, 4, 2, 0}});
  ExpectSegments(r.Store(0), {{int32_t(s1 * 6 + 0), 0, 3}});
  // Drafts 7, 8 rejected: the step at 7 closes entry 1 again (same entry, overwrite):
  // positions 4, 5, 6 from rows 4, 5, 0 (the wrap), 7 new. A second sequence in
  // the batch first (slot 0, 5 new tokens) shifts the batch rows by 5.
  ASSERT_EQ(r.Build({{s0, 5, 5, 0}, {s1, 1, 8, 0}}), SWA_OK) << swa_last_error();
  ExpectWindows(r.Windows(0), {W{0, s0, 0, 0, 0, 0, 0, 0, 4, 0}, W{1, s1, 1, 4, 4, 0, 3, 4, 1, 5}});
  ExpectSegments(r.Store(0), {{int32_t(s0 * 6), 0, 5}, {int32_t(s1 * 6 + 1), 5, 1}});
}

// CSA, c = 4, L = 10: entry 0's Ca slots are missing (positions < 0).
TEST(CompressPlan, CsaGoldensWithRejectedDraft) {
  Rig r;
  uint32_t s;
  ASSERT_EQ(swa_slot_alloc(r.cache, &s), SWA_OK);
  ASSERT_EQ(r.Build({{s, 9, 9, 0}}), SWA_OK) << swa_last_error();
  ExpectWindows(r.Windows(1), {W{0, s, 0, 0, -4, 4, 0, 0, 4, 0}, W{0, s, 1, 4, 0, 0, 0, 0, 8, 0}});
  ExpectSegments(r.Store(1), {{int32_t(s * 10), 0, 9}});
  // 9..12 (the last two drafts): entry 2 = positions 4..11: 4..8 from rows 4..8, 9..11 new.
  ASSERT_EQ(r.Build({{s, 4, 13, 0}}), SWA_OK) << swa_last_error();
  ExpectWindows(r.Windows(1), {W{0, s, 2, 8, 4, 0, 5, 4, 3, 0}});
  ExpectSegments(r.Store(1), {{int32_t(s * 10 + 9), 0, 1}, {int32_t(s * 10), 1, 3}});
  // Reject 11, 12: entry 2 closes again from rows 4..9, 0 (positions 4..10) and 11 new.
  ASSERT_EQ(r.Build({{s, 1, 12, 0}}), SWA_OK) << swa_last_error();
  ExpectWindows(r.Windows(1), {W{0, s, 2, 8, 4, 0, 7, 4, 1, 0}});
  ExpectSegments(r.Store(1), {{int32_t(s * 10 + 1), 0, 1}});
  // HCA layer of the same step: entry 2 = positions 8..11, 8..10 from rows 2, 3, 4.
  ExpectWindows(r.Windows(0), {W{0, s, 2, 8, 8, 0, 3, 2, 1, 0}});
}

// valid_start above a window's first position: those slots are missing.
TEST(CompressPlan, MissingBelowValidStart) {
  Rig r;
  uint32_t s;
  ASSERT_EQ(swa_slot_alloc(r.cache, &s), SWA_OK);
  ASSERT_EQ(swa_slot_set_valid_start(r.cache, s, 6), SWA_OK);
  ASSERT_EQ(r.Build({{s, 3, 9, 0}}), SWA_OK) << swa_last_error();
  ExpectWindows(r.Windows(0), {W{0, s, 1, 4, 4, 2, 0, 0, 2, 0}});
  ExpectWindows(r.Windows(1), {W{0, s, 1, 4, 0, 6, 0, 0, 2, 0}});
}

// A rewind that the SWA ring (R = 64) allows but the HCA ring (L = 6) does not:
// refused with the numbers, nothing changes; N + 1 = 3 behind is fine.
TEST(CompressPlan, RewindDepth) {
  Rig r;
  uint32_t s;
  ASSERT_EQ(swa_slot_alloc(r.cache, &s), SWA_OK);
  ASSERT_EQ(r.Build({{s, 12, 12, 0}}), SWA_OK);
  // q_start 5 reopens entry 1 (positions 4..): needs rows >= 4, the ring holds >= 6.
  EXPECT_EQ(r.Build({{s, 1, 6, 0}}), SWA_FAILED_PRECONDITION);
  EXPECT_NE(std::strstr(swa_last_error(), "compressor ring of layer 0"), nullptr) << swa_last_error();
  swa_slot_info_t info;
  info.struct_size = sizeof info;
  ASSERT_EQ(swa_slot_info(r.cache, s, &info), SWA_OK);
  EXPECT_EQ(info.written_end, 12);
  // q_start 9 = 12 - (N + 1): needs rows >= 8 (entry 2), held (>= 6).
  EXPECT_EQ(r.Build({{s, 1, 10, 0}}), SWA_OK) << swa_last_error();
}

// Descriptions that do not fit: each refused with the field named.
TEST(CompressPlan, BadDescriptions) {
  auto create = [](void (*edit)(swa_layer_desc_t*)) {
    swa_layer_desc_t d;
    swa_layer_desc_init(&d);
    d.head_dim = 32;
    d.compress_kind = SWA_COMPRESS_CSA;
    d.compress_ratio = 4;
    d.compress_head_dim = 8;
    edit(&d);
    swa_config_t cfg;
    swa_config_init(&cfg);
    cfg.num_layers = 1;
    cfg.layers = &d;
    cfg.backend = SWA_BACKEND_CPU;
    swa_layout_t lay;
    lay.struct_size = sizeof lay;
    const swa_status_t st = swa_layout_compute(&cfg, &lay);
    return std::make_pair(st, std::string(st == SWA_OK ? "" : swa_last_error()));
  };
  auto expect = [&](void (*edit)(swa_layer_desc_t*), const char* field) {
    const auto [st, msg] = create(edit);
    EXPECT_EQ(st, SWA_INVALID_ARGUMENT) << field;
    EXPECT_NE(msg.find(field), std::string::npos) << msg;
  };
  EXPECT_EQ(create([](swa_layer_desc_t*) {}).first, SWA_OK);
  expect([](swa_layer_desc_t* d) { d->compress_ratio = 0; }, "compress_ratio");
  expect([](swa_layer_desc_t* d) { d->compress_ratio = 1u << 17; }, "compress_ratio");
  expect([](swa_layer_desc_t* d) { d->compress_entry_bytes = 64; }, "compress_entry_bytes");
  expect([](swa_layer_desc_t* d) { d->compress_head_dim = 0; }, "compress_head_dim");
  expect([](swa_layer_desc_t* d) { d->compress_rope_dims = 3; }, "compress_rope_dims");
  expect([](swa_layer_desc_t* d) { d->compress_rope_dims = 10; }, "compress_rope_dims");
  expect([](swa_layer_desc_t* d) { d->compress_row_format = SWA_FORMAT_MXFP8; },
         "compress_row_format");
  expect([](swa_layer_desc_t* d) { d->compress_kind = SWA_COMPRESS_HCA, d->index_head_dim = 4; },
         "index_head_dim");
  expect([](swa_layer_desc_t* d) { d->compress_kind = static_cast<swa_compress_kind_t>(7); },
         "compress_kind");
  expect([](swa_layer_desc_t* d) { d->compress_reserved = 1; }, "compress_reserved");
  expect([](swa_layer_desc_t* d) { d->compress_kind = SWA_COMPRESS_OPAQUE; }, "compress_head_dim");
}

}  // namespace
