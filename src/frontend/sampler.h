// frontend/sampler.h — where an allocator's next heap-profile samples fall,
// per size class (ROOST_PROFILE).
//
// The malloc fast path counts nothing for the profiler: it pops the class's
// fast list as always.  Instead, with profiling on, a refill hands the fast
// list no more objects than fit before the class's next sample point, so
// the allocation that reaches the point finds the list empty and takes the
// refill (a slow path), which serves it as a sampled object.  A point is
// kept as the value the class's allocation count (which the fast path
// keeps for statistics anyway) will have when the object holding it is
// handed out; the bytes drawn to it become objects of the class's size
// once per sample (a division, on that slow path only).  A refill whose
// list cannot reach the point (a list holds at most a slab's capacity)
// compares the count with one number and is done.  Objects a cut leaves
// over wait here, held, until the point's refill.
//
// A sampled object is a large object of a chunk of its own
// (frontend/profile.h).  The chunks of small ones, once freed, wait here, a
// few for the whole process, for the next sampled objects of any thread:
// whichever thread frees them (in a pipeline, not the one that allocated
// them), the next sample then takes no lock and touches no backend
// structure, only a slot of a SlotPool.  They are apart from the chunk
// cache, whose reserve and whose resident chunks are the slabs'.
//
// Owns, per class: the next sample point, the count from which a refill
// may reach it, the held objects and the count of sampled objects;
// process-wide, the spare chunks.  Must never: be touched on a fast path,
// or with profiling off; hold objects an allocator's release does not get
// back (release_held), or chunks trim does not (release_spares).
#pragma once

#include <cstdint>

#include "backend/chunk_meta.h"
#include "ds/counter.h"
#include "ds/freelist.h"
#include "ds/sizeclass.h"
#include "ds/slot_pool.h"

namespace roost {

class Sampler {
 public:
  constexpr Sampler() = default;
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Has every class a sample point (see start())?
  bool started() const { return started_; }
  // Sets every class's next sample point `draw(sc)` bytes from its next
  // object, the class's allocation count being `allocs(sc)` now.
  template <typename Allocs, typename Draw>
  void start(Allocs&& allocs, Draw&& draw) {
    for (unsigned sc = 0; sc < sizeclass::kCount; sc++) restart(sc, allocs(sc), draw(sc));
    started_ = true;
  }

  // Can no list a refill hands out reach class `sc`'s point, its count
  // being `allocs`?  (Not started, or objects held: false.)
  bool beyond_reach(unsigned sc, uint64_t allocs) const {
    return static_cast<int64_t>(allocs) < reach_from_[sc];
  }
  // The objects class `sc` hands out, its count being `allocs`, before the
  // one holding its point (0: the next one holds it; negative: the point
  // was passed, which happens only when something allocated without a
  // sample point, a thread inside the profiler).
  int64_t ahead(unsigned sc, uint64_t allocs) const {
    return static_cast<int64_t>(point_[sc] - allocs);
  }
  // The next point of class `sc` is `bytes` from its next object, its count
  // being `allocs` (memoryless: after a sampled object, the object's own
  // bytes past its point are not counted again).
  void restart(unsigned sc, uint64_t allocs, uint64_t bytes) {
    point_[sc] = allocs + bytes / sizeclass::kInfo.info[sc].size;
    reach_from_[sc] = static_cast<int64_t>(point_[sc]) -
                      static_cast<int64_t>(sizeclass::kInfo.info[sc].capacity) + 1;
  }

  // Objects served at sample points, per class (apart from the class's
  // allocation count, as refill_sampled() says): counted by the owner, read
  // by the statistics from any thread.
  void count_sampled(unsigned sc) { bump_counter(sampled_[sc]); }
  uint64_t sampled(unsigned sc) const { return read_counter(sampled_[sc]); }

  // Objects a cut left over, for the next refill (head nullptr: none), and
  // how many.
  struct Held {
    FreeObject* head;
    uint32_t length;
  };
  Held take_held(unsigned sc) {
    Held held = {held_[sc], held_length_[sc]};
    held_[sc] = nullptr;
    held_length_[sc] = 0;
    return held;
  }
  void hold(unsigned sc, FreeObject* list, uint32_t length) {
    held_[sc] = list;
    held_length_[sc] = length;
  }

  // Every class's held objects go to the front of its fast list (in
  // `fast_lists`, one per class), so that an allocator releasing its fast lists releases
  // them too.  `next(sc, o)`: the successor of `o` on a list of class sc.
  template <typename Next>
  void release_held(FreeObject** fast_lists, Next&& next) {
    for (unsigned sc = 0; sc < sizeclass::kCount; sc++) {
      FreeObject* list = take_held(sc).head;
      if (list == nullptr) continue;
      FreeObject* tail = list;
      for (FreeObject* n; (n = next(sc, tail)) != nullptr;) tail = n;
      freelist::set_next(tail, fast_lists[sc]);
      fast_lists[sc] = list;
    }
  }

  // The process's spare chunks (empty, kind kUnused, each of the smallest
  // order), any thread's: one to take (nullptr: none), one to keep (false:
  // there are enough), and every one to `release`, a function of the chunk.
  static constexpr unsigned kSpareChunks = 16;
  static ChunkMeta* take_spare() { return g_spares.take(); }
  static bool keep_spare(ChunkMeta* m) { return g_spares.put(m); }
  template <typename Release>
  static bool release_spares(Release&& release) {
    bool any = false;
    while (ChunkMeta* m = take_spare()) {
      release(m);
      any = true;
    }
    return any;
  }

 private:
  // Per class: the count at which its point's object is handed out, and
  // the lowest count from which a refill may reach it (a list holds at most
  // a slab's capacity; 0 until started, which every count reaches).
  uint64_t point_[sizeclass::kCount] = {};
  int64_t reach_from_[sizeclass::kCount] = {};
  FreeObject* held_[sizeclass::kCount] = {};
  uint32_t held_length_[sizeclass::kCount] = {};
  uint64_t sampled_[sizeclass::kCount] = {};
  bool started_ = false;

  static inline constinit SlotPool<ChunkMeta, kSpareChunks> g_spares;
};

}  // namespace roost
