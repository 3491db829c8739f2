// ds/counter.h — statistics counters shared between threads.
//
// Owns: how a counter is read by a thread that does not write it, and how
// a counter many threads write is added to.  Most counters belong to one
// thread, which increments them with plain instructions (the fast paths
// cannot afford an atomic read-modify-write); statistics read them from
// other threads with a relaxed atomic load (std::atomic_ref), so a figure
// read while its thread runs is approximate.  The malloc fast path's
// per-class counts may be narrower, widened to 64 bits by their owner's
// folds (EventCounts).  Also how statistics read other fields their owners write
// plainly (ROOST_RACY_READER).  Must never: be used for anything but
// statistics (and the heap profiler's sample points, read by the owner), or
// order memory accesses other than a count's own.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "ds/bits.h"

namespace roost {

// Marks a function that reads, for statistics, fields their owners write
// with plain stores as they run (slab records): it reads each with
// ROOST_RACY_LOAD (a relaxed atomic load of the field's bytes, expanded in
// place), and ThreadSanitizer, which would report those stores against its
// loads, does not instrument it.  Its figures are approximate while the
// owners run, exact once they stop.
#define ROOST_RACY_READER __attribute__((no_sanitize("thread")))
#define ROOST_RACY_LOAD(field, type) \
  __atomic_load_n(reinterpret_cast<const type*>(&(field)), __ATOMIC_RELAXED)

// Reads a counter that its own thread may be writing.  Relaxed: a figure,
// ordering nothing (an aligned 64-bit word: never torn on x86-64 or
// AArch64).
template <typename Word>
ROOST_INLINE Word read_counter(const Word& counter) {
  return std::atomic_ref(const_cast<Word&>(counter)).load(std::memory_order_relaxed);
}

// Counts one event in a counter its own thread writes, on a fast path: a
// plain increment (one writer; readers never see the aligned store torn).
// Under ThreadSanitizer a relaxed load and store instead, as bump_counter:
// the service thread's allocator (full offload) counts while statistics
// read, and the sanitizer would report the plain write.
template <typename Word>
ROOST_INLINE void count_event(Word& counter) {
#if defined(__SANITIZE_THREAD__)
  std::atomic_ref c(counter);
  c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
#else
  counter++;
#endif
}

// Adds `n` to a counter only the calling thread writes, as a relaxed atomic
// load and store (plain moves, no read-modify-write): for counters off the
// fast paths that a thread other than the usual one may write (the service
// thread, delivering a parked allocator's mail), so that readers' loads
// never race with a plain write.
template <typename Word>
ROOST_INLINE void bump_counter(Word& counter, std::type_identity_t<Word> n = 1) {
  std::atomic_ref c(counter);
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

// Per-index counts of events that one thread makes on a fast path (an
// allocator's allocations, per size class), kept there in a narrower word
// than 64 bits where that spares the fast path an instruction (the
// allocator's choice: config::kNarrowAllocCounts).  The owner also counts
// events where it installs what its fast path will count (an allocator's
// refill, which hands out a list's first object): count_and_fold(), at most
// 2^StepBits events apart.  There, now and then, it folds the count into 64
// bits: whenever the narrow word, modulo a quarter of its range, is below
// 2^StepBits.  No run of steps that short passes that window by, so a fold
// comes at least once every quarter range; a refill outside it pays a
// load, a test and a branch.  A fold records the whole count, and the
// narrow word never restarts: read() is the last fold's figure plus the
// narrow difference since.  Counts only grow (what takes events back keeps
// its own count).
template <unsigned N, typename Word, unsigned StepBits>
class EventCounts {
 public:
  // One event of `i`, on a fast path: a plain increment.
  ROOST_INLINE void count(unsigned i) { count_event(low_[i]); }
  // One event of `i` where the owner installs what its fast path counts
  // (see above): counted, and folded in the window.
  void count_and_fold(unsigned i) {
    count(i);
    if constexpr (!kWhole) {
      if (ROOST_UNLIKELY((low_[i] & kFoldWindow) == 0)) publish(mark_[i], low_[i]);
    }
  }
  // The events of `i` so far, read by any thread (approximate while the
  // owner counts).  The fold's release and this acquire: a narrow word
  // read after a fold is never older than the fold's.
  uint64_t read(unsigned i) const {
    if constexpr (kWhole) {
      return read_counter(low_[i]);
    } else {
      uint64_t mark =
          std::atomic_ref(const_cast<uint64_t&>(mark_[i])).load(std::memory_order_acquire);
      Word low = read_counter(low_[i]);
      return mark + static_cast<Word>(low - static_cast<Word>(mark));
    }
  }

 private:
  // 64-bit words: the count itself, never folded.
  static constexpr bool kWhole = sizeof(Word) >= sizeof(uint64_t);
  static constexpr unsigned kBits = 8 * sizeof(Word);
  static_assert(kWhole || StepBits + 2 < kBits, "steps must be short against the word");
  // The bits that are all zero in the fold window: bits StepBits up to two
  // below the top (a quarter range).
  static constexpr Word kFoldWindow = kWhole
                                          ? 0
                                          : static_cast<Word>(((uint64_t{1} << (kBits - 2)) - 1) &
                                                              ~((uint64_t{1} << StepBits) - 1));

  // The whole count into `mark`, its narrow word being `low` now.
  static void publish(uint64_t& mark, Word low) {
    uint64_t whole = mark + static_cast<Word>(low - static_cast<Word>(mark));
    // Release: pairs with read()'s acquire (the narrow word's stores before
    // it are seen with it).
    std::atomic_ref(mark).store(whole, std::memory_order_release);
  }

  // Whole words are never folded: no marks.
  struct NoMarks {};
  using Marks = std::conditional_t<kWhole, NoMarks, std::array<uint64_t, N>>;

  Word low_[N] = {};                       // the narrow words, counted on
  [[no_unique_address]] Marks mark_ = {};  // the whole count at the last fold
};

// Adds to a counter that any thread may add to.  Relaxed: only the sum
// matters, and the read-modify-write keeps every addition.
ROOST_INLINE void add_shared_counter(uint64_t& counter, uint64_t n) {
  std::atomic_ref(counter).fetch_add(n, std::memory_order_relaxed);
}

}  // namespace roost
