// ds/slot_pool.h — a few pointers that any thread may leave and any thread
// take, without a lock: a row of slots, each empty or holding one.
//
// For things worth keeping between the threads that free them and the
// threads that need them next (the heap profiler's spare chunks: a
// producer's sampled objects are freed by its consumers).  A put fills an
// empty slot and fails when every slot is full (the caller lets the thing
// go); a take empties a full slot and finds nothing when all are empty.
// Each slot changes hands in one compare-and-swap or exchange of the
// pointer itself (no links, so no ABA): nothing is taken twice or lost.
//
// Owns: the slots.  Must never: block, allocate, or be used on a fast path.
#pragma once

#include <atomic>

namespace roost {

template <typename T, unsigned N>
class SlotPool {
 public:
  constexpr SlotPool() = default;
  SlotPool(const SlotPool&) = delete;
  SlotPool& operator=(const SlotPool&) = delete;

  // Leaves `x` (not nullptr) in an empty slot; false when all are full.
  bool put(T* x) {
    for (std::atomic<T*>& slot : slots_) {
      // Relaxed: a look that spares a full slot's line a write (the
      // exchange decides).
      if (slot.load(std::memory_order_relaxed) != nullptr) continue;
      T* empty = nullptr;
      // release: what the putter wrote to *x before is seen by its taker.
      if (slot.compare_exchange_strong(empty, x, std::memory_order_release,
                                       std::memory_order_relaxed))
        return true;
    }
    return false;
  }

  // Something left here (nullptr: none).
  T* take() {
    for (std::atomic<T*>& slot : slots_) {
      // Relaxed: a look that spares an empty slot's line a write.
      if (slot.load(std::memory_order_relaxed) == nullptr) continue;
      // acquire: pairs with put's release.
      if (T* x = slot.exchange(nullptr, std::memory_order_acquire)) return x;
    }
    return nullptr;
  }

 private:
  std::atomic<T*> slots_[N] = {};
};

}  // namespace roost
