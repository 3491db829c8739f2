// ds/counter.h — statistics counters shared between threads.
//
// Owns: how a counter is read by a thread that does not write it, and how
// a counter many threads write is added to.  Most counters belong to one
// thread, which increments them with plain instructions (the fast paths
// cannot afford an atomic read-modify-write); statistics read them from
// other threads with a relaxed atomic load (std::atomic_ref), so a figure
// read while its thread runs is approximate.  Also how statistics read other
// fields their owners write plainly (ROOST_RACY_READER).  Must never: be
// used for anything but statistics, or order other memory accesses.
#pragma once

#include <atomic>
#include <cstdint>

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
ROOST_INLINE uint64_t read_counter(const uint64_t& counter) {
  return std::atomic_ref(const_cast<uint64_t&>(counter)).load(std::memory_order_relaxed);
}

// Counts one event in a counter its own thread writes, on a fast path: a
// plain increment (one writer; readers never see the aligned store torn).
// Under ThreadSanitizer a relaxed load and store instead, as bump_counter:
// the service thread's allocator (full offload) counts while statistics
// read, and the sanitizer would report the plain write.
ROOST_INLINE void count_event(uint64_t& counter) {
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
ROOST_INLINE void bump_counter(uint64_t& counter, uint64_t n = 1) {
  std::atomic_ref c(counter);
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

// Adds to a counter that any thread may add to.  Relaxed: only the sum
// matters, and the read-modify-write keeps every addition.
ROOST_INLINE void add_shared_counter(uint64_t& counter, uint64_t n) {
  std::atomic_ref(counter).fetch_add(n, std::memory_order_relaxed);
}

}  // namespace roost
