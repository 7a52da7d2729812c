// ThreadPool: exact coverage of every index, inline pools, nesting, several
// callers, destruction.
#include "backend/cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace swa::cpu {
namespace {

// Counts how often each index was visited; every count must be exactly 1.
void ExpectEachIndexOnce(ThreadPool& pool, size_t n, size_t grain) {
  std::vector<std::atomic<int>> hits(n);
  std::atomic<size_t> max_chunk{0};
  pool.ParallelFor(n, grain, [&](size_t begin, size_t end) {
    ASSERT_LT(begin, end);
    ASSERT_LE(end, n);
    size_t seen = max_chunk.load();
    while (end - begin > seen && !max_chunk.compare_exchange_weak(seen, end - begin)) {
    }
    for (size_t i = begin; i < end; ++i) hits[i].fetch_add(1);
  });
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "index " << i << " of " << n;
  if (pool.num_threads() > 1 && n > grain) {
    EXPECT_LE(max_chunk.load(), grain);
  }
}

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (unsigned threads : {1u, 2u, 3u, 8u}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (size_t n : {0u, 1u, 2u, 3u, 7u, 64u, 1000u, 4097u}) {
      for (size_t grain : {1u, 3u, 16u}) ExpectEachIndexOnce(pool, n, grain);
    }
  }
}

TEST(ThreadPool, ZeroMeansHardwareThreads) {
  ThreadPool pool(0);
  EXPECT_EQ(pool.num_threads(), std::max(1u, std::thread::hardware_concurrency()));
}

TEST(ThreadPool, PoolOfOneRunsInlineOnTheCaller) {
  ThreadPool pool(1);
  const std::thread::id caller = std::this_thread::get_id();
  int calls = 0;
  pool.ParallelFor(100, 1, [&](size_t begin, size_t end) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_EQ(begin, 0u);
    EXPECT_EQ(end, 100u);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
}

TEST(ThreadPool, WorkersAndCallerShareTheWork) {
  ThreadPool pool(3);
  std::mutex mu;
  std::set<std::thread::id> ids;
  // Each chunk waits until several threads have arrived, so the job cannot be
  // finished by one thread alone (bounded wait: the assertion is on the set).
  std::atomic<int> arrived{0};
  pool.ParallelFor(3, 1, [&](size_t, size_t) {
    arrived.fetch_add(1);
    for (int spin = 0; spin < 2000 && arrived.load() < 3; ++spin) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::lock_guard<std::mutex> lock(mu);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(ids.size(), 3u);
}

TEST(ThreadPool, NestedCallRunsInline) {
  ThreadPool pool(2);
  std::vector<std::atomic<int>> hits(8 * 8);
  pool.ParallelFor(8, 1, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      pool.ParallelFor(8, 1, [&](size_t b2, size_t e2) {
        for (size_t j = b2; j < e2; ++j) hits[i * 8 + j].fetch_add(1);
      });
    }
  });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

TEST(ThreadPool, ConcurrentCallersAreSerialisedCorrectly) {
  ThreadPool pool(3);
  std::vector<std::thread> callers;
  std::atomic<int> failures{0};
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&, c] {
      for (int rep = 0; rep < 50; ++rep) {
        const size_t n = 100 + c * 37 + rep;
        std::vector<std::atomic<int>> hits(n);
        pool.ParallelFor(n, 2, [&](size_t b, size_t e) {
          for (size_t i = b; i < e; ++i) hits[i].fetch_add(1);
        });
        for (auto& h : hits) failures += h.load() != 1;
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(ThreadPool, ManyShortJobsThenDestroy) {
  for (int round = 0; round < 20; ++round) {
    ThreadPool pool(4);
    std::atomic<long> sum{0};
    for (int rep = 0; rep < 100; ++rep) {
      pool.ParallelFor(10, 1, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) sum += static_cast<long>(i);
      });
    }
    EXPECT_EQ(sum.load(), 100L * 45);
  }
  ThreadPool never_used(5);  // destroyed without ever running a job
}

}  // namespace
}  // namespace swa::cpu
