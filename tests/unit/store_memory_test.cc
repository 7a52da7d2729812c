// The built-in memory store: contents, LRU order under a byte budget,
// statistics, and concurrent use.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "store/memory_store.h"

namespace swa {
namespace {

ConstByteSpan In(const void* p, size_t n) { return ConstByteSpan(static_cast<const uint8_t*>(p), n); }
ByteSpan Out(void* p, size_t n) { return ByteSpan(static_cast<uint8_t*>(p), n); }

absl::Status PutString(MemoryStore& s, const std::string& key, const std::string& value) {
  // Split in two pieces to exercise gathering.
  const size_t cut = value.size() / 3;
  const ConstByteSpan iov[2] = {In(value.data(), cut), In(value.data() + cut, value.size() - cut)};
  return s.Put(key, iov);
}

// Reads `key` assuming `size` bytes; returns the bytes, or the reported size mismatch.
std::string GetString(MemoryStore& s, const std::string& key, size_t size, absl::Status* st,
                      uint64_t* reported = nullptr) {
  std::string out(size, '\xCC');  // poison
  const ByteSpan iov[1] = {Out(out.data(), out.size())};
  absl::StatusOr<uint64_t> blob_size = s.Get(key, iov);
  *st = blob_size.status();
  if (reported != nullptr) *reported = blob_size.ok() ? *blob_size : 0xDEAD;
  return out;
}

TEST(MemoryStore, PutGetExistsRemove) {
  MemoryStore s(1 << 20);
  ASSERT_TRUE(PutString(s, "a", "hello world").ok());
  absl::Status st;
  uint64_t reported = 0;
  EXPECT_EQ(GetString(s, "a", 11, &st, &reported), "hello world");
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_EQ(reported, 11u);
  // Wrong size: the true size is reported and the buffer left alone.
  EXPECT_EQ(GetString(s, "a", 5, &st, &reported), std::string(5, '\xCC'));
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(reported, 11u);
  EXPECT_TRUE(absl::IsNotFound((GetString(s, "b", 3, &st), st)));
  EXPECT_TRUE(*s.Exists("a"));
  EXPECT_FALSE(*s.Exists("b"));
  // Overwrite replaces.
  ASSERT_TRUE(PutString(s, "a", "second value!").ok());
  EXPECT_EQ(GetString(s, "a", 13, &st), "second value!");
  EXPECT_TRUE(s.Remove("a").ok());
  EXPECT_TRUE(absl::IsNotFound(s.Remove("a")));
  EXPECT_FALSE(*s.Exists("a"));
  // Keys are byte strings: embedded zeros are distinct keys.
  ASSERT_TRUE(PutString(s, std::string("k\0x", 3), "zero").ok());
  EXPECT_FALSE(*s.Exists("k"));
  EXPECT_TRUE(*s.Exists(std::string("k\0x", 3)));
}

// GetStreaming copies in slices and reports each: landed(n) never decreases,
// ends at the size, and the first n bytes are the blob's every time; over
// pieces with an empty one; nothing reported for a blob of another size.
TEST(MemoryStore, StreamingGetReportsSlicesInOrder) {
  MemoryStore store(64 << 20);
  std::mt19937_64 rng(3);
  for (size_t bytes : {size_t{1415104}, size_t{100}, size_t{0}}) {
    std::vector<uint8_t> blob(bytes);
    for (auto& b : blob) b = static_cast<uint8_t>(rng());
    const ConstByteSpan put[1] = {ConstByteSpan(blob.data(), blob.size())};
    ASSERT_TRUE(store.Put("k", put).ok());
    std::vector<uint8_t> got(bytes, 0xEE);
    const size_t cut = std::min<size_t>(64, bytes);
    const ByteSpan pieces[3] = {ByteSpan(got.data(), cut), ByteSpan(got.data() + cut, 0),
                                ByteSpan(got.data() + cut, bytes - cut)};
    std::vector<uint64_t> calls;
    bool prefix_ok = true;
    absl::StatusOr<uint64_t> size = store.GetStreaming("k", pieces, [&](uint64_t n) {
      calls.push_back(n);
      // memcmp must not see the null data() of an empty vector, even for n == 0.
      prefix_ok = prefix_ok && (n == 0 || std::memcmp(got.data(), blob.data(), n) == 0);
    });
    ASSERT_TRUE(size.ok()) << size.status();
    EXPECT_EQ(*size, bytes);
    EXPECT_EQ(got, blob);
    ASSERT_FALSE(calls.empty());
    EXPECT_EQ(calls.back(), bytes);
    EXPECT_TRUE(std::is_sorted(calls.begin(), calls.end()));
    EXPECT_TRUE(prefix_ok);
    if (bytes > 1000000) EXPECT_GE(calls.size(), 6u);  // 256 KiB slices
    std::vector<uint8_t> other(bytes + 1);
    const ByteSpan wrong[1] = {ByteSpan(other.data(), other.size())};
    calls.clear();
    EXPECT_EQ(*store.GetStreaming("k", wrong, [&](uint64_t n) { calls.push_back(n); }), bytes);
    EXPECT_TRUE(calls.empty());
  }
}

TEST(MemoryStore, LruEvictionWithinBudgetMatchesModel) {
  // Budget counts key + value bytes. Model: an ordered list, most recent first.
  const uint64_t budget = 1000;
  MemoryStore s(budget);
  std::mt19937_64 rng(11);
  std::vector<std::pair<std::string, std::string>> model;  // front = most recent
  uint64_t evictions = 0, hits = 0, misses = 0, puts = 0, rejected = 0;
  auto bytes = [&] {
    uint64_t b = 0;
    for (auto& [k, v] : model) b += k.size() + v.size();
    return b;
  };
  for (int step = 0; step < 3000; ++step) {
    const std::string key = "key" + std::to_string(rng() % 12);
    auto it = std::find_if(model.begin(), model.end(), [&](auto& e) { return e.first == key; });
    if (rng() % 2 == 0) {
      std::string value(rng() % 400 + 1, '\0');
      for (char& c : value) c = static_cast<char>('a' + rng() % 26);
      const bool fits = key.size() + value.size() <= budget;
      absl::Status st = PutString(s, key, value);
      ASSERT_EQ(st.ok(), fits) << st;
      if (!fits) {
        ++rejected;
        ASSERT_TRUE(absl::IsResourceExhausted(st));
        continue;
      }
      ++puts;
      if (it != model.end()) model.erase(it);
      while (!model.empty() && bytes() + key.size() + value.size() > budget) {
        model.pop_back();
        ++evictions;
      }
      model.insert(model.begin(), {key, value});
    } else {
      absl::Status st;
      const size_t size = it != model.end() ? it->second.size() : 1;
      const std::string got = GetString(s, key, size, &st);
      if (it == model.end()) {
        ++misses;
        ASSERT_TRUE(absl::IsNotFound(st)) << st;
      } else {
        ++hits;
        ASSERT_TRUE(st.ok()) << st;
        ASSERT_EQ(got, it->second);
        auto e = *it;
        model.erase(it);
        model.insert(model.begin(), e);
      }
    }
    for (auto& [k, v] : model) ASSERT_TRUE(*s.Exists(k)) << "step " << step << " lost " << k;
    const MemoryStoreStats st = s.Stats();
    ASSERT_EQ(st.bytes, bytes());
    ASSERT_LE(st.bytes, budget);
    ASSERT_EQ(st.entries, model.size());
  }
  const MemoryStoreStats st = s.Stats();
  EXPECT_EQ(st.budget_bytes, budget);
  EXPECT_EQ(st.puts, puts);
  EXPECT_EQ(st.rejected_puts, rejected);
  EXPECT_EQ(st.hits, hits);
  EXPECT_EQ(st.misses, misses);
  EXPECT_EQ(st.evictions, evictions);
  EXPECT_GT(evictions, 0u);
}

TEST(MemoryStore, TooLargeBlobChangesNothing) {
  MemoryStore s(100);
  ASSERT_TRUE(PutString(s, "k", std::string(50, 'x')).ok());
  EXPECT_TRUE(absl::IsResourceExhausted(PutString(s, "k", std::string(100, 'y'))));
  absl::Status st;
  EXPECT_EQ(GetString(s, "k", 50, &st), std::string(50, 'x'));
  EXPECT_EQ(s.Stats().rejected_puts, 1u);
  EXPECT_EQ(s.Stats().evictions, 0u);
}

TEST(MemoryStore, ConcurrentWritersAndReadersSeeWholeBlobs) {
  // Each value is one repeated byte; a torn read would mix bytes.
  MemoryStore s(64 * 1024);
  std::atomic<bool> bad{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (int i = 0; i < 2000; ++i) {
        const std::string key = "k" + std::to_string(rng() % 8);
        if (rng() % 2) {
          const std::string value(4096, static_cast<char>('A' + rng() % 26));
          if (!PutString(s, key, value).ok()) bad = true;
        } else {
          absl::Status st;
          const std::string got = GetString(s, key, 4096, &st);
          if (st.ok() && got.find_first_not_of(got[0]) != std::string::npos) bad = true;
          if (!st.ok() && !absl::IsNotFound(st)) bad = true;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_FALSE(bad);
  EXPECT_LE(s.Stats().bytes, 64u * 1024);
}

}  // namespace
}  // namespace swa
