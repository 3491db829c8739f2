// The metadata arena (backend/meta_arena.h): alignments from 1 to 4096
// honoured, memory handed out zeroed and never twice (allocations are
// disjoint, also when threads allocate at once), a new block reserved when
// the current one cannot hold a request (reserved_bytes() grows), and
// requests larger than a block.  Blocks are committed lazily: the tests
// touch only the bytes they check.
#include "backend/meta_arena.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

using namespace roost;

namespace {

constexpr size_t kBlock = size_t{64} << 20;  // meta_arena.cc's largest block

bool all_zero(const void* p, size_t size) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < size; i++)
    if (b[i] != 0) return false;
  return true;
}

// [start, start + size) ranges: none overlaps another.
void expect_disjoint(std::vector<std::pair<uintptr_t, size_t>> ranges) {
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); i++)
    ASSERT_LE(ranges[i - 1].first + ranges[i - 1].second, ranges[i].first)
        << "allocation " << i - 1 << " of " << ranges[i - 1].second << " bytes overlaps the next";
}

}  // namespace

TEST(MetaArena, AlignmentIsHonoured) {
  // Odd sizes in between move the cursor off every alignment.
  for (size_t align : {1, 2, 8, 16, 64, 128, 256, 1024, 4096}) {
    for (size_t size : {1, 3, 24, 100, 4097}) {
      void* p = meta_arena::alloc(size, align);
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u) << size << " bytes at " << align;
      ASSERT_NE(meta_arena::alloc(1, 1), nullptr);  // misalign the cursor again
    }
  }
}

// Every allocation reads as zero, even right after its neighbours were
// written all over, and none overlaps another.
TEST(MetaArena, MemoryIsZeroedAndAllocationsAreDisjoint) {
  std::vector<std::pair<uintptr_t, size_t>> ranges;
  const size_t aligns[] = {1, 8, 16, 64, 4096};
  for (int i = 0; i < 2000; i++) {
    size_t size = 1 + (i * 37) % 300;
    size_t align = aligns[i % 5];
    void* p = meta_arena::alloc(size, align);
    ASSERT_NE(p, nullptr);
    ASSERT_TRUE(all_zero(p, size)) << "allocation " << i << " of " << size << " bytes";
    std::memset(p, 0xa5, size);
    ranges.emplace_back(reinterpret_cast<uintptr_t>(p), size);
  }
  expect_disjoint(ranges);
}

TEST(MetaArena, ThreadsAllocatingAtOnceGetDisjointZeroedMemory) {
  constexpr int kThreads = 8, kPerThread = 2000;
  std::vector<std::vector<std::pair<uintptr_t, size_t>>> got(kThreads);
  std::vector<int> dirty(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; i++) {
        size_t size = 8 + (i * 13 + t) % 120;
        void* p = meta_arena::alloc(size, i % 2 ? 16 : 64);
        if (p == nullptr || !all_zero(p, size)) {
          dirty[t]++;
          continue;
        }
        std::memset(p, t + 1, size);
        got[t].emplace_back(reinterpret_cast<uintptr_t>(p), size);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  std::vector<std::pair<uintptr_t, size_t>> all;
  for (int t = 0; t < kThreads; t++) {
    EXPECT_EQ(dirty[t], 0) << "thread " << t << " got null or non-zero memory";
    for (auto [start, size] : got[t]) {
      // Still this thread's bytes: nobody else was handed them.
      const unsigned char* b = reinterpret_cast<const unsigned char*>(start);
      for (size_t i = 0; i < size; i++) ASSERT_EQ(b[i], t + 1);
      all.emplace_back(start, size);
    }
  }
  EXPECT_EQ(all.size(), size_t{kThreads} * kPerThread);
  expect_disjoint(all);
}

// Megabyte requests run the current block out within 64 of them: then a
// new block is reserved (reserved_bytes() grows by one block: at least the
// request, at most the largest block) and the request is served from it.
TEST(MetaArena, ANewBlockIsReservedWhenTheCurrentOneIsExhausted) {
  constexpr size_t kMiB = size_t{1} << 20;
  size_t before = meta_arena::reserved_bytes();
  std::vector<std::pair<uintptr_t, size_t>> ranges;
  size_t after = before;
  for (int i = 0; i <= 65 && after == before; i++) {
    void* p = meta_arena::alloc(kMiB, 64);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    // Only the ends: the rest stays uncommitted.
    char* c = static_cast<char*>(p);
    EXPECT_EQ(c[0], 0);
    EXPECT_EQ(c[kMiB - 1], 0);
    c[0] = c[kMiB - 1] = 1;
    ranges.emplace_back(reinterpret_cast<uintptr_t>(p), kMiB);
    after = meta_arena::reserved_bytes();
  }
  EXPECT_GT(after, before) << "no new block after 66 MiB of requests";
  EXPECT_GE(after - before, kMiB);
  EXPECT_LE(after - before, kBlock);
  EXPECT_GE(ranges.size(), 1u);
  expect_disjoint(ranges);
  // Small requests go on from the new block.
  void* small = meta_arena::alloc(64, 64);
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(meta_arena::reserved_bytes(), after);
  ranges.emplace_back(reinterpret_cast<uintptr_t>(small), 64);
  expect_disjoint(ranges);
}

// A request bigger than a block gets a block of its own, big enough for it;
// the arena goes on serving small requests afterwards.
TEST(MetaArena, RequestsLargerThanABlock) {
  const size_t size = kBlock + kBlock / 2 + 1;
  size_t before = meta_arena::reserved_bytes();
  void* p = meta_arena::alloc(size, 4096);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  EXPECT_GE(meta_arena::reserved_bytes(), before + size);
  char* c = static_cast<char*>(p);
  EXPECT_EQ(c[0], 0);
  EXPECT_EQ(c[size / 2], 0);
  EXPECT_EQ(c[size - 1], 0);
  c[0] = c[size / 2] = c[size - 1] = 1;
  void* q = meta_arena::alloc(size, 64);  // and again, from another block
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(static_cast<char*>(q)[size - 1], 0);
  void* small = meta_arena::alloc(100, 16);
  ASSERT_NE(small, nullptr);
  EXPECT_TRUE(all_zero(small, 100));
  expect_disjoint({{reinterpret_cast<uintptr_t>(p), size},
                   {reinterpret_cast<uintptr_t>(q), size},
                   {reinterpret_cast<uintptr_t>(small), 100}});
}
