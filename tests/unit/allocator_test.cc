// Allocator (frontend/allocator.h), the composite, through allocators not
// bound to any thread: its rules between the components.  A class that
// runs dry takes objects freed elsewhere before fresh memory; local frees
// visit the inbox now and then; a thread that only frees others' objects
// takes its own back when it posts; release_unused gives every empty slab
// back.
#include "frontend/allocator.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <vector>

#include "backend/pagemap.h"
#include "remote_free.h"
#include "scoped_option.h"
#include "unbound_allocator.h"

using namespace roost;
using test::ScopedOption;

namespace {

constexpr unsigned kClass = sizeclass::from_size(256);
const sizeclass::ClassInfo& kInfo = sizeclass::kInfo.info[kClass];

std::unique_ptr<Allocator> make(uint32_t id) { return test::unbound_allocator(id); }

// The class's fast list emptied (test::take_fast_list).
std::vector<void*> drain_fast_list(Allocator& a) { return test::take_fast_list(a, kClass); }

void free_all_local(Allocator& a, const std::vector<void*>& objects) {
  for (void* p : objects) ASSERT_TRUE(a.try_free_local(pagemap::lookup(p), p));
}

}  // namespace

TEST(Allocator, EveryFastListSlotMapsBackToItsClass) {
  auto a = make(1);
  for (unsigned sc = 0; sc < sizeclass::kCount; sc++) EXPECT_EQ(a->class_of(a->fast_slot(sc)), sc);
}

TEST(Allocator, TheLocalFreeTakesOnlyItsOwnObjects) {
  auto owner = make(1);
  auto other = make(2);
  void* p = owner->alloc(kClass);
  ChunkMeta* m = pagemap::lookup(p);
  // Another allocator's object is left to the caller: nothing reaches the
  // slab.
  EXPECT_FALSE(other->try_free_local(m, p));
  EXPECT_EQ(slab::free_objects(m), 0u);
  if constexpr (config::kCheckedFree) {
    // So is an interior pointer, in the build that checks on the fast path.
    EXPECT_FALSE(owner->try_free_local(m, static_cast<char*>(p) + 16));
    EXPECT_EQ(slab::free_objects(m), 0u);
  }
  // The owner takes it back onto the slab (where statistics count local
  // frees): the next allocation of the class returns it.
  EXPECT_TRUE(owner->try_free_local(m, p));
  EXPECT_EQ(slab::free_objects(m), 1u);
  EXPECT_EQ(owner->list_balance(kClass), 0u);
  std::vector<void*> rest = drain_fast_list(*owner);
  void* again = owner->alloc(kClass);
  EXPECT_EQ(again, p);
  // Taken off the slab for the fast list: still one local free.
  EXPECT_EQ(slab::free_objects(m), 0u);
  EXPECT_EQ(owner->list_balance(kClass), 1u);
  free_all_local(*owner, rest);
  free_all_local(*owner, {again});
  owner->release_unused();
  EXPECT_EQ(owner->slab_count(), 0u);
}

TEST(Allocator, ARefillTakesObjectsFreedElsewhereBeforeFreshMemory) {
  auto owner = make(1);
  auto freer = make(2);
  std::vector<void*> sent;
  for (uint32_t i = 0; i < kInfo.carve; i++) sent.push_back(owner->alloc(kClass));
  std::vector<void*> rest = drain_fast_list(*owner);
  for (void* p : sent) test::free_remote(freer.get(), p);
  freer->settle();  // posted: waiting in the owner's inbox
  uint64_t slabs = owner->slab_count();
  // The class is dry: the refill visits the inbox first and hands the
  // objects that came home out again, on the same slab.
  std::set<void*> expected(sent.begin(), sent.end());
  std::vector<void*> again;
  for (size_t i = 0; i < sent.size(); i++) again.push_back(owner->alloc(kClass));
  EXPECT_EQ(std::set<void*>(again.begin(), again.end()), expected);
  EXPECT_EQ(owner->slab_count(), slabs);
  EXPECT_EQ(owner->message_counters().messages_received, sent.size());
  free_all_local(*owner, again);
  free_all_local(*owner, rest);
  owner->release_unused();
  EXPECT_EQ(owner->slab_count(), 0u);
}

TEST(Allocator, LocalFreesVisitTheInboxOncePerWakeCount) {
  auto owner = make(1);
  auto freer = make(2);
  // A slab's worth of objects, all out, and one more from the next slab:
  // the first is no longer active, and sleeps until its wake count of them
  // come back.  (Frees into the active slab bring no state change.)
  std::vector<void*> objects;
  for (uint32_t i = 0; i < kInfo.capacity; i++) objects.push_back(owner->alloc(kClass));
  void* next_slab = owner->alloc(kClass);
  ASSERT_NE(pagemap::lookup(next_slab), pagemap::lookup(objects[0]));
  std::vector<void*> rest = drain_fast_list(*owner);
  rest.push_back(next_slab);
  // One of them freed by another thread, waiting in the owner's inbox.
  void* remote = objects.back();
  objects.pop_back();
  test::free_remote(freer.get(), remote);
  freer->settle();
  // Local frees below the wake count do not look at the inbox...
  uint32_t wake = slab::wake_count(pagemap::lookup(objects[0]));
  ASSERT_GT(wake, 1u);
  for (uint32_t i = 0; i + 1 < wake; i++)
    ASSERT_TRUE(owner->try_free_local(pagemap::lookup(objects[i]), objects[i]));
  EXPECT_EQ(owner->message_counters().inbox_drains, 0u);
  // ...the one that wakes the slab does.
  ASSERT_TRUE(owner->try_free_local(pagemap::lookup(objects[wake - 1]), objects[wake - 1]));
  EXPECT_EQ(owner->message_counters().inbox_drains, 1u);
  EXPECT_EQ(owner->message_counters().messages_received, 1u);
  free_all_local(*owner, std::vector<void*>(objects.begin() + wake, objects.end()));
  free_all_local(*owner, rest);
  EXPECT_TRUE(owner->release_unused());
  EXPECT_EQ(owner->slab_count(), 0u);
}

TEST(Allocator, AThreadThatOnlyFreesTakesItsOwnObjectsBackWhenItPosts) {
  ScopedOption outbox(options::kOutboxBytes, 4096);
  auto a = make(1);
  auto b = make(2);
  // Each allocates, then frees only the other's objects.
  std::vector<void*> of_a, of_b;
  for (int i = 0; i < 64; i++) {
    of_a.push_back(a->alloc(kClass));
    of_b.push_back(b->alloc(kClass));
  }
  for (void* p : of_b) test::free_remote(a.get(), p);
  // a's outbox filled (64 x 256 B > 4 KiB) and was posted: b's objects are
  // in b's inbox.  When b's own outbox fills, b posts and visits its inbox.
  EXPECT_GT(a->message_counters().batches_sent, 0u);
  EXPECT_EQ(b->message_counters().messages_received, 0u);
  for (void* p : of_a) test::free_remote(b.get(), p);
  EXPECT_GT(b->message_counters().messages_received, 0u);
  for (Allocator* x : {a.get(), b.get(), a.get()}) x->settle();
  EXPECT_EQ(a->message_counters().messages_received, of_a.size());
  EXPECT_EQ(b->message_counters().messages_received, of_b.size());
  a->release_unused();
  b->release_unused();
  EXPECT_EQ(a->slab_count(), 0u);
  EXPECT_EQ(b->slab_count(), 0u);
}
