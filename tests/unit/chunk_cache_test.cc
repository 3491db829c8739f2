// ChunkCache (frontend/chunk_cache.h): the empty chunks one allocator keeps.
// Fresh memory comes a batch at a time and the rest of the batch serves the
// next requests; resident chunks are taken before untouched ones; the
// reserve bounds what is kept (spare slabs charged to it included); trim
// gives everything back; the shortage hook runs only before fresh memory.
#include "frontend/chunk_cache.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backend/chunk_allocator.h"
#include "backend/pagemap.h"
#include "scoped_option.h"

using namespace roost;
using test::ScopedOption;

namespace {

constexpr unsigned kOrder = 16;  // one granule: the smallest chunk
constexpr size_t kChunk = size_t{1} << kOrder;
// A purge delay no test reaches: released memory stays dirty.
constexpr uint64_t kNoPurge = 3600 * 1000;

// A cache that gives everything back when the test ends.  Meanwhile no
// shortage hook runs: the allocator pool's (set when another test started
// roost) would release memory of parked allocators, which these tests count.
struct TrimmedCache : ChunkCache {
  TrimmedCache() : saved(set_shortage_hook(nullptr)) {}
  ~TrimmedCache() {
    trim(0);
    set_shortage_hook(saved);
  }
  ShortageHook saved;
};

// No released memory waits in the backend: what the cache takes comes from
// it or from fresh memory.
void start_clean() {
  ASSERT_TRUE(pagemap::init());
  chunks::purge_all();
}

// Writes the first `pages` pages of `m`, as a slab would have, and records
// them as its dirty extent.
void dirty(ChunkMeta* m, uint32_t pages) {
  std::memset(reinterpret_cast<void*>(m->base), 0x5a, size_t{pages} << config::kMinPageBits);
  m->dirty_pages = pages;
}

int g_shortages = 0;
void count_shortage() { g_shortages++; }

}  // namespace

TEST(ChunkCache, FreshMemoryComesABatchAtATimeAndTheRestServesLaterRequests) {
  start_clean();
  ScopedOption reserve(options::kSlabReserveBytes, 512 << 10);
  TrimmedCache cache;
  std::vector<ChunkMeta*> got;
  size_t out_before = chunks::bytes_out();
  got.push_back(cache.take(kOrder));
  ASSERT_NE(got.back(), nullptr);
  // One 512 KiB batch left the backend: eight granules' worth.
  size_t batch = chunks::bytes_out() - out_before;
  ASSERT_EQ(batch, size_t{512} << 10);
  for (size_t i = 1; i < batch / kChunk; i++) {
    got.push_back(cache.take(kOrder));
    ASSERT_NE(got.back(), nullptr);
    EXPECT_EQ(chunks::bytes_out() - out_before, batch) << "take " << i << " went to the backend";
  }
  // Every chunk is a distinct, aligned granule of the batch, handed out as
  // kUnused and reading as zero.
  for (size_t i = 0; i < got.size(); i++) {
    ChunkMeta* m = got[i];
    EXPECT_EQ(m->order, kOrder);
    EXPECT_EQ(kind_of(m), ChunkKind::kUnused);
    EXPECT_EQ(m->base % kChunk, 0u);
    EXPECT_EQ(m->dirty_pages, 0u);
    EXPECT_EQ(reinterpret_cast<const char*>(m->base)[kChunk - 1], 0);
    for (size_t j = 0; j < i; j++) EXPECT_NE(got[j]->base, m->base);
  }
  // The batch is used up: the next chunk needs the backend again.
  ChunkMeta* next = cache.take(kOrder);
  ASSERT_NE(next, nullptr);
  EXPECT_GT(chunks::bytes_out() - out_before, batch);
  got.push_back(next);
  for (ChunkMeta* m : got) chunks::release(m, 0);
}

TEST(ChunkCache, ResidentChunksAreTakenBeforeUntouchedOnes) {
  start_clean();
  ScopedOption reserve(options::kSlabReserveBytes, 512 << 10);
  TrimmedCache cache;
  ChunkMeta* untouched = cache.take(kOrder);
  ChunkMeta* resident = cache.take(kOrder);
  ASSERT_NE(untouched, nullptr);
  ASSERT_NE(resident, nullptr);
  dirty(resident, 3);
  cache.keep(untouched);
  cache.keep(resident);
  // Untouched pieces of the batch are cached too, but the chunk whose
  // pages are resident comes first, keeping its extent...
  ChunkMeta* first = cache.take(kOrder);
  EXPECT_EQ(first, resident);
  EXPECT_EQ(first->dirty_pages, 3u);
  // ...and it was the only resident one.
  EXPECT_EQ(cache.take_resident(kOrder), nullptr);
  chunks::release(first, dirty_extent(first));
}

TEST(ChunkCache, ABiggerResidentChunkIsSplitAndTheRestStaysCached) {
  start_clean();
  ScopedOption reserve(options::kSlabReserveBytes, 512 << 10);
  TrimmedCache cache;
  ChunkMeta* big = cache.take(kOrder + 2);  // 256 KiB
  ASSERT_NE(big, nullptr);
  dirty(big, 20);  // 80 KiB: all of the lower granule, part of the next
  cache.keep(big);
  ChunkMeta* a = cache.take_resident(kOrder);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->base, big->base);
  EXPECT_EQ(a->dirty_pages, 16u);
  // The granule above it holds the rest of the extent, and is taken next.
  ChunkMeta* b = cache.take_resident(kOrder);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->base, a->base + kChunk);
  EXPECT_EQ(b->dirty_pages, 4u);
  EXPECT_EQ(cache.take_resident(kOrder), nullptr);
  chunks::release(a, dirty_extent(a));
  chunks::release(b, dirty_extent(b));
}

TEST(ChunkCache, TheReserveBoundsResidentBytesKeptSparesIncluded) {
  start_clean();
  ScopedOption reserve(options::kSlabReserveBytes, 2 * kChunk);
  ScopedOption no_purge(options::kPurgeDelayMs, kNoPurge);
  TrimmedCache cache;
  // A reserve below a batch: chunks come one at a time.
  size_t out_before = chunks::bytes_out();
  ChunkMeta* a = cache.take(kOrder);
  ChunkMeta* b = cache.take(kOrder);
  ChunkMeta* c = cache.take(kOrder);
  ASSERT_TRUE(a != nullptr && b != nullptr && c != nullptr);
  EXPECT_EQ(chunks::bytes_out() - out_before, 3 * kChunk);
  // A spare slab's bytes count against the reserve: one granule left.
  EXPECT_TRUE(cache.try_charge(kChunk));
  dirty(a, 16);
  cache.keep(a);  // fits: kept
  EXPECT_EQ(cache.take_resident(kOrder), a);
  cache.keep(a);
  // Full: a resident chunk goes back to the backend, where it waits dirty.
  size_t dirty_before = chunks::dirty_bytes();
  dirty(b, 1);
  cache.keep(b);
  EXPECT_EQ(chunks::dirty_bytes() - dirty_before, size_t{1} << config::kMinPageBits);
  EXPECT_FALSE(cache.try_charge(1));
  // An untouched chunk costs nothing resident: kept whatever the reserve.
  cache.keep(c);
  ChunkMeta* again = cache.take(kOrder);
  EXPECT_TRUE(again == a || again == c);
  // Uncharging the spare makes room again.
  cache.uncharge(kChunk);
  EXPECT_TRUE(cache.try_charge(kChunk));
  cache.uncharge(kChunk);
  chunks::release(again, dirty_extent(again));
}

TEST(ChunkCache, TrimGivesEveryCachedChunkBack) {
  start_clean();
  ScopedOption reserve(options::kSlabReserveBytes, 512 << 10);
  TrimmedCache cache;
  size_t out_before = chunks::bytes_out();
  ChunkMeta* m = cache.take(kOrder);  // the rest of its batch stays cached
  ASSERT_NE(m, nullptr);
  dirty(m, 2);
  cache.keep(m);
  EXPECT_EQ(chunks::bytes_out() - out_before, size_t{512} << 10);
  EXPECT_TRUE(cache.trim(0));
  EXPECT_EQ(chunks::bytes_out(), out_before);
  EXPECT_EQ(cache.take_resident(kOrder), nullptr);
  EXPECT_FALSE(cache.trim(0));  // nothing left
}

TEST(ChunkCache, TheShortageHookRunsOnlyBeforeFreshMemory) {
  start_clean();
  ScopedOption reserve(options::kSlabReserveBytes, 512 << 10);
  ScopedOption no_purge(options::kPurgeDelayMs, kNoPurge);
  g_shortages = 0;
  {
    TrimmedCache cache;
    ChunkCache::set_shortage_hook(count_shortage);
    ChunkMeta* first = cache.take(kOrder);  // nothing cached: fresh memory
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(g_shortages, 1);
    ChunkMeta* second = cache.take(kOrder);  // from the batch's rest
    ASSERT_NE(second, nullptr);
    EXPECT_EQ(g_shortages, 1);
    // Memory released to the backend and not purged serves before fresh
    // memory too.
    cache.trim(0);
    dirty(first, 1);
    chunks::release(first, dirty_extent(first));
    ChunkMeta* reused = cache.take(kOrder);
    EXPECT_EQ(reused, first);
    EXPECT_EQ(g_shortages, 1);
    chunks::release(second, 0);
    chunks::release(reused, dirty_extent(reused));
    EXPECT_EQ(ChunkCache::set_shortage_hook(nullptr), count_shortage);
  }
}
