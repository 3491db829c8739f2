// The buddy chunk allocator: natural alignment, no overlap, zeroed memory,
// coalescing back to whole blocks, counters.
#include "backend/chunk_allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "backend/pagemap.h"

using namespace roost;

TEST(ChunkAllocator, ChunksAreNaturallyAlignedDisjointAndZero) {
  ASSERT_TRUE(pagemap::init());
  std::vector<ChunkMeta*> got;
  for (unsigned order = chunks::kMinOrder; order <= 22; order++) {
    for (int i = 0; i < 3; i++) {
      ChunkMeta* m = chunks::alloc(order);
      ASSERT_NE(m, nullptr);
      EXPECT_EQ(m->order, order);
      EXPECT_EQ(m->base & ((uintptr_t{1} << order) - 1), 0u);
      EXPECT_EQ(chunks::meta_of(m->base), m);
      const char* bytes = reinterpret_cast<const char*>(m->base);
      EXPECT_EQ(bytes[0], 0);
      EXPECT_EQ(bytes[(size_t{1} << order) - 1], 0);
      got.push_back(m);
    }
  }
  std::sort(got.begin(), got.end(), [](ChunkMeta* a, ChunkMeta* b) { return a->base < b->base; });
  for (size_t i = 1; i < got.size(); i++)
    ASSERT_LE(got[i - 1]->base + (size_t{1} << got[i - 1]->order), got[i]->base);
  for (ChunkMeta* m : got) chunks::release(m, size_t{1} << m->order);
}

TEST(ChunkAllocator, FreedBuddiesCoalesceIntoTheBlockTheyCameFrom) {
  ChunkMeta* big = chunks::alloc(20);  // 1 MiB
  ASSERT_NE(big, nullptr);
  uintptr_t base = big->base;
  size_t out_before = chunks::bytes_out();
  chunks::release(big, 0);
  EXPECT_EQ(chunks::bytes_out(), out_before - (size_t{1} << 20));
  // Sixteen 64 KiB chunks come from the freed block (lowest first)...
  std::vector<ChunkMeta*> small;
  for (int i = 0; i < 16; i++) small.push_back(chunks::alloc(16));
  for (ChunkMeta* m : small) {
    EXPECT_GE(m->base, base);
    EXPECT_LT(m->base, base + (size_t{1} << 20));
  }
  // ...and once all are back, the whole block is handed out again.
  for (ChunkMeta* m : small) chunks::release(m, 0);
  ChunkMeta* again = chunks::alloc(20);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->base, base);
  chunks::release(again, 0);
}

TEST(ChunkAllocator, ReleasedDirtyMemoryReadsAsZero) {
  ChunkMeta* m = chunks::alloc(16);
  ASSERT_NE(m, nullptr);
  char* bytes = reinterpret_cast<char*>(m->base);
  bytes[0] = 1;
  bytes[65535] = 2;
  uintptr_t base = m->base;
  chunks::release(m, size_t{1} << 16);
  ChunkMeta* again = chunks::alloc(16);
  ASSERT_EQ(again->base, base);
  EXPECT_EQ(bytes[0], 0);
  EXPECT_EQ(bytes[65535], 0);
  chunks::release(again, 0);
}

TEST(ChunkAllocator, SplitHandsBackEveryUpperPiece) {
  ChunkMeta* m = chunks::alloc(20);
  ASSERT_NE(m, nullptr);
  std::vector<ChunkMeta*> pieces;
  chunks::split_out(m, 16, [&](ChunkMeta* piece) { pieces.push_back(piece); });
  EXPECT_EQ(m->order, 16u);
  ASSERT_EQ(pieces.size(), 4u);  // 64K, 128K, 256K, 512K
  size_t total = size_t{1} << 16;
  for (ChunkMeta* p : pieces) {
    EXPECT_EQ(p->base & ((uintptr_t{1} << p->order) - 1), 0u);
    total += size_t{1} << p->order;
  }
  EXPECT_EQ(total, size_t{1} << 20);
  // Each piece counts as a chunk handed out and is released on its own.
  size_t chunks_before = chunks::chunks_out();
  for (ChunkMeta* p : pieces) chunks::release(p, 0);
  chunks::release(m, 0);
  EXPECT_EQ(chunks::chunks_out(), chunks_before - 5);
}
