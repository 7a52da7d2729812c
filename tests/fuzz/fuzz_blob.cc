// Fuzz harness (1): the blob parser and the restore path. The input is a blob
// (the first byte chooses which header fields the harness repairs so that the
// fuzzer gets past the checksum and the layout check: CRC, fingerprint,
// payload length, magic/version, key hash/reserved). It goes through
// VerifyBlob() and through swa_slot_restore() of key "k" from an engine store
// that returns it. Seeds: tests/fuzz/corpus/blob/, written by
// scripts/fuzz_blob_seeds.py. Promises checked: VerifyBlob and the restore
// agree; a refused restore returns a known status with a message and leaves
// the slot byte-for-byte and position-for-position unchanged; an accepted one
// installs exactly the blob's payload and positions, and saving the slot again
// gives back the same blob.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "store/blob.h"
#include "store/crc32c.h"
#include "swacache.h"

namespace {

using swa_fuzz::Check;

struct Fixture {
  swa_layer_desc_t layers[2];
  swa_cache_t* cache = nullptr;
  swa_layout_t layout{};
  uint8_t* pool = nullptr;
  std::vector<uint8_t> blob;  // what the store's get returns
  std::vector<uint8_t> saved;  // what the store's put received

  Fixture() {
    for (int i = 0; i < 2; ++i) {
      swa_layer_desc_init(&layers[i]);
      layers[i].role = i == 0 ? SWA_LAYER_STORED : SWA_LAYER_DROPPED;
      layers[i].q_heads = 1;
      layers[i].head_dim = 32;
      layers[i].kv_format = i == 0 ? SWA_FORMAT_BF16 : SWA_FORMAT_MXFP8;
    }
    swa_config_t c;
    swa_config_init(&c);
    c.window = 4;
    c.max_slots = 2;
    c.backend = SWA_BACKEND_CPU;
    c.num_threads = 1;
    c.num_layers = 2;
    c.layers = layers;
    Check(swa_cache_create(&c, &cache) == SWA_OK, "create");
    layout.struct_size = sizeof layout;
    Check(swa_cache_layout(cache, &layout) == SWA_OK, "layout");
    swa_layer_layout_t ll;
    ll.struct_size = sizeof ll;
    swa_tensor_view_t v;
    v.struct_size = sizeof v;
    Check(swa_cache_layer_layout(cache, 0, &ll) == SWA_OK && swa_cache_layer_view(cache, 0, &v) == SWA_OK,
          "view");
    pool = static_cast<uint8_t*>(v.data) - ll.ring_offset;
    swa_kv_store_t t;
    swa_kv_store_init(&t);
    t.user_data = this;
    t.put = [](void* u, const uint8_t*, size_t, const swa_iov_t* iov, size_t n, char*, size_t) {
      auto* f = static_cast<Fixture*>(u);
      f->saved.clear();
      for (size_t i = 0; i < n; ++i) {
        const uint8_t* p = static_cast<const uint8_t*>(iov[i].data);
        f->saved.insert(f->saved.end(), p, p + iov[i].size);
      }
      return SWA_OK;
    };
    t.get = [](void* u, const uint8_t*, size_t, const swa_iov_t* iov, size_t n, uint64_t* size,
               char*, size_t) {
      auto* f = static_cast<Fixture*>(u);
      if (*size == f->blob.size()) {
        size_t off = 0;
        for (size_t i = 0; i < n; ++i) {
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
  uint8_t* Slot() const { return pool; }
};

Fixture& F() {
  static Fixture* f = new Fixture();  // lives for the process (no leak report: reachable)
  return *f;
}

void PutLe(uint8_t* p, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t GetLe(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Fixture& f = F();
  const uint8_t repair = data[0];
  f.blob.assign(data + 1, data + size);
  std::vector<uint8_t>& b = f.blob;
  if ((repair & 16) && b.size() < swa::kBlobHeaderBytes + f.layout.stored_bytes)
    b.resize(swa::kBlobHeaderBytes + f.layout.stored_bytes, 0x5A);  // right length, fuzzed header
  if (b.size() >= swa::kBlobHeaderBytes) {
    if (repair & 8) {
      std::memcpy(b.data(), "SWAB", 4);
      PutLe(&b[4], swa::kBlobVersion, 2);
      PutLe(&b[6], 64, 2);
    }
    if (repair & 2) PutLe(&b[8], f.layout.fingerprint, 8);
    if (repair & 4) PutLe(&b[24], b.size() - swa::kBlobHeaderBytes, 8);
    if (repair & 32) {
      PutLe(&b[swa::kBlobKeyHashOffset], swa::BlobKeyHash("k"), 8);
      std::memset(&b[swa::kBlobReservedOffset], 0,
                  swa::kBlobChecksumOffset - swa::kBlobReservedOffset);
    }
    if (repair & 1) {
      uint32_t crc = swa::Crc32c(0, b.data(), 60);
      crc = swa::Crc32c(crc, b.data() + 64, b.size() - 64);
      PutLe(&b[60], crc, 4);
    }
  }
  // The parser alone.
  const swa::BlobExpectation expect{f.layout.fingerprint, f.layout.stored_bytes,
                                    swa::BlobKeyHash("k")};
  const absl::StatusOr<swa::BlobHeader> parsed = swa::VerifyBlob(b.data(), b.size(), expect);
  if (!parsed.ok())
    Check(absl::IsDataLoss(parsed.status()) || absl::IsFailedPrecondition(parsed.status()),
          "VerifyBlob status");

  // The restore path: slot 0 holds a known pattern and positions.
  const uint64_t stored = f.layout.stored_bytes;
  for (uint64_t i = 0; i < f.layout.slot_bytes; ++i) f.Slot()[i] = static_cast<uint8_t>(i * 7 + 1);
  Check(swa_slot_reset(f.cache, 0) == SWA_OK, "reset");
  int32_t rs, rl;
  Check(swa_slot_begin_replay(f.cache, 0, 9, &rs, &rl) == SWA_OK, "replay");
  const std::vector<uint8_t> before(f.Slot(), f.Slot() + f.layout.slot_bytes);
  swa_slot_info_t info_before{sizeof(swa_slot_info_t)}, info{sizeof(swa_slot_info_t)};
  Check(swa_slot_info(f.cache, 0, &info_before) == SWA_OK, "info");
  const uint8_t key[] = {'k'};
  const swa_status_t s = swa_slot_restore(f.cache, 0, key, 1);
  Check(swa_slot_info(f.cache, 0, &info) == SWA_OK, "info");
  if (s != SWA_OK) {
    Check(swa_fuzz::KnownStatus(s) && swa_last_error()[0] != '\0', "restore failure reported");
    Check(!parsed.ok(), "restore refused a blob VerifyBlob accepts");
    Check(std::memcmp(before.data(), f.Slot(), before.size()) == 0, "a refused restore wrote the slot");
    Check(info.written_end == info_before.written_end && info.valid_start == info_before.valid_start,
          "a refused restore changed the positions");
    return 0;
  }
  Check(parsed.ok(), "restore accepted a blob VerifyBlob refuses");
  Check(b.size() == swa::kBlobHeaderBytes + stored, "accepted blob size");
  Check(std::memcmp(f.Slot(), b.data() + swa::kBlobHeaderBytes, stored) == 0, "payload installed");
  Check(std::memcmp(f.Slot() + stored, before.data() + stored, before.size() - stored) == 0,
        "restore wrote past the stored region");
  Check(info.written_end == static_cast<int32_t>(GetLe(&b[16], 4)) &&
            info.valid_start == static_cast<int32_t>(GetLe(&b[20], 4)),
        "restored positions");
  Check(swa_slot_save(f.cache, 0, key, 1) == SWA_OK, "save after restore");
  Check(f.saved == b, "save after restore gives back the blob");
  return 0;
}
