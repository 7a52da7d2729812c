// The chunked HMAC tag of version 5 blobs (store/blob_auth.h, docs/store.md
// "Authenticated blobs"), on BlobSecret and the hash workers directly, with
// payloads whose last chunk is partial: the tag equals a reference written
// out with OpenSSL's one-shot SHA256() and HMAC() for every thread count;
// every payload bit flip (each chunk boundary included), swapped chunks,
// payloads cut or extended by whole chunks (header resealed to match), a
// changed chunk exponent and a header moved between the two constructions
// are refused. Through a cache: a single-pass blob saved as earlier releases
// did restores in a cache that saves chunked tags, and concurrent restores
// from several threads share the hash workers.
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "store/blob.h"
#include "store/blob_auth.h"
#include "store/blob_store.h"
#include "store/blob_tag_stream.h"
#include "store/hash_workers.h"
#include "store/memory_store.h"
#include "unit/store_test_util.h"

namespace swa {
namespace {

using swa::testing::FillRandom;
using swa::testing::PoolBytes;
using swa::testing::Restore;
using swa::testing::Save;
using swa::testing::SharedStore;

const std::vector<uint8_t> kSecret(40, 0xA7);
const std::string kFullKey = "ns3:abc0123456789abcdef:sequence-7";

void PutLe64(std::vector<uint8_t>& v, uint64_t x) {
  for (int i = 0; i < 8; ++i) v.push_back(static_cast<uint8_t>(x >> (8 * i)));
}

// docs/store.md's chunked tag, with OpenSSL's one-shot functions.
std::vector<uint8_t> ReferenceChunkedTag(const std::vector<uint8_t>& secret, const uint8_t* header,
                                         const std::string& key, const std::vector<uint8_t>& p,
                                         int chunk_log2) {
  const size_t chunk = size_t{1} << chunk_log2;
  const size_t n = (p.size() + chunk - 1) / chunk;
  std::vector<uint8_t> msg(header, header + kBlobHeaderBytes);
  PutLe64(msg, key.size());
  msg.insert(msg.end(), key.begin(), key.end());
  PutLe64(msg, p.size());
  PutLe64(msg, n);
  for (size_t i = 0; i < n; ++i) {
    uint8_t d[SHA256_DIGEST_LENGTH];
    SHA256(p.data() + i * chunk, std::min(chunk, p.size() - i * chunk), d);
    msg.insert(msg.end(), d, d + sizeof d);
  }
  std::vector<uint8_t> tag(32);
  unsigned len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), msg.data(), msg.size(),
       tag.data(), &len);
  EXPECT_EQ(len, 32u);
  return tag;
}

// A version 5 header for `payload` with chunk exponent `c`.
std::vector<uint8_t> Header(const std::vector<uint8_t>& payload, int c, int version = 5,
                            uint32_t flags = kBlobFlagTagged | kBlobFlagChunkedTag) {
  BlobHeader h;
  h.version = static_cast<uint16_t>(version);
  h.fingerprint = 0x1234;
  h.written_end = 40;
  h.valid_start = 3;
  h.ring_high = 41;
  h.payload_bytes = payload.size();
  h.key_hash = BlobKeyHash("sequence-7");
  h.flags = flags;
  h.tag_chunk_log2 = static_cast<uint8_t>(c);
  std::vector<uint8_t> out(kBlobHeaderBytes);
  EncodeBlobHeader(h, payload.data(), out.data());
  return out;
}

class ChunkedTagTest : public ::testing::Test {
 protected:
  void SetUp() override {
    payload_.resize(1000);  // 64-byte chunks: 15 whole and one of 40 bytes
    FillRandom(payload_.data(), payload_.size(), rng_);
    header_ = Header(payload_, 6);
    tag_.resize(kBlobTagBytes);
    ASSERT_TRUE(secret_->TagChunked(header_.data(), kFullKey, payload_.data(), payload_.size(), 6,
                                    2, tag_.data())
                    .ok());
  }

  absl::StatusCode Verify(const std::vector<uint8_t>& header, const std::vector<uint8_t>& payload,
                          size_t threads = 2, const BlobSecret* secret = nullptr) const {
    if (secret == nullptr) secret = secret_.get();
    return secret
        ->Verify(header.data(), kFullKey, payload.data(), payload.size(), tag_.data(), threads)
        .code();
  }

  std::mt19937_64 rng_{77};
  std::shared_ptr<const BlobSecret> secret_ = *BlobSecret::Create(kSecret, "secret");
  std::vector<uint8_t> payload_, header_, tag_;
};

TEST_F(ChunkedTagTest, MatchesTheReferenceOnEveryThreadCountAndChunkSize) {
  EXPECT_EQ(tag_, ReferenceChunkedTag(kSecret, header_.data(), kFullKey, payload_, 6));
  for (int c : {6, 7, 9, 10, 16}) {
    const std::vector<uint8_t> header = Header(payload_, c);
    const std::vector<uint8_t> want = ReferenceChunkedTag(kSecret, header.data(), kFullKey, payload_, c);
    for (size_t threads : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{8}, size_t{100}}) {
      uint8_t got[kBlobTagBytes];
      ASSERT_TRUE(secret_->TagChunked(header.data(), kFullKey, payload_.data(), payload_.size(), c,
                                      threads, got)
                      .ok());
      EXPECT_EQ(std::vector<uint8_t>(got, got + kBlobTagBytes), want)
          << "chunk exponent " << c << ", threads " << threads;
      EXPECT_TRUE(secret_->Verify(header.data(), kFullKey, payload_.data(), payload_.size(), got,
                                  threads)
                      .ok());
    }
  }
  // An empty payload: no chunks.
  const std::vector<uint8_t> empty;
  const std::vector<uint8_t> header = Header(empty, 6);
  uint8_t got[kBlobTagBytes];
  ASSERT_TRUE(secret_->TagChunked(header.data(), kFullKey, empty.data(), 0, 6, 2, got).ok());
  EXPECT_EQ(std::vector<uint8_t>(got, got + kBlobTagBytes),
            ReferenceChunkedTag(kSecret, header.data(), kFullKey, empty, 6));
  EXPECT_EQ(secret_->TagChunked(header.data(), kFullKey, empty.data(), 0, 5, 2, got).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(secret_->TagChunked(header.data(), kFullKey, empty.data(), 0, 31, 2, got).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ChunkedTagTest, EveryPayloadAndHeaderBitFlipIsRefused) {
  ASSERT_EQ(Verify(header_, payload_), absl::StatusCode::kOk);
  for (size_t bit = 0; bit < payload_.size() * 8; ++bit) {
    std::vector<uint8_t> p = payload_;
    p[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    ASSERT_EQ(Verify(header_, p, 1 + bit % 3), absl::StatusCode::kDataLoss) << "payload bit " << bit;
  }
  for (size_t bit = 0; bit < kBlobHeaderBytes * 8; ++bit) {
    std::vector<uint8_t> h = header_;
    h[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    ASSERT_EQ(Verify(h, payload_), absl::StatusCode::kDataLoss) << "header bit " << bit;
  }
  for (size_t bit = 0; bit < kFullKey.size() * 8; ++bit) {
    std::string key = kFullKey;
    key[bit / 8] = static_cast<char>(key[bit / 8] ^ (1 << (bit % 8)));
    ASSERT_EQ(secret_->Verify(header_.data(), key, payload_.data(), payload_.size(), tag_.data())
                  .code(),
              absl::StatusCode::kDataLoss)
        << "key bit " << bit;
  }
}

TEST_F(ChunkedTagTest, ReorderedTruncatedAndExtendedChunksAreRefused) {
  // Chunks 3 and 4 swapped (the same bytes, the same digests, in another order).
  std::vector<uint8_t> swapped = payload_;
  std::swap_ranges(swapped.begin() + 3 * 64, swapped.begin() + 4 * 64, swapped.begin() + 4 * 64);
  ASSERT_NE(swapped, payload_);
  EXPECT_EQ(Verify(Header(swapped, 6), swapped), absl::StatusCode::kDataLoss);
  // The partial last chunk dropped, then the last whole one too; the header
  // resealed with the shorter length each time.
  for (size_t keep : {size_t{960}, size_t{896}, size_t{0}}) {
    const std::vector<uint8_t> cut(payload_.begin(), payload_.begin() + keep);
    EXPECT_EQ(Verify(Header(cut, 6), cut), absl::StatusCode::kDataLoss) << keep;
  }
  // Extended by a copy of its last chunk, and by one byte.
  std::vector<uint8_t> longer = payload_;
  longer.insert(longer.end(), payload_.end() - 40, payload_.end());
  EXPECT_EQ(Verify(Header(longer, 6), longer), absl::StatusCode::kDataLoss);
  longer = payload_;
  longer.push_back(payload_.back());
  EXPECT_EQ(Verify(Header(longer, 6), longer), absl::StatusCode::kDataLoss);
  // Another chunk exponent (resealed): other chunks, another tag.
  for (int c : {7, 16, 30}) EXPECT_EQ(Verify(Header(payload_, c), payload_), absl::StatusCode::kDataLoss);
  // Out of range: refused before any hashing.
  for (int c : {0, 5, 31, 255}) EXPECT_EQ(Verify(Header(payload_, c), payload_), absl::StatusCode::kDataLoss);
}

TEST_F(ChunkedTagTest, WrongSecretAndTheOtherConstructionAreRefused) {
  auto other = *BlobSecret::Create(std::vector<uint8_t>(40, 0xA6), "other");
  EXPECT_EQ(Verify(header_, payload_, 2, other.get()), absl::StatusCode::kDataLoss);
  // The same header relabelled as a single-pass blob (version 3, no chunk
  // flag, byte 48 cleared, resealed), the tag kept: refused. And a
  // single-pass tag under a header relabelled as chunked: refused.
  const std::vector<uint8_t> single = Header(payload_, 0, 3, kBlobFlagTagged);
  EXPECT_EQ(Verify(single, payload_), absl::StatusCode::kDataLoss);
  uint8_t single_tag[kBlobTagBytes];
  ASSERT_TRUE(secret_->Tag(single.data(), kFullKey, payload_.data(), payload_.size(), single_tag).ok());
  EXPECT_TRUE(secret_->Verify(single.data(), kFullKey, payload_.data(), payload_.size(), single_tag)
                  .ok());
  EXPECT_EQ(secret_->Verify(header_.data(), kFullKey, payload_.data(), payload_.size(), single_tag)
                .code(),
            absl::StatusCode::kDataLoss);
  // The chunk flag in a version 4 header: the single-pass tag is what is
  // checked (version 5 alone names the chunked one), so the chunked tag fails.
  EXPECT_EQ(Verify(Header(payload_, 6, 4), payload_), absl::StatusCode::kDataLoss);
}

TEST(HashWorkers, RunsEveryIndexOnceFromSeveralCallersAtOnce) {
  constexpr size_t kN = 257;
  std::vector<std::thread> callers;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&, t] {
      for (int round = 0; round < 50; ++round) {
        std::vector<std::atomic<int>> seen(kN);
        ParallelFor(kN, 1 + (t + round) % 4, [&](size_t i) { seen[i].fetch_add(1); });
        for (auto& s : seen)
          if (s.load() != 1) bad.fetch_add(1);
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GE(DefaultHashThreads(), 1u);
  EXPECT_LE(DefaultHashThreads(), kMaxHashThreads);
}

// ChunkStream: an index runs only once it is ready, each at most once; Finish
// runs every index; Cancel runs none that was not ready, and no fn runs
// after it returns. Many streams at once, with 1 ... 4 threads.
// A child forked while the workers wait (Python multiprocessing's "fork",
// a server forking per request) has none of them: its ParallelFor and
// ChunkStream calls must still run every index and return, neither
// deadlocking on a lock a parent thread held nor waiting on a condition
// variable the parent's threads wait on (glibc counts those waiters). Run in
// a child of its own so that a hang is a timeout, not a stuck test binary.
TEST(HashWorkers, AForkedChildHashesWithoutTheParentsWorkers) {
  for (int round = 0; round < 20; ++round) {
    // Workers started and waiting, some possibly still leaving a job.
    std::atomic<int> sum{0};
    ParallelFor(64, 4, [&](size_t i) { sum.fetch_add(static_cast<int>(i)); });
    ASSERT_EQ(sum.load(), 64 * 63 / 2);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      alarm(20);  // a hang kills the child: SIGALRM
      std::atomic<int> child_sum{0};
      for (int k = 0; k < 3; ++k) ParallelFor(64, 4, [&](size_t i) { child_sum.fetch_add(static_cast<int>(i)); });
      std::atomic<int> streamed{0};
      {
        ChunkStream stream(16, 4, [&](size_t i) { streamed.fetch_add(static_cast<int>(i)); });
        stream.Ready(8);
        stream.Finish();
      }
      _exit(child_sum.load() == 3 * 64 * 63 / 2 && streamed.load() == 16 * 15 / 2 ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << "round " << round << ": the child hung or crashed (signal "
                                   << (WIFSIGNALED(status) ? WTERMSIG(status) : 0) << ")";
    ASSERT_EQ(WEXITSTATUS(status), 0) << "round " << round << ": wrong sums in the child";
  }
}

// A worker thread that cannot be started (here: no address space left for
// its stack, in a forked child, which starts with no workers) costs
// parallelism only: ParallelFor and ChunkStream still run every index on the
// caller. (Before: std::system_error out of a save or restore.) Not under a
// sanitizer, whose runtime needs address space of its own.
TEST(HashWorkers, AWorkerThatCannotStartLeavesTheWorkToTheCaller) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizer build";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
  GTEST_SKIP() << "sanitizer build";
#endif
#endif
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(20);
    FILE* f = std::fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (f == nullptr || std::fscanf(f, "%lu", &pages) != 1) _exit(3);
    std::fclose(f);
    // Room for small allocations, none for a thread's stack (8 MiB here).
    const rlim_t limit = pages * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + (2u << 20);
    const rlimit as{limit, limit};
    if (setrlimit(RLIMIT_AS, &as) != 0) _exit(3);
    int code = 0;
    try {
      std::atomic<int> sum{0};
      ParallelFor(64, 4, [&](size_t i) { sum.fetch_add(static_cast<int>(i)); });
      std::atomic<int> streamed{0};
      {
        ChunkStream stream(16, 4, [&](size_t i) { streamed.fetch_add(static_cast<int>(i)); });
        stream.Ready(8);
        stream.Finish();
      }
      code = sum.load() == 64 * 63 / 2 && streamed.load() == 16 * 15 / 2 ? 0 : 1;
    } catch (...) {
      code = 2;
    }
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child hung or crashed";
  EXPECT_NE(WEXITSTATUS(status), 2) << "an exception left ParallelFor or ChunkStream";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(HashWorkers, ChunkStreamRunsReadyIndicesOnly) {
  std::atomic<int> bad{0};
  std::vector<std::thread> owners;
  for (int t = 0; t < 3; ++t)
    owners.emplace_back([&, t] {
      for (int round = 0; round < 40; ++round) {
        const size_t n = 1 + (round * 5 + t) % 30;
        std::atomic<size_t> ready{0};
        std::vector<std::atomic<int>> runs(n);
        std::atomic<bool> closed{false};
        {
          ChunkStream stream(n, 1 + (round + t) % 4, [&](size_t i) {
            if (i >= ready.load() || closed.load()) bad.fetch_add(1);
            runs[i].fetch_add(1);
          });
          const bool cancel = round % 3 == 2;
          const size_t upto = cancel ? n / 2 : n;
          for (size_t k = 1; k <= upto; k += 1 + k / 3) {
            ready.store(k);
            stream.Ready(k);
          }
          if (cancel) {
            stream.Cancel();
            closed.store(true);
            for (size_t i = 0; i < n; ++i)
              if (runs[i].load() > 1 || (i >= ready.load() && runs[i].load() != 0)) bad.fetch_add(1);
          } else {
            ready.store(n);
            stream.Finish();
            closed.store(true);
            for (size_t i = 0; i < n; ++i)
              if (runs[i].load() != 1) bad.fetch_add(1);
          }
        }
      }
    });
  for (auto& o : owners) o.join();
  EXPECT_EQ(bad.load(), 0);
  // A stream dropped without Finish cancels: nothing runs.
  std::atomic<int> ran{0};
  { ChunkStream dropped(5, 2, [&](size_t) { ran.fetch_add(1); }); }
  EXPECT_EQ(ran.load(), 0);
}

// The restore's check as a blob lands (StreamingTagCheck): payloads that end
// exactly on a chunk boundary, one byte either side of it, or are empty,
// landed once whole, at every chunk boundary, or byte by byte: the sound blob
// verifies; its last payload byte flipped, or another tag, is refused.
TEST(StoreAuthChunked, StreamingCheckAtChunkBoundaries) {
  std::shared_ptr<const BlobSecret> secret = *BlobSecret::Create(kSecret, "secret");
  std::mt19937_64 rng(123);
  constexpr int kLog2 = 6;
  for (size_t len : {0, 1, 63, 64, 65, 128, 191, 192, 193}) {
    std::vector<uint8_t> payload(len);
    FillRandom(payload.data(), len, rng);
    const std::vector<uint8_t> header = Header(payload, kLog2);
    uint8_t tag[kBlobTagBytes];
    ASSERT_TRUE(secret->TagChunked(header.data(), kFullKey, payload.data(), len, kLog2, 2, tag).ok());
    uint8_t other[kBlobTagBytes];
    std::memcpy(other, tag, sizeof other);
    other[kBlobTagBytes - 1] ^= 1;
    const uint64_t total = kBlobHeaderBytes + len + kBlobTagBytes;
    for (int schedule = 0; schedule < 3; ++schedule) {
      std::vector<uint64_t> marks;
      if (schedule == 0) {
        marks = {total};
      } else if (schedule == 1) {
        for (uint64_t at = 0; at <= len; at += 64) marks.push_back(kBlobHeaderBytes + at);
        marks.push_back(kBlobHeaderBytes + len);
        marks.push_back(total);
      } else {
        for (uint64_t n = 0; n <= total; ++n) marks.push_back(n);
      }
      for (int variant = 0; variant < 3; ++variant) {  // sound, last byte flipped, other tag
        if (variant == 1 && len == 0) continue;
        std::vector<uint8_t> p = payload;
        if (variant == 1) p[len - 1] ^= 0x10;
        StreamingTagCheck check(*secret, kFullKey, header.data(), p.data(), len, 2);
        for (uint64_t n : marks) check.Landed(n);
        const absl::Status st = check.Verify(variant == 2 ? other : tag);
        if (variant == 0)
          EXPECT_TRUE(st.ok()) << "len " << len << ", schedule " << schedule << ": " << st;
        else
          EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss)
              << "len " << len << ", schedule " << schedule << ", variant " << variant;
      }
    }
  }
}

// A cache that saves chunked tags restores single-pass blobs (saved as
// earlier releases did) and the reverse; restores from several threads at
// once through one store all succeed and agree.
TEST(StoreAuthChunked, SinglePassBlobsStillRestoreAndConcurrentRestoresAgree) {
  ModelSpec spec = swa::testing::SmallSpec();
  auto shared = std::make_shared<MemoryStore>(64 << 20);
  auto make = [&](uint8_t chunk_log2) {
    CacheOptions options;
    options.store_security.secret = *BlobSecret::Create(kSecret, "secret");
    options.store_security.tag_chunk_log2 = chunk_log2;
    options.store_security.tag_threads = 2;
    std::unique_ptr<Cache> c = std::move(*Cache::Create(spec, options));
    c->SetStore(std::make_shared<BlobStore>(std::make_unique<SharedStore>(shared),
                                            c->layout().fingerprint(), c->store_security()));
    return c;
  };
  std::unique_ptr<Cache> old_writer = make(0), cache = make(8);
  std::mt19937_64 rng(5);
  FillRandom(old_writer->pool(), old_writer->layout().pool_bytes(), rng);
  FillRandom(cache->pool(), cache->layout().pool_bytes(), rng);
  const uint32_t src = *old_writer->slots().Alloc();
  ASSERT_TRUE(old_writer->slots().Set(src, {true, 30, 2, 31}).ok());
  ASSERT_TRUE(Save(*old_writer, src, "old").ok());
  // The old writer's blob is single-pass: version 3, no chunk flag.
  std::vector<uint8_t> raw(kBlobHeaderBytes + old_writer->layout().stored_bytes() + kBlobTagBytes);
  const ByteSpan whole[1] = {ByteSpan(raw.data(), raw.size())};
  ASSERT_EQ(*shared->Get((*cache->store())->FullKey("old"), whole), raw.size());
  EXPECT_EQ(raw[4], 3);
  EXPECT_EQ(raw[kBlobFlagsOffset], kBlobFlagTagged);
  EXPECT_GT(cache->layout().stored_bytes(), 2u * 256);  // several 256-byte chunks
  std::vector<uint32_t> slots;
  for (uint32_t i = 0; i < spec.max_slots; ++i) slots.push_back(*cache->slots().Alloc());
  ASSERT_TRUE(Restore(*cache, slots[0], "old").ok());
  EXPECT_EQ(std::memcmp(cache->slot_base(slots[0]), old_writer->slot_base(src),
                        cache->layout().stored_bytes()),
            0);
  ASSERT_TRUE(Save(*cache, slots[0], "new").ok());
  ASSERT_TRUE(Restore(*old_writer, *old_writer->slots().Alloc(), "new").ok());
  // Several threads restore at once, each into its own slot.
  std::vector<std::thread> threads;
  std::atomic<int> failed{0};
  for (size_t t = 1; t < slots.size(); ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i)
        if (!Restore(*cache, slots[t], i % 2 ? "new" : "old").ok()) failed.fetch_add(1);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0);
  for (size_t t = 1; t < slots.size(); ++t)
    EXPECT_EQ(std::memcmp(cache->slot_base(slots[t]), old_writer->slot_base(src),
                          cache->layout().stored_bytes()),
              0);
}

}  // namespace
}  // namespace swa
