// Shared by the store fault tests: a small CPU cache with two allocated slots
// whose stored bytes a test fills with a seeded pattern, checks, and
// snapshots (bytes of the whole slot plus its positions).
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "swacache.h"

namespace swa_test {

struct SlotImage {
  std::vector<uint8_t> bytes;
  int32_t written_end = 0, valid_start = 0;
  bool operator==(const SlotImage& o) const {
    return bytes == o.bytes && written_end == o.written_end && valid_start == o.valid_start;
  }
};

struct SlotFixture {
  std::vector<swa_layer_desc_t> layers;
  swa_cache_t* cache = nullptr;
  swa_layout_t layout{};
  uint8_t* pool = nullptr;
  uint32_t a = 0, b = 0;

  SlotFixture() {
    for (int i = 0; i < 3; ++i) {
      swa_layer_desc_t l;
      swa_layer_desc_init(&l);
      l.role = i < 2 ? SWA_LAYER_STORED : SWA_LAYER_DROPPED;
      l.q_heads = 2;
      l.head_dim = 64;
      layers.push_back(l);
    }
    swa_config_t c;
    swa_config_init(&c);
    c.window = 16;
    c.max_slots = 4;
    c.backend = SWA_BACKEND_CPU;
    c.num_threads = 1;
    c.num_layers = static_cast<uint32_t>(layers.size());
    c.layers = layers.data();
    EXPECT_EQ(swa_cache_create(&c, &cache), SWA_OK) << swa_last_error();
    layout.struct_size = sizeof layout;
    EXPECT_EQ(swa_cache_layout(cache, &layout), SWA_OK);
    swa_layer_layout_t ll{sizeof ll};
    swa_tensor_view_t v{sizeof v};
    EXPECT_EQ(swa_cache_layer_layout(cache, 0, &ll), SWA_OK);
    EXPECT_EQ(swa_cache_layer_view(cache, 0, &v), SWA_OK);
    pool = static_cast<uint8_t*>(v.data) - ll.ring_offset;
    EXPECT_EQ(swa_slot_alloc(cache, &a), SWA_OK);
    EXPECT_EQ(swa_slot_alloc(cache, &b), SWA_OK);
  }
  ~SlotFixture() { swa_cache_destroy(cache); }

  uint64_t fingerprint() const { return layout.fingerprint; }
  uint8_t* Slot(uint32_t s) const { return pool + s * layout.slot_bytes; }

  // Stored bytes from `seed`, and positions that depend on it too.
  void Fill(uint32_t s, uint64_t seed) const {
    std::mt19937_64 rng(seed);
    for (uint64_t i = 0; i < layout.stored_bytes; ++i) Slot(s)[i] = static_cast<uint8_t>(rng());
    EXPECT_EQ(swa_slot_reset(cache, s), SWA_OK);
    EXPECT_EQ(swa_slot_begin_replay(cache, s, static_cast<int32_t>(16 + seed % 50), nullptr, nullptr),
              SWA_OK);
  }
  bool Holds(uint32_t s, uint64_t seed) const {
    std::mt19937_64 rng(seed);
    for (uint64_t i = 0; i < layout.stored_bytes; ++i)
      if (Slot(s)[i] != static_cast<uint8_t>(rng())) return false;
    const SlotImage img = Image(s);
    return img.written_end == static_cast<int32_t>(seed % 50) && img.valid_start == img.written_end;
  }
  SlotImage Image(uint32_t s) const {
    SlotImage img;
    img.bytes.assign(Slot(s), Slot(s) + layout.slot_bytes);
    swa_slot_info_t i{sizeof i};
    EXPECT_EQ(swa_slot_info(cache, s, &i), SWA_OK);
    img.written_end = i.written_end;
    img.valid_start = i.valid_start;
    return img;
  }
  swa_status_t Save(uint32_t s, const std::string& key) const {
    return swa_slot_save(cache, s, reinterpret_cast<const uint8_t*>(key.data()), key.size());
  }
  swa_status_t Restore(uint32_t s, const std::string& key) const {
    return swa_slot_restore(cache, s, reinterpret_cast<const uint8_t*>(key.data()), key.size());
  }
  // The key as the store sees it: 16 hex digits of the fingerprint, ':', key.
  std::string StoreKey(const std::string& key) const {
    char prefix[18];
    std::snprintf(prefix, sizeof prefix, "%016llx:", static_cast<unsigned long long>(layout.fingerprint));
    return std::string(prefix, 17) + key;
  }
};

}  // namespace swa_test
