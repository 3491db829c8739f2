// The buddy chunk allocator: natural alignment, no overlap, zeroed memory,
// coalescing back to whole blocks, decay of released memory, counters.
#include "backend/chunk_allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "backend/pagemap.h"
#include "ds/bits.h"
#include "options.h"
#include "platform/os.h"
#include "scoped_option.h"

using namespace roost;

namespace {
// The purge delay for one test.
struct ScopedPurgeDelay : test::ScopedOption {
  explicit ScopedPurgeDelay(uint64_t ms) : ScopedOption(options::kPurgeDelayMs, ms) {}
};

// The pagemap is set up before any test takes a chunk, as the product sets
// it up before its first: a test run on its own (a filter) or in any order
// finds the backend as a program would.
class PagemapFirst : public ::testing::Environment {
 public:
  void SetUp() override { ASSERT_TRUE(pagemap::init()); }
};
::testing::Environment* const kPagemapFirst = ::testing::AddGlobalTestEnvironment(new PagemapFirst);
}  // namespace

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
  chunks::purge_all();
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

// A released chunk stays resident and is handed out again as it is (no
// page faults); purging makes it read as zero.
TEST(ChunkAllocator, ReleasedChunksAreReusedUnpurgedThenPurged) {
  chunks::purge_all();
  ChunkMeta* m = chunks::alloc(16);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->dirty_pages, 0u);
  char* bytes = reinterpret_cast<char*>(m->base);
  bytes[0] = 1;
  bytes[65535] = 2;
  uintptr_t base = m->base;
  size_t dirty_before = chunks::dirty_bytes();
  chunks::release(m, size_t{1} << 16);
  EXPECT_EQ(chunks::dirty_bytes(), dirty_before + (size_t{1} << 16));
  EXPECT_TRUE(chunks::has_dirty(16));
  ChunkMeta* again = chunks::alloc(16);
  ASSERT_EQ(again->base, base);
  EXPECT_EQ(again->dirty_pages, 16u);  // says so: it may hold old bytes...
  EXPECT_EQ(bytes[0], 1);              // ...and it does: not purged
  EXPECT_EQ(bytes[65535], 2);
  EXPECT_EQ(chunks::dirty_bytes(), dirty_before);
  chunks::release(again, 4096);  // only the first page written
  EXPECT_TRUE(chunks::purge_all());
  EXPECT_EQ(chunks::dirty_bytes(), 0u);
  EXPECT_FALSE(chunks::has_dirty(16));
  EXPECT_EQ(bytes[0], 0);
  EXPECT_FALSE(chunks::purge_all());
}

// Dirty memory is purged by the calls that come one to two purge delays
// after it was released, unless it is a big chunk (1 MiB and up) and the
// program took as many bytes of big chunks from the backend meanwhile: then
// it stays for another delay, for as long as that goes on.
TEST(ChunkAllocator, BigDirtyChunksStayWhileTheProgramTakesBigChunksThenArePurged) {
  chunks::purge_all();
  ScopedPurgeDelay delay(20);
  ChunkMeta* big = chunks::alloc(20);
  ChunkMeta* small = chunks::alloc(17);
  ASSERT_NE(big, nullptr);
  ASSERT_NE(small, nullptr);
  char* big_bytes = reinterpret_cast<char*>(big->base);
  char* small_bytes = reinterpret_cast<char*>(small->base);
  big_bytes[5] = 7;
  small_bytes[5] = 7;
  chunks::release(big, 4096);
  chunks::release(small, 4096);
  EXPECT_EQ(chunks::dirty_bytes(), 8192u);
  // Four delays, each with 2 MiB taken (a size neither dirty chunk can
  // serve, so neither is reused): the big one is kept, the small one not.
  for (int i = 0; i < 4; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    chunks::release(chunks::alloc(21), 0);  // ages the generations, after the take
  }
  EXPECT_EQ(chunks::dirty_bytes(), 4096u);
  EXPECT_EQ(big_bytes[5], 7);
  EXPECT_EQ(small_bytes[5], 0);
  // Two delays with nothing taken (the service thread's call ages them):
  // purged.
  uint64_t next = 0;
  for (int i = 0; i < 2; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    chunks::purge_due(os::now_ns(), &next);
  }
  EXPECT_EQ(chunks::dirty_bytes(), 0u);
  EXPECT_EQ(big_bytes[5], 0);
  EXPECT_EQ(next, UINT64_MAX);
}

// A request takes a dirty chunk of its own size, even an older one, before
// it splits a bigger one: big chunks stay whole for big requests.
TEST(ChunkAllocator, DirtyChunksOfTheSizeAskedForAreTakenBeforeBiggerOnesAreSplit) {
  chunks::purge_all();
  ScopedPurgeDelay delay(20);
  ChunkMeta* small = chunks::alloc(17);
  ChunkMeta* big = chunks::alloc(19);
  ASSERT_NE(small, nullptr);
  ASSERT_NE(big, nullptr);
  uintptr_t small_base = small->base, big_base = big->base;
  chunks::release(small, size_t{128} << 10);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  uint64_t next = 0;
  chunks::purge_due(os::now_ns(), &next);  // `small` is old now
  // `big` is young.
  chunks::release(big, size_t{512} << 10);
  ChunkMeta* again = chunks::alloc(17);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->base, small_base);
  EXPECT_EQ(again->dirty_pages, 32u);
  ChunkMeta* whole = chunks::alloc(19);
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(whole->base, big_base);
  EXPECT_EQ(whole->dirty_pages, 128u);
  chunks::release(again, 0);
  chunks::release(whole, 0);
}

// purge_due() (the service thread's call) ages dirty memory on time with no
// other call coming, and says when to call it next.  The release hook hears
// of every release that leaves dirty memory.
int g_release_calls = 0;
void count_release() { g_release_calls++; }

TEST(ChunkAllocator, PurgeDueAgesDirtyMemoryOnTime) {
  chunks::purge_all();
  ScopedPurgeDelay delay(20);
  auto* previous = chunks::set_release_hook(count_release);
  g_release_calls = 0;
  ChunkMeta* m = chunks::alloc(17);
  ASSERT_NE(m, nullptr);
  char* bytes = reinterpret_cast<char*>(m->base);
  bytes[5] = 7;
  chunks::release(m, 4096);
  EXPECT_EQ(g_release_calls, 1);
  uint64_t next = 0;
  uint64_t before = chunks::purged_bytes();
  size_t purged = chunks::purge_due(os::now_ns(), &next);  // not due yet
  EXPECT_EQ(purged, 0u);
  ASSERT_NE(next, UINT64_MAX);
  for (int round = 0; round < 2 && next != UINT64_MAX; round++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    EXPECT_LE(next, os::now_ns());                     // due by now
    purged += chunks::purge_due(os::now_ns(), &next);  // young -> old, then purged
  }
  EXPECT_EQ(purged, 4096u);
  EXPECT_EQ(chunks::purged_bytes() - before, 4096u);
  EXPECT_EQ(chunks::dirty_bytes(), 0u);
  EXPECT_EQ(next, UINT64_MAX);  // nothing left to do
  EXPECT_EQ(bytes[5], 0);
  chunks::set_release_hook(previous);
}

// A thread reads the clock before it takes the lock, so another thread may
// age the generations in between, with a later time: the earlier time must
// not read as a delay long passed (it once wrapped around and purged memory
// released a moment before).
TEST(ChunkAllocator, AClockReadBeforeTheLastAgingAgesNothing) {
  chunks::purge_all();
  ScopedPurgeDelay delay(20);
  uint64_t next = 0;
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  uint64_t earliest = os::now_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  uint64_t earlier = os::now_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  chunks::purge_due(os::now_ns(), &next);  // ages them, at a later time
  ChunkMeta* m = chunks::alloc(17);
  ASSERT_NE(m, nullptr);
  char* bytes = reinterpret_cast<char*>(m->base);
  bytes[5] = 7;
  chunks::release(m, 4096);
  EXPECT_EQ(chunks::purge_due(earlier, &next), 0u);
  EXPECT_EQ(chunks::purge_due(earliest, &next), 0u);
  EXPECT_EQ(chunks::dirty_bytes(), 4096u);
  EXPECT_EQ(bytes[5], 7);
  chunks::purge_all();
}

// A purge the program undoes (it takes as much fresh memory within the next
// delay) doubles the delay, up to eight times the option's; a delay with
// nothing taken halves it; purge_all (malloc_trim) resets it.
TEST(ChunkAllocator, UndonePurgesStretchTheDelayAndIdleDelaysShrinkIt) {
  chunks::purge_all();
  ScopedPurgeDelay delay(20);
  const uint64_t base = 20 * 1000000ull;
  EXPECT_EQ(chunks::purge_delay_now_ns(), base);
  uint64_t next = 0;
  // A busy program: a small chunk released and taken back (dirty: no fault)
  // at every step, while the service thread's call ages the generations.
  ChunkMeta* busy = chunks::alloc(16);
  ASSERT_NE(busy, nullptr);
  auto step = [&] {
    chunks::release(busy, 4096);
    busy = chunks::alloc(16);
    ASSERT_NE(busy, nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    chunks::purge_due(os::now_ns(), &next);
  };
  // Each cycle: a written MiB released and purged, then taken again fresh
  // (to be faulted in): the rotation after the take doubles the delay, up
  // to eight times the option's.  (A loaded machine may stall the steps for
  // a whole delay, which halves it: so the test asks for doublings only, and
  // for the top to be reached within a few more cycles.)
  ChunkMeta* m = chunks::alloc(20);
  ASSERT_NE(m, nullptr);
  for (int cycle = 1; cycle <= 12 && chunks::purge_delay_now_ns() < (base << 3); cycle++) {
    memset(reinterpret_cast<void*>(m->base), 1, size_t{1} << 20);
    size_t purged_before = chunks::purged_bytes();
    chunks::release(m, size_t{1} << 20);
    while (chunks::purged_bytes() == purged_before) step();
    uint64_t before = chunks::purge_delay_now_ns();
    m = chunks::alloc(20);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->dirty_pages, 0u) << "cycle " << cycle << ": the MiB was purged";
    uint64_t until = os::now_ns() + 3 * before;
    while (chunks::purge_delay_now_ns() == before && os::now_ns() < until) step();
    uint64_t after = chunks::purge_delay_now_ns();
    EXPECT_TRUE(after == before * 2 || after == before / 2)
        << "cycle " << cycle << ": " << before << " ns, then " << after;
  }
  EXPECT_EQ(chunks::purge_delay_now_ns(), base << 3);
  // No further: one more undone purge leaves it at the top.
  memset(reinterpret_cast<void*>(m->base), 1, size_t{1} << 20);
  size_t purged_before = chunks::purged_bytes();
  chunks::release(m, size_t{1} << 20);
  while (chunks::purged_bytes() == purged_before) step();
  m = chunks::alloc(20);
  ASSERT_NE(m, nullptr);
  uint64_t until = os::now_ns() + 2 * (base << 3);
  while (os::now_ns() < until) step();
  EXPECT_LE(chunks::purge_delay_now_ns(), base << 3);
  chunks::release(m, 0);
  chunks::release(busy, 0);
  // Delays with nothing taken: back down to the option's, a halving each.
  uint64_t seen = chunks::purge_delay_now_ns();
  while (seen > base) {
    while (chunks::purge_delay_now_ns() == seen) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      chunks::purge_due(os::now_ns(), &next);
    }
    EXPECT_EQ(chunks::purge_delay_now_ns(), seen / 2);
    seen = chunks::purge_delay_now_ns();
  }
  // And malloc_trim's purge_all resets a stretched delay at once.
  for (int cycle = 0; cycle < 2; cycle++) {
    ChunkMeta* again = chunks::alloc(20);
    ASSERT_NE(again, nullptr);
    memset(reinterpret_cast<void*>(again->base), 1, size_t{1} << 20);
    chunks::release(again, size_t{1} << 20);
    chunks::purge_all();
  }
  EXPECT_EQ(chunks::purge_delay_now_ns(), base);
}

// A dirty chunk split for a smaller request hands its dirty extent on to
// the pieces it reaches; pieces beyond it are clean.
TEST(ChunkAllocator, SplittingADirtyChunkKeepsTrackOfItsDirtyPart) {
  chunks::purge_all();
  ChunkMeta* big = chunks::alloc(20);
  ASSERT_NE(big, nullptr);
  uintptr_t base = big->base;
  chunks::release(big, size_t{512} << 10);  // the lower half was written
  ChunkMeta* small = chunks::alloc(16);
  ASSERT_EQ(small->base, base);
  EXPECT_EQ(small->dirty_pages, 16u);
  // Pieces: 64K, 128K and 256K inside the dirty half, 512K clean.
  EXPECT_EQ(chunks::dirty_bytes(), size_t{448} << 10);
  EXPECT_TRUE(chunks::has_dirty(16));
  EXPECT_TRUE(chunks::has_dirty(17));
  EXPECT_TRUE(chunks::has_dirty(18));
  EXPECT_FALSE(chunks::has_dirty(19));
  chunks::release(small, 0);
  EXPECT_TRUE(chunks::purge_all());
  // Purged, every piece merged back into the block.
  ChunkMeta* again = chunks::alloc(20);
  EXPECT_EQ(again->base, base);
  EXPECT_EQ(again->dirty_pages, 0u);
  chunks::release(again, 0);
}

// Released buddies merge while dirty, so released memory of one size serves
// a request of another without fresh pages.
TEST(ChunkAllocator, DirtyBuddiesMerge) {
  chunks::purge_all();
  ChunkMeta* pair = chunks::alloc(17);
  ASSERT_NE(pair, nullptr);
  uintptr_t base = pair->base;
  std::vector<ChunkMeta*> halves;
  chunks::split_out(pair, 16, [&](ChunkMeta* upper) { halves.push_back(upper); });
  halves.push_back(pair);
  ASSERT_EQ(halves.size(), 2u);
  for (ChunkMeta* m : halves) reinterpret_cast<char*>(m->base)[0] = 3;
  for (ChunkMeta* m : halves) chunks::release(m, 4096);
  EXPECT_TRUE(chunks::has_dirty(17));
  ChunkMeta* whole = chunks::alloc(17);  // the two halves, merged: no fresh memory
  EXPECT_EQ(whole->base, base);
  EXPECT_GT(whole->dirty_pages, 0u);
  EXPECT_EQ(reinterpret_cast<char*>(base)[0], 3);
  chunks::release(whole, size_t{1} << 17);
  chunks::purge_all();
}

// The same across generations: one half released, the generations age,
// the other half released; the merge takes the first off the old list.
TEST(ChunkAllocator, DirtyBuddiesMergeAcrossGenerations) {
  chunks::purge_all();
  ScopedPurgeDelay delay(20);
  ChunkMeta* pair = chunks::alloc(17);
  ASSERT_NE(pair, nullptr);
  uintptr_t base = pair->base;
  ChunkMeta* upper = nullptr;
  chunks::split_out(pair, 16, [&](ChunkMeta* piece) { upper = piece; });
  ASSERT_NE(upper, nullptr);
  chunks::release(upper, 4096);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  chunks::release(chunks::alloc(19), 0);  // ages: the upper half is now old
  chunks::release(pair, 4096);            // merges with the old upper half
  EXPECT_TRUE(chunks::has_dirty(17));
  EXPECT_FALSE(chunks::has_dirty(18));
  ChunkMeta* whole = chunks::alloc(17);
  EXPECT_EQ(whole->base, base);
  EXPECT_EQ(chunks::dirty_bytes(), 0u);  // nothing left on either list
  chunks::release(whole, 0);
  EXPECT_FALSE(chunks::purge_all());
}

// Releases a 128 MiB chunk as written whole but for its lowest MiB, which
// stays out (so that the rest, 127 MiB of dirty pieces, has no buddy to
// merge with); returns that MiB.
ChunkMeta* release_dirty_but_a_mib() {
  ChunkMeta* m = chunks::alloc(27);
  std::vector<ChunkMeta*> pieces;
  chunks::split_out(m, 20, [&](ChunkMeta* piece) { pieces.push_back(piece); });
  for (ChunkMeta* piece : pieces) chunks::release(piece, size_t{1} << piece->order);
  return m;
}

// More dirty memory than its cap (the bytes handed out, a floor at least)
// is purged at once, biggest chunks first, down to three quarters of the
// cap; what is left stays dirty (reusable without faults) until the clock
// ages it.
TEST(ChunkAllocator, DirtyMemoryOverTheCapIsPurgedDownToItsMark) {
  ScopedPurgeDelay delay(60000);  // the clock ages nothing meanwhile
  chunks::purge_all();
  ASSERT_LT(chunks::bytes_out(), config::kDirtyCapFloor / 4);  // the floor is the cap
  EXPECT_EQ(chunks::dirty_cap(), config::kDirtyCapFloor);
  size_t purged = chunks::purged_bytes();
  // 2 x 127 MiB of dirty pieces (the biggest 64 MiB): under the cap,
  // nothing is purged.
  std::vector<ChunkMeta*> held;
  for (int i = 0; i < 2; i++) held.push_back(release_dirty_but_a_mib());
  EXPECT_EQ(chunks::purged_bytes(), purged);
  EXPECT_GE(chunks::dirty_bytes(), size_t{254} << 20);
  // A 128 MiB chunk (clean: nothing that big is dirty) released with 64 MiB
  // written passes the cap: it goes, then 64 MiB pieces, the biggest first,
  // until the rest is under the mark; the smaller pieces stay.
  chunks::release(chunks::alloc(27), size_t{1} << 26);
  size_t mark = config::kDirtyCapFloor / 4 * config::kDirtyAfterCapQuarters;
  EXPECT_LE(chunks::dirty_bytes(), mark);
  EXPECT_GE(chunks::dirty_bytes(), mark - (size_t{1} << 26));
  EXPECT_GE(chunks::purged_bytes() - purged, size_t{1} << 26);
  EXPECT_LE(chunks::purged_bytes() - purged, size_t{3} << 26);
  EXPECT_FALSE(chunks::has_dirty(27));
  for (unsigned order = 20; order < 26; order++) EXPECT_TRUE(chunks::has_dirty(order)) << order;
  for (ChunkMeta* m : held) chunks::release(m, 0);
  chunks::purge_all();
}

// A program that holds more than the floor may keep as much again dirty:
// the cap follows the bytes handed out, and comes down with them.
TEST(ChunkAllocator, TheDirtyCapFollowsTheMemoryHandedOut) {
  ScopedPurgeDelay delay(60000);
  chunks::purge_all();
  size_t base_out = chunks::bytes_out();
  ASSERT_LT(base_out, config::kDirtyCapFloor / 4);
  // 512 MiB held (untouched: address space handed out counts as held).
  std::vector<ChunkMeta*> big;
  for (int i = 0; i < 4; i++) big.push_back(chunks::alloc(27));
  EXPECT_EQ(chunks::dirty_cap(), chunks::bytes_out());
  EXPECT_GE(chunks::dirty_cap(), base_out + (size_t{512} << 20));
  // 381 MiB dirty: over the floor, under this program's cap; nothing goes.
  std::vector<ChunkMeta*> held;
  for (int i = 0; i < 3; i++) held.push_back(release_dirty_but_a_mib());
  EXPECT_GE(chunks::dirty_bytes(), size_t{381} << 20);
  // The program lets go of its big chunks (untouched: no dirty bytes), so
  // the cap is the floor again: the releases purge down to its mark.
  for (ChunkMeta* m : big) chunks::release(m, 0);
  EXPECT_EQ(chunks::dirty_cap(), config::kDirtyCapFloor);
  EXPECT_LE(chunks::dirty_bytes(), config::kDirtyCapFloor / 4 * config::kDirtyAfterCapQuarters);
  for (ChunkMeta* m : held) chunks::release(m, 0);
  chunks::purge_all();
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

// A split shares the chunk's dirty extent out: each piece gets the part that
// reaches it, so a cache holding the pieces knows which are resident.
TEST(ChunkAllocator, SplitSharesTheDirtyExtentOut) {
  ChunkMeta* m = chunks::alloc(20);
  ASSERT_NE(m, nullptr);
  m->dirty_pages = 48;  // the first 192 KiB were written
  std::vector<ChunkMeta*> pieces;
  chunks::split_out(m, 16, [&](ChunkMeta* piece) { pieces.push_back(piece); });
  ASSERT_EQ(pieces.size(), 4u);    // 512K, 256K, 128K, 64K from the top down
  EXPECT_EQ(m->dirty_pages, 16u);  // the first 64 KiB: all of it
  for (ChunkMeta* p : pieces) {
    size_t offset = p->base - m->base;
    uint32_t want = offset == (size_t{64} << 10) ? 16u : offset == (size_t{128} << 10) ? 16u : 0u;
    EXPECT_EQ(p->dirty_pages, want) << "piece at +" << (offset >> 10) << " KiB";
  }
  for (ChunkMeta* p : pieces) chunks::release(p, size_t{p->dirty_pages} << config::kMinPageBits);
  chunks::release(m, size_t{m->dirty_pages} << config::kMinPageBits);
  chunks::purge_all();
}

// alloc_dirty takes only released, unpurged memory, and only from chunks no
// bigger than it is told: a large object's dirty block stays whole.
TEST(ChunkAllocator, AllocDirtyTakesOnlyReleasedChunksWithinTheOrderBound) {
  chunks::purge_all();
  EXPECT_EQ(chunks::alloc_dirty(16, 19), nullptr);  // nothing released
  ChunkMeta* big = chunks::alloc(20);
  ASSERT_NE(big, nullptr);
  uintptr_t big_base = big->base;
  chunks::release(big, size_t{1} << 20);  // a 1 MiB dirty block
  EXPECT_EQ(chunks::alloc_dirty(16, 19), nullptr) << "split a block above the bound";
  EXPECT_EQ(chunks::dirty_bytes(), size_t{1} << 20);
  ChunkMeta* piece = chunks::alloc_dirty(16, 20);
  ASSERT_NE(piece, nullptr);
  EXPECT_EQ(piece->order, 16u);
  EXPECT_EQ(piece->base, big_base);
  EXPECT_EQ(piece->dirty_pages, (size_t{1} << 16) >> config::kMinPageBits);
  EXPECT_EQ(chunks::dirty_bytes(), (size_t{1} << 20) - (size_t{1} << 16));
  chunks::release(piece, size_t{1} << 16);
  chunks::purge_all();
  EXPECT_EQ(chunks::alloc_dirty(16, 20), nullptr) << "purged memory is not dirty";
}

namespace {
// Whether every granule record of the fresh extent reads as unused (none
// written since it became fresh).
bool fresh_extent_has_no_records() {
  chunks::Extent fresh = chunks::fresh_extent();
  for (uintptr_t g = fresh.begin; g < fresh.end; g += config::kGranule)
    if (kind_of(chunks::meta_of(g)) != ChunkKind::kUnused) return false;
  return true;
}

// A clean chunk of 2^order bytes cut from the fresh extent: the buddy lists'
// blocks that size and up are taken first and kept in `held`.
ChunkMeta* cut_from_fresh(unsigned order, std::vector<ChunkMeta*>& held) {
  for (int i = 0; i < 256; i++) {
    ChunkMeta* m = chunks::alloc(order);
    if (m == nullptr) return nullptr;
    if (chunks::fresh_extent().begin == m->base + (size_t{1} << order)) return m;
    held.push_back(m);
  }
  return nullptr;
}
}  // namespace

// Chunks cut from a region write records only where they are and in the
// alignment gaps below them: the region's untouched top keeps its table
// untouched (a small program's metadata stays a page or two).
TEST(ChunkAllocator, ChunksCutFromTheFreshTopOfARegionWriteNoRecordAboveThem) {
  chunks::purge_all();
  std::vector<ChunkMeta*> held;
  for (unsigned order : {16u, 18u, 16u, 21u, 17u}) {
    chunks::Extent before = chunks::fresh_extent();
    ChunkMeta* m = cut_from_fresh(order, held);
    ASSERT_NE(m, nullptr);
    if (m->base >= before.begin && m->base < before.end)
      EXPECT_EQ(m->base, bits::align_up(before.begin, size_t{1} << order))
          << "a cut is the lowest aligned place in the fresh extent";
    EXPECT_TRUE(fresh_extent_has_no_records()) << "after a cut of order " << order;
    held.push_back(m);
  }
  for (ChunkMeta* m : held) chunks::release(m, 0);
  EXPECT_TRUE(fresh_extent_has_no_records());
}

// A clean chunk released next to the fresh extent's bottom rejoins it, and
// is the next cut of its size.
TEST(ChunkAllocator, AChunkFreedAtTheFreshEdgeRejoinsIt) {
  chunks::purge_all();
  std::vector<ChunkMeta*> held;
  ChunkMeta* m = cut_from_fresh(22, held);
  ASSERT_NE(m, nullptr);
  uintptr_t base = m->base;
  chunks::release(m, 0);
  EXPECT_LE(chunks::fresh_extent().begin, base);
  EXPECT_EQ(kind_of(chunks::meta_of(base)), ChunkKind::kUnused);
  EXPECT_TRUE(fresh_extent_has_no_records());
  ChunkMeta* again = chunks::alloc(22);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->base, base);
  chunks::release(again, 0);
  for (ChunkMeta* h : held) chunks::release(h, 0);
}

// When the fresh extent has no room for a request, a new region's top
// becomes fresh and what was left of the old one is handed out from the
// buddy lists.
TEST(ChunkAllocator, TheRestOfAUsedUpFreshExtentGoesToTheBuddyLists) {
  chunks::purge_all();
  std::vector<ChunkMeta*> held;
  ChunkMeta* small = cut_from_fresh(16, held);  // the fresh extent has begun
  ASSERT_NE(small, nullptr);
  held.push_back(small);
  chunks::Extent rest = chunks::fresh_extent();
  ASSERT_LT(rest.begin, rest.end);
  ChunkMeta* whole = chunks::alloc(chunks::kMaxOrder);  // no room left for it
  if (whole == nullptr) {
    for (ChunkMeta* h : held) chunks::release(h, 0);
    GTEST_SKIP() << "the OS refused a region of " << (size_t{1} << chunks::kMaxOrder) << " bytes";
  }
  EXPECT_TRUE(whole->base + (size_t{1} << chunks::kMaxOrder) <= rest.begin ||
              whole->base >= rest.end);
  chunks::Extent now = chunks::fresh_extent();
  EXPECT_FALSE(now.begin >= rest.begin && now.begin < rest.end) << "the old rest is not fresh";
  // The old rest's lowest granule is the next 64 KiB chunk (from the lists).
  ChunkMeta* next = chunks::alloc(16);
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(next->base, rest.begin);
  EXPECT_EQ(next->dirty_pages, 0u);
  EXPECT_TRUE(fresh_extent_has_no_records());
  chunks::release(next, 0);
  chunks::release(whole, 0);
  for (ChunkMeta* h : held) chunks::release(h, 0);
}

// ---- released pages moved into a big chunk (alloc(order, fill)) ----

namespace {
constexpr size_t kMiB = size_t{1} << 20;

// `count` chunks of 2^order bytes whose buddies are held (in `held`), so
// that none merges with another once released.
std::vector<ChunkMeta*> unpaired(unsigned order, size_t count, std::vector<ChunkMeta*>& held) {
  std::vector<ChunkMeta*> all, out;
  for (size_t i = 0; i < 2 * count + 2; i++) all.push_back(chunks::alloc(order));
  for (ChunkMeta* m : all) {
    if (m == nullptr) continue;
    bool paired = out.size() < count && (m->base & (uintptr_t{1} << order)) == 0 &&
                  std::any_of(all.begin(), all.end(), [&](ChunkMeta* o) {
                    return o != nullptr && o->base == (m->base ^ (uintptr_t{1} << order));
                  });
    (paired ? out : held).push_back(m);
  }
  EXPECT_EQ(out.size(), count);
  return out;
}

// Writes `value` over the first `written` bytes of `m` and releases it
// with that dirty extent; returns its base.
uintptr_t release_written(ChunkMeta* m, size_t written, unsigned char value) {
  memset(reinterpret_cast<void*>(m->base), value, written);
  uintptr_t base = m->base;
  chunks::release(m, written);
  return base;
}

void release_all(std::vector<ChunkMeta*>& held) {
  for (ChunkMeta* m : held) chunks::release(m, 0);
  held.clear();
}

const unsigned char* bytes_at(uintptr_t a) { return reinterpret_cast<const unsigned char*>(a); }
}  // namespace

// A 16 MiB chunk with nothing of its size released gets the written pages
// of a released 4 MiB chunk and a 2 MiB one moved into its first 6 MiB:
// each whole (the bigger first), its head at a 2 MiB boundary, no byte
// copied.  The two read as zero after, and are clean (not counted dirty).
TEST(ChunkAllocator, TheWrittenPagesOfSmallerReleasedChunksAreMovedIntoABigOne) {
  if (!os::can_move_pages()) GTEST_SKIP() << "this kernel does not move pages (MREMAP_DONTUNMAP)";
  ScopedPurgeDelay delay(60000);
  chunks::purge_all();
  std::vector<ChunkMeta*> held;
  ChunkMeta* four = unpaired(22, 1, held)[0];
  ChunkMeta* two = unpaired(21, 1, held)[0];  // (taken before `four` is released)
  uintptr_t a = release_written(four, 3 * kMiB, 0xA1);
  uintptr_t b = release_written(two, 2 * kMiB, 0xB2);
  size_t moved = chunks::moved_bytes();
  size_t dirty = chunks::dirty_bytes();
  ChunkMeta* m = chunks::alloc(24, 6 * kMiB);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(chunks::moved_bytes() - moved, 6 * kMiB);
  EXPECT_EQ(dirty_extent(m), 6 * kMiB);
  EXPECT_EQ(dirty - chunks::dirty_bytes(), 5 * kMiB) << "the two are not dirty any more";
  EXPECT_EQ(bytes_at(m->base)[0], 0xA1);
  EXPECT_EQ(bytes_at(m->base + 3 * kMiB - 1)[0], 0xA1);
  EXPECT_EQ(bytes_at(m->base + 3 * kMiB)[0], 0) << "past a's extent";
  EXPECT_EQ(bytes_at(m->base + 4 * kMiB)[0], 0xB2) << "a's extent rounds up to 4 MiB";
  EXPECT_EQ(bytes_at(m->base + 6 * kMiB - 1)[0], 0xB2);
  EXPECT_EQ(bytes_at(m->base + 6 * kMiB)[0], 0);
  EXPECT_EQ(bytes_at(a)[0], 0);
  EXPECT_EQ(bytes_at(b + 2 * kMiB - 1)[0], 0);
  EXPECT_EQ(chunks::alloc_dirty(21, 22), nullptr);
  chunks::release(m, 0);
  release_all(held);
  chunks::purge_all();
}

// No more than the chunk's user will use is filled: a fill of 5 MiB takes
// a whole released 4 MiB chunk, and the last 2 MiB of an 8 MiB one that
// does not fit whole, which keeps the rest of its written head.
TEST(ChunkAllocator, AMoveTakesTheTailOfAChunkTooBigForWhatIsLeftToFill) {
  if (!os::can_move_pages()) GTEST_SKIP() << "this kernel does not move pages (MREMAP_DONTUNMAP)";
  ScopedPurgeDelay delay(60000);
  chunks::purge_all();
  std::vector<ChunkMeta*> held;
  ChunkMeta* four = unpaired(22, 1, held)[0];
  ChunkMeta* eight = unpaired(23, 1, held)[0];
  uintptr_t a = release_written(four, 4 * kMiB, 0xA1);
  uintptr_t b = release_written(eight, 8 * kMiB, 0xB2);
  size_t moved = chunks::moved_bytes();
  ChunkMeta* m = chunks::alloc(24, 5 * kMiB + 1);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(chunks::moved_bytes() - moved, 6 * kMiB);
  EXPECT_EQ(dirty_extent(m), 6 * kMiB);
  EXPECT_EQ(bytes_at(m->base)[0], 0xA1);
  EXPECT_EQ(bytes_at(m->base + 4 * kMiB)[0], 0xB2) << "b's tail";
  EXPECT_EQ(bytes_at(m->base + 6 * kMiB)[0], 0);
  EXPECT_EQ(bytes_at(a)[0], 0);
  EXPECT_EQ(bytes_at(b + 6 * kMiB - 1)[0], 0xB2) << "the rest of b stays";
  EXPECT_EQ(bytes_at(b + 6 * kMiB)[0], 0);
  ChunkMeta* rest = chunks::alloc_dirty(23, 23);
  ASSERT_NE(rest, nullptr);
  EXPECT_EQ(rest->base, b);
  EXPECT_EQ(dirty_extent(rest), 6 * kMiB);
  chunks::release(rest, 0);
  chunks::release(m, 0);
  release_all(held);
  chunks::purge_all();
}

// A released chunk of which only the first and last pages were written
// (a long extent, little of it resident) is not moved: its head would
// land far from the head of what it fills, and stay resident there.
TEST(ChunkAllocator, ASparselyWrittenReleasedChunkIsNotMoved) {
  ScopedPurgeDelay delay(60000);
  chunks::purge_all();
  ChunkMeta* d = chunks::alloc(23);
  ASSERT_NE(d, nullptr);
  uintptr_t base = d->base;
  const_cast<unsigned char*>(bytes_at(base))[0] = 0xC3;
  const_cast<unsigned char*>(bytes_at(base))[8 * kMiB - 1] = 0xC3;
  chunks::release(d, 8 * kMiB);
  size_t moved = chunks::moved_bytes();
  ChunkMeta* m = chunks::alloc(24, 16 * kMiB);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(chunks::moved_bytes(), moved);
  EXPECT_EQ(m->dirty_pages, 0u);
  EXPECT_EQ(bytes_at(base)[0], 0xC3);
  ChunkMeta* again = chunks::alloc_dirty(23, 23);
  ASSERT_NE(again, nullptr) << "it is dirty still";
  EXPECT_EQ(again->base, base);
  chunks::release(again, 0);
  chunks::release(m, 0);
  chunks::purge_all();
}

// Of the released chunks of the size asked for, a caller that says what it
// will use gets the one whose written part fits it best: the smallest
// that covers it, else the biggest.
TEST(ChunkAllocator, OfReleasedChunksOfTheSizeTheOneWhoseWrittenPartFitsBestIsTaken) {
  ScopedPurgeDelay delay(60000);
  chunks::purge_all();
  std::vector<ChunkMeta*> held;
  std::vector<ChunkMeta*> three = unpaired(23, 3, held);
  ASSERT_EQ(three.size(), 3u);
  uintptr_t two = release_written(three[0], 2 * kMiB, 1);
  uintptr_t five = release_written(three[1], 5 * kMiB, 2);
  uintptr_t seven = release_written(three[2], 7 * kMiB, 3);
  ChunkMeta* m = chunks::alloc(23, 4 * kMiB);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->base, five);
  ChunkMeta* n = chunks::alloc(23, 8 * kMiB);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->base, seven);
  ChunkMeta* o = chunks::alloc(23);  // not told: the youngest
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->base, two);
  for (ChunkMeta* c : {m, n, o}) chunks::release(c, 0);
  release_all(held);
  chunks::purge_all();
}

// A released chunk as big as the one being filled, written over less than
// is left to fill, is moved whole; nothing outside it moves (a tail move
// past its start would take the pages of whatever lies below it).
TEST(ChunkAllocator, AReleasedChunkAsBigAsTheOneFilledMovesOnlyItsOwnPages) {
  if (!os::can_move_pages()) GTEST_SKIP() << "this kernel does not move pages (MREMAP_DONTUNMAP)";
  ScopedPurgeDelay delay(60000);
  chunks::purge_all();
  std::vector<ChunkMeta*> held;
  std::vector<ChunkMeta*> two = unpaired(25, 2, held);
  ASSERT_EQ(two.size(), 2u);
  for (ChunkMeta* h : held) memset(reinterpret_cast<void*>(h->base), 0x77, size_t{1} << 25);
  uintptr_t a = release_written(two[0], 2 * kMiB, 0xA1);
  uintptr_t b = release_written(two[1], 2 * kMiB, 0xB2);
  // One of the two is split for the 16 MiB chunk (2 MiB written), the
  // other's 2 MiB follow.
  ChunkMeta* m = chunks::alloc(24, 8 * kMiB);
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->base == a || m->base == b);
  uintptr_t other = m->base == a ? b : a;
  unsigned char mine = m->base == a ? 0xA1 : 0xB2, theirs = m->base == a ? 0xB2 : 0xA1;
  EXPECT_EQ(bytes_at(m->base)[0], mine);
  EXPECT_EQ(bytes_at(m->base + 2 * kMiB)[0], theirs);
  EXPECT_EQ(bytes_at(m->base + 4 * kMiB - 1)[0], theirs);
  EXPECT_EQ(bytes_at(m->base + 4 * kMiB)[0], 0);
  EXPECT_EQ(bytes_at(other)[0], 0);
  for (ChunkMeta* h : held)
    for (size_t at = 0; at < size_t{1} << 25; at += kMiB) {
      ASSERT_EQ(bytes_at(h->base + at)[0], 0x77) << "a held chunk changed at " << at;
      ASSERT_EQ(bytes_at(h->base + at + kMiB - 1)[0], 0x77) << "a held chunk changed at " << at;
    }
  chunks::release(m, 0);
  release_all(held);
  chunks::purge_all();
}
