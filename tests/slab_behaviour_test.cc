// Slabs seen from outside, through the prefixed API (roost.h) only: objects
// are reused, empty slabs go back (but for one spare a class), counters
// return to where they were, memory moves between size classes.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "roost.h"
#include "support.h"

namespace {
struct roost_stats snapshot() {
  struct roost_stats s;
  EXPECT_EQ(roost_stats(&s), 0);
  return s;
}
}  // namespace

TEST(Slab, FreedObjectsAreReusedBeforeFreshMemory) {
  SKIP_UNDER_OFFLOAD();  // which objects come back is the rings' under offload
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
  SKIP_UNDER_OFFLOAD();
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
  // Empty slabs went back (a class may keep its active slab and, within
  // the 512 KiB reserve, one spare: 8 of 64 KiB).
  EXPECT_LE(after.slabs, before.slabs + 97 + 8);
  EXPECT_LT(after.slabs, during.slabs);
}

// A class that empties its oldest slabs (FIFO frees) keeps the first one as
// a spare and refills from it before it carves the active slab's untouched
// tail or takes another chunk; the second goes back; trim takes the spare.
TEST(Slab, AnEmptiedSlabIsKeptAsTheClassSpareAndRefilledFirst) {
  SKIP_UNDER_OFFLOAD();
  constexpr size_t kSize = 1024;
  constexpr uintptr_t kSlabBytes = uintptr_t{64} << 10;  // classes up to 4 KiB
  auto slab_of = [](void* p) { return reinterpret_cast<uintptr_t>(p) & ~(kSlabBytes - 1); };
  roost_trim();  // nothing kept from earlier tests
  struct roost_stats base = snapshot();
  // Three and a half slabs' worth, in allocation order.
  const size_t per_slab = kSlabBytes / kSize;
  std::vector<uintptr_t> order;  // slabs in the order they were first used
  std::map<uintptr_t, std::vector<void*>> by_slab;
  for (size_t i = 0; i < per_slab * 7 / 2; i++) {
    void* p = roost_malloc(kSize);
    ASSERT_NE(p, nullptr);
    if (by_slab.count(slab_of(p)) == 0) order.push_back(slab_of(p));
    by_slab[slab_of(p)].push_back(p);
  }
  ASSERT_EQ(order.size(), 4u);
  ASSERT_EQ(by_slab[order[0]].size(), per_slab);
  ASSERT_EQ(by_slab[order[1]].size(), per_slab);
  struct roost_stats full = snapshot();
  EXPECT_EQ(full.slabs, base.slabs + order.size());
  // The two oldest slabs empty: the first stays as the spare, the second goes.
  for (int s = 0; s < 2; s++)
    for (void* p : by_slab[order[s]]) roost_free(p);
  struct roost_stats emptied = snapshot();
  EXPECT_EQ(emptied.slabs, full.slabs - 1);
  // The next slab's worth comes from the spare (after what was left on the
  // fast list from the last carve, which lies in the active slab).
  std::set<uintptr_t> seen(order.begin(), order.end());
  size_t in_spare = 0;
  std::vector<void*> again;
  for (size_t i = 0; i < per_slab; i++) {
    void* p = roost_malloc(kSize);
    ASSERT_NE(p, nullptr);
    again.push_back(p);
    EXPECT_NE(slab_of(p), order[1]) << "the released slab came back before the spare";
    EXPECT_TRUE(seen.count(slab_of(p))) << "fresh memory while the spare had room";
    in_spare += slab_of(p) == order[0] ? 1 : 0;
  }
  EXPECT_GE(in_spare, per_slab / 2);
  for (void* p : again) roost_free(p);
  // Trim gives back everything empty, the spare included: what is left are
  // the two slabs that still hold objects.
  roost_trim();
  EXPECT_EQ(snapshot().slabs, base.slabs + 2);
  for (size_t s = 2; s < order.size(); s++)
    for (void* p : by_slab[order[s]]) roost_free(p);
  roost_trim();
  EXPECT_EQ(snapshot().slabs, base.slabs);
}

// A class whose active slab would next carve untouched pages takes an empty
// chunk that is still resident (released by another class) instead, and
// carves that chunk's resident pages before touching any fresh one.
TEST(Slab, ResidentEmptyMemoryIsCarvedBeforeUntouchedPages) {
  SKIP_UNDER_OFFLOAD();
  constexpr uintptr_t kSlabBytes = uintptr_t{64} << 10;
  auto slab_of = [](void* p) { return reinterpret_cast<uintptr_t>(p) & ~(kSlabBytes - 1); };
  roost_trim();  // nothing resident kept from earlier tests
  // Class of 64 B: one carve is one page of 64 objects.
  std::vector<void*> small;
  small.push_back(roost_malloc(64));
  uintptr_t first_slab = slab_of(small[0]);
  // Four slabs of 1 KiB objects, written, then freed: the first stays as
  // that class's spare, the middle two go to the chunk cache (resident),
  // the active one stays.
  std::vector<void*> big;
  std::set<uintptr_t> big_slabs;
  for (int i = 0; i < 4 * 64; i++) {
    big.push_back(roost_malloc(1024));
    std::memset(big.back(), 1, 1024);
    big_slabs.insert(slab_of(big.back()));
  }
  ASSERT_EQ(big_slabs.size(), 4u);
  for (void* p : big) roost_free(p);
  struct roost_stats before = snapshot();
  // The rest of the first page of 64 B objects...
  for (int i = 1; i < 64; i++) {
    small.push_back(roost_malloc(64));
    EXPECT_EQ(slab_of(small.back()), first_slab);
  }
  // ...then a whole slab's worth more, all from one of the freed 1 KiB slabs
  // (its pages were written: no fresh page is touched), and no new chunk.
  uintptr_t resident_slab = 0;
  for (int i = 0; i < 1024; i++) {
    small.push_back(roost_malloc(64));
    uintptr_t s = slab_of(small.back());
    if (i == 0) {
      resident_slab = s;
      EXPECT_NE(s, first_slab) << "carved untouched pages while resident memory was cached";
      EXPECT_TRUE(big_slabs.count(s)) << "not a chunk the 1 KiB class released";
    }
    EXPECT_EQ(s, resident_slab);
  }
  struct roost_stats after = snapshot();
  EXPECT_EQ(after.slabs, before.slabs + 1);
  EXPECT_EQ(after.bytes_committed, before.bytes_committed);
  for (void* p : small) roost_free(p);
  roost_trim();
}

// The reserve bounds the resident memory an allocator keeps: untouched
// pieces of a batch it took from the backend do not count against it, so
// emptied slabs (resident) stay in the allocator instead of going back to
// the backend while untouched pieces take their place.
TEST(Slab, UntouchedCachedChunksDoNotCrowdEmptiedSlabsOutOfTheReserve) {
  constexpr size_t kSize = 1024;
  constexpr size_t kPerSlab = (size_t{64} << 10) / kSize;
  roost_trim();  // nothing cached or dirty
  // Ten slabs: the first batch of eight (512 KiB), then a second batch, of
  // which two slabs are used and six pieces (384 KiB) stay untouched.
  std::vector<void*> objects;
  for (size_t i = 0; i < 10 * kPerSlab; i++) {
    objects.push_back(roost_malloc(kSize));
    ASSERT_NE(objects.back(), nullptr);
    std::memset(objects.back(), 7, kSize);
  }
  // Under offload the service refills this thread's ring of 1 KiB objects
  // after the last malloc (a slab from a fresh batch): both readings wait
  // until it is done.
  roost_test::wait_for_offload_rest();
  struct roost_stats before = snapshot();
  for (void* p : objects) roost_free(p);
  roost_test::wait_for_offload_rest();
  struct roost_stats after = snapshot();
  // One spare and up to seven cached chunks (512 KiB) stay resident in the
  // allocator; at most the last emptied slabs go to the backend.  Counting
  // the untouched pieces against the reserve sent seven (448 KiB) there.
  // What went there is dirty or, once its delay is out, purged.
  size_t purged = after.bytes_purged - before.bytes_purged;
  EXPECT_LE(after.bytes_dirty + purged - before.bytes_dirty, size_t{128} << 10);
  EXPECT_EQ(after.bytes_committed + purged, before.bytes_committed);
  roost_trim();
}

// A slab needs a chunk and nothing resident is cached: memory another
// thread released (resident, waiting out the purge delay) is taken before
// an untouched cached piece, so the footprint does not grow.
TEST(Slab, ReleasedResidentMemoryIsReusedBeforeUntouchedCachedPieces) {
  SKIP_UNDER_OFFLOAD();
  constexpr uintptr_t kSlabBytes = uintptr_t{64} << 10;
  auto slab_of = [](void* p) { return reinterpret_cast<uintptr_t>(p) & ~(kSlabBytes - 1); };
  roost_trim();
  // This thread takes a batch: one slab of 48 B objects, the rest cached
  // untouched.
  void* first = roost_malloc(48);
  ASSERT_NE(first, nullptr);
  // Another thread fills and frees four slabs of 1 KiB objects and exits:
  // its chunks go back to the backend, written (dirty).
  std::set<uintptr_t> released;
  std::thread other([&] {
    std::vector<void*> objects;
    for (int i = 0; i < 4 * 64; i++) {
      objects.push_back(roost_malloc(1024));
      std::memset(objects.back(), 9, 1024);
      released.insert(slab_of(objects.back()));
    }
    for (void* p : objects) roost_free(p);
  });
  other.join();
  ASSERT_EQ(released.size(), 4u);
  struct roost_stats before = snapshot();
  ASSERT_GE(before.bytes_dirty, size_t{4} * kSlabBytes);
  // A new class here needs a slab: it is one of the released ones.
  void* p = roost_malloc(2000);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(released.count(slab_of(p))) << "took an untouched piece over released memory";
  struct roost_stats after = snapshot();
  EXPECT_EQ(after.bytes_dirty, before.bytes_dirty - kSlabBytes);
  roost_free(p);
  roost_free(first);
  roost_trim();
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

// A thread that only frees other threads' objects (a consumer) still takes
// its own objects back from its inbox: it visits the inbox whenever its
// outbox is full and posted (256 KiB of frees by default), without
// allocating anything.
TEST(Slab, AThreadThatOnlyFreesTakesItsOwnObjectsBack) {
  SKIP_UNDER_OFFLOAD();
  constexpr size_t kMine = 100, kTheirs = 12000, kSize = 64;  // theirs: 750 KiB
  std::vector<void*> mine, theirs;
  for (size_t i = 0; i < kMine; i++) mine.push_back(roost_malloc(kSize));
  std::thread other([&] {
    for (size_t i = 0; i < kTheirs; i++) theirs.push_back(roost_malloc(kSize));
    for (void* p : mine) roost_free(p);  // remote frees, posted at thread exit
  });
  other.join();
  struct roost_stats before = snapshot();
  for (void* p : theirs) roost_free(p);  // this thread now only frees
  struct roost_stats after = snapshot();
  EXPECT_EQ(after.allocations, before.allocations);
  EXPECT_GE(after.messages_received - before.messages_received, kMine);
  EXPECT_GE(after.inbox_drains - before.inbox_drains, 1u);
}

// Threads that come and go, each leaving an object behind (kept in shared
// slots, where the next thread to pick the slot frees it): a thread that
// takes an exited thread's allocator carries on with its slabs (one with
// free objects, or a tail left to carve) instead of starting a slab of its
// own, so the slabs held follow the objects kept, not the generations of
// threads.
TEST(Slab, ThreadGenerationsThatLeaveObjectsBehindShareTheirSlabs) {
  SKIP_UNDER_OFFLOAD();  // threads allocate from the service's rings there
  constexpr size_t kSize = 200, kSlots = 400, kGenerations = 300, kThreads = 4;
  std::vector<std::atomic<void*>> slots(kSlots);
  roost_trim();
  struct roost_stats before = snapshot();
  uint64_t seed = 0x9e3779b97f4a7c15u;
  for (size_t g = 0; g < kGenerations; g++) {
    std::vector<std::thread> threads;
    for (size_t t = 0; t < kThreads; t++) {
      seed = seed * 6364136223846793005u + 1442695040888963407u;
      size_t slot = (seed >> 33) % kSlots;
      threads.emplace_back([&slots, slot] {
        void* p = roost_malloc(kSize);
        ASSERT_NE(p, nullptr);
        std::memset(p, 7, kSize);
        roost_free(slots[slot].exchange(p));
      });
    }
    for (auto& t : threads) t.join();
  }
  struct roost_stats after = snapshot();
  // 400 objects of 200 B fill about a slab and a quarter; each of the
  // allocators in use (this thread's, and one for each of the four threads
  // alive at once) may hold a part-used slab or two of them.  A slab
  // started by every thread that found no free object of its own would be
  // hundreds.
  EXPECT_LE(after.slabs, before.slabs + 3 * (kThreads + 1) + 2);
  for (auto& s : slots) roost_free(s.exchange(nullptr));
  roost_trim();
}
