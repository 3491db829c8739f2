// The checks of frontend/checks.h on a real slab's record: messages and
// batches that do not fit their slab, the free mark's double free (and the
// live object it must not report), a free list whose head is its own
// successor or an object freed while it is the head, sized frees of the
// wrong size.  Each fault is a death with
// its diagnostic's text.  (The suite is not named *DeathTest: gtest would
// run it first, and its released slab would be the chunk that the chunk
// allocator's tests expect fresh.)
#include "frontend/checks.h"

#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <string>

#include "backend/chunk_allocator.h"
#include "frontend/pointer.h"
#include "frontend/slab.h"

using namespace roost;

namespace {

const int kOwner = 0;
constexpr unsigned kClass48 = sizeclass::from_size(48);

// A slab of class `sc` (48-byte objects unless said), every object carved
// (out), mapped in the pagemap; retired and released at the end.
struct CarvedSlab {
  explicit CarvedSlab(unsigned sc = kClass48) {
    EXPECT_TRUE(pagemap::init());
    m = chunks::alloc(sizeclass::kInfo.info[sc].slab_bits);
    EXPECT_NE(m, nullptr);
    slab::start(m, sc, &kOwner, false);
    while (!slab::fully_carved(m)) slab::carve(m, nullptr);
  }
  ~CarvedSlab() {
    slab::retire(m);
    chunks::release(m, dirty_extent(m));
  }
  FreeObject* object(size_t i) const {
    return reinterpret_cast<FreeObject*>(m->base + i * m->obj_size);
  }
  ChunkMeta* m;
};

std::string hex(const void* p) {
  char buf[32];
  snprintf(buf, sizeof(buf), "0x%" PRIxPTR, reinterpret_cast<uintptr_t>(p));
  return buf;
}

}  // namespace

// The queue node of a message whose tail is at `tail` (its link word), as a
// message link holds it.
const void* node(const void* tail) {
  return slab_batch::node_of(static_cast<FreeObject*>(const_cast<void*>(tail)));
}

TEST(Checks, AMessageOutsideEverySlabIsCorrupted) {
  alignas(16) static char not_a_slab[64];
  EXPECT_DEATH(checks::message(nullptr, node(not_a_slab)),
               "receiving a message: corrupted message 0x");
}

TEST(Checks, AMessageInsideAnObjectIsCorrupted) {
  CarvedSlab s;
  checks::message(s.m, node(s.object(3)));  // an object start: fine
  EXPECT_DEATH(checks::message(s.m, node(reinterpret_cast<char*>(s.object(3)) + 16)),
               "corrupted message 0x[0-9a-f]+ \\(size class 48 bytes\\)");
}

TEST(Checks, AMessageLinkMustLeadToAnObjectStartAndNameItsHolder) {
  CarvedSlab s;
  checks::message_link(node(s.object(2)), node(s.object(3)));  // an object start: fine
  checks::message_link(nullptr, node(s.object(3)));
  auto* inside = reinterpret_cast<char*>(s.object(3)) + 16;
  EXPECT_DEATH(checks::message_link(node(s.object(2)), node(inside)),
               "receiving a message: corrupted message " + hex(s.object(2)) + " \\(size class 48");
  alignas(16) static char not_a_slab[64];
  EXPECT_DEATH(checks::message_link(node(s.object(2)), node(not_a_slab)),
               "corrupted message " + hex(s.object(2)));
  EXPECT_DEATH(checks::message_link(nullptr, node(inside)), "corrupted message " + hex(inside));
}

TEST(Checks, ABatchMustHoldOneToCapacityObjectsOfItsSlab) {
  CarvedSlab s;
  uint32_t capacity = sizeclass::kInfo.info[kClass48].capacity;
  checks::batch(s.m, slab_batch::Batch{s.object(0), s.object(1), 2});
  checks::batch(s.m, slab_batch::Batch{s.object(5), s.object(5), capacity});
  EXPECT_DEATH(checks::batch(s.m, slab_batch::Batch{s.object(0), s.object(1), 0}),
               "corrupted message");
  EXPECT_DEATH(checks::batch(s.m, slab_batch::Batch{s.object(0), s.object(1), capacity + 1}),
               "corrupted message");
  auto* outside = reinterpret_cast<FreeObject*>(s.m->base + sizeclass::slab_size(kClass48));
  EXPECT_DEATH(checks::batch(s.m, slab_batch::Batch{outside, s.object(1), 2}), "corrupted message");
  auto* inside = reinterpret_cast<FreeObject*>(reinterpret_cast<char*>(s.object(2)) + 8);
  EXPECT_DEATH(checks::batch(s.m, slab_batch::Batch{inside, s.object(1), 2}), "corrupted message");
}

// The default build's free mark: a marked object whose link word reads as
// a link (null, an object start, a message's queue link) is a double
// free; one whose link word cannot be a link is a live object whose first
// word the program set to the mark, freed as any (its mark wiped, then set
// again by its free).
TEST(Checks, AMarkedObjectIsADoubleFreeOnlyWhenItsLinkReadsAsALink) {
  if (!config::kMarkUnchecked) GTEST_SKIP() << "the default build's mark";
  CarvedSlab s;
  FreeObject* o = s.object(4);
  free_mark::set(o, s.m);
  EXPECT_FALSE(checks::mark_freed(s.m, o, "free"));
  for (uintptr_t link : {uintptr_t{0}, reinterpret_cast<uintptr_t>(s.object(7)),
                         reinterpret_cast<uintptr_t>(slab_batch::node_of(s.object(7)))}) {
    freelist::set_next(o, reinterpret_cast<FreeObject*>(link));
    EXPECT_DEATH(checks::marked_twice(s.m, o, "free"),
                 "roost: free: double free " + hex(o) + " \\(size class 48 bytes\\)");
  }
  freelist::set_next(o, reinterpret_cast<FreeObject*>(uintptr_t{0x636261}));  // "abc"
  checks::marked_twice(s.m, o, "free");
  EXPECT_FALSE(free_mark::is_set(o, s.m));
  EXPECT_TRUE(checks::mark_freed(s.m, o, "free"));
  EXPECT_TRUE(free_mark::is_set(o, s.m));
}

// A 16-byte message's tail keeps its batch word where its mark was: found
// marked when received, it was freed again on its way.
TEST(Checks, ASixteenByteTailMarkedInFlightIsADoubleFree) {
  if (!config::kMarkUnchecked) GTEST_SKIP() << "the default build's mark";
  CarvedSlab s(sizeclass::from_size(16));
  FreeObject* tail = s.object(5);
  QueueNode* node = slab_batch::seal(tail, tail, 1, 16);
  checks::batch_word_intact(s.m, node);  // sealed: its batch word, odd
  free_mark::set(tail, s.m);             // a second free's mark
  EXPECT_DEATH(checks::batch_word_intact(s.m, node),
               "roost: receiving a message: double free " + hex(tail));
}

TEST(Checks, AnObjectFreedTwiceInARowIsFoundWhenItsSlabsListIsTaken) {
  CarvedSlab s;
  slab::return_object(s.m, s.object(7));
  slab::return_object(s.m, s.object(9));
  FreeObject* list = slab::take_free(s.m);  // no double free: fine
  ASSERT_NE(list, nullptr);
  slab::return_object(s.m, s.object(7));
  slab::return_object(s.m, s.object(7));
  EXPECT_DEATH(slab::take_free(s.m), "allocation: double free 0x[0-9a-f]+ \\(size class 48");
}

TEST(Checks, AFreeOfItsSlabsFreeListHeadIsADoubleFree) {
  CarvedSlab s;
  checks::not_free_list_head(s.m, s.object(7));  // nothing free yet: fine
  slab::return_object(s.m, s.object(7));
  checks::not_free_list_head(s.m, s.object(9));  // another object: fine
  slab::return_object(s.m, s.object(9));
  checks::not_free_list_head(s.m, s.object(7));  // free, but not the head: not seen
  EXPECT_DEATH(checks::not_free_list_head(s.m, s.object(9)),
               "free: double free 0x[0-9a-f]+ \\(size class 48");
}

TEST(Checks, SizedFreesMustNameTheObjectsSize) {
  CarvedSlab s;
  pointer::check_sized_free(s.object(1), 48, 0, "free_sized");
  pointer::check_sized_free(s.object(1), 33, 0, "free_sized");  // the same class
  pointer::check_sized_free(s.object(1), 48, 16, "free_aligned_sized");
  EXPECT_DEATH(pointer::check_sized_free(s.object(1), 4096, 0, "free_sized"),
               "free_sized: size mismatch 0x[0-9a-f]+ \\(size class 48 bytes\\)");
  EXPECT_DEATH(pointer::check_sized_free(s.object(1), 16, 0, "free_sized"), "size mismatch");
  EXPECT_DEATH(pointer::check_sized_free(s.object(1), 48, 64, "free_aligned_sized"),
               "size mismatch");
}
