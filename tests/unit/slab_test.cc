// One slab's record (frontend/slab.h): starting a slab on a chunk, carving
// its tail a step at a time (resident pages known), the object-start test,
// objects and batches returned with the counts that decide its state
// changes (none while it is active), taking its free list, leaving the
// active state, waking, and retiring it.
#include "frontend/slab.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <vector>

#include "backend/chunk_allocator.h"
#include "platform/os.h"
#include "resident.h"

using namespace roost;

namespace {

const int kOwner = 0;

// A slab of class `sc` on a chunk from the backend, whose first
// `resident_pages` pages count as written by an earlier use (and are, when
// `written`); retired and released when the test ends.  `keep_resident`:
// slab::start's.
struct TestSlab {
  TestSlab(unsigned sc, uint32_t resident_pages = 0, size_t keep_resident = slab::kKeepResident,
           bool written = false) {
    EXPECT_TRUE(pagemap::init());
    // Memory that reads as zero: what earlier tests released is purged
    // first, so the extent set below is the chunk's whole written part.
    chunks::purge_all();
    m = chunks::alloc(sizeclass::kInfo.info[sc].slab_bits);
    EXPECT_EQ(m->dirty_pages, 0u);
    EXPECT_NE(m, nullptr);
    m->dirty_pages = resident_pages;
    if (written)
      memset(reinterpret_cast<void*>(m->base), 0xa5,
             size_t{resident_pages} << config::kMinPageBits);
    slab::start(m, sc, &kOwner, keep_resident);
  }
  ~TestSlab() {
    slab::retire(m);
    chunks::release(m, dirty_extent(m));
  }
  void* object(size_t i) const { return reinterpret_cast<void*>(m->base + i * m->obj_size); }
  // Carves the whole slab: every object is out.
  std::vector<void*> carve_all();
  ChunkMeta* m;
};

std::vector<void*> list_of(FreeObject* head) {
  std::vector<void*> v;
  for (FreeObject* o = head; o != nullptr; o = freelist::next(o)) v.push_back(o);
  return v;
}

std::vector<void*> TestSlab::carve_all() {
  FreeObject* out = nullptr;
  while (!slab::fully_carved(m)) out = slab::carve(m, out);
  return list_of(out);
}

constexpr unsigned kClass48 = sizeclass::from_size(48);

}  // namespace

TEST(Slab, StartMakesAnEmptyActiveSlabMappedToItsRecord) {
  TestSlab s(kClass48);
  const sizeclass::ClassInfo& info = sizeclass::kInfo.info[kClass48];
  EXPECT_EQ(s.m->owner, &kOwner);
  EXPECT_EQ(kind_of(s.m), ChunkKind::kSlab);
  EXPECT_EQ(s.m->sizeclass, kClass48);
  EXPECT_EQ(s.m->obj_size, 48u);
  EXPECT_EQ(s.m->inverse, info.inverse);
  EXPECT_EQ(s.m->carved, 0u);
  EXPECT_EQ(s.m->free_head, nullptr);
  EXPECT_TRUE(slab::is_active(s.m));
  EXPECT_EQ(s.m->needed, slab::kActiveHold);
  EXPECT_FALSE(slab::fully_carved(s.m));
  for (size_t off = 0; off < sizeclass::slab_size(kClass48); off += config::kGranule)
    EXPECT_EQ(pagemap::lookup(reinterpret_cast<void*>(s.m->base + off)), s.m);
}

TEST(Slab, ObjectStartsAreExactForEveryClassSize) {
  for (unsigned sc : {sizeclass::from_size(32), kClass48, sizeclass::from_size(80),
                      sizeclass::from_size(1280), sizeclass::from_size(20000)}) {
    TestSlab s(sc);
    size_t size = sizeclass::kInfo.info[sc].size;
    uint32_t capacity = sizeclass::kInfo.info[sc].capacity;
    for (uint32_t i = 0; i < capacity; i += 1 + capacity / 64) {
      uintptr_t p = s.m->base + i * size;
      EXPECT_TRUE(slab::is_object_start(s.m, reinterpret_cast<void*>(p))) << size << " #" << i;
      EXPECT_FALSE(slab::is_object_start(s.m, reinterpret_cast<void*>(p + 16))) << size;
      EXPECT_FALSE(slab::is_object_start(s.m, reinterpret_cast<void*>(p + size - 16))) << size;
    }
  }
}

TEST(Slab, CarvingHandsOutTheTailInAddressOrderAndTracksTouchedPages) {
  TestSlab s(kClass48);
  const sizeclass::ClassInfo& info = sizeclass::kInfo.info[kClass48];
  // A fresh chunk: the first carve reaches untouched pages.
  EXPECT_TRUE(slab::carve_touches_fresh(s.m));
  uint32_t count = slab::carve_count(s.m);
  EXPECT_EQ(count, info.carve);
  FreeObject sentinel{0};
  std::vector<void*> got = list_of(slab::carve(s.m, &sentinel));
  ASSERT_EQ(got.size(), count + 1u);
  EXPECT_EQ(got.back(), &sentinel);  // carved onto the list it was given
  for (uint32_t i = 0; i < count; i++) EXPECT_EQ(got[i], s.object(i));
  EXPECT_EQ(s.m->carved, count);
  EXPECT_EQ(s.m->touched_pages, (count * 48 + config::kMinPageSize - 1) / config::kMinPageSize);
  // Every carved object is out, counted above the active slab's hold.
  EXPECT_EQ(s.m->needed, slab::kActiveHold + static_cast<int32_t>(count));
  // Carving to the end.
  while (!slab::fully_carved(s.m)) slab::carve(s.m, nullptr);
  EXPECT_EQ(s.m->carved, info.capacity);
  EXPECT_EQ(s.m->needed, slab::kActiveHold + static_cast<int32_t>(info.capacity));
}

TEST(Slab, PagesAnEarlierUseLeftResidentAreCarvedWithoutTouchingFreshOnes) {
  TestSlab s(kClass48, 1);  // one resident page
  EXPECT_EQ(s.m->touched_pages, 1u);
  // 48-byte objects, 85 at a time (a page's worth): the first carve stays
  // within the resident page, the second does not.
  EXPECT_FALSE(slab::carve_touches_fresh(s.m));
  slab::carve(s.m, nullptr);
  EXPECT_EQ(s.m->touched_pages, 1u);
  EXPECT_TRUE(slab::carve_touches_fresh(s.m));
  slab::carve(s.m, nullptr);
  EXPECT_EQ(s.m->touched_pages, 2u);
}

constexpr unsigned kClass16 = sizeclass::from_size(16);
constexpr size_t kSlab16 = sizeclass::slab_size(kClass16);
constexpr uint32_t kPages16 = static_cast<uint32_t>(kSlab16 / config::kMinPageSize);

TEST(Slab, ResidentPagesPastWhatTheSlabKeepsGoBackToTheOs) {
  if (!test::small_os_pages()) GTEST_SKIP() << "pages of " << os::page_size() << " bytes";
  size_t page = os::page_size();
  // Asked to keep a few bytes over a page: two pages stay (whole pages of
  // the OS's), the rest goes and reads as zero.
  TestSlab s(kClass16, kPages16, page + 100, true);
  uint32_t kept = static_cast<uint32_t>(2 * page / config::kMinPageSize);
  EXPECT_EQ(test::resident_small_pages(reinterpret_cast<void*>(s.m->base), kSlab16), long{kept});
  const unsigned char* b = reinterpret_cast<const unsigned char*>(s.m->base);
  EXPECT_EQ(b[0], 0xa5);
  EXPECT_EQ(b[2 * page - 1], 0xa5);
  for (size_t i = 2 * page; i < kSlab16; i += 512) ASSERT_EQ(b[i], 0) << "byte " << i;
  EXPECT_EQ(s.m->touched_pages, kept);
  // Carving up to the kept pages touches nothing fresh; past them it does.
  while (!slab::carve_touches_fresh(s.m)) slab::carve(s.m, nullptr);
  EXPECT_LE(size_t{s.m->carved} * s.m->obj_size, 2 * page);
  slab::carve(s.m, nullptr);
  EXPECT_GT(s.m->touched_pages, kept);
}

TEST(Slab, ResidentPagesStayWhenTheExcessIsSmallOrAllAreKept) {
  if (!test::small_os_pages()) GTEST_SKIP() << "pages of " << os::page_size() << " bytes";
  size_t page = os::page_size();
  // An excess under kMinResidentExcess stays.
  uint32_t small =
      static_cast<uint32_t>((page + config::kMinResidentExcess) / config::kMinPageSize) - 1;
  if (small <= kPages16) {
    TestSlab s(kClass16, small, 1, true);
    EXPECT_EQ(s.m->touched_pages, small);
    EXPECT_EQ(test::resident_small_pages(reinterpret_cast<void*>(s.m->base),
                                         size_t{small} * config::kMinPageSize),
              long{small});
  }
  // kKeepResident, or a keep beyond the extent, keeps everything.
  for (size_t keep : {slab::kKeepResident, kSlab16}) {
    TestSlab s(kClass16, kPages16, keep, true);
    EXPECT_EQ(s.m->touched_pages, kPages16);
    EXPECT_EQ(test::resident_small_pages(reinterpret_cast<void*>(s.m->base), kSlab16),
              long{kPages16});
  }
}

TEST(Slab, ReturnsIntoTheActiveSlabBringNoStateChange) {
  TestSlab s(kClass48);
  std::vector<void*> objects = s.carve_all();
  // Every object back, most one at a time and the last ten in a batch: no
  // state change.
  size_t n = objects.size();
  for (size_t i = 0; i + 10 < n; i++) EXPECT_FALSE(slab::return_object(s.m, objects[i]));
  for (size_t i = n - 10; i + 1 < n; i++)
    freelist::set_next(static_cast<FreeObject*>(objects[i]),
                       static_cast<FreeObject*>(objects[i + 1]));
  slab_batch::Batch b = slab_batch::open(
      slab_batch::seal(static_cast<FreeObject*>(objects[n - 10]),
                       static_cast<FreeObject*>(objects[n - 1]), 10, s.m->obj_size),
      s.m->obj_size);
  EXPECT_FALSE(slab::return_batch(s.m, b));
  EXPECT_TRUE(slab::is_active(s.m));
  // Taking the free list hands out every object; it stays active with all
  // of them out.
  EXPECT_EQ(list_of(slab::take_free(s.m)).size(), objects.size());
  EXPECT_TRUE(slab::is_active(s.m));
  EXPECT_EQ(s.m->needed, slab::kActiveHold + static_cast<int32_t>(objects.size()));
}

TEST(Slab, LeavingTheActiveStateCountsTheFreesSinceTheLastTake) {
  const unsigned wake = sizeclass::kInfo.info[kClass48].wake;
  // Fewer than the wake count back: it sleeps, waiting for the rest.
  {
    TestSlab s(kClass48);
    std::vector<void*> objects = s.carve_all();
    for (uint32_t i = 0; i + 2 < wake; i++) slab::return_object(s.m, objects[i]);
    EXPECT_FALSE(slab::leave_active(s.m));
    EXPECT_TRUE(slab::is_asleep(s.m));
    EXPECT_FALSE(slab::return_object(s.m, objects[wake - 2]));
    EXPECT_TRUE(slab::return_object(s.m, objects[wake - 1]));
    EXPECT_EQ(slab::wake(s.m), objects.size() - wake);
  }
  // The wake count and more back: it must wake at once, with the rest out.
  {
    TestSlab s(kClass48);
    std::vector<void*> objects = s.carve_all();
    for (uint32_t i = 0; i < wake + 5; i++) slab::return_object(s.m, objects[i]);
    EXPECT_TRUE(slab::leave_active(s.m));
    EXPECT_EQ(slab::wake(s.m), objects.size() - wake - 5);
  }
  // Nothing carved (a slab that started over): empty at once.
  {
    TestSlab s(kClass48);
    EXPECT_TRUE(slab::leave_active(s.m));
    EXPECT_EQ(slab::wake(s.m), 0u);
  }
}

TEST(Slab, ReturnsCountDownToTheStateChanges) {
  TestSlab s(kClass48);
  std::vector<void*> objects = s.carve_all();
  EXPECT_FALSE(slab::leave_active(s.m));
  uint32_t wake = slab::wake_count(s.m);
  // Asleep: the wake count-th free reports the change, not before.
  for (uint32_t i = 0; i + 1 < wake; i++) EXPECT_FALSE(slab::return_object(s.m, objects[i]));
  EXPECT_TRUE(slab::return_object(s.m, objects[wake - 1]));
  EXPECT_EQ(slab::wake(s.m), objects.size() - wake);
  EXPECT_FALSE(slab::is_asleep(s.m));
  // Awake: the free that empties it reports the change.
  for (size_t i = wake; i + 1 < objects.size(); i++)
    EXPECT_FALSE(slab::return_object(s.m, objects[i]));
  EXPECT_TRUE(slab::return_object(s.m, objects.back()));
  // Its free list holds every object, the latest first.
  std::vector<void*> free_list = list_of(s.m->free_head);
  ASSERT_EQ(free_list.size(), objects.size());
  EXPECT_EQ(free_list.front(), objects.back());
  // Taking them makes it the active slab again, every object out.
  EXPECT_EQ(list_of(slab::take_free(s.m)).size(), objects.size());
  EXPECT_EQ(s.m->free_head, nullptr);
  EXPECT_TRUE(slab::is_active(s.m));
  EXPECT_EQ(s.m->needed, slab::kActiveHold + static_cast<int32_t>(objects.size()));
}

TEST(Slab, ABatchIsSplicedWholeAndItsSurplusCountsWhenTheSlabWakes) {
  TestSlab s(kClass48);
  std::vector<void*> objects = s.carve_all();
  EXPECT_FALSE(slab::leave_active(s.m));
  uint32_t wake = slab::wake_count(s.m);
  // One object freed alone, then a batch of wake + 9 objects linked
  // head -> tail: the batch brings the slab past its wake count.
  EXPECT_FALSE(slab::return_object(s.m, objects[0]));
  uint32_t n = wake + 9;
  for (uint32_t i = 1; i < n; i++)
    freelist::set_next(static_cast<FreeObject*>(objects[i]),
                       static_cast<FreeObject*>(objects[i + 1]));
  auto* head = static_cast<FreeObject*>(objects[1]);
  auto* tail = static_cast<FreeObject*>(objects[n]);
  slab_batch::Batch b =
      slab_batch::open(slab_batch::seal(head, tail, n, s.m->obj_size), s.m->obj_size);
  EXPECT_TRUE(slab::return_batch(s.m, b));
  EXPECT_EQ(slab::wake(s.m), objects.size() - 1 - n);
  // The batch, then the object freed alone, on the free list.
  std::vector<void*> free_list = list_of(s.m->free_head);
  ASSERT_EQ(free_list.size(), n + 1u);
  for (uint32_t i = 0; i < n; i++) EXPECT_EQ(free_list[i], objects[i + 1]);
  EXPECT_EQ(free_list[n], objects[0]);
}

TEST(Slab, RetiringUnmapsItAndRecordsTheTouchedExtent) {
  ChunkMeta* m;
  uintptr_t base;
  {
    TestSlab s(kClass48);
    slab::carve(s.m, nullptr);
    uint32_t touched = s.m->touched_pages;
    m = s.m;
    base = m->base;
    slab::retire(m);
    EXPECT_EQ(m->owner, nullptr);
    EXPECT_EQ(m->free_head, nullptr);
    EXPECT_EQ(m->dirty_pages, touched);
    EXPECT_EQ(pagemap::lookup(reinterpret_cast<void*>(base)), nullptr);
    slab::start(m, kClass48, &kOwner, slab::kKeepResident);  // the fixture retires it again
  }
  EXPECT_EQ(pagemap::lookup(reinterpret_cast<void*>(base)), nullptr);
}
