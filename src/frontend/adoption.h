// frontend/adoption.h — slabs of exited threads' allocators, taken over by
// the threads that need them.
//
// An allocator whose thread exited waits in the pool with the slabs its
// objects still live in (frontend/allocator_pool.h).  A thread whose class
// would otherwise take memory no slab uses (a cached or fresh chunk)
// adopts one of them instead: a slab with free objects, or an active one
// with a tail to carve, of that class.  Its owner becomes the adopter in one
// store, made while the pool lock holds the parked giver (no thread of its
// own, no delivery of its mail can run), and the adopter takes its free
// objects as its class's active slab.  With ROOST_ADOPT=2 (experimental),
// a thread that frees an object of a parked allocator's slab adopts that
// slab too, keeping its state, and frees into it as its own.  A free that
// read the old owner sends the object there, and the old owner's receive
// forwards it to the new one, as it forwards any batch of a slab it does
// not own (frontend/ownership.h).  So an exited thread's half-used slabs
// fill with its successors' objects, as a shared heap's would.  On at
// refills by default (ROOST_ADOPT=1); with ROOST_ADOPT=0 the pool offers
// nothing and installs no hook.  Both sides reach an allocator's slabs
// through Slabs (its SizeClassSlabs and chunk cache), which the allocator
// hands out and knows nothing more of: giving up and adopting are this
// component's steps, not the allocator's.
//
// Owns: the per-class hint (some parked allocator may give a slab of the
// class), the hook by which a refill reaches the pool's slabs, the steps
// that give a slab up and adopt it, and the count of slabs adopted.  Must
// never: be consulted on a fast path, wait for the pool lock, or change a
// slab's owner outside it.
#pragma once

#include <atomic>
#include <cstdint>

#include "backend/chunk_meta.h"
#include "ds/bits.h"
#include "ds/freelist.h"
#include "ds/sizeclass.h"
#include "frontend/chunk_cache.h"
#include "frontend/ownership.h"
#include "frontend/size_class_slabs.h"

namespace roost::adoption {

static_assert(sizeclass::kCount <= 64, "one bit of the hint per class");

// Bit `sc`: some parked allocator may give a slab of class `sc`.  Set as an
// allocator parks or its mail is delivered, cleared when a look finds none,
// both under the pool lock, so no set is lost to a clear.  Read anywhere,
// relaxed: a hint (a stale set bit costs one look, a stale clear one slab
// carved from other memory).
inline constinit std::atomic<uint64_t> g_offered{0};
// Slabs adopted since start (statistics): changed under the pool lock,
// read anywhere, relaxed.
inline constinit std::atomic<uint64_t> g_adopted{0};

inline bool may_give(unsigned sc) {
  // Relaxed: a hint, as g_offered says.
  return ((g_offered.load(std::memory_order_relaxed) >> sc) & 1) != 0;
}
// The caller holds the pool lock.
inline void offer(uint64_t classes) {
  // Relaxed, and a read-modify-write only where a bit is new: the pool lock
  // orders the writers; readers take a hint.
  uint64_t now = g_offered.load(std::memory_order_relaxed);
  if ((now | classes) != now) g_offered.fetch_or(classes, std::memory_order_relaxed);
}
inline void withdraw(unsigned sc) {
  // Relaxed: under the pool lock, as offer().
  g_offered.fetch_and(~(uint64_t{1} << sc), std::memory_order_relaxed);
}
inline void count_adopted() {
  // Relaxed load and store: under the pool lock (one writer at a time).
  g_adopted.store(g_adopted.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}
inline uint64_t adopted() {
  return g_adopted.load(std::memory_order_relaxed);  // relaxed: statistics
}

// The pool's side, set once at start-up, before any thread allocates.
struct Source {
  // A slab of class `sc` some parked allocator gives up to `adopter` (its
  // owner already), or nullptr: none to give, or the pool busy.
  ChunkMeta* (*of_class)(unsigned sc, const void* adopter);
  // Slab `m`, whose owner may be parked, given up to `adopter`: false when
  // its owner is not in the pool, or the pool is busy.
  bool (*this_slab)(ChunkMeta* m, const void* adopter);
};
inline constinit Source g_source = {};
// Set only where adoption is on (ROOST_ADOPT=1 or 2); `this_slab` only
// where frees adopt (2).
inline void set_source(const Source& source) { g_source = source; }
inline bool at_frees() { return g_source.this_slab != nullptr; }
inline ChunkMeta* take(unsigned sc, const void* adopter) {
  return g_source.of_class != nullptr ? g_source.of_class(sc, adopter) : nullptr;
}
inline bool take(ChunkMeta* m, const void* adopter) {
  return g_source.this_slab != nullptr && g_source.this_slab(m, adopter);
}

// An allocator's slabs as adoption reaches them: its SizeClassSlabs (whose
// owner is the allocator) and the chunk cache that charges their spare and
// takes their empty chunks.
struct Slabs {
  SizeClassSlabs& slabs;
  ChunkCache& chunks;
};

// ---- the giver's side: a parked allocator, held by the pool lock ----

// The classes (bit `sc`) of which `giver` could give a slab to another.
inline uint64_t offered_classes(const Slabs& giver) { return giver.slabs.offered_classes(); }
// A slab of class `sc` given up to `adopter`, its owner from now on
// (nullptr: none).
inline ChunkMeta* give_up(const Slabs& giver, unsigned sc, const void* adopter) {
  return giver.slabs.give_up(sc, adopter, giver.chunks);
}
// Slab `m`, one of `giver`'s own, given up to `adopter`.
inline void give_up(const Slabs& giver, ChunkMeta* m, const void* adopter) {
  giver.slabs.give_up(m, adopter, giver.chunks);
}

// ---- the adopter's side: its own thread (a refill, a remote free) ----

// A slab of class `sc` a parked allocator gives up, as the class's active
// slab of `adopter`: a list for the class's fast list, or nullptr.  (Apart
// from the refill that calls it, which it would lengthen.)
ROOST_NOINLINE inline FreeObject* adopt(const Slabs& adopter, unsigned sc) {
  ChunkMeta* m = take(sc, adopter.slabs.owner());
  return m != nullptr ? adopter.slabs.adopt(m, adopter.chunks) : nullptr;
}
// Slab `m`, whose owner is parked, adopted by `adopter` as it is; false
// when its owner would not give it up.
inline bool adopt(const Slabs& adopter, ChunkMeta* m) {
  if (!take(m, adopter.slabs.owner())) return false;
  adopter.slabs.adopt_as_is(m, adopter.chunks);
  return true;
}

// Is the owner of slab `m` (an allocator) parked?  A thread that frees an
// object of it then adopts the slab, so that it and the objects the thread
// frees there stay with a thread that runs.  A hint, read relaxed: the
// pool checks again under its lock.
template <typename Allocator>
inline bool owner_parked(const ChunkMeta* m) {
  auto* owner = static_cast<const Allocator*>(ownership::owner(m));
  return owner != nullptr && owner->parked();
}

}  // namespace roost::adoption
