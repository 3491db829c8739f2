// Litmus tests of the memory orders roost's protocols rest on, with the
// primitives they use (ds/mpsc_queue.h, ds/fence.h), run by two threads in
// lockstep many times: each outcome the protocol forbids is counted, and
// must never occur.
//
//   store buffering (SB): one side makes its work visible and then reads the
//   other's flag, the other sets its flag and then looks for work; at least
//   one must see the other.  Acquire and release do not give that (x86-64
//   itself reorders a store with a later load); the full fence on both
//   sides does.  The shape of Messenger::deliver() against set_parked() (an
//   enqueue, then the parked flag) and against the service's look at the
//   live-mail flag (take_live_mail_flag(), then the inboxes), and of
//   service::want() against the service going idle.  Without either fence
//   these tests fail on x86-64 hardware within a few thousand trials.
//   message passing (MP): a node's contents written by the producer before
//   the enqueue are what the consumer reads after the dequeue (the
//   enqueue's release, the dequeue's acquire).  ThreadSanitizer reports a
//   race here if either is weakened; weak hardware (AArch64) may show the
//   old contents.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "ds/fence.h"
#include "ds/mpsc_queue.h"

using namespace roost;

namespace {

constexpr unsigned kRounds = 5000;
constexpr unsigned kPerRound = 32;  // trials per round, each on its own cell

// Two threads meet at each step (spinning, yielding when the other is off
// its core, as on a loaded 2-core machine).
class Steps {
 public:
  void meet(unsigned step) {
    arrived_.fetch_add(1, std::memory_order_acq_rel);
    for (unsigned spins = 0; arrived_.load(std::memory_order_acquire) < 2 * (step + 1); spins++)
      if (spins > 256) std::this_thread::yield();
  }

 private:
  std::atomic<unsigned> arrived_{0};
};

struct Cell {
  MpscQueue queue;
  QueueNode node;
  std::atomic<bool> flag{false};
  bool sender_saw_flag = false;
  bool looker_saw_mail = false;
};

// One SB test: `flag_initially` is the flag's value before each trial;
// `take_flag` has the looker clear it with an exchange (the live-mail flag)
// instead of setting it (the parked flag).  Returns the trials where the
// sender saw the flag as it was and the looker saw no mail: the outcome the
// fences forbid.
unsigned store_buffering(bool flag_initially, bool take_flag) {
  auto cells = std::make_unique<Cell[]>(kPerRound);
  Steps steps;
  unsigned forbidden = 0;
  std::thread looker([&] {
    for (unsigned r = 0; r < kRounds; r++) {
      steps.meet(2 * r);
      for (unsigned k = 0; k < kPerRound; k++) {
        Cell& c = cells[k];
        if (take_flag)
          c.flag.exchange(false, std::memory_order_relaxed);
        else
          c.flag.store(true, std::memory_order_relaxed);
        full_fence();
        c.looker_saw_mail = c.queue.maybe_nonempty();
      }
      steps.meet(2 * r + 1);
    }
  });
  for (unsigned r = 0; r < kRounds; r++) {
    for (unsigned k = 0; k < kPerRound; k++) {
      cells[k].queue.init();
      cells[k].flag.store(flag_initially, std::memory_order_relaxed);
    }
    steps.meet(2 * r);
    for (unsigned k = 0; k < kPerRound; k++) {
      Cell& c = cells[k];
      c.queue.enqueue(&c.node, &c.node);
      full_fence();
      c.sender_saw_flag = c.flag.load(std::memory_order_relaxed) == flag_initially;
    }
    steps.meet(2 * r + 1);
    for (unsigned k = 0; k < kPerRound; k++)
      if (cells[k].sender_saw_flag && !cells[k].looker_saw_mail) forbidden++;
  }
  looker.join();
  return forbidden;
}

}  // namespace

// deliver() against set_parked(): the sender enqueues, fences and reads the
// parked flag; the parker sets it, fences, and (through the service) looks
// at the inbox.  Never both miss.
TEST(Litmus, AnEnqueueAndTheParkedFlagAreNeverBothMissed) {
  EXPECT_EQ(store_buffering(false, false), 0u) << "of " << kRounds * kPerRound << " trials";
}

// deliver() against the service's look at bound inboxes: the sender
// enqueues, fences, and finds the live-mail flag still set (so it does not
// call the service); the service takes the flag, fences, and looks.  Never
// both miss: the look finds the mail.
TEST(Litmus, AnEnqueueIsSeenByTheLookThatTookTheLiveMailFlag) {
  EXPECT_EQ(store_buffering(true, true), 0u) << "of " << kRounds * kPerRound << " trials";
}

// MP through the queue: each node's payload, written just before its
// enqueue, is what the consumer reads after dequeuing it.
TEST(Litmus, AnEnqueuedNodesContentsAreWhatTheConsumerReads) {
  struct Message {
    QueueNode node;
    uint64_t payload[4];
  };
  static_assert(offsetof(Message, node) == 0);
  constexpr unsigned kMessages = 20000;
  auto messages = std::make_unique<Message[]>(kMessages);
  MpscQueue queue;
  std::atomic<bool> go{false};
  std::thread producer([&] {
    while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
    for (unsigned i = 0; i < kMessages; i++) {
      Message& m = messages[i];
      for (unsigned w = 0; w < 4; w++) m.payload[w] = uint64_t{i} * 4 + w + 1;
      queue.enqueue(&m.node, &m.node);
    }
  });
  go.store(true, std::memory_order_release);
  std::string error;
  unsigned received = 0, polls = 0;
  while (received < kMessages && error.empty()) {
    QueueNode* n = queue.dequeue();
    if (n == nullptr) {
      if (++polls % 64 == 0) std::this_thread::yield();
      continue;
    }
    auto* m = reinterpret_cast<Message*>(n);
    unsigned i = static_cast<unsigned>(m - messages.get());
    for (unsigned w = 0; w < 4; w++)
      if (m->payload[w] != uint64_t{i} * 4 + w + 1)
        error = "message " + std::to_string(i) + " word " + std::to_string(w) + " reads " +
                std::to_string(m->payload[w]);
    received++;
  }
  producer.join();
  EXPECT_EQ(error, "");
  EXPECT_EQ(received, kMessages);
}
