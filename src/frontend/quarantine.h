// frontend/quarantine.h — the hardened build's quarantine: freed small
// objects wait here, in their freeing thread's allocator, before they go
// back to their slabs (config::kQuarantine).
//
// Each free puts its object into a random one of kSlots slots and sends on
// the object that slot held, so an object waits for an unpredictable number
// of frees (kSlots on average) and the order objects come back in is not
// the order they were freed in.  An object is marked freed, filled and
// zeroed before it comes in (frontend/checks.h): a second free of it while
// it waits is caught as at any other time.
//
// Owns: the slots and the choice of slot.  Must never: free anything itself
// (the caller sends on what it returns), or be shared between threads.
#pragma once

#include <cstddef>
#include <cstdint>

#include "config.h"
#include "ds/bits.h"
#include "ds/secret.h"

namespace roost {

template <unsigned kSlots>
class Quarantine {
  static_assert((kSlots & (kSlots - 1)) == 0, "a power of two: a slot is a random number's bits");

 public:
  // `p` comes in; returns the object it displaces (nullptr while a slot is
  // empty), which leaves the quarantine.
  ROOST_INLINE void* admit(void* p) {
    void*& slot = slots_[next_random() & (kSlots - 1)];
    void* out = slot;
    slot = p;
    return out;
  }

  // Every object leaves, each through `release(p)`.
  template <class Release>
  void drain(Release release) {
    for (void*& slot : slots_) {
      void* p = slot;
      slot = nullptr;
      if (p != nullptr) release(p);
    }
  }

 private:
  // xorshift64, seeded on first use from the per-process secret and the
  // quarantine's own address (its allocator's).
  ROOST_INLINE uint64_t next_random() {
    uint64_t x = state_;
    if (ROOST_UNLIKELY(x == 0)) x = secret::g_value ^ reinterpret_cast<uintptr_t>(this);
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    state_ = x;
    return x >> 32;
  }

  void* slots_[kSlots] = {};
  uint64_t state_ = 0;
};

// Where the quarantine is off: nothing waits.
template <>
class Quarantine<0> {
 public:
  ROOST_INLINE void* admit(void* p) { return p; }
  template <class Release>
  void drain(Release) {}
};

}  // namespace roost
