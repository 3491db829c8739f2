// frontend/backpressure.h — the allocator as back-pressure (BatchIt §5.2):
// a thread whose objects other threads free, and that holds more than its
// budget of slabs, waits a moment for its objects to come home before it
// takes fresh memory; while it waits it is hungry and calls for its objects,
// and the threads holding them answer each call with one early post (they
// look for calls at the end of each stretch of their outbox,
// frontend/outbox.h).  A waiter whose mail brought nothing of its class
// calls again.  One answer per call, not a post per stretch while the wait
// lasts: a wait that the first post feeds costs the senders one post.
//
// A producer that outruns its consumers thus runs at their pace instead of
// carving memory for the queue between them.  The budget adapts: a wait
// that brings nothing of the class home (the objects are kept: a cache, a
// leak, a queue that only grows) doubles it, so such a program pays a few
// bounded waits in all; holding under a quarter of it (and at least where
// it started) halves it again.  ROOST_BACKPRESSURE_BYTES fixes it, and
// ROOST_BACKPRESSURE=0 turns the whole off.
//
// Owns: the budget, the decision to wait and how long a wait lasts at most;
// the process-wide count of hungry allocators.  Must never: wait itself
// (the allocator does, bounded by wait_ns()), be consulted on a fast path,
// or make a thread whose objects nobody else has ever freed wait.
#pragma once

#include <atomic>
#include <cstdint>

#include "config.h"
#include "ds/bits.h"

namespace roost {

class Backpressure {
 public:
  constexpr Backpressure() = default;

  // The options in force, for a thread taking the allocator: `on`, a fixed
  // budget (0: adaptive) and the longest wait; `received`: the objects the allocator's
  // inbox has brought home so far (under its earlier threads: the new one
  // waits only once its own objects have come home).  The service's own
  // allocator never waits.  An adaptive budget keeps what the allocator's
  // earlier threads taught it: threads that take a pooled allocator in
  // turn (a pool's workers, generations of threads) mostly do the same
  // work, and starting each from the start would cost each its own
  // fruitless waits.
  void load_options(bool on, uint64_t fixed_budget, uint64_t wait_ns, uint64_t received) {
    on_ = on;
    wait_ns_ = wait_ns;
    bool was_fixed = fixed_;
    fixed_ = fixed_budget != 0;
    if (fixed_)
      budget_ = fixed_budget;
    else if (was_fixed)
      budget_ = config::kBackpressureStartBytes;
    received_before_ = received;
  }

  // A refill found no free object of its class and would take fresh
  // memory: should it wait for its mail first?  `held`: bytes of slabs the
  // allocator holds; `received`: objects its inbox ever brought home (none
  // since its thread took it: nobody else frees that thread's objects, and
  // nothing would come).  An adaptive budget halves while the allocator
  // holds under a quarter of it but at least the starting budget: a thread
  // that settled well below what it once needed; not one that has just
  // taken the allocator and holds little yet.
  bool should_wait(uint64_t held, uint64_t received) {
    if (!on_ || received == received_before_) return false;
    if (!fixed_ && held < budget_ >> 2 && held >= config::kBackpressureStartBytes) budget_ >>= 1;
    return held >= budget_;
  }

  // A wait ended; `fed`: it brought objects of the class home.  One that
  // did not doubles an adaptive budget.
  void waited(bool fed) {
    if (!fed && !fixed_ && budget_ < config::kBackpressureMaxBytes) budget_ <<= 1;
  }

  uint64_t budget() const { return budget_; }
  // The longest one wait lasts (ROOST_BACKPRESSURE_WAIT_US).
  uint64_t wait_ns() const { return wait_ns_; }

  // While an allocator waits, it is hungry: it calls for its objects as
  // it starts, and again (call()) when its mail brought nothing it needs.
  class Hungry {
   public:
    // Relaxed, all: hints that make senders post sooner; the waiter looks
    // at its inbox itself (an answer it misses costs it a stretch's delay,
    // a lost call at most the wait's bound).
    Hungry() {
      g_hungry.fetch_add(1, std::memory_order_relaxed);
      call();
    }
    ~Hungry() { g_hungry.fetch_sub(1, std::memory_order_relaxed); }
    Hungry(const Hungry&) = delete;
    Hungry& operator=(const Hungry&) = delete;
    static void call() {
      // Relaxed: a hint, as above.
      g_calls.fetch_add(1, std::memory_order_relaxed);
    }
  };
  // The sender's look, once a stretch of its outbox: is an allocator
  // waiting with a call this one has not answered?  Then it is answered
  // now: the caller posts.  One load of a line written only as waits
  // start, call and end, and a second while one waits.  Relaxed: a stale
  // answer delays a post or adds one.
  bool answer_call() {
    if (ROOST_LIKELY(g_hungry.load(std::memory_order_relaxed) == 0)) return false;
    uint32_t calls = g_calls.load(std::memory_order_relaxed);
    if (calls == answered_) return false;
    answered_ = calls;
    return true;
  }
  // Does any allocator wait for its objects now, and how many?  Relaxed: a
  // hint, as above (and a figure for the statistics).
  static bool anyone_hungry() { return g_hungry.load(std::memory_order_relaxed) != 0; }
  static uint32_t hungry_now() { return g_hungry.load(std::memory_order_relaxed); }
  // A forked child has only the thread that forked, which was not waiting
  // (relaxed: the child has one thread).
  static void after_fork_in_child() { g_hungry.store(0, std::memory_order_relaxed); }

 private:
  static inline std::atomic<uint32_t> g_hungry{0};
  // Calls made so far (wrapping): a sender answers each once.
  static inline std::atomic<uint32_t> g_calls{0};

  uint64_t budget_ = config::kBackpressureStartBytes;
  uint64_t wait_ns_ = 0;
  uint64_t received_before_ = 0;
  uint32_t answered_ = 0;  // the last call this allocator answered (answer_call)
  bool on_ = false;
  bool fixed_ = false;
};

}  // namespace roost
