// Back-pressure's decisions (frontend/backpressure.h): when a refill that
// would take fresh memory waits for its objects first, and how the budget
// adapts; the hunger count senders read.  Waiting itself is the
// allocator's (tested through the API in ../backpressure_test.cc).
#include "frontend/backpressure.h"

#include <gtest/gtest.h>

#include <cstdint>

using namespace roost;

namespace {

constexpr uint64_t kStart = config::kBackpressureStartBytes;

TEST(Backpressure, WaitsOnlyOverItsBudgetAndOnlyWhenObjectsHaveComeHome) {
  Backpressure b;
  b.load_options(true, 0, 100000, 0);
  EXPECT_EQ(b.budget(), kStart);
  EXPECT_EQ(b.wait_ns(), 100000u);
  EXPECT_FALSE(b.should_wait(kStart - 1, 100));
  EXPECT_TRUE(b.should_wait(kStart, 100));
  EXPECT_FALSE(b.should_wait(kStart * 8, 0)) << "nobody ever freed its objects";
  Backpressure off;
  off.load_options(false, 0, 100000, 0);
  EXPECT_FALSE(off.should_wait(kStart * 8, 100));
}

TEST(Backpressure, AThreadTakingAnAllocatorWaitsOnlyOnceItsOwnObjectsCameHome) {
  Backpressure b;
  b.load_options(true, 0, 100000, 500);  // 500 came home under the allocator's last thread
  EXPECT_FALSE(b.should_wait(kStart * 8, 500));
  EXPECT_TRUE(b.should_wait(kStart * 8, 501));
}

TEST(Backpressure, AFruitlessWaitDoublesTheBudgetAndHoldingLittleHalvesIt) {
  Backpressure b;
  b.load_options(true, 0, 100000, 0);
  b.waited(true);  // fed: unchanged
  EXPECT_EQ(b.budget(), kStart);
  b.waited(false);
  b.waited(false);
  b.waited(false);
  EXPECT_EQ(b.budget(), kStart * 8);
  EXPECT_FALSE(b.should_wait(kStart * 4, 1));  // half of it: neither waits nor shrinks
  EXPECT_EQ(b.budget(), kStart * 8);
  EXPECT_FALSE(b.should_wait(kStart, 1));  // under a quarter, and at least the start: halved
  EXPECT_EQ(b.budget(), kStart * 4);
  EXPECT_FALSE(b.should_wait(kStart, 1));  // a quarter of it: kept
  EXPECT_EQ(b.budget(), kStart * 4);
  // Holding little (a thread that has just taken the allocator): kept.
  EXPECT_FALSE(b.should_wait(kStart / 2, 1));
  EXPECT_FALSE(b.should_wait(0, 1));
  EXPECT_EQ(b.budget(), kStart * 4);
  // Never below where it started.
  Backpressure c;
  c.load_options(true, 0, 100000, 0);
  EXPECT_FALSE(c.should_wait(0, 1));
  EXPECT_FALSE(c.should_wait(kStart / 8, 1));
  EXPECT_EQ(c.budget(), kStart);
  for (int i = 0; i < 100; i++) b.waited(false);
  EXPECT_EQ(b.budget(), config::kBackpressureMaxBytes);  // capped
}

// A thread taking the allocator after another keeps the budget its
// predecessors taught it (unless a fixed budget is set, or was).
TEST(Backpressure, TheNextThreadKeepsAnAdaptiveBudget) {
  Backpressure b;
  b.load_options(true, 0, 100000, 0);
  b.waited(false);
  b.waited(false);
  b.load_options(true, 0, 100000, 10);
  EXPECT_EQ(b.budget(), kStart * 4);
  b.load_options(true, 1 << 20, 100000, 10);
  EXPECT_EQ(b.budget(), uint64_t{1} << 20);
  b.load_options(true, 0, 100000, 10);
  EXPECT_EQ(b.budget(), kStart);
}

TEST(Backpressure, AFixedBudgetStaysPut) {
  Backpressure b;
  b.load_options(true, 1 << 20, 100000, 0);
  EXPECT_EQ(b.budget(), uint64_t{1} << 20);
  b.waited(false);
  EXPECT_FALSE(b.should_wait(0, 1));
  EXPECT_EQ(b.budget(), uint64_t{1} << 20);
  EXPECT_TRUE(b.should_wait(1 << 20, 1));
}

TEST(Backpressure, HungerLastsWhileAWaitDoes) {
  EXPECT_FALSE(Backpressure::anyone_hungry());
  {
    Backpressure::Hungry one;
    EXPECT_TRUE(Backpressure::anyone_hungry());
    {
      Backpressure::Hungry two;
      EXPECT_TRUE(Backpressure::anyone_hungry());
    }
    EXPECT_TRUE(Backpressure::anyone_hungry());
  }
  EXPECT_FALSE(Backpressure::anyone_hungry());
}

// Each call for objects gets one early post from each sender: a sender
// answers a call once, whatever the stretches it ends while the wait
// lasts, and a waiter that calls again is answered again.
TEST(Backpressure, EachSenderAnswersEachCallOnce) {
  Backpressure first, second;
  EXPECT_FALSE(first.answer_call());  // nobody waits
  {
    Backpressure::Hungry waiting;
    EXPECT_TRUE(first.answer_call());
    EXPECT_FALSE(first.answer_call());  // answered: no post per stretch
    EXPECT_TRUE(second.answer_call());  // another sender answers it too
    Backpressure::Hungry::call();       // its mail brought nothing it needs
    EXPECT_TRUE(first.answer_call());
    EXPECT_FALSE(first.answer_call());
    EXPECT_TRUE(second.answer_call());
  }
  Backpressure::Hungry::call();       // (a call made as a wait ends)
  EXPECT_FALSE(first.answer_call());  // nobody waits any more
}

}  // namespace
