// backend/chunk_internal.h — the seam between the chunk allocator's three
// files: what backend/chunk_allocator.cc (the buddy lists, the fresh extent,
// the records) lends backend/residency.cc (what stays resident) and
// backend/page_moves.cc (released pages moved into a chunk handed out).
//
// Owns: nothing; declares the two backend locks and the buddy side's entry
// points those files call, and holds the buddy step both merges take.
// Must never: be included by any other file (the rest of roost calls
// backend/chunk_allocator.h), or declare a policy (residency.h has those).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/chunk_allocator.h"
#include "backend/chunk_meta.h"
#include "ds/spinlock.h"

namespace roost::chunks {

// The backend's lock: every list and generation, the fresh extent, the
// counters written under it.
extern SpinLock g_lock;
// One purge at a time: taken before g_lock, or tried with it held.  So
// malloc_trim (purge_all) and fork wait for a purge in progress, whose
// chunks are in transit, still resident and on no list; page moves hold it
// while their donors are in transit.
extern SpinLock g_purge_lock;

// Lock held: a free chunk on its order's buddy list (no merge: its lower
// buddy is out).
void push_free(ChunkMeta* m);
// Lock held: a clean chunk (purged, or never written) into the buddy lists,
// merged with its free buddies (or back into the fresh extent).
void merge_free(ChunkMeta* m);

// Lock held: chunk `m`'s buddy (the chunk of its order it would merge with
// into one of the next order), when that buddy is of `kind` and of `m`'s
// order, and the two in address order; all null otherwise.  The step both
// merges (merge_free, merge_dirty) take.
struct Buddies {
  ChunkMeta* buddy = nullptr;
  ChunkMeta* lower = nullptr;
  ChunkMeta* upper = nullptr;
};
inline Buddies buddy_of_kind(ChunkMeta* m, ChunkKind kind) {
  uintptr_t buddy_base = m->base ^ (uintptr_t{1} << m->order);
  ChunkMeta* buddy = meta_of(buddy_base);
  if (kind_of(buddy) != kind || order_of(buddy) != m->order) return {};
  bool below = buddy_base < m->base;
  return {buddy, below ? buddy : m, below ? m : buddy};
}

// Lock held, the decay done: a chunk of 2^order bytes, dirty first (split
// from one of at most 2^max_dirty_order bytes; `fill`: the bytes the caller
// will use, 0 if not told), then, if `clean` allows, a clean one; counted
// out.  nullptr when there is none (or the OS refuses).
ChunkMeta* take_locked(unsigned order, unsigned max_dirty_order, bool clean, size_t fill = 0);
// take_locked() with the lock taken and the decay done first.
ChunkMeta* take(unsigned order, unsigned max_dirty_order, bool clean);
// Lock held: chunk `m`, handed out, lost to roost (a failed page move took
// part of it): counted back in as if released, on no list ever again.
void lose(ChunkMeta* m);

}  // namespace roost::chunks
