// The outbox's buckets (frontend/outbox.h): kBuckets and kMask, add()
// filing nodes under a bucket newest first with the first one filed as the
// tail, take() handing the whole list over and emptying the bucket, empty(),
// and for_each_filled() visiting exactly the filled buckets in increasing
// order, taking each as it goes; the room, charged in stretches.  The nodes
// are the test's own QueueNodes.
#include "frontend/outbox.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

using namespace roost;

namespace {

using V = std::vector<unsigned>;

static_assert(Outbox::kBuckets == 1u << config::kBucketBits);
static_assert(Outbox::kMask == Outbox::kBuckets - 1);
static_assert((Outbox::kBuckets & Outbox::kMask) == 0, "a power of two");
static_assert(Outbox::kBuckets >= 8, "the bucket numbers below assume the default 2^6");

V filled(Outbox& box) {
  V out;
  box.for_each_filled([&](unsigned b) { out.push_back(b); });
  return out;
}

// The nodes of a taken list, head to tail, following `next`; stops after
// `limit` nodes so a broken link cannot loop forever.
std::vector<QueueNode*> chain(Outbox::Bucket bucket, size_t limit = 1000) {
  std::vector<QueueNode*> out;
  for (QueueNode* n = bucket.head; n != nullptr && out.size() < limit;
       n = n->next(std::memory_order_relaxed))
    out.push_back(n);
  return out;
}

// Nodes as objects in memory would be: 16-byte aligned, links set to
// garbage first (add() must set them).
struct Nodes {
  explicit Nodes(size_t n) : nodes(new Node[n]) {
    for (size_t i = 0; i < n; i++)
      nodes[i].q.set_next(reinterpret_cast<QueueNode*>(uintptr_t{0xbad0}),
                          std::memory_order_relaxed);
  }
  QueueNode* operator[](size_t i) { return &nodes[i].q; }
  struct alignas(16) Node {
    QueueNode q;
    char payload[48];
  };
  std::unique_ptr<Node[]> nodes;
};

}  // namespace

TEST(Outbox, ANewOutboxHasNothingFiled) {
  Outbox box;
  for (unsigned b = 0; b < Outbox::kBuckets; b++) EXPECT_TRUE(box.empty(b)) << b;
  EXPECT_EQ(filled(box), V{});
  Outbox::Bucket none = box.take(0);
  EXPECT_EQ(none.head, nullptr);
  EXPECT_EQ(none.tail, nullptr);
}

// Within a bucket the newest node comes first; the tail is the first filed
// and ends the chain.  Other buckets are untouched.
TEST(Outbox, AddFilesNodesUnderTheirBucketNewestFirst) {
  Nodes n(4);
  Outbox box;
  const unsigned b = 5 & Outbox::kMask;
  box.add(b, n[0]);
  EXPECT_FALSE(box.empty(b));
  box.add(b, n[1]);
  box.add(b, n[2]);
  for (unsigned other = 0; other < Outbox::kBuckets; other++) {
    if (other != b) {
      EXPECT_TRUE(box.empty(other)) << other;
    }
  }
  EXPECT_EQ(filled(box), V{b});
  Outbox::Bucket got = box.take(b);
  EXPECT_EQ(got.head, n[2]);
  EXPECT_EQ(got.tail, n[0]);
  EXPECT_EQ(chain(got), (std::vector<QueueNode*>{n[2], n[1], n[0]}));
  EXPECT_EQ(n[0]->next(std::memory_order_relaxed), nullptr);
}

TEST(Outbox, TakeEmptiesTheBucketAndItFillsAgain) {
  Nodes n(4);
  Outbox box;
  box.add(0, n[0]);
  box.add(0, n[1]);
  Outbox::Bucket first = box.take(0);
  EXPECT_EQ(chain(first), (std::vector<QueueNode*>{n[1], n[0]}));
  EXPECT_TRUE(box.empty(0));
  EXPECT_EQ(filled(box), V{});
  Outbox::Bucket again = box.take(0);
  EXPECT_EQ(again.head, nullptr);
  EXPECT_EQ(again.tail, nullptr);
  // Refilled, the bucket starts a new list with a new tail, and is filled.
  box.add(0, n[2]);
  box.add(0, n[3]);
  EXPECT_EQ(filled(box), V{0});
  Outbox::Bucket second = box.take(0);
  EXPECT_EQ(second.head, n[3]);
  EXPECT_EQ(second.tail, n[2]);
  EXPECT_EQ(chain(second), (std::vector<QueueNode*>{n[3], n[2]}));
}

TEST(Outbox, ForEachFilledVisitsExactlyTheFilledBucketsInOrder) {
  const unsigned last = Outbox::kMask;
  const V buckets = {last, 0, last / 2, 1, last - 1};
  V want = {0, 1, last / 2, last - 1, last};
  Nodes n(buckets.size() * 2);
  Outbox box;
  for (size_t i = 0; i < buckets.size(); i++) {
    box.add(buckets[i], n[2 * i]);
    box.add(buckets[i], n[2 * i + 1]);
  }
  EXPECT_EQ(filled(box), want);
  // Taking one in between leaves the others.
  box.take(last / 2);
  want.erase(want.begin() + 2);
  EXPECT_EQ(filled(box), want);
  for (unsigned b = 0; b < Outbox::kBuckets; b++) {
    bool is_filled = std::find(want.begin(), want.end(), b) != want.end();
    EXPECT_EQ(box.empty(b), !is_filled) << b;
  }
}

// Posting's pattern: walk the filled buckets and take each one visited.
// Every node comes out once, in its own bucket, and the outbox ends empty.
TEST(Outbox, ForEachFilledToleratesTakingTheBucketItVisits) {
  Nodes n(3 * Outbox::kBuckets);
  Outbox box;
  V want;
  auto count = [](unsigned b) { return 1 + (b / 3) % 3; };  // 1 to 3 nodes a bucket
  for (unsigned b = 0; b < Outbox::kBuckets; b += 3) {
    want.push_back(b);
    for (unsigned k = 0; k < count(b); k++) box.add(b, n[3 * b + k]);
  }
  V seen;
  size_t nodes = 0;
  box.for_each_filled([&](unsigned b) {
    seen.push_back(b);
    Outbox::Bucket got = box.take(b);
    std::vector<QueueNode*> c = chain(got);
    ASSERT_FALSE(c.empty()) << b;
    EXPECT_EQ(c.back(), got.tail) << b;
    for (QueueNode* node : c) {
      size_t index = static_cast<size_t>(reinterpret_cast<Nodes::Node*>(node) - n.nodes.get());
      EXPECT_EQ(index / 3, b) << "a node of another bucket";
    }
    nodes += c.size();
  });
  EXPECT_EQ(seen, want);
  size_t added = 0;
  for (unsigned b : want) added += count(b);
  EXPECT_EQ(nodes, added);
  EXPECT_EQ(filled(box), V{});
  for (unsigned b = 0; b < Outbox::kBuckets; b++) EXPECT_TRUE(box.empty(b)) << b;
}

// The room: a limit is charged in four stretches; the first three end with
// stretch_ended() false (the next starts), the fourth says the outbox is
// full.  What a charge takes past a stretch's end is not carried over.
TEST(Outbox, TheRoomIsChargedInStretches) {
  Outbox box;
  box.reset_room(64 * 1024);
  unsigned ends = 0, bytes = 0;
  bool full = false;
  while (!full) {
    bytes += 1000;
    if (box.charge(1000)) {
      ends++;
      full = box.stretch_ended();
      EXPECT_EQ(full, ends == 1u << Outbox::kStretchBits) << ends;
    }
    ASSERT_LT(bytes, 80 * 1024u) << "never full";
  }
  EXPECT_EQ(ends, 1u << Outbox::kStretchBits);
  // Four stretches of 16 KiB, each ended by the 17th charge of 1000 bytes.
  EXPECT_EQ(bytes, 4u * 17 * 1000);
  box.reset_room(64 * 1024);
  EXPECT_FALSE(box.charge(16 * 1024));  // exactly a stretch: not past it
  EXPECT_TRUE(box.charge(1));
}

// A limit too small to split posts at its first overflow; 0 at every
// charge; one beyond 2^63 never fills.
TEST(Outbox, SmallZeroAndUnboundedLimits) {
  Outbox box;
  box.reset_room(3);
  EXPECT_FALSE(box.charge(3));
  EXPECT_TRUE(box.charge(1));
  EXPECT_TRUE(box.stretch_ended());
  box.reset_room(0);
  EXPECT_TRUE(box.charge(16));
  EXPECT_TRUE(box.stretch_ended());
  box.reset_room(~uint64_t{0});
  for (int i = 0; i < 1000; i++) ASSERT_FALSE(box.charge(UINT32_MAX));
}
