// EventCounts (ds/counter.h): a narrow count that its owner folds into 64
// bits.  With 8-bit words and steps of at most 2^2 events between the
// owner's count_and_fold() calls, the narrow word wraps every 256 events
// and read() must still give the exact count after every step, across
// thousands of wraps; steps longer
// than the bound lose wraps (so the exact reads are not vacuous).  64-bit
// words are the count itself.  And a reader on another thread, while the
// owner counts with 32-bit words, never sees the count go down, nor below
// what the owner had counted before the read.
#include "ds/counter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>

using namespace roost;

namespace {

// A small deterministic stream (xorshift).
struct Stream {
  uint32_t x = 2463534242u;
  uint32_t next() {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return x;
  }
};

}  // namespace

TEST(EventCounts, NarrowWordsReadExactlyAcrossThousandsOfWraps) {
  EventCounts<2, uint8_t, 2> c;
  uint64_t truth[2] = {};
  Stream s;
  for (int round = 0; round < 200000; round++) {
    unsigned i = s.next() & 1;
    // A refill: counted, folded in the window.
    c.count_and_fold(i);
    truth[i]++;
    ASSERT_EQ(c.read(i), truth[i]) << "round " << round;
    // The fast path: at most 2^2 - 1 more before the next refill.
    unsigned pops = s.next() % 4;
    for (unsigned k = 0; k < pops; k++) {
      c.count(i);
      truth[i]++;
      ASSERT_EQ(c.read(i), truth[i]) << "round " << round;
    }
  }
  // Far past the 8-bit range, each index on its own.
  EXPECT_GT(truth[0], 100000u);
  EXPECT_GT(truth[1], 100000u);
  EXPECT_EQ(c.read(0), truth[0]);
  EXPECT_EQ(c.read(1), truth[1]);
}

TEST(EventCounts, StepsBeyondTheBoundLoseWraps) {
  EventCounts<1, uint8_t, 2> c;
  c.count_and_fold(0);
  // 300 fast-path events with no refill among them: more than the narrow
  // word holds.
  for (int k = 0; k < 300; k++) c.count(0);
  EXPECT_NE(c.read(0), 301u);
  EXPECT_EQ(c.read(0), 301u - 256u);
}

TEST(EventCounts, WholeWordsAreTheCount) {
  // Nothing beside the words: they are never folded.
  static_assert(sizeof(EventCounts<3, uint64_t, 17>) == 3 * sizeof(uint64_t));
  EventCounts<3, uint64_t, 17> c;
  for (int k = 0; k < 1000; k++) c.count(2);
  c.count_and_fold(2);
  EXPECT_EQ(c.read(2), 1001u);
  EXPECT_EQ(c.read(0), 0u);
}

TEST(EventCounts, AReaderOnAnotherThreadSeesTheCountOnlyGrow) {
  static EventCounts<1, uint32_t, 4> c;
  constexpr uint64_t kEvents = 4'000'000;
  constexpr uint64_t kReads = 10'000;
  std::atomic<uint64_t> counted{0};
  std::atomic<uint64_t> reads{0};
  std::atomic<bool> done{false};
  // The owner keeps counting until the reader has read often enough, so the
  // reads overlap the counting even when the scheduler runs one thread first.
  std::thread owner([&] {
    uint64_t n = 0;
    while (n < kEvents || reads.load(std::memory_order_relaxed) < kReads) {
      c.count_and_fold(0);
      n++;
      for (int k = 0; k < 15; k++) {
        c.count(0);
        n++;
      }
      counted.store(n, std::memory_order_release);
    }
    done.store(true, std::memory_order_release);
  });
  uint64_t last = 0;
  uint64_t went_down = 0;
  while (!done.load(std::memory_order_acquire)) {
    // What the owner had counted before the read.
    uint64_t before = counted.load(std::memory_order_acquire);
    uint64_t v = c.read(0);
    if (v < last || v < before) went_down++;
    last = v;
    reads.fetch_add(1, std::memory_order_relaxed);
  }
  owner.join();
  EXPECT_EQ(went_down, 0u);
  EXPECT_EQ(c.read(0), counted.load());
  EXPECT_GE(reads.load(), kReads);
}
