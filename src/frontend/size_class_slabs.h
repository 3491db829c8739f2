// frontend/size_class_slabs.h — an allocator's slabs, by size class.
//
// Owns, per class: the active slab (whose bump tail is being carved), the
// available list (awake slabs with free objects, the active one excepted),
// and at most one spare (an emptied slab kept on the available list,
// charged to the chunk cache's reserve); and the count of slabs owned (per
// class, changed only as slabs start and retire).
// Sleeping slabs are on no list: the frees that wake them find them again.
// A parked allocator's slab may be given up to another allocator, which
// adopts it (frontend/adoption.h).  Every step is O(1) but offered_classes(),
// a look at each class.  Its refill steps hand the allocator lists of
// objects for a class's fast list (which the allocator owns).  Must never:
// touch a slab another allocator owns, or hold an empty slab beyond the
// spare (empty slabs go back to the chunk cache).
//
// Slab life: a new slab is its class's active one, carved from its bump
// tail a page at a time for the class's fast list (pages a chunk's previous
// use left resident are carved before the class turns to other slabs, and
// before any untouched page while a cached chunk still has resident ones).
// While active, refills take its free objects directly and frees into it
// bring no state change.  When the class turns to another slab it sleeps
// until the class's wake count of objects have come back since its free
// objects were last taken; woken, it joins the available list until it is
// empty (or taken: it is active again); empty, it stays as the class's
// spare or its chunk goes to the chunk cache, where any size class can
// reuse it.
#pragma once

#include <cstdint>

#include "backend/chunk_meta.h"
#include "ds/bits.h"
#include "ds/counter.h"
#include "ds/dlist.h"
#include "ds/freelist.h"
#include "ds/sizeclass.h"
#include "frontend/checks.h"
#include "frontend/chunk_cache.h"
#include "frontend/slab.h"

namespace roost {

class SizeClassSlabs {
 public:
  // `owner` is what the slabs' records name as their owner.
  constexpr explicit SizeClassSlabs(const void* owner) : owner_(owner) {
    for (unsigned sc = 0; sc < sizeclass::kCount; sc++)
      ramp_left_[sc] = sizeclass::kInfo.info[sc].carve;
  }
  SizeClassSlabs(const SizeClassSlabs&) = delete;
  SizeClassSlabs& operator=(const SizeClassSlabs&) = delete;

  // What its slabs' records name as their owner.
  const void* owner() const { return owner_; }

  // ---- objects for an empty fast list of class `sc`, cheapest first ----
  // Each returns a list of free objects, or nullptr when it has none.

  // The active slab's free objects (freed into it since it was last taken).
  FreeObject* take_from_active(unsigned sc) {
    ChunkMeta* m = active_[sc];
    if (m == nullptr || m->free_head == nullptr) return nullptr;
    FreeObject* list = take_free(m, SlabState::kActive);
    // A class still ramping up (batch()) whose objects cycle through its
    // active slab is in use: its carves go on doubling here, or it would
    // refill every few objects for as long as it cycles.
    if (ROOST_UNLIKELY(ramp_left_[sc] != 0)) list = ramp_up(m, list);
    return list;
  }
  // The active slab's tail, while its next carve stays on resident pages.
  FreeObject* carve_resident_tail(unsigned sc) {
    // The active slab has no free objects here, so it is asleep (an awake
    // slab holds free objects until taken): carving it, or switching away
    // from it, strands nothing.  Resident pages in its tail go first: a
    // slab left with such a tail would sleep on it while the class takes
    // more memory.
    ChunkMeta* m = active_[sc];
    if (m == nullptr || slab::fully_carved(m) || slab::carve_touches_fresh(m, batch(sc)))
      return nullptr;
    return carve(m);
  }
  // An available slab's free objects; it becomes the active one.
  FreeObject* take_available(unsigned sc, ChunkCache& cache) {
    ChunkMeta* m = available_[sc].pop_front();
    if (m == nullptr) return nullptr;
    if (m == spare_[sc]) forget_spare(sc, cache);
    FreeObject* list = take_free(m, SlabState::kAvailable);
    make_active(m, cache);
    return list;
  }
  // The active slab's tail, touching fresh pages only when no cached chunk
  // has resident ones (a slab on that chunk then becomes the active one); or
  // a new slab from `cache`.  nullptr when memory runs out.
  FreeObject* carve_fresh(unsigned sc, ChunkCache& cache);

  // ---- a slab reached its state change (slab::return_object/batch) ----

  // It woke (joins the available list) or became empty (kept as the
  // class's spare within the reserve, else back to `cache`).  True when it
  // went to on_empty (which may release memory to the backend).
  inline bool on_state_change(ChunkMeta* m, ChunkCache& cache);

  // Every object of `m` came home at once and it started over
  // (slab::start_over): the active slab stays, to be carved anew; any
  // other (asleep: on no list) goes back to `cache`.  True when it went.
  bool on_whole_return(ChunkMeta* m, ChunkCache& cache) {
    if (m == active_[m->sizeclass]) return false;
    release(m, cache);
    return true;
  }

  // Lets go of everything not in use: the objects of `fast_lists` (one list
  // per class, emptied) go back to their slabs, no class keeps a spare or
  // an active slab (but one whose carved objects are all out while it has
  // a tail to carve), a slab with free objects is left on the available
  // list, and every empty slab goes back to `cache` (thread exit, trim, a
  // parked allocator's mail delivered).  True if any slab went.
  bool release_unused(FreeObject** fast_lists, ChunkCache& cache);

  // ---- adoption: a slab changes allocators (frontend/adoption.h) ----
  // The giver is parked and held by the caller (the pool lock: no thread,
  // no delivery); the adopter is its thread's own.

  // The classes (bit `sc`: adoption.h's hint) of which this allocator could
  // give a slab: one with free objects on the available list, or an active
  // one with free objects or a tail to carve.
  uint64_t offered_classes() const;
  // Gives up such a slab of class `sc` (nullptr: none): it leaves this
  // allocator's lists and counts, and names `adopter` as its owner from
  // now on.  `cache`: this allocator's (a spare given up is uncharged).
  ChunkMeta* give_up(unsigned sc, const void* adopter, ChunkCache& cache);
  // Gives up slab `m`, whatever its state: as give_up().
  void give_up(ChunkMeta* m, const void* adopter, ChunkCache& cache);
  // Slab `m`, given up to this allocator, becomes its class's active slab;
  // returns its free objects, or the next carve of its tail, for the
  // class's fast list.
  FreeObject* adopt(ChunkMeta* m, ChunkCache& cache);
  // Slab `m`, given up to this allocator, keeps its state (an active one
  // is active no longer): it joins the available list or stays asleep.
  void adopt_as_is(ChunkMeta* m, ChunkCache& cache);

  // How many objects the list holds that the last refill step above (or
  // adopt()) returned: the heap profiler cuts a refill's list at a sample
  // point without walking one that cannot reach it.
  uint32_t last_list_length() const { return last_list_length_; }

  // `n` objects of class `sc` came back to their slab in the mail (for
  // the list balance).
  void note_delivered(unsigned sc, uint32_t n) { bump_counter(list_balance_[sc], -uint64_t{n}); }

  // Statistics, read from any thread.  The list balance of class `sc`: the
  // objects its slabs' free lists gave up (taken for the fast list, or gone
  // with a retired slab) less those they got other than by a local free
  // (the mail, fast lists given back).  Local frees are not counted as they
  // happen (the free fast path has no counter): they are this balance plus
  // the objects on the free lists now (slab::free_objects).
  uint64_t list_balance(unsigned sc) const { return read_counter(list_balance_[sc]); }
  // Slabs owned, of class `sc` and in all.
  uint64_t slab_count(unsigned sc) const { return read_counter(slabs_[sc]); }
  uint64_t slab_count() const {
    uint64_t n = 0;
    for (unsigned sc = 0; sc < sizeclass::kCount; sc++) n += slab_count(sc);
    return n;
  }
  // Bytes of the slabs owned (the owner's own figure: back-pressure).
  uint64_t bytes_held() const { return bytes_held_; }

 private:
  // Starts `m` as class `sc`'s active slab (`keep_resident`: slab::start's).
  void start(ChunkMeta* m, unsigned sc, ChunkCache& cache, size_t keep_resident);
  // slab::take_free() of `m` in `state` (active, or awake: a constant, which
  // spares the general case's branches), its objects counted in the list
  // balance (the owner's own count: exact, not clamped).
  FreeObject* take_free(ChunkMeta* m, SlabState state) {
    auto n =
        static_cast<uint32_t>(slab::owners_free_objects(state, m->needed, m->carved, m->sizeclass));
    bump_counter(list_balance_[m->sizeclass], n);
    last_list_length_ = n;
    return slab::take_free(m);
  }
  // slab::carve() of the active slab `m` in front of `list`.
  FreeObject* carve(ChunkMeta* m, FreeObject* list = nullptr) {
    unsigned sc = m->sizeclass;
    uint32_t n = slab::carve_count(m, batch(sc));
    last_list_length_ = n;
    ramp_left_[sc] = n < ramp_left_[sc] ? ramp_left_[sc] - n : 0;
    return slab::carve(m, list, n);
  }
  // take_from_active()'s `list` (not empty) of the active slab `m`, with
  // its class's next carve behind it where its tail has one (the objects
  // freed last stay first).  The list is short while a class ramps up.
  ROOST_NOINLINE FreeObject* ramp_up(ChunkMeta* m, FreeObject* list);

  // The objects class `sc`'s next carve takes at most: a small page's worth
  // at first, then as many as the class carved before (the carves double)
  // up to its batch.  A class a program uses a little touches a page of it.
  uint32_t batch(unsigned sc) const {
    const sizeclass::ClassInfo& info = sizeclass::kInfo.info[sc];
    uint32_t carved = info.carve - ramp_left_[sc];
    return carved > info.first_carve ? carved : info.first_carve;
  }
  // `m` (already slab::take_free()n, or started) becomes its class's active
  // slab; the one it replaces sleeps, or wakes at once.
  void make_active(ChunkMeta* m, ChunkCache& cache);
  // An awake slab other than the active one became empty.
  void on_empty(ChunkMeta* m, ChunkCache& cache);
  // Class `sc`'s spare is no longer one (taken for use, or released).
  void forget_spare(unsigned sc, ChunkCache& cache);
  void release(ChunkMeta* m, ChunkCache& cache);
  // A slab of class `sc` given up to this allocator counts as its own.
  void count_adopted(unsigned sc);

  ChunkMeta* active_[sizeclass::kCount] = {};
  DList<ChunkMeta> available_[sizeclass::kCount] = {};
  ChunkMeta* spare_[sizeclass::kCount] = {};
  uint64_t slabs_[sizeclass::kCount] = {};         // slabs owned, by class
  uint64_t list_balance_[sizeclass::kCount] = {};  // see list_balance()
  uint64_t bytes_held_ = 0;                        // see bytes_held()
  uint32_t last_list_length_ = 0;                  // see last_list_length()
  uint32_t ramp_left_[sizeclass::kCount] = {};     // objects to carve before a batch: batch()
  uint32_t last_carved_[sizeclass::kCount] = {};   // bytes its last released slab carved
  const void* owner_;
};

bool SizeClassSlabs::on_state_change(ChunkMeta* m, ChunkCache& cache) {
  // The active slab's hold keeps it from here (short of a flood of double
  // frees); it stays as it is whatever comes back, so a class that empties
  // and refills its slab does not thrash through the backend.
  if (slab::is_active(m)) return false;
  if (slab::is_asleep(m)) {
    uint32_t in_use = slab::wake(m);
    available_[m->sizeclass].push_front(m);
    if (in_use != 0) return false;
  }
  on_empty(m, cache);
  return true;
}

}  // namespace roost
