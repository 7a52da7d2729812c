// The caches fuzz_blob restores into, and its reference computations (the
// store key and the HMAC-SHA-256 tag written out from docs/store.md, "Blob
// format" and "Authenticated blobs", with OpenSSL's one-shot HMAC() and
// SHA256(), not through the library's BlobSecret).
//
// Four fixtures, chosen by the low two bits of the input's first byte:
//   0 plain        a BF16 stored layer and an MXFP8 dropped one, no secret
//   1 secret       the same layers, a store secret and a namespace (with a
//                  NUL byte in it): blobs carry a 32-byte tag
//   2 compression  an HCA stored layer (FP32 rows), a CSA stored layer with
//                  its indexer (BF16 rows) and a CSA dropped layer;
//                  swa_cache_set_save_compression on: version 4 blobs whose
//                  payload ends with the compression section
//   3 both         the compression fixture with the secret and namespace
// Each has slot 0 allocated and an engine store whose get returns `blob`
// and whose put records what it received in `saved`.
#pragma once

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "swacache.h"

namespace swa_fuzz_blob {

using swa_fuzz::Check;

inline constexpr size_t kHeader = 64;
inline constexpr size_t kTag = 32;
inline constexpr uint8_t kSecret[16] = {0x5e, 0xc2, 0x37, 0x01, 0x9a, 0x44, 0xd0, 0x6b,
                                        0x13, 0xfe, 0x80, 0x2c, 0x71, 0xb5, 0x08, 0xe9};
// The secret the harness tags with for fixtures that have none (a blob saved
// by some other cache with a secret).
inline constexpr uint8_t kOtherSecret[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
inline constexpr char kNamespace[] = {'t', 'e', 'n', '\0', 'a'};
inline constexpr char kKey[] = "k";  // the engine key every restore and save uses

inline void PutLe(uint8_t* p, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline uint64_t GetLe(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

// (offset in the slot, bytes) of one ring the compression section holds.
struct Piece {
  uint64_t offset;
  uint64_t bytes;
};

struct Fixture {
  bool secret = false;
  bool compression = false;
  swa_layer_desc_t layers[3];
  swa_cache_t* cache = nullptr;
  swa_layout_t layout{};
  uint8_t* slot = nullptr;         // slot 0's bytes (host pool)
  uint64_t payload_bytes = 0;      // stored_bytes (+ compress_saved_bytes)
  std::vector<Piece> pieces;       // the compression section's rings, in order
  std::string full_key;            // the store key of engine key "k"
  std::vector<uint8_t> blob;       // what the store's get returns
  std::vector<uint8_t> saved;      // what the store's put received

  Fixture(bool with_secret, bool with_compression)
      : secret(with_secret), compression(with_compression) {
    const uint32_t n = compression ? 3 : 2;
    for (uint32_t i = 0; i < n; ++i) {
      swa_layer_desc_init(&layers[i]);
      layers[i].q_heads = 1;
      layers[i].head_dim = 32;
      layers[i].kv_format = SWA_FORMAT_BF16;
    }
    if (compression) {
      for (uint32_t i = 0; i < n; ++i) {
        layers[i].compress_ratio = i == 0 ? 4 : 2;
        layers[i].compress_head_dim = 8;
        layers[i].compress_rope_dims = 4;
      }
      layers[0].compress_kind = SWA_COMPRESS_HCA;
      layers[1].compress_kind = SWA_COMPRESS_CSA;
      layers[1].index_head_dim = 4;
      layers[1].compress_row_format = SWA_FORMAT_BF16;
      layers[2].compress_kind = SWA_COMPRESS_CSA;  // dropped: not in the section
      layers[2].role = SWA_LAYER_DROPPED;
    } else {
      layers[1].role = SWA_LAYER_DROPPED;
      layers[1].kv_format = SWA_FORMAT_MXFP8;
    }
    swa_config_t c;
    swa_config_init(&c);
    c.window = 4;
    c.draft_tokens = 1;
    c.max_slots = 2;
    c.backend = SWA_BACKEND_CPU;
    c.num_threads = 1;
    c.num_layers = n;
    c.layers = layers;
    if (secret) {
      c.store_secret = kSecret;
      c.store_secret_len = sizeof kSecret;
      c.store_namespace = reinterpret_cast<const uint8_t*>(kNamespace);
      c.store_namespace_len = sizeof kNamespace;
    }
    Check(swa_cache_create(&c, &cache) == SWA_OK, "create");
    if (compression) Check(swa_cache_set_save_compression(cache, 1) == SWA_OK, "save compression");
    layout.struct_size = sizeof layout;
    Check(swa_cache_layout(cache, &layout) == SWA_OK, "layout");
    payload_bytes = layout.stored_bytes;
    uint64_t section = 0;
    for (uint32_t i = 0; i < n; ++i) {
      swa_layer_layout_t ll{};
      ll.struct_size = sizeof ll;
      Check(swa_cache_layer_layout(cache, i, &ll) == SWA_OK, "layer layout");
      if (i == 0) {
        swa_tensor_view_t v{};
        v.struct_size = sizeof v;
        Check(swa_cache_layer_view(cache, 0, &v) == SWA_OK, "view");
        slot = static_cast<uint8_t*>(v.data) - ll.ring_offset;
      }
      if (ll.role != SWA_LAYER_STORED || ll.compress_kind == SWA_COMPRESS_OPAQUE) continue;
      pieces.push_back({ll.compress_offset, uint64_t{ll.compress_len} * ll.compress_entry_bytes});
      if (ll.index_row_bytes != 0)
        pieces.push_back({ll.index_offset, uint64_t{ll.compress_len} * ll.index_row_bytes});
    }
    for (const Piece& p : pieces) section += p.bytes;
    Check(section == layout.compress_saved_bytes && (section != 0) == compression,
          "the compression section is the stored layers' typed rings");
    if (compression) payload_bytes += section;
    // The store key (docs/store.md): "ns" + decimal length + ":" + namespace,
    // then 16 lower-case hex digits of the fingerprint, ":" and the key.
    if (secret)
      full_key = "ns" + std::to_string(sizeof kNamespace) + ":" +
                 std::string(kNamespace, sizeof kNamespace);
    char fp[24];
    std::snprintf(fp, sizeof fp, "%016llx:", static_cast<unsigned long long>(layout.fingerprint));
    full_key += fp;
    full_key += kKey;

    swa_kv_store_t t;
    swa_kv_store_init(&t);
    t.user_data = this;
    t.put = [](void* u, const uint8_t*, size_t, const swa_iov_t* iov, size_t k, char*, size_t) {
      auto* f = static_cast<Fixture*>(u);
      f->saved.clear();
      for (size_t i = 0; i < k; ++i) {
        const uint8_t* p = static_cast<const uint8_t*>(iov[i].data);
        f->saved.insert(f->saved.end(), p, p + iov[i].size);
      }
      return SWA_OK;
    };
    t.get = [](void* u, const uint8_t*, size_t, const swa_iov_t* iov, size_t k, uint64_t* size,
               char*, size_t) {
      auto* f = static_cast<Fixture*>(u);
      if (*size == f->blob.size()) {
        size_t off = 0;
        for (size_t i = 0; i < k; ++i) {
          std::memcpy(iov[i].data, f->blob.data() + off, iov[i].size);
          off += iov[i].size;
        }
      }
      *size = f->blob.size();
      return SWA_OK;
    };
    Check(swa_cache_set_store(cache, &t) == SWA_OK, "set store");
    uint32_t s;
    Check(swa_slot_alloc(cache, &s) == SWA_OK && s == 0, "alloc");
  }

  // The blob's tag: HMAC-SHA-256 with `key`, by the construction the header
  // names (`body` = header + payload). Version 5 with flag bit 2: the
  // chunked tag, over the header, the store key's length (u64 LE), the store
  // key, the payload's length and chunk count (u64 LE each), then the
  // SHA-256 of each chunk of 2^byte48 bytes; false (no tag can hold) when
  // byte 48 is outside 6 ... 30. Otherwise the single-pass tag, over the
  // header, the store key's length, the store key and the payload.
  bool Tag(const uint8_t* key, size_t key_len, const uint8_t* body, size_t body_len,
           uint8_t out[kTag]) const {
    std::vector<uint8_t> msg(body, body + kHeader);
    uint8_t len[8];
    PutLe(len, full_key.size(), 8);
    msg.insert(msg.end(), len, len + 8);
    msg.insert(msg.end(), full_key.begin(), full_key.end());
    const uint8_t* payload = body + kHeader;
    const size_t payload_len = body_len - kHeader;
    if (GetLe(body + 4, 2) >= 5 && (GetLe(body + 44, 4) & 4) != 0) {
      const int c = body[48];
      if (c < 6 || c > 30) return false;
      const size_t chunk = size_t{1} << c;
      const size_t n = (payload_len + chunk - 1) / chunk;
      PutLe(len, payload_len, 8);
      msg.insert(msg.end(), len, len + 8);
      PutLe(len, n, 8);
      msg.insert(msg.end(), len, len + 8);
      for (size_t i = 0; i < n; ++i) {
        uint8_t d[SHA256_DIGEST_LENGTH];
        SHA256(payload + i * chunk, std::min(chunk, payload_len - i * chunk), d);
        msg.insert(msg.end(), d, d + sizeof d);
      }
    } else {
      msg.insert(msg.end(), payload, payload + payload_len);
    }
    unsigned int n = 0;
    Check(HMAC(EVP_sha256(), key, static_cast<int>(key_len), msg.data(), msg.size(), out, &n) !=
                  nullptr &&
              n == kTag,
          "HMAC");
    return true;
  }
  // The tag under this fixture's secret, or the other secret when it has none.
  void OwnTag(const uint8_t* body, size_t body_len, uint8_t out[kTag]) const {
    if (!(secret ? Tag(kSecret, sizeof kSecret, body, body_len, out)
                 : Tag(kOtherSecret, sizeof kOtherSecret, body, body_len, out)))
      std::memset(out, 0, kTag);  // no tag holds: leave zeros
  }
};

inline Fixture& F(int which) {
  // Live for the process (no leak report: reachable).
  static Fixture* f[4] = {new Fixture(false, false), new Fixture(true, false),
                          new Fixture(false, true), new Fixture(true, true)};
  return *f[which & 3];
}

}  // namespace swa_fuzz_blob
