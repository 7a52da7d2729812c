// Fuzz harness (1): the blob parser and the restore path, blob format
// versions 2, 3 (flags, single-pass HMAC-SHA-256 tag), 4 (compression
// section) and 5 (chunked tag).
//
// Input: a mode byte, a repair byte, then the blob the store returns for key
// "k". Mode: bits 0-1 choose the fixture (fuzz_blob_fixture.h: plain, store
// secret + namespace, compression section, both); 4: the blob's last 32
// bytes are a tag (the repairs below count the payload without them);
// 8: recompute that tag (the fixture's secret, or another one when it has
// none) after the other repairs; 16: set the flags to the fixture's (tag bit
// with mode 4, compression bit for the compression fixtures; with mode 4
// and without 64 the chunked-tag bit too); 32: repair 8 writes version 2
// instead of the fixture's version (5 with mode 4, else 3, or 4 with the
// section); 64: with mode 4, a single-pass tag (version 3 or 4, no
// chunked-tag bit, as earlier releases wrote). Repair (fields fixed so that the fuzzer gets past the checks in
// front of them): 1 CRC, 2 fingerprint, 4 payload length, 8 magic/version/
// header size, 16 pad to the fixture's blob length, 32 key hash and reserved
// bytes (byte 48, the chunk exponent, 16 for a chunked tag).
//
// Promises checked, against a reference written out from docs/store.md:
// VerifyBlob returns DATA_LOSS or FAILED_PRECONDITION when it refuses; with
// a secret, the restore accepts exactly the blobs of the right length whose
// tag (OpenSSL's HMAC() over header, store key length, store key, payload;
// or, version 5 with the chunked-tag bit, over header, store key length,
// store key, payload length, chunk count and SHA256() of each chunk) holds, that VerifyBlob accepts and that carry the tag flag, and refuses a
// blob whose tag does not hold with DATA_LOSS; without one, it accepts
// exactly the blobs VerifyBlob accepts that do not carry the tag flag, and
// refuses a blob of the right length with VerifyBlob's code. A refused
// restore reports a message and leaves the slot byte for byte and position
// for position unchanged; an accepted one installs exactly the stored region
// and the compression section's rings and the positions, touches no other
// byte, and saving the slot again gives back the blob (in the version this
// library writes: 5 with a chunked tag of 64 KiB chunks when tagged; tag
// recomputed).
//
// Seeds: tests/fuzz/corpus/blob/, written by this harness from blobs that the
// library's own save produced (valid v2, v3, v4, tagged v5 with and without
// the section and with 64-byte chunks, single-pass tagged v3 and v4 blobs,
// and near misses):
//   SWA_FUZZ_BLOB_SEEDS=tests/fuzz/corpus/blob build-asan/tests/fuzz/fuzz_blob
// On every start the harness checks that the valid ones restore.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz/fuzz_blob_fixture.h"
#include "fuzz/fuzz_input.h"
#include "store/blob.h"
#include "store/crc32c.h"
#include "swacache.h"

namespace {

using swa_fuzz::Check;
using swa_fuzz_blob::F;
using swa_fuzz_blob::Fixture;
using swa_fuzz_blob::GetLe;
using swa_fuzz_blob::kHeader;
using swa_fuzz_blob::kKey;
using swa_fuzz_blob::kSecret;
using swa_fuzz_blob::kTag;
using swa_fuzz_blob::Piece;
using swa_fuzz_blob::PutLe;

constexpr uint8_t kModeTagShape = 4, kModeRetag = 8, kModeFlags = 16, kModeV2 = 32,
                  kModeSinglePass = 64;
constexpr uint8_t kRepairCrc = 1, kRepairFingerprint = 2, kRepairLength = 4, kRepairMagic = 8,
                  kRepairPad = 16, kRepairKey = 32;

void PutCrc(std::vector<uint8_t>& b, size_t body) {
  uint32_t crc = swa::Crc32c(0, b.data(), 60);
  crc = swa::Crc32c(crc, b.data() + kHeader, body - kHeader);
  PutLe(&b[60], crc, 4);
}

void Repair(const Fixture& f, uint8_t mode, uint8_t repair, std::vector<uint8_t>& b) {
  const size_t tag = (mode & kModeTagShape) ? kTag : 0;
  if ((repair & kRepairPad) && b.size() < kHeader + f.payload_bytes + tag)
    b.resize(kHeader + f.payload_bytes + tag, 0x5A);  // right length, fuzzed header
  if (b.size() < kHeader + tag) return;
  const size_t body = b.size() - tag;  // header + payload
  const bool chunked = tag && !(mode & kModeSinglePass) && !(mode & kModeV2);
  if (repair & kRepairMagic) {
    std::memcpy(b.data(), "SWAB", 4);
    PutLe(&b[4], (mode & kModeV2) ? 2 : chunked ? 5 : f.compression ? 4 : 3, 2);
    PutLe(&b[6], kHeader, 2);
  }
  if (repair & kRepairFingerprint) PutLe(&b[8], f.layout.fingerprint, 8);
  if (repair & kRepairLength) PutLe(&b[24], body - kHeader, 8);
  if (repair & kRepairKey) {
    PutLe(&b[swa::kBlobKeyHashOffset], swa::BlobKeyHash(kKey), 8);
    std::memset(&b[swa::kBlobReservedOffset], 0, swa::kBlobChecksumOffset - swa::kBlobReservedOffset);
    if (chunked) b[swa::kBlobTagChunkOffset] = 16;
  }
  if (mode & kModeFlags)
    PutLe(&b[swa::kBlobFlagsOffset],
          (mode & kModeV2) ? 0 : (tag ? 1 : 0) | (chunked ? 4 : 0) | (f.compression ? 2 : 0), 4);
  if (repair & kRepairCrc) PutCrc(b, body);
  if ((mode & kModeRetag) && tag) f.OwnTag(b.data(), body, &b[body]);
}

swa_status_t Code(const absl::Status& s) {
  if (absl::IsDataLoss(s)) return SWA_DATA_LOSS;
  if (absl::IsFailedPrecondition(s)) return SWA_FAILED_PRECONDITION;
  return SWA_INTERNAL;
}

// Runs one input; returns the restore's status.
swa_status_t RunOne(const uint8_t* data, size_t size) {
  if (size < 2) return SWA_INVALID_ARGUMENT;
  const uint8_t mode = data[0];
  Fixture& f = F(mode & 3);
  f.blob.assign(data + 2, data + size);
  std::vector<uint8_t>& b = f.blob;
  Repair(f, mode, data[1], b);
  const uint64_t payload = f.payload_bytes;
  const size_t untagged = kHeader + payload;

  // The parser alone, and the reference verdict.
  const swa::BlobExpectation expect{f.layout.fingerprint, payload, swa::BlobKeyHash(kKey),
                                    f.compression};
  const absl::StatusOr<swa::BlobHeader> parsed = swa::VerifyBlob(b.data(), b.size(), expect);
  if (!parsed.ok())
    Check(absl::IsDataLoss(parsed.status()) || absl::IsFailedPrecondition(parsed.status()),
          "VerifyBlob status");
  bool accept = false;
  swa_status_t want = SWA_OK;  // the refusal's code, when the reference knows it
  if (f.secret) {
    bool tag_ok = false;
    if (b.size() == untagged + kTag) {
      uint8_t t[kTag];
      tag_ok = f.Tag(kSecret, sizeof kSecret, b.data(), untagged, t) &&
               std::memcmp(t, &b[untagged], kTag) == 0;
    }
    if (!tag_ok) {
      want = SWA_DATA_LOSS;
    } else {
      // A blob whose tag holds is not checked against its CRC (docs/store.md:
      // the tag covers every byte the CRC does).
      swa::BlobExpectation authenticated = expect;
      authenticated.authenticated = true;
      const absl::StatusOr<swa::BlobHeader> body =
          swa::VerifyBlob(b.data(), untagged, authenticated);
      if (!body.ok())
        want = Code(body.status());
      else if ((body->flags & swa::kBlobFlagTagged) == 0)
        want = SWA_DATA_LOSS;
      else
        accept = true;
    }
  } else if (b.size() == untagged) {
    if (!parsed.ok())
      want = Code(parsed.status());
    else if ((parsed->flags & swa::kBlobFlagTagged) != 0)
      want = SWA_DATA_LOSS;
    else
      accept = true;
  }

  // The restore path: slot 0 holds a known pattern and positions.
  const uint64_t slot_bytes = f.layout.slot_bytes;
  for (uint64_t i = 0; i < slot_bytes; ++i) f.slot[i] = static_cast<uint8_t>(i * 7 + 1);
  Check(swa_slot_reset(f.cache, 0) == SWA_OK, "reset");
  int32_t rs, rl;
  Check(swa_slot_begin_replay(f.cache, 0, 9, &rs, &rl) == SWA_OK, "replay");
  const std::vector<uint8_t> before(f.slot, f.slot + slot_bytes);
  swa_slot_info_t info_before{sizeof(swa_slot_info_t)}, info{sizeof(swa_slot_info_t)};
  Check(swa_slot_info(f.cache, 0, &info_before) == SWA_OK, "info");
  const uint8_t key[] = {'k'};
  const swa_status_t s = swa_slot_restore(f.cache, 0, key, 1);
  Check(swa_slot_info(f.cache, 0, &info) == SWA_OK, "info");
  if (s != SWA_OK) {
    Check(swa_fuzz::KnownStatus(s) && swa_last_error()[0] != '\0', "restore failure reported");
    Check(!accept, "restore refused a blob the reference accepts");
    Check(s == SWA_DATA_LOSS || s == SWA_FAILED_PRECONDITION, "restore refusal code");
    Check(want == SWA_OK || s == want, "restore refusal code is the reference's");
    Check(std::memcmp(before.data(), f.slot, before.size()) == 0, "a refused restore wrote the slot");
    Check(info.written_end == info_before.written_end && info.valid_start == info_before.valid_start,
          "a refused restore changed the positions");
    return s;
  }
  Check(accept, "restore accepted a blob the reference refuses");
  // The slot as it must be: the stored region, then each ring of the section.
  std::vector<uint8_t> expected = before;
  std::memcpy(expected.data(), &b[kHeader], f.layout.stored_bytes);
  uint64_t at = kHeader + f.layout.stored_bytes;
  for (const Piece& p : f.pieces) {
    Check(p.offset + p.bytes <= slot_bytes, "ring inside the slot");
    std::memcpy(expected.data() + p.offset, &b[at], p.bytes);
    at += p.bytes;
  }
  Check(at == untagged, "section length");
  Check(std::memcmp(expected.data(), f.slot, slot_bytes) == 0,
        "restore installed the payload and nothing else");
  Check(info.written_end == static_cast<int32_t>(GetLe(&b[16], 4)) &&
            info.valid_start == static_cast<int32_t>(GetLe(&b[20], 4)),
        "restored positions");
  Check(swa_slot_save(f.cache, 0, key, 1) == SWA_OK, "save after restore");
  // What this library writes for the blob: version 3 (4 with the section),
  // flags as accepted; with a secret version 5, the chunked-tag bit and
  // 64 KiB chunks; CRC and tag recomputed.
  std::vector<uint8_t> again(b.begin(), b.begin() + untagged);
  PutLe(&again[4], f.compression ? 4 : 3, 2);
  if (f.secret) {
    PutLe(&again[4], 5, 2);
    PutLe(&again[swa::kBlobFlagsOffset], GetLe(&again[swa::kBlobFlagsOffset], 4) | 4, 4);
    again[swa::kBlobTagChunkOffset] = 16;
  }
  PutCrc(again, untagged);
  if (f.secret) {
    again.resize(untagged + kTag);
    Check(f.Tag(kSecret, sizeof kSecret, again.data(), untagged, &again[untagged]), "tag");
  }
  Check(f.saved == again, "save after restore gives back the blob");
  return s;
}

// ---- Seeds ----------------------------------------------------------------

struct Seed {
  std::string name;
  std::vector<uint8_t> bytes;  // mode, repair, blob
  bool valid;                  // must restore
};

// A blob of fixture `which` saved by the library: slot 0 filled with bytes
// from `seed`, positions from a replay of `hit`.
std::vector<uint8_t> Saved(int which, uint32_t seed, int32_t hit) {
  Fixture& f = F(which);
  uint32_t x = seed * 2654435761u + 1;
  for (uint64_t i = 0; i < f.layout.slot_bytes; ++i) {
    x = x * 1664525u + 1013904223u;
    f.slot[i] = static_cast<uint8_t>(x >> 24);
  }
  Check(swa_slot_reset(f.cache, 0) == SWA_OK, "reset");
  int32_t rs, rl;
  Check(swa_slot_begin_replay(f.cache, 0, hit, &rs, &rl) == SWA_OK, "replay");
  const uint8_t key[] = {'k'};
  Check(swa_slot_save(f.cache, 0, key, 1) == SWA_OK, "seed save");
  return f.saved;
}

std::vector<uint8_t> Input(uint8_t mode, uint8_t repair, const std::vector<uint8_t>& blob) {
  std::vector<uint8_t> in = {mode, repair};
  in.insert(in.end(), blob.begin(), blob.end());
  return in;
}

std::vector<Seed> Seeds() {
  // Valid seeds repair the fingerprint and CRC (and tag), so that they stay
  // deep when a layout change moves the fingerprint.
  const uint8_t deep = kRepairFingerprint | kRepairCrc;
  std::vector<Seed> s;
  std::vector<uint8_t> v3 = Saved(0, 1, 9);
  Check(v3.size() == kHeader + F(0).payload_bytes && v3[4] == 3, "plain blob is v3, untagged");
  s.push_back({"v3_plain", Input(0, deep, v3), true});
  // Positions with rejected drafts: ring_high above written_end.
  std::vector<uint8_t> drafts = v3;
  PutLe(&drafts[16], 7, 4);
  PutLe(&drafts[20], 2, 4);
  PutLe(&drafts[32], 12, 4);
  s.push_back({"v3_plain_drafts", Input(0, deep, drafts), true});
  s.push_back({"v2_plain", Input(kModeV2, deep | kRepairMagic, Saved(0, 2, 5)), true});
  // A tagged blob for a cache without a secret; a v3 blob flagged compressed.
  std::vector<uint8_t> tagged_for_plain = Saved(0, 3, 6);
  tagged_for_plain.resize(tagged_for_plain.size() + kTag);
  s.push_back({"v3_tagged_no_secret",
               Input(kModeTagShape | kModeRetag | kModeFlags | kModeSinglePass, deep, tagged_for_plain),
               false});
  std::vector<uint8_t> v3_compressed = Saved(0, 4, 3);
  PutLe(&v3_compressed[swa::kBlobFlagsOffset], swa::kBlobFlagCompression, 4);
  s.push_back({"v3_flagged_compression", Input(0, deep, v3_compressed), false});

  const std::vector<uint8_t> t5 = Saved(1, 5, 10);
  Check(t5.size() == kHeader + F(1).payload_bytes + kTag && t5[4] == 5 &&
            GetLe(&t5[swa::kBlobFlagsOffset], 4) == 5 && t5[swa::kBlobTagChunkOffset] == 16,
        "secret blob is v5 with a chunked tag");
  s.push_back({"v5_tagged", Input(1 | kModeTagShape | kModeRetag, deep, t5), true});
  s.push_back({"v5_tagged_exact", Input(1 | kModeTagShape, 0, t5), true});
  std::vector<uint8_t> stripped(t5.begin(), t5.end() - kTag);
  s.push_back({"v5_tag_stripped", Input(1, deep, stripped), false});
  s.push_back({"v3_untagged_for_secret", Input(1, deep, Saved(0, 6, 4)), false});
  std::vector<uint8_t> altered = t5;
  altered[kHeader + 17] ^= 0x40;
  s.push_back({"v5_tagged_altered", Input(1 | kModeTagShape, deep, altered), false});
  // 64-byte chunks (several), retagged; an exponent out of range.
  std::vector<uint8_t> small_chunks = t5;
  small_chunks[swa::kBlobTagChunkOffset] = 6;
  Check(F(1).payload_bytes > 3 * 64, "several 64-byte chunks");
  s.push_back({"v5_tagged_chunks64", Input(1 | kModeTagShape | kModeRetag, deep, small_chunks), true});
  std::vector<uint8_t> bad_chunks = t5;
  bad_chunks[swa::kBlobTagChunkOffset] = 5;
  s.push_back({"v5_tagged_chunks32", Input(1 | kModeTagShape | kModeRetag, deep, bad_chunks), false});
  // The single-pass tag of versions 3 and 4, as earlier releases wrote.
  std::vector<uint8_t> t3 = t5;
  PutLe(&t3[4], 3, 2);
  PutLe(&t3[swa::kBlobFlagsOffset], swa::kBlobFlagTagged, 4);
  t3[swa::kBlobTagChunkOffset] = 0;
  s.push_back({"v3_tagged_single_pass",
               Input(1 | kModeTagShape | kModeRetag | kModeSinglePass, deep, t3), true});
  // ... and a single-pass tag under a header relabelled as chunked.
  std::vector<uint8_t> relabelled = t3;
  PutCrc(relabelled, relabelled.size() - kTag);
  F(1).OwnTag(relabelled.data(), relabelled.size() - kTag, &relabelled[relabelled.size() - kTag]);
  PutLe(&relabelled[4], 5, 2);
  PutLe(&relabelled[swa::kBlobFlagsOffset], 5, 4);
  relabelled[swa::kBlobTagChunkOffset] = 16;
  s.push_back({"v5_relabelled_single_pass", Input(1 | kModeTagShape, deep, relabelled), false});

  const std::vector<uint8_t> v4 = Saved(2, 7, 11);
  Check(v4.size() == kHeader + F(2).payload_bytes && v4[4] == 4 &&
            F(2).payload_bytes > F(2).layout.stored_bytes,
        "compression blob is v4 with the section");
  s.push_back({"v4_section", Input(2, deep, v4), true});
  std::vector<uint8_t> v4_short(v4.begin(), v4.end() - 1);
  s.push_back({"v4_section_short", Input(2, deep | kRepairLength, v4_short), false});
  std::vector<uint8_t> v4_unflagged = v4;
  PutLe(&v4_unflagged[swa::kBlobFlagsOffset], 0, 4);
  s.push_back({"v4_unflagged", Input(2, deep, v4_unflagged), false});
  s.push_back({"v3_without_section", Input(2, deep, Saved(0, 8, 2)), false});
  const std::vector<uint8_t> t5s = Saved(3, 9, 13);
  Check(t5s.size() == kHeader + F(3).payload_bytes + kTag && t5s[4] == 5 &&
            GetLe(&t5s[swa::kBlobFlagsOffset], 4) == 7,
        "tagged blob with the section is v5");
  s.push_back({"v5_section_tagged", Input(3 | kModeTagShape | kModeRetag, deep, t5s), true});
  std::vector<uint8_t> t5s_flip = t5s;
  t5s_flip[t5s.size() - kTag - 3] ^= 1;  // a section byte
  s.push_back({"v5_section_tagged_flip", Input(3 | kModeTagShape, deep, t5s_flip), false});
  std::vector<uint8_t> t4 = t5s;  // single-pass, version 4
  PutLe(&t4[4], 4, 2);
  PutLe(&t4[swa::kBlobFlagsOffset], 3, 4);
  t4[swa::kBlobTagChunkOffset] = 0;
  s.push_back({"v4_section_tagged_single_pass",
               Input(3 | kModeTagShape | kModeRetag | kModeSinglePass, deep, t4), true});
  s.push_back({"short", {0, 0, 'S', 'W', 'A', 'B'}, false});
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The seeds come from the library's own saves: check that the valid ones
  // restore and the others do not, and write them out when asked.
  const char* out = std::getenv("SWA_FUZZ_BLOB_SEEDS");
  for (const Seed& seed : Seeds()) {
    const swa_status_t st = RunOne(seed.bytes.data(), seed.bytes.size());
    if ((st == SWA_OK) != seed.valid) {
      std::fprintf(stderr, "seed %s: restore status %d\n", seed.name.c_str(), st);
      Check(false, "a seed restores as the seed list says");
    }
    if (out == nullptr) continue;
    const std::string path = std::string(out) + "/" + seed.name;
    std::FILE* file = std::fopen(path.c_str(), "wb");
    Check(file != nullptr, "open seed file");
    Check(std::fwrite(seed.bytes.data(), 1, seed.bytes.size(), file) == seed.bytes.size() &&
              std::fclose(file) == 0,
          "write seed file");
  }
  if (out != nullptr) {
    std::fprintf(stderr, "fuzz_blob: seeds written to %s\n", out);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  RunOne(data, size);
  return 0;
}
