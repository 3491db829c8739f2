// Messenger (frontend/messenger.h), through allocators not bound to any
// thread: frees of another allocator's objects wait in the outbox until it
// is posted (or fills), go home in one batch per slab, are forwarded when
// they reach an allocator whose id shares the owner's bucket bits, and are
// counted on both sides.
#include "frontend/messenger.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "backend/pagemap.h"
#include "frontend/allocator.h"
#include "remote_free.h"
#include "scoped_option.h"

using namespace roost;
using test::ScopedOption;

namespace {

constexpr unsigned kClass = sizeclass::from_size(64);

// An allocator for one test, reading the options in force when made.
std::unique_ptr<Allocator> make(uint32_t id) {
  EXPECT_TRUE(pagemap::init());
  auto a = std::make_unique<Allocator>(id);
  a->attach();
  return a;
}

// The service's look at `a`'s inbox at the made-up time `now` (ns), with a
// purge delay of kDelayNs.
constexpr uint64_t kDelayNs = 1000000;
Messenger::Look look(Allocator& a, uint64_t now) {
  return a.look_for_neglected_mail(now, kDelayNs);
}

// Is the page holding `p` resident (mincore)?
bool resident(const void* p) {
  uintptr_t page = reinterpret_cast<uintptr_t>(p) & ~(uintptr_t{4096} - 1);
  unsigned char in = 0;
  EXPECT_EQ(mincore(reinterpret_cast<void*>(page), 1, &in), 0);
  return (in & 1) != 0;
}

std::vector<void*> alloc_n(Allocator& a, size_t n) {
  std::vector<void*> v;
  for (size_t i = 0; i < n; i++) {
    v.push_back(a.alloc(kClass));
    EXPECT_NE(v.back(), nullptr);
  }
  return v;
}

void free_remote(Allocator& by, const std::vector<void*>& objects) {
  for (void* p : objects) {
    ChunkMeta* m = pagemap::lookup(p);
    ASSERT_NE(m, nullptr);
    ASSERT_FALSE(by.owns(m));
    test::free_remote(&by, p);
  }
}

// free_remote() (the remote free's slow path), then `by` posts what it
// collected.
void send_home(Allocator& by, const std::vector<void*>& objects) {
  free_remote(by, objects);
  by.settle();
}

// Frees `objects` into the slabs `owner` owns (the local fast path).
void free_local(Allocator& owner, const std::vector<void*>& objects) {
  for (void* p : objects) ASSERT_TRUE(owner.try_free_local(pagemap::lookup(p), p));
}

// The size class of `objects` (all of one class).
unsigned objects_class(const std::vector<void*>& objects) {
  return pagemap::lookup(objects.front())->sizeclass;
}

// Objects this allocator received for its own slabs (not forwarded).
uint64_t delivered(const Allocator& a) {
  return a.message_counters().messages_received - a.message_counters().messages_forwarded;
}

// Settles every allocator until a whole round moves nothing, then lets
// each release what it holds.
void settle_and_release(std::initializer_list<Allocator*> all) {
  for (int round = 0; round < 16; round++) {
    uint64_t moved = 0;
    for (Allocator* a : all) moved += a->settle();
    if (moved == 0) break;
  }
  for (Allocator* a : all) a->release_unused();
}

}  // namespace

TEST(Messenger, RemoteFreesWaitUntilPostedThenGoHomeAsOneBatchPerSlab) {
  ScopedOption outbox(options::kOutboxBytes, 64 << 10);
  auto owner = make(1);
  auto freer = make(2);
  std::vector<void*> objects = alloc_n(*owner, 100);  // 6400 bytes: one slab
  free_remote(*freer, objects);
  const MessageCounters& sent = freer->message_counters();
  // Counted as they leave the BatchIt cache for the outbox (without
  // BatchIt, one by one as they are freed).
  EXPECT_EQ(sent.remote_frees, config::kBatchIt ? 0u : 100u);
  EXPECT_EQ(freer->remote_frees_sent(objects_class(objects)), sent.remote_frees);
  // Below the outbox's limit nothing is posted.
  EXPECT_EQ(sent.batches_sent, 0u);
  EXPECT_FALSE(owner->visit_inbox());
  EXPECT_EQ(freer->settle(), 0u);  // posts; nothing came to the freer
  EXPECT_EQ(sent.remote_frees, 100u);
  EXPECT_EQ(freer->remote_frees_sent(objects_class(objects)), 100u);
  EXPECT_EQ(sent.batches_sent, 1u);  // one bucket, one exchange
  EXPECT_EQ(sent.slab_batches_sent, config::kBatchIt ? 1u : 100u);
  EXPECT_TRUE(owner->visit_inbox());
  const MessageCounters& got = owner->message_counters();
  EXPECT_EQ(got.messages_received, 100u);
  EXPECT_EQ(got.slab_batches_received, sent.slab_batches_sent);
  EXPECT_EQ(got.messages_forwarded, 0u);
  EXPECT_EQ(got.inbox_drains, 1u);
  // Home again: the owner hands the same objects out (after what its fast
  // list still held from the last carve).
  std::set<void*> before(objects.begin(), objects.end());
  std::vector<void*> again = alloc_n(*owner, 200);
  size_t reused = 0;
  for (void* p : again) reused += before.count(p);
  EXPECT_EQ(reused, 100u);
  free_local(*owner, again);
  settle_and_release({owner.get(), freer.get()});
}

TEST(Messenger, AFullOutboxIsPostedByTheFreeThatFillsIt) {
  ScopedOption outbox(options::kOutboxBytes, 0);  // every free fills it
  auto owner = make(1);
  auto freer = make(2);
  std::vector<void*> objects = alloc_n(*owner, 10);
  free_remote(*freer, objects);
  EXPECT_EQ(freer->message_counters().batches_sent, 10u);
  EXPECT_TRUE(owner->visit_inbox());
  EXPECT_EQ(owner->message_counters().messages_received, 10u);
  settle_and_release({owner.get(), freer.get()});
}

TEST(Messenger, MessagesForAnIdSharingTheBucketBitsAreForwardedHome) {
  static_assert(config::kBucketBits < 7, "ids 1 and 1 + 2^k share the first bucket bits");
  uint32_t shared = 1u + (1u << config::kBucketBits);
  auto x = make(1);
  auto y = make(shared);
  auto sender = make(0);
  std::vector<void*> of_x = alloc_n(*x, 40);
  std::vector<void*> of_y = alloc_n(*y, 40);
  free_remote(*sender, of_x);
  free_remote(*sender, of_y);
  // Both owners' objects share one outbox bucket: it goes whole to the
  // owner of one of them, which forwards the other's.
  sender->settle();
  EXPECT_EQ(sender->message_counters().batches_sent, 1u);
  settle_and_release({x.get(), y.get(), sender.get()});
  EXPECT_EQ(delivered(*x), 40u);
  EXPECT_EQ(delivered(*y), 40u);
  uint64_t forwarded =
      x->message_counters().messages_forwarded + y->message_counters().messages_forwarded;
  EXPECT_EQ(forwarded, 40u);
  EXPECT_EQ(x->slab_count(), 0u);
  EXPECT_EQ(y->slab_count(), 0u);
}

// The service thread's look at an inbox (Messenger::look_for_neglected_mail),
// made here by hand: mail that waited from one look to the next with its
// owner not receiving is sorted; slabs all of whose objects are in it are
// handed back, resident, and purged once they have waited a purge delay
// untaken; the rest is kept, sorted, for the owner.
TEST(Messenger, ANeglectedInboxsWholeSlabsAreHandedBackAndTheRestStays) {
  ScopedOption zero(options::kPurgeZero, 1);
  constexpr uint32_t kCapacity = sizeclass::kInfo.info[kClass].capacity;
  auto owner = make(1);
  auto freer = make(2);
  // Three whole slabs and the start of a fourth, allocated in order.
  std::vector<void*> objects = alloc_n(*owner, 3 * kCapacity + 10);
  std::set<ChunkMeta*> slabs;
  for (void* p : objects) slabs.insert(pagemap::lookup(p));
  ASSERT_EQ(slabs.size(), 4u);
  ASSERT_EQ(owner->slab_count(), 4u);
  // The fourth slab's objects stay out, with contents.
  std::vector<void*> kept(objects.end() - 10, objects.end());
  objects.resize(3 * kCapacity);
  for (size_t i = 0; i < kept.size(); i++) memset(kept[i], 0x40 + static_cast<int>(i), 64);
  send_home(*freer, objects);
  ASSERT_TRUE(owner->has_mail());

  // The first look only notes the mail; the second sorts it and hands the
  // whole slabs back, resident (looked at again until purged or taken).
  Messenger::Look first = look(*owner, 0);
  EXPECT_TRUE(first.pending);
  EXPECT_EQ(first.whole_slabs, 0u);
  Messenger::Look second = look(*owner, 1);
  EXPECT_EQ(second.whole_slabs, 3u);
  EXPECT_EQ(second.bytes_purged, 0u);
  EXPECT_TRUE(second.pending);
  // Within the purge delay: left as they are.
  EXPECT_EQ(look(*owner, kDelayNs).bytes_purged, 0u);
  // A purge delay on, still untaken: purged, and the first slab's objects
  // read as zero now.
  Messenger::Look third = look(*owner, 1 + kDelayNs);
  EXPECT_EQ(third.whole_slabs, 0u);
  EXPECT_EQ(third.bytes_purged, 3 * sizeclass::slab_size(kClass));
  EXPECT_FALSE(third.pending);
  EXPECT_EQ(*static_cast<uint64_t*>(objects[kCapacity / 2]), 0u);
  // Nothing new since: a later look leaves the inbox and the slabs alone.
  Messenger::Look fourth = look(*owner, 2 + 2 * kDelayNs);
  EXPECT_EQ(fourth.whole_slabs, 0u);
  EXPECT_EQ(fourth.bytes_purged, 0u);

  // The owner receives: the three slabs start over and go back; the
  // fourth keeps its objects.
  EXPECT_TRUE(owner->has_mail());
  EXPECT_EQ(owner->settle(), 3u * kCapacity);
  owner->release_unused();
  EXPECT_EQ(owner->slab_count(), 1u);
  for (size_t i = 0; i < kept.size(); i++)
    for (size_t b = 0; b < 64; b++)
      ASSERT_EQ(static_cast<unsigned char*>(kept[i])[b], 0x40 + i) << "kept object " << i;
  // Counted as received (process-wide: the service's own counters), so
  // the message counters balance.
  EXPECT_EQ(owner->message_counters().messages_received, 0u);
  EXPECT_GE(Messenger::collected_counters().messages_received, 3u * kCapacity);

  // And the owner allocates again, from slabs as good as new.
  std::vector<void*> again = alloc_n(*owner, 2 * kCapacity);
  for (void* p : again) memset(p, 0x5a, 64);
  free_local(*owner, again);
  free_local(*owner, kept);
  settle_and_release({owner.get(), freer.get()});
  EXPECT_EQ(owner->slab_count(), 0u);
}

// Whole slabs the owner takes back within a purge delay of the sort are
// never purged: a thread blocked for a moment finds them as it left them.
TEST(Messenger, WholeSlabsTakenBackWithinAPurgeDelayStayResident) {
  ScopedOption zero(options::kPurgeZero, 1);
  constexpr uint32_t kCapacity = sizeclass::kInfo.info[kClass].capacity;
  auto owner = make(1);
  auto freer = make(2);
  std::vector<void*> objects = alloc_n(*owner, 2 * kCapacity);
  for (void* p : objects) memset(p, 0x33, 64);  // every page touched
  send_home(*freer, objects);
  look(*owner, 0);
  Messenger::Look sorted = look(*owner, 1);
  EXPECT_EQ(sorted.whole_slabs, 2u);
  EXPECT_EQ(sorted.bytes_purged, 0u);
  // Resident: no page of theirs was purged.
  for (void* p : objects) ASSERT_TRUE(resident(p)) << p;
  // The owner receives before the delay ends: both slabs start over.
  EXPECT_EQ(owner->settle(), 2u * kCapacity);
  // A look a delay later finds nothing to purge.
  Messenger::Look later = look(*owner, 2 + kDelayNs);
  EXPECT_EQ(later.bytes_purged, 0u);
  EXPECT_FALSE(later.pending);
  settle_and_release({owner.get(), freer.get()});
  EXPECT_EQ(owner->slab_count(), 0u);
}

// A slab whose mail arrives over two sorts: the first keeps its batches
// (not whole yet), the second finds them with the rest.
TEST(Messenger, ASlabWhoseMailArrivesOverTwoSortsIsFoundWhole) {
  constexpr uint32_t kCapacity = sizeclass::kInfo.info[kClass].capacity;
  auto owner = make(1);
  auto freer = make(2);
  std::vector<void*> objects = alloc_n(*owner, kCapacity + 10);
  std::vector<void*> first(objects.begin(), objects.begin() + kCapacity / 2);
  std::vector<void*> second(objects.begin() + kCapacity / 2, objects.begin() + kCapacity);
  send_home(*freer, first);
  look(*owner, 1);
  EXPECT_EQ(look(*owner, 2).whole_slabs, 0u);  // sorted, kept
  EXPECT_TRUE(owner->has_mail());
  send_home(*freer, second);
  EXPECT_TRUE(look(*owner, 3).pending);
  EXPECT_EQ(look(*owner, 4).whole_slabs, 1u);
  EXPECT_EQ(owner->settle(), kCapacity);
  EXPECT_EQ(owner->slab_count(), 1u);  // the whole one went back to the chunk cache
  free_local(*owner, std::vector<void*>(objects.begin() + kCapacity, objects.end()));
  settle_and_release({owner.get(), freer.get()});
  EXPECT_EQ(owner->slab_count(), 0u);
}

// Mail its owner received between two looks is not the service's to sort.
TEST(Messenger, AnInboxItsOwnerVisitsIsNotSorted) {
  constexpr uint32_t kCapacity = sizeclass::kInfo.info[kClass].capacity;
  auto owner = make(1);
  auto freer = make(2);
  std::vector<void*> objects = alloc_n(*owner, 2 * kCapacity);
  std::vector<void*> first(objects.begin(), objects.begin() + kCapacity);
  std::vector<void*> second(objects.begin() + kCapacity, objects.end());
  send_home(*freer, first);
  EXPECT_TRUE(look(*owner, 5).pending);
  EXPECT_TRUE(owner->visit_inbox());  // the owner takes it in
  send_home(*freer, second);
  // The second slab's mail is new since the look, and the owner received
  // since: noted, not sorted.
  Messenger::Look noted = look(*owner, 6);
  EXPECT_EQ(noted.whole_slabs, 0u);
  EXPECT_TRUE(noted.pending);
  EXPECT_EQ(owner->settle(), kCapacity);
  EXPECT_EQ(delivered(*owner), 2u * kCapacity);
  settle_and_release({owner.get(), freer.get()});
  EXPECT_EQ(owner->slab_count(), 0u);
}

TEST(Messenger, AnObjectSentAloneArrivesAndIsCountedProcessWide) {
  auto owner = make(3);
  void* p = owner->alloc(kClass);
  ASSERT_NE(p, nullptr);
  MessageCounters before;
  before.add(Messenger::alone_counters());
  Messenger::send_alone(pagemap::lookup(p), p);
  MessageCounters after;
  after.add(Messenger::alone_counters());
  EXPECT_EQ(after.remote_frees - before.remote_frees, 1u);
  EXPECT_EQ(after.batches_sent - before.batches_sent, 1u);
  EXPECT_EQ(after.slab_batches_sent - before.slab_batches_sent, 1u);
  EXPECT_TRUE(owner->visit_inbox());
  EXPECT_EQ(delivered(*owner), 1u);
  settle_and_release({owner.get()});
  EXPECT_EQ(owner->slab_count(), 0u);
}

TEST(Messenger, CountersAddUp) {
  MessageCounters a, b;
  a.remote_frees = 3;
  a.inbox_drains = 1;
  b.remote_frees = 4;
  b.batchit_evictions = 2;
  a.add(b);
  EXPECT_EQ(a.remote_frees, 7u);
  EXPECT_EQ(a.inbox_drains, 1u);
  EXPECT_EQ(a.batchit_evictions, 2u);
  EXPECT_EQ(b.remote_frees, 4u);
}
