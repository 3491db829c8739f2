// Slabs through the prefixed API: objects are reused, empty slabs go back,
// counters return to where they were, memory moves between size classes.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <vector>

#include "roost.h"

namespace {
struct roost_stats snapshot() {
  struct roost_stats s;
  EXPECT_EQ(roost_stats(&s), 0);
  return s;
}
}  // namespace

TEST(Slab, FreedObjectsAreReusedBeforeFreshMemory) {
  std::vector<void*> first;
  for (int i = 0; i < 1000; i++) first.push_back(roost_malloc(48));
  std::set<void*> addresses(first.begin(), first.end());
  EXPECT_EQ(addresses.size(), first.size());
  for (void* p : first) roost_free(p);
  int reused = 0;
  std::vector<void*> second;
  for (int i = 0; i < 1000; i++) {
    second.push_back(roost_malloc(48));
    reused += addresses.count(second.back()) ? 1 : 0;
  }
  // Objects still on the fast list from the last carve (at most one carve,
  // the class wake threshold: 170 of 48 bytes) come first; the rest is reused.
  EXPECT_GE(reused, 1000 - 170);
  for (void* p : second) roost_free(p);
}

TEST(Slab, CountersReturnToBaselineAfterFreeingEverything) {
  struct roost_stats before = snapshot();
  std::vector<void*> objects;
  for (int i = 0; i < 20000; i++) objects.push_back(roost_malloc(16 + (i % 97) * 16));
  struct roost_stats during = snapshot();
  EXPECT_GE(during.allocations - before.allocations, 20000u);
  EXPECT_GT(during.bytes_in_use, before.bytes_in_use);
  EXPECT_GT(during.slabs, before.slabs);
  for (void* p : objects) roost_free(p);
  struct roost_stats after = snapshot();
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  EXPECT_EQ(after.frees - before.frees, after.allocations - before.allocations);
  // Empty slabs went back (at most one per class stays as the active one).
  EXPECT_LE(after.slabs, before.slabs + 97);
  EXPECT_LT(after.slabs, during.slabs);
}

TEST(Slab, MemoryFreedInOneClassServesAnother) {
  struct roost_stats before = snapshot();
  for (int round = 0; round < 8; round++) {
    size_t size = 64u << round;  // a different class each round
    std::vector<void*> objects;
    for (size_t bytes = 0; bytes < (size_t{8} << 20); bytes += size)
      objects.push_back(roost_malloc(size));
    for (void* p : objects) std::memset(p, round, size);
    for (void* p : objects) roost_free(p);
  }
  struct roost_stats after = snapshot();
  // Eight rounds of 8 MiB each did not leave 64 MiB committed.
  EXPECT_LT(after.bytes_committed, before.bytes_committed + (size_t{24} << 20));
}

TEST(Slab, LargeObjectsComeAndGo) {
  struct roost_stats before = snapshot();
  void* p = roost_malloc(size_t{3} << 20);
  ASSERT_NE(p, nullptr);
  EXPECT_GE(roost_usable_size(p), size_t{3} << 20);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  std::memset(p, 1, size_t{3} << 20);
  struct roost_stats during = snapshot();
  EXPECT_EQ(during.large_allocations, before.large_allocations + 1);
  roost_free(p);
  struct roost_stats after = snapshot();
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
}
