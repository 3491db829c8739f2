// The inbox queue (ds/mpsc_queue.h) on its own: empty and single-element
// behaviour, the stub being re-enqueued internally so the last node comes
// out without a further enqueue, and many producers (more than cores)
// appending batches while one consumer takes everything: each node exactly
// once, and every producer's nodes in the order it enqueued them; the
// consumer's link check.  Runs in
// every build tree, ThreadSanitizer's included.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "ds/mpsc_queue.h"

using namespace roost;

namespace {

// A message as the tests send it: the queue link first, so a QueueNode* is
// the Item*.
struct Item {
  QueueNode node;
  uint32_t producer = 0;
  uint32_t seq = 0;
};
static_assert(std::is_standard_layout_v<Item>);
static_assert(offsetof(Item, node) == 0);

Item* item_of(QueueNode* n) { return reinterpret_cast<Item*>(n); }

// Links items[first..last] through `next` (the queue overwrites last's link).
void link(Item* items, size_t first, size_t last) {
  for (size_t i = first; i < last; i++)
    items[i].node.set_next(&items[i + 1].node, std::memory_order_relaxed);
}

}  // namespace

TEST(MpscQueue, EmptyQueueDequeuesNothing) {
  MpscQueue q;
  EXPECT_FALSE(q.maybe_nonempty());
  EXPECT_EQ(q.dequeue(), nullptr);
  EXPECT_EQ(q.dequeue(), nullptr);
  EXPECT_FALSE(q.maybe_nonempty());
  q.init();
  EXPECT_EQ(q.dequeue(), nullptr);
}

TEST(MpscQueue, SingleElementComesOutOnceWithoutAFurtherEnqueue) {
  MpscQueue q;
  Item a;
  q.enqueue(&a.node, &a.node);
  EXPECT_TRUE(q.maybe_nonempty());
  // `a` is the last node: the queue must put its stub behind it to hand it
  // out.
  EXPECT_EQ(q.dequeue(), &a.node);
  EXPECT_EQ(q.dequeue(), nullptr);
  EXPECT_FALSE(q.maybe_nonempty());
  EXPECT_EQ(q.dequeue(), nullptr);
  // And the queue still works after the stub went round.
  q.enqueue(&a.node, &a.node);
  EXPECT_EQ(q.dequeue(), &a.node);
  EXPECT_EQ(q.dequeue(), nullptr);
}

TEST(MpscQueue, LastNodeOfABatchIsDequeuedWithoutAFurtherEnqueue) {
  MpscQueue q;
  std::vector<Item> items(5);
  link(items.data(), 0, 4);
  q.enqueue(&items[0].node, &items[4].node);
  for (size_t i = 0; i < items.size(); i++) EXPECT_EQ(q.dequeue(), &items[i].node) << i;
  EXPECT_EQ(q.dequeue(), nullptr);
  EXPECT_FALSE(q.maybe_nonempty());
}

// The consumer's check sees each link before the queue follows it: the
// stub's (holder nullptr) to the first node, then each node's to the next;
// never a link to the stub.
TEST(MpscQueue, TheConsumersCheckSeesEveryLinkBeforeItIsFollowed) {
  MpscQueue q;
  std::vector<Item> items(3);
  link(items.data(), 0, 2);
  q.enqueue(&items[0].node, &items[2].node);
  std::vector<std::pair<const QueueNode*, const QueueNode*>> seen;
  auto record = [&seen](const QueueNode* holder, const QueueNode* next) {
    seen.emplace_back(holder, next);
  };
  for (size_t i = 0; i < items.size(); i++) EXPECT_EQ(q.dequeue(record), &items[i].node) << i;
  EXPECT_EQ(q.dequeue(record), nullptr);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].first, nullptr);
  EXPECT_EQ(seen[0].second, &items[0].node);
  EXPECT_EQ(seen[1].first, &items[0].node);
  EXPECT_EQ(seen[1].second, &items[1].node);
  EXPECT_EQ(seen[2].first, &items[1].node);
  EXPECT_EQ(seen[2].second, &items[2].node);
}

TEST(MpscQueue, InterleavedEnqueueAndDequeueKeepFifoOrder) {
  MpscQueue q;
  std::vector<Item> items(8);
  q.enqueue(&items[0].node, &items[0].node);
  EXPECT_EQ(q.dequeue(), &items[0].node);
  q.enqueue(&items[1].node, &items[1].node);
  link(items.data(), 2, 4);
  q.enqueue(&items[2].node, &items[4].node);
  EXPECT_EQ(q.dequeue(), &items[1].node);
  EXPECT_EQ(q.dequeue(), &items[2].node);
  q.enqueue(&items[5].node, &items[5].node);
  EXPECT_EQ(q.dequeue(), &items[3].node);
  EXPECT_EQ(q.dequeue(), &items[4].node);
  EXPECT_EQ(q.dequeue(), &items[5].node);
  EXPECT_EQ(q.dequeue(), nullptr);
  // A node may be sent again once it came out (objects are reused).
  q.enqueue(&items[0].node, &items[0].node);
  q.enqueue(&items[5].node, &items[5].node);
  EXPECT_EQ(q.dequeue(), &items[0].node);
  EXPECT_EQ(q.dequeue(), &items[5].node);
  EXPECT_EQ(q.dequeue(), nullptr);
}

namespace {

// One round: kProducers threads append their nodes in batches of 1..32; this
// thread dequeues until it has seen them all.  "" or the first error.
std::string many_producers_round(unsigned round) {
  constexpr unsigned kProducers = 6;  // more than the cores of the test machines
  constexpr uint32_t kPerProducer = 20000;
  std::vector<std::unique_ptr<Item[]>> items;
  for (unsigned p = 0; p < kProducers; p++) {
    items.push_back(std::make_unique<Item[]>(kPerProducer));
    for (uint32_t i = 0; i < kPerProducer; i++) {
      items[p][i].producer = p;
      items[p][i].seq = i;
    }
  }

  MpscQueue q;
  std::atomic<bool> go{false};
  std::vector<std::thread> producers;
  for (unsigned p = 0; p < kProducers; p++) {
    producers.emplace_back([&, p] {
      std::mt19937 rng(round * 7919 + p + 1);
      Item* mine = items[p].get();
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      uint32_t i = 0;
      while (i < kPerProducer) {
        uint32_t n = std::min<uint32_t>(1 + rng() % 32, kPerProducer - i);
        link(mine, i, i + n - 1);
        q.enqueue(&mine[i].node, &mine[i + n - 1].node);
        i += n;
        if (rng() % 8 == 0) std::this_thread::yield();
      }
    });
  }

  // The consumer: this thread.
  std::vector<std::vector<uint8_t>> seen(kProducers, std::vector<uint8_t>(kPerProducer, 0));
  std::vector<int64_t> last(kProducers, -1);
  uint64_t total = 0, empty_polls = 0;
  std::string error;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  go.store(true, std::memory_order_release);
  while (total < uint64_t{kProducers} * kPerProducer && error.empty()) {
    QueueNode* n = q.dequeue();
    if (n == nullptr) {
      // Nothing ready: producers are behind, or one is between its exchange
      // and its link.  The consumer does not spin on the queue.
      if (++empty_polls % 64 == 0) {
        std::this_thread::yield();
        if (std::chrono::steady_clock::now() > deadline)
          error = "timed out with " + std::to_string(total) + " nodes dequeued";
      }
      continue;
    }
    Item* it = item_of(n);
    if (it->producer >= kProducers || it->seq >= kPerProducer ||
        n != &items[it->producer][it->seq].node) {
      error = "dequeued a node that was never enqueued";
      break;
    }
    if (seen[it->producer][it->seq]++ != 0) {
      error = "producer " + std::to_string(it->producer) + " seq " + std::to_string(it->seq) +
              " dequeued twice";
      break;
    }
    if (static_cast<int64_t>(it->seq) <= last[it->producer]) {
      error = "producer " + std::to_string(it->producer) + ": seq " + std::to_string(it->seq) +
              " after " + std::to_string(last[it->producer]);
      break;
    }
    last[it->producer] = it->seq;
    total++;
  }
  for (auto& t : producers) t.join();
  if (!error.empty()) return error;
  if (total != uint64_t{kProducers} * kPerProducer) return "not every node came out";
  // Everything is out; the queue is empty and stays usable.
  if (q.dequeue() != nullptr) return "a node came out after the last one";
  if (q.maybe_nonempty()) return "maybe_nonempty() after the last node";
  q.enqueue(&items[0][0].node, &items[0][0].node);
  if (q.dequeue() != &items[0][0].node) return "the queue is unusable after a round";
  if (q.dequeue() != nullptr) return "a node came out twice";
  return "";
}

}  // namespace

TEST(MpscQueue, ManyProducersOneConsumerEveryNodeOnceInProducerOrder) {
  for (unsigned round = 0; round < 4; round++)
    ASSERT_EQ(many_producers_round(round), "") << "round " << round;
}
