// ds/bitset.h — a fixed set of small integers, walked in increasing order.
//
// Owns: one bit per member of 0..N-1 and the walk over the members present
// (by count-trailing-zeros, so an empty word costs one test).  Used to visit
// only the outbox buckets and cache sets that hold something.  Must never:
// allocate, or depend on anything above ds/.
#pragma once

#include <cstdint>

#include "ds/bits.h"

namespace roost {

template <unsigned N>
class BitSet {
 public:
  ROOST_INLINE void insert(unsigned i) { words_[i / 64] |= uint64_t{1} << (i % 64); }
  ROOST_INLINE void erase(unsigned i) { words_[i / 64] &= ~(uint64_t{1} << (i % 64)); }
  void clear() {
    for (uint64_t& w : words_) w = 0;
  }

  // Calls fn(i) for every member i, in increasing order, as the set was when
  // the walk reached i's word: fn may erase i, but members inserted during
  // the walk may be missed.
  template <typename Fn>
  void for_each(Fn&& fn) const {
    for (unsigned w = 0; w < kWords; w++) {
      for (uint64_t bits = words_[w]; bits != 0; bits &= bits - 1)
        fn(w * 64 + static_cast<unsigned>(__builtin_ctzll(bits)));
    }
  }

 private:
  static constexpr unsigned kWords = (N + 63) / 64;
  uint64_t words_[kWords] = {};
};

}  // namespace roost
