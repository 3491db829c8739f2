// frontend/sampler.h — where an allocator's next heap-profile samples fall,
// per size class (ROOST_PROFILE).
//
// The malloc fast path counts nothing for the profiler: it pops the class's
// fast list as always.  Instead, with profiling on, a refill hands the fast
// list no more objects than fit before the class's next sample point, so
// the allocation that reaches the point finds the list empty and takes the
// refill (a slow path), which serves it as a sampled object.  The bytes
// allocated since the last refill are the class's allocation count (which
// the fast path keeps for statistics anyway) times the class size.
// Objects a cut leaves over wait here, held, and go to the fast list at
// the next refill.
//
// Owns, per class: the bytes from the class's allocation count when last
// looked at to its next sample point, that count, and the held objects.
// Must never: be touched on a fast path, or with profiling off; hold
// objects an allocator's release does not get back (release_held).
#pragma once

#include <cstdint>

#include "ds/freelist.h"
#include "ds/sizeclass.h"

namespace roost {

class Sampler {
 public:
  constexpr Sampler() = default;
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Has every class a sample point (see start())?
  bool started() const { return started_; }
  // Sets every class's next sample point `draw(sc)` bytes away from its
  // allocation count now (`allocs[sc]`).
  template <typename Draw>
  void start(const uint64_t* allocs, Draw&& draw) {
    for (unsigned sc = 0; sc < sizeclass::kCount; sc++) {
      seen_[sc] = allocs[sc];
      left_[sc] = static_cast<int64_t>(draw(sc));
    }
    started_ = true;
  }

  // The bytes from the next object of class `sc` to its sample point, the
  // class having counted `allocs` allocations now (negative: the point was
  // passed, which a cut makes happen only when something allocated without
  // one, a thread inside the profiler).
  int64_t left(unsigned sc, uint64_t allocs) {
    int64_t size = sizeclass::kInfo.info[sc].size;
    left_[sc] -= static_cast<int64_t>(allocs - seen_[sc]) * size;
    seen_[sc] = allocs;
    return left_[sc];
  }
  // The object at the sample point was sampled: the next point is `bytes`
  // past it (memoryless: the object's own bytes past the point are not
  // counted again).
  void restart(unsigned sc, uint64_t bytes) { left_[sc] = static_cast<int64_t>(bytes); }

  // Objects a cut left over, for the next refill (nullptr: none).
  FreeObject* take_held(unsigned sc) {
    FreeObject* list = held_[sc];
    held_[sc] = nullptr;
    return list;
  }
  void hold(unsigned sc, FreeObject* list) { held_[sc] = list; }

  // Every class's held objects go to the front of its fast list (in
  // `fast_lists`), so that an allocator releasing its fast lists releases
  // them too.  `next(sc, o)`: the successor of `o` on a list of class sc.
  template <typename Next>
  void release_held(FreeObject* (&fast_lists)[sizeclass::kCount], Next&& next) {
    for (unsigned sc = 0; sc < sizeclass::kCount; sc++) {
      FreeObject* list = take_held(sc);
      if (list == nullptr) continue;
      FreeObject* tail = list;
      for (FreeObject* n; (n = next(sc, tail)) != nullptr;) tail = n;
      freelist::set_next(tail, fast_lists[sc]);
      fast_lists[sc] = list;
    }
  }

 private:
  int64_t left_[sizeclass::kCount] = {};
  uint64_t seen_[sizeclass::kCount] = {};
  FreeObject* held_[sizeclass::kCount] = {};
  bool started_ = false;
};

}  // namespace roost
