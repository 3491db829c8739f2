// Foreign reuse (frontend/foreign_reuse.h) through allocators not bound to
// any thread, each post made explicitly: what a post keeps (a class the
// thread allocates and mostly frees remotely, up to its demand), what it
// does not (a thread that frees mostly its own objects, a thread that only
// frees the class), and that kept objects reach their owner by message on
// every path that lets a fast list go (the next post, trim, thread exit, a
// pooled allocator's release), never the keeper's slabs.
#include "frontend/foreign_reuse.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <vector>

#include "backend/pagemap.h"
#include "frontend/allocator.h"
#include "remote_free.h"
#include "scoped_option.h"
#include "unbound_allocator.h"

using namespace roost;
using test::ScopedOption;

namespace {

constexpr unsigned kClass = sizeclass::from_size(256);
constexpr uint32_t kObjects = 32;  // at most a slab's: a batch of one slab

std::unique_ptr<Allocator> make(uint32_t id) { return test::unbound_allocator(id); }

// The class's fast list emptied (test::take_fast_list).
std::vector<void*> drain_fast_list(Allocator& a) { return test::take_fast_list(a, kClass); }

std::vector<void*> alloc_n(Allocator& a, uint32_t n) {
  std::vector<void*> v;
  for (uint32_t i = 0; i < n; i++) v.push_back(a.alloc(kClass));
  return v;
}

void free_local(Allocator& a, const std::vector<void*>& objects) {
  for (void* p : objects) ASSERT_TRUE(a.try_free_local(pagemap::lookup(p), p));
}

void free_remote(Allocator& by, const std::vector<void*>& objects) {
  for (void* p : objects) test::free_remote(&by, p);
}

// The objects on the class's fast list, in order.
std::vector<void*> fast_list(Allocator& a) {
  std::vector<void*> v;
  for (FreeObject* p = *a.fast_slot(kClass); p != nullptr; p = freelist::next(p)) v.push_back(p);
  return v;
}

// An owner, and a keeper that allocated kObjects of the class (its demand;
// its fast list then emptied) and freed kObjects of the owner's: the
// keeper's next post keeps them.
class ForeignReuseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    owner = make(1);
    keeper = make(2);
    of_owner = alloc_n(*owner, kObjects);
    own_rest = drain_fast_list(*owner);
    of_keeper = alloc_n(*keeper, kObjects);
    keeper_rest = drain_fast_list(*keeper);
  }

  // Everything back: the owner's objects that came home are on its slabs,
  // and neither allocator holds a slab once each frees its own.
  void TearDown() override {
    free_local(*keeper, of_keeper);
    free_local(*keeper, keeper_rest);
    keeper->settle();
    keeper->release_unused();
    owner->settle();
    free_local(*owner, own_rest);
    free_local(*owner, still_out);
    owner->release_unused();
    EXPECT_EQ(keeper->slab_count(), 0u);
    EXPECT_EQ(owner->slab_count(), 0u);
  }

  // The keeper kept the owner's kObjects objects: its next allocations
  // hand them out, in the order they were freed, from the owner's slab
  // (which still counts them out); freed again, they take the remote path
  // home.
  void reuse_kept_and_free_them() {
    std::vector<void*> again = alloc_n(*keeper, kObjects);
    EXPECT_EQ(again, of_owner);
    free_remote(*keeper, again);
    keeper->settle();
    owner->settle();
    EXPECT_EQ(received(), kObjects);
  }

  uint64_t kept() const { return keeper->message_counters().foreign_kept; }
  uint64_t sent_home() const { return keeper->message_counters().foreign_sent_home; }
  uint64_t received() const { return owner->message_counters().messages_received; }

  ScopedOption reuse{options::kForeignReuse, 1};
  ScopedOption outbox{options::kOutboxBytes, 1 << 20};  // no post but the test's
  std::unique_ptr<Allocator> owner, keeper;
  std::vector<void*> of_owner, own_rest, of_keeper, keeper_rest;
  std::vector<void*> still_out;  // the owner's, out when the test ends
};

}  // namespace

TEST_F(ForeignReuseTest, APostKeepsTheBatchOfAClassTheThreadAllocatesAndFreesRemotely) {
  if constexpr (!config::kForeignReuse) GTEST_SKIP() << "not in this build";
  free_remote(*keeper, of_owner);
  keeper->post();
  EXPECT_EQ(kept(), kObjects);
  owner->settle();
  EXPECT_EQ(received(), 0u);
  reuse_kept_and_free_them();
  EXPECT_EQ(sent_home(), 0u);
}

// A post that finds nothing of a class in the cache does not look at it:
// the class's window runs on to the next post, whose keeping counts the
// demand the thread showed before the first.
TEST_F(ForeignReuseTest, APostWithNothingOfTheClassCachedLeavesItsWindowOpen) {
  if constexpr (!config::kForeignReuse) GTEST_SKIP() << "not in this build";
  keeper->post();  // nothing cached: the allocations of SetUp stay in the window
  EXPECT_EQ(kept(), 0u);
  free_remote(*keeper, of_owner);
  keeper->post();
  EXPECT_EQ(kept(), kObjects);
  reuse_kept_and_free_them();
}

TEST_F(ForeignReuseTest, WhatTheNextPostFindsUnusedGoesHome) {
  if constexpr (!config::kForeignReuse) GTEST_SKIP() << "not in this build";
  free_remote(*keeper, of_owner);
  keeper->post();
  ASSERT_EQ(kept(), kObjects);
  std::vector<void*> used = alloc_n(*keeper, kObjects / 2);
  keeper->post();
  EXPECT_EQ(sent_home(), kObjects - kObjects / 2);
  EXPECT_EQ(kept(), kObjects);  // no remote frees since: nothing more kept
  // The rest of the fast list is the keeper's own.
  for (void* p : fast_list(*keeper)) EXPECT_TRUE(keeper->owns(pagemap::lookup(p)));
  owner->settle();
  EXPECT_EQ(received(), kObjects - kObjects / 2);
  free_remote(*keeper, used);
  keeper->settle();
  owner->settle();
  EXPECT_EQ(received(), kObjects);
}

TEST_F(ForeignReuseTest, AThreadWhoseFreesAreMostlyItsOwnKeepsNothing) {
  if constexpr (!config::kForeignReuse) GTEST_SKIP() << "not in this build";
  // Three of its own objects freed locally for each remote free: the
  // class's allocations (its frees) are mostly local.
  std::vector<void*> local = alloc_n(*keeper, 3 * kObjects);
  std::vector<void*> rest = drain_fast_list(*keeper);
  free_local(*keeper, local);
  free_remote(*keeper, of_owner);
  keeper->post();
  EXPECT_EQ(kept(), 0u);
  owner->settle();
  EXPECT_EQ(received(), kObjects);
  free_local(*keeper, rest);
}

TEST_F(ForeignReuseTest, AThreadThatOnlyFreesTheClassKeepsNothing) {
  if constexpr (!config::kForeignReuse) GTEST_SKIP() << "not in this build";
  // A consumer: an allocator that never allocated the class.
  auto consumer = make(3);
  free_remote(*consumer, of_owner);
  consumer->post();
  EXPECT_EQ(consumer->message_counters().foreign_kept, 0u);
  owner->settle();
  EXPECT_EQ(received(), kObjects);
  consumer->release_unused();
}

TEST_F(ForeignReuseTest, AFastListThatStillHoldsTheDemandKeepsNothing) {
  if constexpr (!config::kForeignReuse) GTEST_SKIP() << "not in this build";
  // As many of the keeper's own objects back on its fast list as it
  // allocated: no refill is near.
  FreeObject* list = nullptr;
  for (auto it = of_keeper.rbegin(); it != of_keeper.rend(); ++it) {
    ASSERT_TRUE(checks::mark_freed(pagemap::lookup(*it), *it, "test"));
    freelist::set_next(static_cast<FreeObject*>(*it), list);
    list = static_cast<FreeObject*>(*it);
  }
  *keeper->fast_slot(kClass) = list;
  free_remote(*keeper, of_owner);
  keeper->post();
  EXPECT_EQ(kept(), 0u);
  owner->settle();
  EXPECT_EQ(received(), kObjects);
  EXPECT_EQ(drain_fast_list(*keeper), of_keeper);
}

// Each path that lets the fast lists go, as its caller makes it
// (allocator_pool.cc): the kept objects reach their owner by message, and
// the keeper's slabs get only its own.
enum class LetGo { kTrim, kThreadExit, kPooledRelease };

class ForeignReuseLetGoTest : public ForeignReuseTest,
                              public ::testing::WithParamInterface<LetGo> {};

TEST_P(ForeignReuseLetGoTest, KeptObjectsGoHomeByMessage) {
  if constexpr (!config::kForeignReuse) GTEST_SKIP() << "not in this build";
  free_remote(*keeper, of_owner);
  keeper->post();
  ASSERT_EQ(kept(), kObjects);
  // One of them used, and out when the fast lists go.
  still_out.push_back(keeper->alloc(kClass));
  free_local(*keeper, of_keeper);
  of_keeper.clear();
  free_local(*keeper, keeper_rest);
  keeper_rest.clear();
  switch (GetParam()) {
    case LetGo::kTrim:  // malloc_trim: settle, then release
      keeper->settle();
      keeper->release_unused();
      break;
    case LetGo::kThreadExit:  // on_thread_exit
      keeper->drain_quarantine("thread exit");
      keeper->settle();
      keeper->release_unused();
      break;
    case LetGo::kPooledRelease:  // a pooled allocator taken for one allocation
      keeper->release_unused();
      break;
  }
  EXPECT_EQ(sent_home(), kObjects - 1);
  EXPECT_EQ(*keeper->fast_slot(kClass), nullptr);
  EXPECT_EQ(keeper->slab_count(), 0u);
  owner->settle();
  EXPECT_EQ(received(), kObjects - 1);
}

INSTANTIATE_TEST_SUITE_P(EveryPath, ForeignReuseLetGoTest,
                         ::testing::Values(LetGo::kTrim, LetGo::kThreadExit,
                                           LetGo::kPooledRelease));

TEST(ForeignReuse, OffByDefault) {
  EXPECT_EQ(options::get(options::kForeignReuse), 0u);
  auto owner = make(1);
  auto keeper = make(2);
  std::vector<void*> of_owner = alloc_n(*owner, kObjects);
  std::vector<void*> mine = alloc_n(*keeper, kObjects);
  free_remote(*keeper, of_owner);
  keeper->post();
  EXPECT_EQ(keeper->message_counters().foreign_kept, 0u);
  owner->settle();
  EXPECT_EQ(owner->message_counters().messages_received, kObjects);
  free_local(*keeper, mine);
  keeper->release_unused();
  owner->release_unused();
}
