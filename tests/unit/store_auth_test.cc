// Authenticated blobs (issue 33, item 2): a cache with a store secret tags
// every blob with an HMAC-SHA-256 over header, full store key and payload,
// and a restore refuses (DATA_LOSS, slot and pool unchanged) every blob
// without a valid tag: every single bit flipped in header, payload and tag,
// a blob moved to a key one bit away, a blob re-tagged with another secret, a
// tagged blob restored without the secret and an untagged one with it. The
// tag is checked against OpenSSL's one-shot HMAC() (and SHA256() for the
// chunk digests) as the reference. Every test runs for the chunked tag
// (version 5) with 64-byte chunks (the blob's payload spans several) and
// with the default 64 KiB (one chunk), and for the single-pass tag of
// versions 3 and 4 (tag_chunk_log2 = 0, as earlier releases wrote): those
// blobs still restore.
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "store/blob.h"
#include "store/blob_auth.h"
#include "store/blob_store.h"
#include "store/memory_store.h"
#include "store/tiered_store.h"
#include "unit/store_test_util.h"

namespace swa {
namespace {

using swa::testing::FillRandom;
using swa::testing::PoolBytes;
using swa::testing::ReadLe;
using swa::testing::Restore;
using swa::testing::Save;
using swa::testing::SharedStore;

// One stored BF16 layer, W = 4: a blob of a few hundred bytes, so that every
// one of its bits can be flipped.
ModelSpec TinySpec() {
  ModelSpec spec;
  spec.window = 4;
  spec.draft_tokens = 0;
  spec.max_slots = 3;
  LayerSpec l;
  l.role = Role::kStored;
  l.head_dim = 32;
  l.kv_heads = 1;
  l.q_heads = 1;
  l.shared_kv = false;
  l.format = Format::kBf16;
  spec.layers.push_back(l);
  return spec;
}

std::vector<uint8_t> Bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

std::unique_ptr<Cache> MakeCacheWith(const std::vector<uint8_t>& secret, const std::string& ns,
                                     std::shared_ptr<KvStore> shared,
                                     uint8_t chunk_log2 = kDefaultTagChunkLog2) {
  CacheOptions options;
  options.store_security.tag_chunk_log2 = chunk_log2;
  if (!secret.empty()) {
    absl::StatusOr<std::shared_ptr<const BlobSecret>> s = BlobSecret::Create(secret, "secret");
    EXPECT_TRUE(s.ok()) << s.status();
    options.store_security.secret = *s;
  }
  options.store_security.name_space = ns;
  absl::StatusOr<std::unique_ptr<Cache>> c = Cache::Create(TinySpec(), options);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return nullptr;
  (*c)->SetStore(std::make_shared<BlobStore>(std::make_unique<SharedStore>(shared),
                                             (*c)->layout().fingerprint(),
                                             (*c)->store_security()));
  return std::move(*c);
}

std::vector<uint8_t> GetRaw(KvStore& kv, const std::string& full_key) {
  absl::StatusOr<uint64_t> size = kv.Get(full_key, {});
  EXPECT_TRUE(size.ok()) << size.status();
  std::vector<uint8_t> blob(size.ok() ? *size : 0);
  const ByteSpan whole[1] = {ByteSpan(blob.data(), blob.size())};
  EXPECT_TRUE(kv.Get(full_key, whole).ok());
  return blob;
}

void PutRaw(KvStore& kv, const std::string& full_key, const std::vector<uint8_t>& blob) {
  const ConstByteSpan whole[1] = {ConstByteSpan(blob.data(), blob.size())};
  ASSERT_TRUE(kv.Put(full_key, whole).ok());
}

void PutLe64(std::vector<uint8_t>& v, uint64_t x) {
  for (int i = 0; i < 8; ++i) v.push_back(static_cast<uint8_t>(x >> (8 * i)));
}

// The reference tag, written out from docs/store.md with OpenSSL's one-shot
// HMAC() and SHA256(): chunk_log2 = 0 the single-pass tag (header, key
// length, key, payload), else the chunked one (header, key length, key,
// payload length, chunk count, the chunks' SHA-256 digests).
std::vector<uint8_t> ReferenceTag(const std::vector<uint8_t>& secret, const uint8_t* blob,
                                  size_t payload_bytes, const std::string& full_key,
                                  int chunk_log2) {
  const uint8_t* payload = blob + kBlobHeaderBytes;
  std::vector<uint8_t> msg(blob, blob + kBlobHeaderBytes);
  PutLe64(msg, full_key.size());
  msg.insert(msg.end(), full_key.begin(), full_key.end());
  if (chunk_log2 == 0) {
    msg.insert(msg.end(), payload, payload + payload_bytes);
  } else {
    const size_t chunk = size_t{1} << chunk_log2;
    const size_t n = (payload_bytes + chunk - 1) / chunk;
    PutLe64(msg, payload_bytes);
    PutLe64(msg, n);
    for (size_t i = 0; i < n; ++i) {
      uint8_t d[SHA256_DIGEST_LENGTH];
      SHA256(payload + i * chunk, std::min(chunk, payload_bytes - i * chunk), d);
      msg.insert(msg.end(), d, d + sizeof d);
    }
  }
  std::vector<uint8_t> tag(EVP_MAX_MD_SIZE);
  unsigned len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), msg.data(), msg.size(),
       tag.data(), &len);
  tag.resize(len);
  return tag;
}

// The parameter: the chunk exponent the tagged cache saves with (0: single-pass).
class StoreAuthTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    shared_ = std::make_shared<MemoryStore>(64 << 20);
    tagged_ = MakeCacheWith(secret_, "", shared_, static_cast<uint8_t>(GetParam()));
    ASSERT_NE(tagged_, nullptr);
    for (int i = 0; i < 2; ++i) slots_.push_back(*tagged_->slots().Alloc());
    FillRandom(tagged_->pool(), tagged_->layout().pool_bytes(), rng_);
    ASSERT_TRUE(tagged_->slots().Set(slots_[0], {true, 11, 3, 12}).ok());
    ASSERT_TRUE(tagged_->slots().Set(slots_[1], {true, 7, 5, 9}).ok());
    ASSERT_TRUE(Save(*tagged_, slots_[0], "seq").ok());
    full_key_ = (*tagged_->store())->FullKey("seq");
    blob_ = GetRaw(*shared_, full_key_);
  }

  // Restores slot 1 of `cache` from `key`; expects DATA_LOSS and the pool and
  // every slot state unchanged.
  void ExpectRefused(Cache& cache, const std::string& what, const std::string& key = "seq") {
    const std::vector<uint8_t> pool = PoolBytes(cache);
    const SlotState before = *cache.slots().Get(1);
    absl::Status st = Restore(cache, 1, key);
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << what << ": " << st;
    EXPECT_TRUE(PoolBytes(cache) == pool) << what << ": the pool changed";
    const SlotState after = *cache.slots().Get(1);
    EXPECT_TRUE(after.written_end == before.written_end && after.valid_start == before.valid_start &&
                after.ring_high == before.ring_high)
        << what << ": the slot state changed";
  }

  size_t payload_bytes() const { return tagged_->layout().stored_bytes(); }
  std::vector<uint8_t> Reference(const std::vector<uint8_t>& secret, const uint8_t* blob) const {
    return ReferenceTag(secret, blob, payload_bytes(), full_key_, GetParam());
  }

  std::mt19937_64 rng_{33};
  std::vector<uint8_t> secret_ = Bytes("0123456789abcdef-tenant-secret");
  std::shared_ptr<MemoryStore> shared_;
  std::unique_ptr<Cache> tagged_;
  std::vector<uint32_t> slots_;
  std::string full_key_;
  std::vector<uint8_t> blob_;
};

TEST_P(StoreAuthTest, TaggedBlobLayoutMatchesTheReferenceHmacAndRoundTrips) {
  ASSERT_EQ(blob_.size(), kBlobHeaderBytes + payload_bytes() + kBlobTagBytes);
  if (GetParam() == 0) {
    EXPECT_EQ(ReadLe(blob_.data() + 4, 2), kBlobVersion);
    EXPECT_EQ(ReadLe(blob_.data() + kBlobFlagsOffset, 4), kBlobFlagTagged);
    EXPECT_EQ(blob_[kBlobTagChunkOffset], 0);
  } else {
    EXPECT_EQ(ReadLe(blob_.data() + 4, 2), 5u);
    EXPECT_EQ(ReadLe(blob_.data() + kBlobFlagsOffset, 4), 5u);  // tagged | chunked
    EXPECT_EQ(blob_[kBlobTagChunkOffset], GetParam());
  }
  if (GetParam() == 6) EXPECT_GT(payload_bytes(), 4u * 64);  // several chunks
  const std::vector<uint8_t> want = Reference(secret_, blob_.data());
  ASSERT_EQ(want.size(), kBlobTagBytes);
  EXPECT_TRUE(std::equal(want.begin(), want.end(), blob_.end() - kBlobTagBytes));
  // The payload is the slot's stored region, in clear (the tag does not hide it).
  EXPECT_EQ(std::memcmp(blob_.data() + kBlobHeaderBytes, tagged_->slot_base(slots_[0]),
                        payload_bytes()),
            0);
  ASSERT_TRUE(Restore(*tagged_, slots_[1], "seq").ok());
  EXPECT_EQ(std::memcmp(tagged_->slot_base(slots_[1]), tagged_->slot_base(slots_[0]),
                        payload_bytes()),
            0);
  EXPECT_EQ(tagged_->slots().Get(slots_[1])->written_end, 11);
  EXPECT_EQ(tagged_->slots().Get(slots_[1])->ring_high, 12);
}

TEST_P(StoreAuthTest, EveryBitFlipOfHeaderPayloadAndTagIsRefused) {
  ASSERT_EQ(slots_[1], 1u);
  const size_t bits = blob_.size() * 8;
  for (size_t bit = 0; bit < bits; ++bit) {
    std::vector<uint8_t> b = blob_;
    b[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    PutRaw(*shared_, full_key_, b);
    ExpectRefused(*tagged_, "bit " + std::to_string(bit));
    if (HasFailure()) return;
  }
}

TEST_P(StoreAuthTest, EveryBitFlipOfTheKeyIsRefused) {
  // The blob moved (copied) to every key one bit away from "seq".
  const std::string key = "seq";
  for (size_t bit = 0; bit < key.size() * 8; ++bit) {
    std::string other = key;
    other[bit / 8] = static_cast<char>(other[bit / 8] ^ (1 << (bit % 8)));
    PutRaw(*shared_, (*tagged_->store())->FullKey(other), blob_);
    ExpectRefused(*tagged_, "key bit " + std::to_string(bit), other);
    if (HasFailure()) return;
  }
}

TEST_P(StoreAuthTest, BlobMovedToAnotherNamespaceIsRefused) {
  std::unique_ptr<Cache> other = MakeCacheWith(secret_, "tenant-b", shared_);
  ASSERT_NE(other, nullptr);
  ASSERT_EQ(*other->slots().Alloc(), 0u);
  ASSERT_EQ(*other->slots().Alloc(), 1u);
  FillRandom(other->pool(), other->layout().pool_bytes(), rng_);
  PutRaw(*shared_, (*other->store())->FullKey("seq"), blob_);
  ExpectRefused(*other, "moved into namespace tenant-b");
}

TEST_P(StoreAuthTest, BlobRetaggedWithAnotherSecretIsRefused) {
  std::vector<uint8_t> b = blob_;
  const std::vector<uint8_t> forged = Reference(Bytes("another secret, 32 bytes long..."), b.data());
  std::copy(forged.begin(), forged.end(), b.end() - kBlobTagBytes);
  PutRaw(*shared_, full_key_, b);
  ExpectRefused(*tagged_, "re-tagged with another secret");
  // Control: re-tagging with the right secret is accepted (the test can pass).
  const std::vector<uint8_t> right = Reference(secret_, b.data());
  std::copy(right.begin(), right.end(), b.end() - kBlobTagBytes);
  PutRaw(*shared_, full_key_, b);
  EXPECT_TRUE(Restore(*tagged_, 1, "seq").ok());
}

TEST_P(StoreAuthTest, TaggedWithoutSecretAndUntaggedWithSecretAreRefused) {
  std::unique_ptr<Cache> plain = MakeCacheWith({}, "", shared_);
  ASSERT_NE(plain, nullptr);
  ASSERT_EQ(*plain->slots().Alloc(), 0u);
  ASSERT_EQ(*plain->slots().Alloc(), 1u);
  FillRandom(plain->pool(), plain->layout().pool_bytes(), rng_);
  ASSERT_EQ((*plain->store())->FullKey("seq"), full_key_);  // same key, same layout
  // A tagged blob read by a cache without the secret.
  ExpectRefused(*plain, "tagged blob, no secret");
  // The same with its tag stripped (the header still says tagged; CRC holds).
  std::vector<uint8_t> stripped(blob_.begin(), blob_.end() - kBlobTagBytes);
  PutRaw(*shared_, full_key_, stripped);
  ExpectRefused(*plain, "stripped tag, no secret");
  ExpectRefused(*tagged_, "stripped tag, with secret");
  // An untagged blob (saved by the plain cache) read with the secret.
  ASSERT_TRUE(Save(*plain, 0, "seq").ok());
  ASSERT_EQ(GetRaw(*shared_, full_key_).size(), kBlobHeaderBytes + payload_bytes());
  ExpectRefused(*tagged_, "untagged blob, with secret");
  // ... also with 32 junk bytes appended so that its size is a tagged blob's.
  std::vector<uint8_t> padded = GetRaw(*shared_, full_key_);
  padded.resize(padded.size() + kBlobTagBytes, 0x5A);
  PutRaw(*shared_, full_key_, padded);
  ExpectRefused(*tagged_, "untagged blob + 32 bytes, with secret");
  // Control: the plain cache reads its own blob.
  ASSERT_TRUE(Save(*plain, 0, "seq").ok());
  EXPECT_TRUE(Restore(*plain, 1, "seq").ok());
}

// Through a tiered store: a blob altered in the slow tier is refused with the
// slot unchanged, and never promoted into the fast tier (the tag is checked
// inside the tiered get, before the promotion).
TEST_P(StoreAuthTest, TieredStoreRestoresAreVerifiedBeforeTheSlot) {
  auto fast = std::make_shared<MemoryStore>(64 << 20);
  auto slow = std::make_shared<MemoryStore>(64 << 20);
  std::vector<std::unique_ptr<KvStore>> tiers;
  tiers.push_back(std::make_unique<SharedStore>(fast));
  tiers.push_back(std::make_unique<SharedStore>(slow));
  absl::StatusOr<std::unique_ptr<TieredStore>> tiered = TieredStore::Create(std::move(tiers));
  ASSERT_TRUE(tiered.ok()) << tiered.status();
  tagged_->SetStore(std::make_shared<BlobStore>(std::move(*tiered), tagged_->layout().fingerprint(),
                                                tagged_->store_security()));
  ASSERT_TRUE(Save(*tagged_, slots_[0], "seq").ok());
  std::vector<uint8_t> b = GetRaw(*slow, full_key_);
  ASSERT_EQ(b, blob_);
  b[kBlobHeaderBytes + 5] ^= 0x40;  // a payload bit, in the slow tier only
  PutRaw(*slow, full_key_, b);
  ASSERT_TRUE(fast->Remove(full_key_).ok());
  ExpectRefused(*tagged_, "altered in the slow tier");
  EXPECT_FALSE(*fast->Exists(full_key_));  // not promoted
  ExpectRefused(*tagged_, "altered, read again from the slow tier");
  // Control: the sound blob back in the slow tier restores, and only now is
  // it promoted.
  PutRaw(*slow, full_key_, blob_);
  EXPECT_TRUE(Restore(*tagged_, 1, "seq").ok());
  EXPECT_EQ(GetRaw(*fast, full_key_), blob_);
}

INSTANTIATE_TEST_SUITE_P(ChunkLog2, StoreAuthTest, ::testing::Values(6, 16, 0),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return p.param == 0 ? std::string("SinglePass")
                                               : "Chunks" + std::to_string(p.param);
                         });

TEST(StoreAuth, SecretLengthIsChecked) {
  EXPECT_EQ(BlobSecret::Create(std::vector<uint8_t>(15, 1), "s").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(BlobSecret::Create(std::vector<uint8_t>(16, 1), "s").ok());
  EXPECT_TRUE(BlobSecret::Create(std::vector<uint8_t>(1024, 1), "s").ok());
  EXPECT_EQ(BlobSecret::Create(std::vector<uint8_t>(1025, 1), "s").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace swa
