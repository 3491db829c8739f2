// Large objects (backend/large.h): page-granular usable sizes at the
// alignment asked for, the pagemap pointing at each object's record while
// it lives; the *dirty report (fresh memory reports nothing and reads as
// zero, reused memory reports exactly the extent that may hold old bytes);
// freed memory reused while the backend keeps it resident; the in-place
// resize rules of large objects (within the chunk, not below a quarter of
// it, a shrink by a megabyte or more purges the tail) and of huge ones
// (mapped alone beyond a region's size: shrink only, to at least half,
// the tail unmapped); a chunk its caller keeps holding one object after
// another; and the counters.  Other tests in this binary use
// the backend too: counters are compared with a snapshot.
#include "backend/large.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/chunk_allocator.h"
#include "backend/pagemap.h"
#include "config.h"
#include "options.h"
#include "platform/os.h"
#include "resident.h"
#include "scoped_option.h"

using namespace roost;
using test::ScopedOption;

namespace {

constexpr size_t kKiB = size_t{1} << 10;
constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kGiB = size_t{1} << 30;

// An hour: nothing released during a test is purged behind its back.
constexpr uint64_t kNoPurgeMs = 3600 * 1000;

// The OS's page (4, 16 or 64 KiB): large objects are whole ones.
const size_t kPage = os::page_size();
size_t pages_of(size_t bytes) { return (bytes + kPage - 1) & ~(kPage - 1); }

// Purging with MADV_DONTNEED (the default) throughout: purged pages read as
// zero, which the dirty reports below rely on.
class Large : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(pagemap::init()); }
  ScopedOption purge_zero_{options::kPurgeZero, 1};

  // Allocates through large::alloc and checks what every object must be.
  void* alloc(size_t size, size_t align, size_t* dirty) {
    void* p = large::alloc(size, align, dirty);
    EXPECT_NE(p, nullptr) << size << " bytes";
    if (p == nullptr) return nullptr;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u) << size << " bytes at " << align;
    ChunkMeta* m = meta(p);
    EXPECT_NE(m, nullptr) << "not in the pagemap";
    if (m != nullptr) {
      EXPECT_EQ(m->base, reinterpret_cast<uintptr_t>(p));
      // Whole pages of the OS's size.
      EXPECT_EQ(large::usable(m), pages_of(size));
    }
    return p;
  }
  static ChunkMeta* meta(const void* p) { return pagemap::lookup(p); }
  static void free(void* p) {
    large::free(meta(p));
    // The first granule maps to the freed record (a second free is told
    // as a double free) until it is used again.
    EXPECT_TRUE(large::is_freed(meta(p))) << "not marked freed in the pagemap";
  }
};

bool all_bytes(const void* p, size_t size, unsigned char value) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < size; i++)
    if (b[i] != value) return false;
  return true;
}

}  // namespace

TEST_F(Large, UsableSizesArePageGranularAndAlignedAsAsked) {
  struct Case {
    size_t size, align;
  } cases[] = {
      {config::kMaxSmall + 1, 4096}, {300 * kKiB + 5, 4096},  {kMiB, 4096},
      {3 * kMiB + 1, 4096},          {300 * kKiB, 64 * kKiB}, {300 * kKiB, kMiB},
      {5 * kMiB, 8 * kMiB},          {4096, 64 * kMiB},
  };
  std::vector<void*> got;
  for (const Case& c : cases) {
    size_t dirty = 0;
    void* p = alloc(c.size, c.align, &dirty);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(meta(p)->kind, ChunkKind::kLarge);
    // The whole usable size is the caller's.
    static_cast<char*>(p)[0] = 1;
    static_cast<char*>(p)[large::usable(meta(p)) - 1] = 1;
    got.push_back(p);
  }
  for (void* p : got) free(p);
}

// Untouched memory: *dirty is 0 and every byte reads as zero.
TEST_F(Large, FreshMemoryReportsNothingDirtyAndReadsAsZero) {
  chunks::purge_all();  // nothing released by earlier tests is at hand
  for (size_t size : {300 * kKiB, 2 * kMiB + 4096}) {
    size_t dirty = 1;
    void* p = alloc(size, 4096, &dirty);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(dirty, 0u) << size << " bytes";
    EXPECT_TRUE(all_bytes(p, size, 0)) << size << " bytes";
    std::memset(p, 0x77, size);
    free(p);
    chunks::purge_all();  // purged: the next one reads as zero too
  }
}

// A freed object stays resident for the purge delay: the next object of the
// same size gets the same memory, its old bytes and all, and *dirty says
// exactly how much of it may hold them; the rest reads as zero.
TEST_F(Large, FreedMemoryIsReusedBeforeItIsPurged) {
  ScopedOption delay(options::kPurgeDelayMs, kNoPurgeMs);
  chunks::purge_all();
  size_t dirty = 1;
  void* p = alloc(300 * kKiB, 4096, &dirty);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(dirty, 0u);
  std::memset(p, 0x5a, 300 * kKiB);
  free(p);
  // The same size: the same memory, all of it reported.
  void* q = alloc(300 * kKiB, 4096, &dirty);
  ASSERT_EQ(q, p);
  EXPECT_EQ(dirty, pages_of(300 * kKiB));
  EXPECT_TRUE(all_bytes(q, 300 * kKiB, 0x5a)) << "purged although the delay had not passed";
  free(q);
  // A bigger object in the same 512 KiB chunk: the first 300 KiB may hold
  // old bytes (and do), the rest reads as zero.
  void* r = alloc(400 * kKiB, 4096, &dirty);
  ASSERT_EQ(r, p);
  EXPECT_EQ(dirty, pages_of(300 * kKiB));
  EXPECT_TRUE(all_bytes(r, 300 * kKiB, 0x5a));
  EXPECT_TRUE(all_bytes(static_cast<char*>(r) + 300 * kKiB, 100 * kKiB, 0));
  free(r);
  // A smaller one: the bigger one's extent is reported, beyond its size.
  void* s = alloc(260 * kKiB, 4096, &dirty);
  ASSERT_EQ(s, p);
  EXPECT_EQ(dirty, pages_of(400 * kKiB));
  free(s);
  // Once purged, nothing is dirty and the memory reads as zero.
  chunks::purge_all();
  EXPECT_TRUE(all_bytes(p, 400 * kKiB, 0));
  void* t = alloc(300 * kKiB, 4096, &dirty);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(dirty, 0u);
  EXPECT_TRUE(all_bytes(t, 300 * kKiB, 0));
  free(t);
}

// A large object resizes in place within its chunk, down to just above a
// quarter of it.
TEST_F(Large, ResizeInPlaceStaysWithinTheChunkAndAboveAQuarterOfIt) {
  size_t dirty;
  void* p = alloc(3 * kMiB, 4096, &dirty);  // a 4 MiB chunk
  ASSERT_NE(p, nullptr);
  ChunkMeta* m = meta(p);
  EXPECT_TRUE(large::resize_in_place(m, 4 * kMiB));
  EXPECT_EQ(large::usable(m), 4 * kMiB);
  EXPECT_FALSE(large::resize_in_place(m, 4 * kMiB + 1));
  EXPECT_EQ(large::usable(m), 4 * kMiB);
  EXPECT_TRUE(large::resize_in_place(m, kMiB + 1));
  EXPECT_EQ(large::usable(m), kMiB + kPage);      // page-granular
  EXPECT_FALSE(large::resize_in_place(m, kMiB));  // a quarter: too small
  EXPECT_EQ(large::usable(m), kMiB + kPage);
  EXPECT_TRUE(large::resize_in_place(m, 3 * kMiB - 100));
  EXPECT_EQ(large::usable(m), 3 * kMiB);
  EXPECT_EQ(meta(p), m);
  static_cast<char*>(p)[3 * kMiB - 1] = 1;
  free(p);
}

// A shrink by less than a megabyte keeps the tail resident (growing back is
// free); one by a megabyte or more gives the tail's pages back: they read
// as zero, also after growing again.
TEST_F(Large, ShrinkingByAMegabyteOrMorePurgesTheTail) {
  size_t dirty;
  void* p = alloc(3 * kMiB, 4096, &dirty);
  ASSERT_NE(p, nullptr);
  char* c = static_cast<char*>(p);
  ChunkMeta* m = meta(p);
  std::memset(p, 0x11, 3 * kMiB);
  ASSERT_TRUE(large::resize_in_place(m, 2 * kMiB + 512 * kKiB));
  EXPECT_TRUE(all_bytes(c + 2 * kMiB + 512 * kKiB, 512 * kKiB, 0x11)) << "purged a short tail";
  ASSERT_TRUE(large::resize_in_place(m, kMiB + 512 * kKiB));
  EXPECT_TRUE(all_bytes(c, kMiB + 512 * kKiB, 0x11)) << "lost the object's own bytes";
  EXPECT_TRUE(all_bytes(c + kMiB + 512 * kKiB, kMiB + 512 * kKiB, 0)) << "tail not purged";
  ASSERT_TRUE(large::resize_in_place(m, 3 * kMiB));
  EXPECT_TRUE(all_bytes(c + 2 * kMiB, kMiB, 0));
  free(p);
}

TEST_F(Large, CountersFollowAllocationsResizesAndFrees) {
  large::Counters before = large::counters();
  size_t dirty;
  void* a = alloc(300 * kKiB, 4096, &dirty);
  void* b = alloc(2 * kMiB + 1, 4096, &dirty);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  large::Counters during = large::counters();
  EXPECT_EQ(during.allocations, before.allocations + 2);
  EXPECT_EQ(during.frees, before.frees);
  EXPECT_EQ(during.bytes_in_use, before.bytes_in_use + pages_of(300 * kKiB) + 2 * kMiB + kPage);
  ASSERT_TRUE(large::resize_in_place(meta(a), 500 * kKiB));
  EXPECT_EQ(large::counters().bytes_in_use,
            during.bytes_in_use + pages_of(500 * kKiB) - pages_of(300 * kKiB));
  ASSERT_FALSE(large::resize_in_place(meta(a), 600 * kKiB));  // refused: no change
  EXPECT_EQ(large::counters().bytes_in_use,
            during.bytes_in_use + pages_of(500 * kKiB) - pages_of(300 * kKiB));
  free(a);
  large::Counters after_one = large::counters();
  EXPECT_EQ(after_one.frees, before.frees + 1);
  EXPECT_EQ(after_one.bytes_in_use, before.bytes_in_use + 2 * kMiB + kPage);
  free(b);
  large::Counters after = large::counters();
  EXPECT_EQ(after.allocations, before.allocations + 2);
  EXPECT_EQ(after.frees, before.frees + 2);
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
}

// A chunk its caller keeps (the heap profiler's spares, for its sampled
// objects) holds one object after another: place() makes it the object,
// mapped as any large one but left out of the counters (its caller counts
// it); retire() ends the object as free() does but leaves the chunk, its
// dirty extent covering what the object may have written; a chunk too
// small for the object is refused untouched.  alloc_apart() takes such an
// object's chunk from the backend, uncounted too.
TEST_F(Large, AChunkItsCallerKeepsHoldsOneObjectAfterAnother) {
  const size_t kSmall = 3000, kBigger = 20000;
  ASSERT_EQ(large::chunk_order(kSmall), chunks::kMinOrder);
  ChunkMeta* m = chunks::alloc(large::chunk_order(kBigger));
  ASSERT_NE(m, nullptr);
  large::Counters before = large::counters();
  EXPECT_EQ(large::place(m, (size_t{1} << m->order) + 1), nullptr);
  EXPECT_EQ(m->kind, ChunkKind::kUnused);
  for (size_t size : {kSmall, kBigger, kSmall}) {
    void* p = large::place(m, size);
    ASSERT_EQ(p, reinterpret_cast<void*>(m->base)) << size;
    EXPECT_EQ(meta(p), m);
    EXPECT_EQ(m->kind, ChunkKind::kLarge);
    EXPECT_EQ(m->sample, nullptr);
    EXPECT_EQ(large::usable(m), pages_of(size));
    EXPECT_EQ(large::counters().bytes_in_use, before.bytes_in_use) << "counted by large";
    memset(p, 0x5a, size);
    ASSERT_TRUE(large::retire(m));
    EXPECT_TRUE(large::is_freed(meta(p))) << "not marked freed in the pagemap";
    // Its size is still told, for a second free's diagnostic.
    EXPECT_EQ(large::freed_size(meta(p), p), pages_of(size));
    EXPECT_EQ(m->kind, ChunkKind::kUnused);
    EXPECT_GE(dirty_extent(m), pages_of(size));
  }
  chunks::release(m, dirty_extent(m));
  void* p = large::alloc_apart(kSmall);
  ASSERT_NE(p, nullptr);
  m = meta(p);
  EXPECT_EQ(m->kind, ChunkKind::kLarge);
  EXPECT_EQ(m->order, chunks::kMinOrder);
  EXPECT_EQ(large::usable(m), pages_of(kSmall));
  memset(p, 0x5a, kSmall);
  ASSERT_TRUE(large::retire(m));
  chunks::release(m, dirty_extent(m));
  large::Counters after = large::counters();
  EXPECT_EQ(after.allocations, before.allocations);
  EXPECT_EQ(after.frees, before.frees);
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
}

// Up to a region's size an object comes from a region; beyond it, it is
// mapped on its own (no region reserved for it), untouched, and unmapped
// when freed.
TEST_F(Large, ObjectsBeyondARegionAreMappedAlone) {
  size_t dirty = 1;
  void* whole = alloc(config::kRegion, 4096, &dirty);  // exactly a region: still large
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(meta(whole)->kind, ChunkKind::kLarge);
  free(whole);
  size_t regions_before = chunks::reserved_bytes();
  large::Counters before = large::counters();
  const size_t size = kGiB + kGiB / 2;
  void* p = alloc(size, 4096, &dirty);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(meta(p)->kind, ChunkKind::kHuge);
  EXPECT_EQ(dirty, 0u);
  EXPECT_EQ(chunks::reserved_bytes(), regions_before) << "a region was reserved for it";
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % config::kGranule, 0u);
  EXPECT_EQ(test::resident_small_pages(p, size), 0) << "the object was touched";
  EXPECT_EQ(large::counters().bytes_in_use, before.bytes_in_use + size);
  EXPECT_EQ(large::counters().allocations, before.allocations + 1);
  // Counted apart as huge (mallinfo's mapped blocks), with their peak.
  EXPECT_EQ(large::counters().huge_bytes, before.huge_bytes + size);
  EXPECT_EQ(large::counters().huge_objects, before.huge_objects + 1);
  EXPECT_GE(large::counters().huge_peak_bytes, before.huge_bytes + size);
  EXPECT_GE(large::counters().huge_peak_objects, before.huge_objects + 1);
  char* c = static_cast<char*>(p);
  EXPECT_EQ(c[0], 0);
  EXPECT_EQ(c[size - 1], 0);
  c[0] = c[size - 1] = 1;
  free(p);
  EXPECT_EQ(test::resident_small_pages(p, kPage), -1) << "still mapped after free";
  EXPECT_EQ(large::counters().bytes_in_use, before.bytes_in_use);
  EXPECT_EQ(large::counters().frees, before.frees + 1);
  EXPECT_EQ(large::counters().huge_bytes, before.huge_bytes);
  EXPECT_EQ(large::counters().huge_objects, before.huge_objects);
  EXPECT_GE(large::counters().huge_peak_bytes, before.huge_bytes + size) << "the peak stays";
  // An alignment beyond a region's size makes even a small object huge.
  void* aligned = alloc(4096, 2 * kGiB, &dirty);
  ASSERT_NE(aligned, nullptr);
  EXPECT_EQ(meta(aligned)->kind, ChunkKind::kHuge);
  EXPECT_EQ(dirty, 0u);
  free(aligned);
}

// A huge object shrinks in place to half its size or more, and the tail is
// unmapped; it never grows in place.
TEST_F(Large, HugeObjectsOnlyShrinkInPlaceAndUnmapTheTail) {
  const size_t size = kGiB + kGiB / 2;
  size_t dirty;
  void* p = alloc(size, 4096, &dirty);
  ASSERT_NE(p, nullptr);
  ChunkMeta* m = meta(p);
  ASSERT_EQ(m->kind, ChunkKind::kHuge);
  large::Counters before = large::counters();
  EXPECT_FALSE(large::resize_in_place(m, size + 1));
  EXPECT_FALSE(large::resize_in_place(m, size / 2 - kPage));  // below half
  EXPECT_EQ(large::usable(m), size);
  EXPECT_EQ(large::counters().bytes_in_use, before.bytes_in_use);
  EXPECT_EQ(test::resident_small_pages(p, size), 0) << "refused resizes changed the mapping";
  EXPECT_TRUE(large::resize_in_place(m, kGiB + 1));
  EXPECT_EQ(large::usable(m), kGiB + kPage);
  EXPECT_EQ(large::counters().bytes_in_use, before.bytes_in_use - (size - kGiB - kPage));
  EXPECT_EQ(large::counters().huge_bytes, before.huge_bytes - (size - kGiB - kPage));
  char* c = static_cast<char*>(p);
  EXPECT_EQ(test::resident_small_pages(c, kGiB + kPage), 0) << "the object itself was unmapped";
  EXPECT_EQ(test::resident_small_pages(c + kGiB + kPage, kPage), -1) << "the tail is still mapped";
  EXPECT_EQ(test::resident_small_pages(c + size - kPage, kPage), -1) << "the tail is still mapped";
  EXPECT_TRUE(large::resize_in_place(m, kGiB));
  EXPECT_FALSE(large::resize_in_place(m, kGiB / 2 - kPage));  // below half
  EXPECT_EQ(large::usable(m), kGiB);
  EXPECT_TRUE(large::resize_in_place(m, kGiB / 2));  // exactly half
  EXPECT_EQ(large::usable(m), kGiB / 2);
  EXPECT_EQ(test::resident_small_pages(c + kGiB / 2, kPage), -1) << "the tail is still mapped";
  c[kGiB / 2 - 1] = 1;
  free(p);
  EXPECT_EQ(large::counters().bytes_in_use, before.bytes_in_use - size);
  EXPECT_EQ(large::counters().frees, before.frees + 1);
  EXPECT_EQ(large::counters().huge_bytes, before.huge_bytes - size);
  EXPECT_EQ(large::counters().huge_objects, before.huge_objects - 1);
}
