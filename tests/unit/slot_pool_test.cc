// SlotPool (ds/slot_pool.h): a put fills an empty slot and fails once all
// are full; a take empties one and finds nothing once all are empty.
// Threads (more than the cores) that put and take the same things at once
// never take one thing twice and never lose one: each thing is either held
// by exactly one thread or in the pool, checked at every step and at the
// end.
#include "ds/slot_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

using namespace roost;

namespace {

struct Thing {
  std::atomic<int> holders{0};  // threads holding it: 0 while in the pool
};

}  // namespace

TEST(SlotPool, FillsUpToItsCapacityAndEmpties) {
  SlotPool<Thing, 4> pool;
  Thing things[5];
  EXPECT_EQ(pool.take(), nullptr);
  for (Thing& t : things) EXPECT_EQ(pool.put(&t), &t != &things[4]);
  bool taken[4] = {};
  for (int i = 0; i < 4; i++) {
    Thing* t = pool.take();
    ASSERT_NE(t, nullptr);
    ASSERT_LT(t, &things[4]) << "a thing that did not fit came out";
    EXPECT_FALSE(taken[t - things]) << "taken twice";
    taken[t - things] = true;
  }
  EXPECT_EQ(pool.take(), nullptr);
  // Emptied slots take things again.
  EXPECT_TRUE(pool.put(&things[4]));
  EXPECT_EQ(pool.take(), &things[4]);
}

TEST(SlotPool, ThreadsPuttingAndTakingAtOnceNeitherDuplicateNorLose) {
  constexpr int kThreads = 6;
  constexpr int kThingsEach = 8;
  constexpr int kSteps = 200000;
  SlotPool<Thing, 8> pool;
  std::vector<Thing> things(kThreads * kThingsEach);
  std::atomic<int> faults{0};
  std::vector<std::vector<Thing*>> held(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    for (int i = 0; i < kThingsEach; i++) {
      things[t * kThingsEach + i].holders.store(1);
      held[t].push_back(&things[t * kThingsEach + i]);
    }
    threads.emplace_back([&, t] {
      uint32_t x = 2463534242u + static_cast<uint32_t>(t);
      std::vector<Thing*>& mine = held[t];
      for (int step = 0; step < kSteps; step++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        if ((x & 1) != 0 && !mine.empty()) {
          Thing* thing = mine.back();
          thing->holders.fetch_sub(1);  // (before it can be taken)
          if (pool.put(thing)) {
            mine.pop_back();
          } else {
            thing->holders.fetch_add(1);
          }
        } else if (Thing* thing = pool.take()) {
          if (thing->holders.fetch_add(1) != 0) faults.fetch_add(1);
          mine.push_back(thing);
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(faults.load(), 0) << "a thing taken while another thread held it";
  size_t count = 0;
  for (const std::vector<Thing*>& mine : held) count += mine.size();
  while (Thing* thing = pool.take()) {
    EXPECT_EQ(thing->holders.fetch_add(1), 0);
    count++;
  }
  EXPECT_EQ(count, things.size()) << "things lost or duplicated";
  for (const Thing& thing : things) EXPECT_EQ(thing.holders.load(), 1);
}
