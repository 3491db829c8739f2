// SizeClassSlabs (frontend/size_class_slabs.h): one allocator's slabs by
// size class.  Carving gives the fast list objects of a new slab; freed objects
// come back through the active slab; an emptied slab stays as the class's
// spare within the reserve and is reused before fresh pages, or goes back
// to the chunk cache; release_unused lets go of everything; slabs are
// counted by class; a parked allocator's slab changes hands (adoption);
// every refill step tells the length of the list it returns; a class
// starting over on a resident chunk keeps resident what it will carve.
#include "frontend/size_class_slabs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <vector>

#include "backend/chunk_allocator.h"
#include "backend/pagemap.h"
#include "frontend/ownership.h"
#include "frontend/slab.h"
#include "platform/os.h"
#include "resident.h"
#include "scoped_option.h"

using namespace roost;
using test::ScopedOption;

namespace {

const int kOwner = 0;  // what the slabs under test name as their owner

// The slabs and cache of a test, with everything given back at its end.
// Memory released by earlier tests is purged first, so the slabs here start
// on untouched pages.
struct Fixture {
  explicit Fixture(const void* owner = &kOwner) : slabs(owner) {
    EXPECT_TRUE(pagemap::init());
    chunks::purge_all();
  }
  ~Fixture() {
    slabs.release_unused(fast, cache);
    cache.trim(0);
  }
  // An object off class `sc`'s fast list, or nullptr.
  void* pop(unsigned sc) {
    FreeObject* p = fast[sc];
    if (p != nullptr) fast[sc] = freelist::next(p);
    return p;
  }
  // An object of class `sc`, refilling the fast list as the allocator
  // does (less the inbox): the active slab's frees, its resident tail, an
  // available slab, fresh memory.
  void* alloc(unsigned sc) {
    if (void* p = pop(sc)) return p;
    FreeObject* list = slabs.take_from_active(sc);
    if (list == nullptr) list = slabs.carve_resident_tail(sc);
    if (list == nullptr) list = slabs.take_available(sc, cache);
    if (list == nullptr) list = slabs.carve_fresh(sc, cache);
    // Every step tells the length of the list it returned.
    if (list != nullptr) EXPECT_EQ(slabs.last_list_length(), length(list));
    fast[sc] = list;
    return pop(sc);
  }
  static uint32_t length(FreeObject* list) {
    uint32_t n = 0;
    for (; list != nullptr; list = freelist::next(list)) n++;
    return n;
  }
  // Every object of a new slab's first carve of class `sc`: all out, the
  // fast list empty.
  std::vector<void*> first_carve(unsigned sc) {
    std::vector<void*> out;
    for (uint32_t i = 0; i < sizeclass::kInfo.info[sc].carve; i++) out.push_back(alloc(sc));
    EXPECT_EQ(fast[sc], nullptr);
    return out;
  }
  void free(void* p) {
    ChunkMeta* m = pagemap::lookup(p);
    ASSERT_NE(m, nullptr);
    if (slab::return_object(m, p)) slabs.on_state_change(m, cache);
  }
  FreeObject* fast[sizeclass::kCount] = {};
  ChunkCache cache;
  SizeClassSlabs slabs;
};

constexpr unsigned kClass1K = sizeclass::from_size(1024);
const sizeclass::ClassInfo& kInfo1K = sizeclass::kInfo.info[kClass1K];

}  // namespace

TEST(SizeClassSlabs, ANewSlabIsCarvedOntoTheFastListACarveAtATime) {
  Fixture f;
  EXPECT_EQ(f.slabs.take_from_active(kClass1K), nullptr);
  EXPECT_EQ(f.slabs.slab_count(), 0u);
  f.fast[kClass1K] = f.slabs.carve_fresh(kClass1K, f.cache);
  ASSERT_NE(f.fast[kClass1K], nullptr);
  EXPECT_EQ(f.slabs.slab_count(), 1u);
  std::vector<uintptr_t> got;
  while (void* p = f.pop(kClass1K)) got.push_back(reinterpret_cast<uintptr_t>(p));
  // The class's first carve: a small page's worth.
  ASSERT_EQ(got.size(), kInfo1K.first_carve);
  ASSERT_EQ(got.size() * kInfo1K.size, config::kCarveBytes);
  ChunkMeta* m = pagemap::lookup(reinterpret_cast<void*>(got[0]));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->owner, &kOwner);
  EXPECT_EQ(kind_of(m), ChunkKind::kSlab);
  EXPECT_EQ(m->sizeclass, kClass1K);
  // In address order from the slab's start, one object size apart.
  for (size_t i = 0; i < got.size(); i++) {
    EXPECT_EQ(got[i], m->base + i * kInfo1K.size);
    EXPECT_EQ(pagemap::lookup(reinterpret_cast<void*>(got[i])), m);
    EXPECT_TRUE(slab::is_object_start(m, reinterpret_cast<void*>(got[i])));
  }
  EXPECT_FALSE(slab::is_object_start(m, reinterpret_cast<void*>(got[0] + 16)));
  for (uintptr_t p : got) f.free(reinterpret_cast<void*>(p));
}

TEST(SizeClassSlabs, AClassCarvesAPageFirstAndDoublesUpToItsBatch) {
  Fixture f;
  ASSERT_LT(kInfo1K.first_carve, kInfo1K.carve);
  // Carve after carve (the fast list emptied between them): a page's worth,
  // as many again, then doubling, then the class's batch, slab after slab.
  std::vector<uint32_t> sizes;
  std::vector<void*> out;
  for (int k = 0; k < 12; k++) {
    FreeObject* list = f.slabs.carve_fresh(kClass1K, f.cache);
    ASSERT_NE(list, nullptr);
    sizes.push_back(Fixture::length(list));
    for (; list != nullptr; list = freelist::next(list)) out.push_back(list);
  }
  uint32_t expected = kInfo1K.first_carve, carved = 0;
  for (size_t k = 0; k < sizes.size(); k++) {
    EXPECT_EQ(sizes[k], expected) << k;
    carved += sizes[k];
    expected = std::min(std::max(carved, kInfo1K.first_carve), kInfo1K.carve);
  }
  EXPECT_EQ(sizes.back(), kInfo1K.carve);
  EXPECT_GT(f.slabs.slab_count(kClass1K), 1u);  // the batch holds across slabs
  for (void* p : out) f.free(p);
}

// malloc, free, malloc, free...: the objects come back through the active
// slab, so its tail is never reached by an empty active slab; the class's
// refills still grow to its batch (not a page's worth each, for as long
// as it cycles).
TEST(SizeClassSlabs, AClassCyclingAFewObjectsRampsUpToItsBatchAllTheSame) {
  Fixture f;
  ASSERT_LT(kInfo1K.first_carve * 4, kInfo1K.carve);
  constexpr uint32_t kCycles = 2000;
  uint32_t refills = 0;
  for (uint32_t i = 0; i < kCycles; i++) {
    if (f.fast[kClass1K] == nullptr) refills++;
    void* p = f.alloc(kClass1K);
    ASSERT_NE(p, nullptr);
    f.free(p);
  }
  EXPECT_LE(refills, kCycles / kInfo1K.carve + 8);
  EXPECT_EQ(f.slabs.slab_count(), 1u);
}

TEST(SizeClassSlabs, FreedObjectsComeBackThroughTheActiveSlab) {
  Fixture f;
  std::set<void*> first;
  for (uint32_t i = 0; i < kInfo1K.carve; i++) first.insert(f.alloc(kClass1K));
  ASSERT_EQ(first.size(), kInfo1K.carve);
  EXPECT_EQ(f.pop(kClass1K), nullptr);
  EXPECT_EQ(f.slabs.take_from_active(kClass1K), nullptr);  // nothing freed yet
  for (void* p : first) f.free(p);
  f.fast[kClass1K] = f.slabs.take_from_active(kClass1K);
  ASSERT_NE(f.fast[kClass1K], nullptr);
  std::set<void*> second;
  while (void* p = f.pop(kClass1K)) second.insert(p);
  EXPECT_EQ(second, first);
  EXPECT_EQ(f.slabs.slab_count(), 1u);
  for (void* p : second) f.free(p);
}

TEST(SizeClassSlabs, AnEmptiedSlabIsTheClassSpareAndServesBeforeFreshPages) {
  ScopedOption reserve(options::kSlabReserveBytes, 512 << 10);
  Fixture f;
  // Slab A, filled; then the class moves on to slab B.
  std::vector<void*> a;
  for (uint32_t i = 0; i < kInfo1K.capacity; i++) a.push_back(f.alloc(kClass1K));
  void* b_first = f.alloc(kClass1K);
  ASSERT_NE(b_first, nullptr);
  ChunkMeta* slab_a = pagemap::lookup(a[0]);
  ASSERT_NE(pagemap::lookup(b_first), slab_a);
  EXPECT_EQ(f.slabs.slab_count(), 2u);
  // A empties: kept as the class's spare, not released.
  for (void* p : a) f.free(p);
  EXPECT_EQ(f.slabs.slab_count(), 2u);
  EXPECT_EQ(slab_a->owner, &kOwner);
  // B's fast list runs dry; B's tail is untouched, so the spare comes
  // first, and its objects are A's.
  std::vector<void*> b{b_first};
  while (void* p = f.pop(kClass1K)) b.push_back(p);
  void* next = f.alloc(kClass1K);
  EXPECT_EQ(pagemap::lookup(next), slab_a);
  f.free(next);
  for (void* p : b) f.free(p);
}

TEST(SizeClassSlabs, WithoutAReserveAnEmptiedSlabGoesBackToTheCache) {
  ScopedOption reserve(options::kSlabReserveBytes, 0);
  ScopedOption no_purge(options::kPurgeDelayMs, 3600 * 1000);  // released stays dirty
  Fixture f;
  std::vector<void*> a;
  for (uint32_t i = 0; i < kInfo1K.capacity; i++) a.push_back(f.alloc(kClass1K));
  void* b_first = f.alloc(kClass1K);
  ChunkMeta* slab_a = pagemap::lookup(a[0]);
  EXPECT_EQ(f.slabs.slab_count(), 2u);
  size_t dirty_before = chunks::dirty_bytes();
  for (void* p : a) f.free(p);
  EXPECT_EQ(f.slabs.slab_count(), 1u);
  // Unmapped, and its written pages released (the reserve keeps nothing).
  EXPECT_NE(pagemap::lookup(a[0]), slab_a);
  EXPECT_GE(chunks::dirty_bytes(), dirty_before + kInfo1K.capacity * kInfo1K.size / 2);
  f.free(b_first);
}

// The allocator's next thread carries on where release_unused left the
// class (thread exit): the active slab with free objects, fewer than would
// wake it, is on the available list, and they come before any new slab.
TEST(SizeClassSlabs, ReleaseUnusedLeavesASlabWithFreeObjectsAvailable) {
  Fixture f;
  std::vector<void*> out = f.first_carve(kClass1K);
  ChunkMeta* m = pagemap::lookup(out[0]);
  ASSERT_GT(slab::wake_count(m), 1u);
  f.free(out.back());  // one free object: too few to wake a sleeping slab
  out.pop_back();
  EXPECT_FALSE(f.slabs.release_unused(f.fast, f.cache));
  EXPECT_FALSE(slab::is_asleep(m));
  EXPECT_EQ(slab::free_objects(m), 1u);
  void* again = f.alloc(kClass1K);
  EXPECT_EQ(pagemap::lookup(again), m);
  EXPECT_EQ(f.slabs.slab_count(), 1u);
  // Every object back: empty, it goes at the next call.
  f.free(again);
  for (void* p : out) f.free(p);
  EXPECT_TRUE(f.slabs.release_unused(f.fast, f.cache));
  EXPECT_EQ(f.slabs.slab_count(), 0u);
}

// An active slab whose carved objects are all out, with a tail to carve,
// stays active through release_unused: the next refill carves its tail
// instead of starting a slab.  Filled to the end, it sleeps until objects
// come back.
TEST(SizeClassSlabs, ReleaseUnusedKeepsCarvingASlabWithItsObjectsAllOut) {
  Fixture f;
  std::vector<void*> out = f.first_carve(kClass1K);
  ChunkMeta* m = pagemap::lookup(out[0]);
  EXPECT_FALSE(f.slabs.release_unused(f.fast, f.cache));
  EXPECT_TRUE(slab::is_active(m));
  while (out.size() < kInfo1K.capacity) {
    out.push_back(f.alloc(kClass1K));
    ASSERT_EQ(pagemap::lookup(out.back()), m) << "object " << out.size() - 1;
    f.slabs.release_unused(f.fast, f.cache);  // a thread exit after every object
  }
  EXPECT_EQ(f.slabs.slab_count(), 1u);
  EXPECT_TRUE(slab::is_asleep(m));  // filled: nothing to carve, nothing free
  // Objects come back to it: it wakes and serves before a new slab.
  for (uint32_t i = 0; i < slab::wake_count(m); i++) f.free(out[i]);
  EXPECT_FALSE(slab::is_asleep(m));
  void* p = f.alloc(kClass1K);
  EXPECT_EQ(pagemap::lookup(p), m);
  f.free(p);
  for (uint32_t i = slab::wake_count(m); i < out.size(); i++) f.free(out[i]);
}

TEST(SizeClassSlabs, ReleaseUnusedLetsGoOfEverySlabWithNothingOut) {
  ScopedOption reserve(options::kSlabReserveBytes, 512 << 10);
  Fixture f;
  // A class whose objects all came back: its slab has nothing out.
  std::vector<void*> spent;
  for (int i = 0; i < 10; i++) spent.push_back(f.alloc(3));
  for (void* p : spent) f.free(p);
  std::vector<void*> held;
  for (unsigned sc : {0u, 5u, kClass1K}) {
    for (int i = 0; i < 200; i++) {
      void* p = f.alloc(sc);
      ASSERT_NE(p, nullptr);
      if (i % 50 == 0)
        held.push_back(p);
      else
        f.free(p);
    }
  }
  EXPECT_GE(f.slabs.slab_count(), 4u);
  // Counted by class (statistics): one slab for each class used.
  uint64_t by_class = 0;
  for (unsigned sc = 0; sc < sizeclass::kCount; sc++) {
    bool used = sc == 0 || sc == 3 || sc == 5 || sc == kClass1K;
    EXPECT_EQ(f.slabs.slab_count(sc), used ? 1u : 0u) << "class " << sc;
    by_class += f.slabs.slab_count(sc);
  }
  EXPECT_EQ(by_class, f.slabs.slab_count());
  // Slabs with an object out stay; the others go, fast lists included.
  EXPECT_TRUE(f.slabs.release_unused(f.fast, f.cache));
  std::set<ChunkMeta*> holding;
  for (void* p : held) holding.insert(pagemap::lookup(p));
  EXPECT_EQ(f.slabs.slab_count(), holding.size());
  EXPECT_EQ(f.slabs.slab_count(3), 0u);
  EXPECT_EQ(f.slabs.slab_count(kClass1K), 1u);
  for (void* p : held) f.free(p);
  f.slabs.release_unused(f.fast, f.cache);
  EXPECT_EQ(f.slabs.slab_count(), 0u);
  for (unsigned sc = 0; sc < sizeclass::kCount; sc++) EXPECT_EQ(f.slabs.slab_count(sc), 0u);
  for (void* p : held) EXPECT_EQ(pagemap::lookup(p), nullptr);
}

TEST(SizeClassSlabs, AGivenUpSlabIsTheAdoptersWithItsFreeObjectsAndItsState) {
  const int kAdopter = 0;
  Fixture giver;
  // Three slabs' worth, all out: the first two asleep, the third active.
  std::vector<void*> objects;
  for (uint32_t i = 0; i < 3 * kInfo1K.capacity; i++) objects.push_back(giver.alloc(kClass1K));
  ChunkMeta* first = pagemap::lookup(objects[0]);
  ChunkMeta* second = pagemap::lookup(objects[kInfo1K.capacity]);
  ASSERT_NE(first, second);
  // Half of the first comes back (it wakes: available, with free objects).
  std::vector<void*> in_first(objects.begin(), objects.begin() + kInfo1K.capacity);
  std::vector<void*> out_first;
  for (uint32_t i = 0; i < kInfo1K.capacity; i++) {
    if (i % 2 == 0)
      giver.free(in_first[i]);
    else
      out_first.push_back(in_first[i]);
  }
  EXPECT_EQ(first->state, SlabState::kAvailable);
  EXPECT_EQ(second->state, SlabState::kSleeping);
  EXPECT_NE(giver.slabs.offered_classes() & (uint64_t{1} << kClass1K), 0u);
  EXPECT_EQ(giver.slabs.offered_classes() & (uint64_t{1} << sizeclass::from_size(64)), 0u);

  // The available slab is the one given for a refill: its owner, counts and
  // free objects go with it.
  Fixture adopter(&kAdopter);
  EXPECT_EQ(giver.slabs.give_up(kClass1K, &kAdopter, giver.cache), first);
  EXPECT_EQ(ownership::owner(first), &kAdopter);
  EXPECT_EQ(giver.slabs.slab_count(kClass1K), 2u);
  EXPECT_EQ(giver.slabs.bytes_held(), 2 * sizeclass::slab_size(kClass1K));
  adopter.fast[kClass1K] = adopter.slabs.adopt(first, adopter.cache);
  EXPECT_EQ(adopter.slabs.last_list_length(), (kInfo1K.capacity + 1) / 2);
  EXPECT_EQ(Fixture::length(adopter.fast[kClass1K]), (kInfo1K.capacity + 1) / 2);
  EXPECT_EQ(adopter.slabs.slab_count(kClass1K), 1u);
  EXPECT_EQ(adopter.slabs.bytes_held(), sizeclass::slab_size(kClass1K));
  EXPECT_TRUE(slab::is_active(first));
  std::set<void*> got;
  while (void* p = adopter.pop(kClass1K)) got.insert(p);
  std::set<void*> freed_by_giver;
  for (uint32_t i = 0; i < kInfo1K.capacity; i += 2) freed_by_giver.insert(in_first[i]);
  EXPECT_EQ(got, freed_by_giver);
  for (void* p : got) EXPECT_EQ(pagemap::lookup(p), first);

  // A sleeping slab given up keeps its state: the adopter's frees wake it
  // onto the adopter's available list.
  giver.slabs.give_up(second, &kAdopter, giver.cache);
  EXPECT_EQ(ownership::owner(second), &kAdopter);
  adopter.slabs.adopt_as_is(second, adopter.cache);
  EXPECT_EQ(second->state, SlabState::kSleeping);
  EXPECT_EQ(adopter.slabs.slab_count(kClass1K), 2u);
  EXPECT_EQ(giver.slabs.slab_count(kClass1K), 1u);
  uint32_t wake = slab::wake_count(second);
  for (uint32_t i = 0; i < wake; i++) adopter.free(objects[kInfo1K.capacity + i]);
  EXPECT_EQ(second->state, SlabState::kAvailable);
  for (uint32_t i = wake; i < kInfo1K.capacity; i++) adopter.free(objects[kInfo1K.capacity + i]);

  // Everything else back to its owner now.
  for (void* p : got) adopter.free(p);
  for (void* p : out_first) adopter.free(p);
  for (uint32_t i = 2 * kInfo1K.capacity; i < 3 * kInfo1K.capacity; i++) giver.free(objects[i]);
  adopter.slabs.release_unused(adopter.fast, adopter.cache);
  giver.slabs.release_unused(giver.fast, giver.cache);
  EXPECT_EQ(adopter.slabs.slab_count(), 0u);
  EXPECT_EQ(giver.slabs.slab_count(), 0u);
}

namespace {

// Small pages of chunk `m` that are resident.
long resident_pages(const ChunkMeta* m) {
  return test::resident_small_pages(reinterpret_cast<void*>(m->base), size_t{1} << m->order);
}

// A slab of class `sc` carved to the end and written all over, emptied and
// let go: its chunk waits in the cache, all of it resident (the most
// recently cached chunk: the next one a class takes).  Returns it.
ChunkMeta* leave_resident_chunk(Fixture& f, unsigned sc) {
  const sizeclass::ClassInfo& info = sizeclass::kInfo.info[sc];
  std::vector<void*> out;
  for (uint32_t i = 0; i < info.capacity; i++) {
    out.push_back(f.alloc(sc));
    memset(out.back(), 0x5a, info.size);
  }
  ChunkMeta* m = pagemap::lookup(out[0]);
  EXPECT_TRUE(slab::fully_carved(m));
  for (void* p : out) f.free(p);
  EXPECT_TRUE(f.slabs.release_unused(f.fast, f.cache));
  EXPECT_EQ(kind_of(m), ChunkKind::kCached);
  EXPECT_EQ(resident_pages(m), long(sizeclass::slab_size(sc) / config::kMinPageSize));
  return m;
}

constexpr unsigned kClass16 = sizeclass::from_size(16);
const sizeclass::ClassInfo& kInfo16 = sizeclass::kInfo.info[kClass16];
constexpr size_t kPages = sizeclass::slab_size(kClass16) / config::kMinPageSize;

// The pages a class starting over keeps of a resident chunk: its first
// kResidentCarves carves.
size_t pages_kept(const sizeclass::ClassInfo& info) {
  return (config::kResidentCarves * info.carve * info.size + config::kMinPageSize - 1) /
         config::kMinPageSize;
}

}  // namespace

// A class new to the allocator takes the chunk a 1 KiB class filled, and
// keeps resident only what its first carves use: a 16-byte class's slab
// does not hold 64 KiB resident for the few pages it carves.
TEST(SizeClassSlabs, AClassStartingOverKeepsResidentOnlyWhatItsFirstCarvesUse) {
  if (!test::small_os_pages()) GTEST_SKIP() << "pages of " << os::page_size() << " bytes";
  ScopedOption reserve(options::kSlabReserveBytes, 512 << 10);
  Fixture f;
  ChunkMeta* chunk = leave_resident_chunk(f, kClass1K);
  void* p = f.alloc(kClass16);
  ASSERT_EQ(pagemap::lookup(p), chunk);  // the resident chunk, reused
  ASSERT_LT(pages_kept(kInfo16) * config::kMinPageSize + config::kMinResidentExcess,
            sizeclass::slab_size(kClass16));
  EXPECT_EQ(resident_pages(chunk), long(pages_kept(kInfo16)));
  EXPECT_EQ(chunk->touched_pages, pages_kept(kInfo16));
  f.free(p);
}

// A class that carved its active slab to the end is busy: the next slab it
// starts on a resident chunk keeps the chunk whole.
TEST(SizeClassSlabs, AClassThatCarvedItsSlabToTheEndKeepsTheNextOneResident) {
  if (!test::small_os_pages()) GTEST_SKIP() << "pages of " << os::page_size() << " bytes";
  // No reserve: an emptied slab goes straight back to the backend, resident.
  ScopedOption reserve(options::kSlabReserveBytes, 0);
  Fixture f;
  std::vector<void*> out;
  for (uint32_t i = 0; i < kInfo16.capacity; i++) out.push_back(f.alloc(kClass16));
  ASSERT_TRUE(slab::fully_carved(pagemap::lookup(out[0])));
  // A 1 KiB slab written to the end, left for another, emptied.
  std::vector<void*> big;
  for (uint32_t i = 0; i < kInfo1K.capacity; i++) {
    big.push_back(f.alloc(kClass1K));
    memset(big.back(), 0x5a, kInfo1K.size);
  }
  ChunkMeta* chunk = pagemap::lookup(big[0]);
  void* next = f.alloc(kClass1K);
  ASSERT_NE(pagemap::lookup(next), chunk);
  for (void* p : big) f.free(p);
  ASSERT_EQ(kind_of(chunk), ChunkKind::kDirty);  // released to the backend, resident
  ASSERT_EQ(resident_pages(chunk), long{kPages});
  out.push_back(f.alloc(kClass16));
  ASSERT_EQ(pagemap::lookup(out.back()), chunk);
  EXPECT_EQ(resident_pages(chunk), long{kPages});
  EXPECT_EQ(chunk->touched_pages, kPages);
  for (void* p : out) f.free(p);
  f.free(next);
}

// A class whose last slab carved further than its first carves keeps as
// much of the next one it starts over on.
TEST(SizeClassSlabs, AClassStartingOverKeepsAsMuchAsItsLastSlabCarved) {
  if (!test::small_os_pages()) GTEST_SKIP() << "pages of " << os::page_size() << " bytes";
  ScopedOption reserve(options::kSlabReserveBytes, 512 << 10);
  Fixture f;
  // 8 pages carved, then everything freed and let go.
  constexpr size_t kCarvedPages = 8;
  ASSERT_GT(kCarvedPages, pages_kept(kInfo16));
  std::vector<void*> out;
  while (out.size() * kInfo16.size < kCarvedPages * config::kMinPageSize)
    out.push_back(f.alloc(kClass16));
  ChunkMeta* first = pagemap::lookup(out[0]);
  EXPECT_EQ(size_t{first->carved} * kInfo16.size, kCarvedPages * config::kMinPageSize);
  for (void* p : out) f.free(p);
  EXPECT_TRUE(f.slabs.release_unused(f.fast, f.cache));
  ChunkMeta* chunk = leave_resident_chunk(f, kClass1K);
  void* p = f.alloc(kClass16);
  ASSERT_EQ(pagemap::lookup(p), chunk);
  EXPECT_EQ(resident_pages(chunk), long{kCarvedPages});
  f.free(p);
}

// A class of big objects (a slab of several granules, a few objects)
// starting over uses what it starts on whole: each object takes pages of
// its own.
TEST(SizeClassSlabs, AClassOfBigObjectsStartingOverKeepsItsChunkResident) {
  if (!test::small_os_pages()) GTEST_SKIP() << "pages of " << os::page_size() << " bytes";
  ScopedOption reserve(options::kSlabReserveBytes, 2 << 20);
  Fixture f;
  constexpr unsigned kClass16K = sizeclass::from_size(16 << 10);
  constexpr unsigned kClass12K = sizeclass::from_size(12 << 10);
  const sizeclass::ClassInfo& info12k = sizeclass::kInfo.info[kClass12K];
  ASSERT_GT(info12k.slab_bits, config::kTargetSlabBits);
  ASSERT_EQ(sizeclass::kInfo.info[kClass16K].slab_bits, info12k.slab_bits);
  ASSERT_LT(pages_kept(info12k) * config::kMinPageSize + config::kMinResidentExcess,
            sizeclass::slab_size(kClass12K));
  // Left resident by the 16 KiB class; taken by the 12 KiB one, new here.
  ChunkMeta* chunk = leave_resident_chunk(f, kClass16K);
  void* p = f.alloc(kClass12K);
  ASSERT_EQ(pagemap::lookup(p), chunk);
  EXPECT_EQ(resident_pages(chunk), long(sizeclass::slab_size(kClass12K) / config::kMinPageSize));
  f.free(p);
}
