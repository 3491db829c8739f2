// frontend/chunk_cache.h — the empty chunks one allocator keeps for its
// next slabs, and the reserve that bounds them.
//
// Owns: empty chunks by order (each with the resident extent its previous
// use left), and the allocator's reserve: the resident bytes of empty
// memory it may keep (ROOST_SLAB_RESERVE), counting these chunks' dirty
// extents and what the size classes charge to it for their spare slabs.
// Untouched chunks (pieces of a batch) cost address space only and do not
// count.  Taking a chunk prefers memory already resident: cached chunks
// with resident pages, then the backend's released and unpurged memory,
// then untouched cached pieces, then fresh memory (a batch at a time, so
// most slabs cost no lock).  Must never: be shared between threads, or keep
// resident bytes beyond the reserve.
#pragma once

#include <cstddef>

#include "backend/chunk_meta.h"
#include "config.h"
#include "ds/dlist.h"
#include "options.h"

namespace roost {

class ChunkCache {
 public:
  constexpr ChunkCache() = default;
  ChunkCache(const ChunkCache&) = delete;
  ChunkCache& operator=(const ChunkCache&) = delete;

  // Called before an allocator takes fresh memory from the backend, when
  // nothing kept can serve it: a process-wide hook (the allocator pool's,
  // which lets a parked allocator give back what it no longer uses).  Set
  // once at start-up; returns the hook it replaces.
  using ShortageHook = void (*)();
  static ShortageHook set_shortage_hook(ShortageHook hook);

  // An empty chunk of 2^order bytes (kind kUnused, its dirty extent set),
  // resident memory first; nullptr when the OS refuses memory.
  ChunkMeta* take(unsigned order);

  // A cached chunk of at least 2^order bytes with resident pages, split down
  // to it (the rest stays cached); nullptr if there is none.
  ChunkMeta* take_resident(unsigned order) { return take_cached(order, true); }

  // An empty chunk given back (its dirty extent set): kept while its
  // resident bytes fit the reserve, else released to the backend.
  void keep(ChunkMeta* m);

  // Charges `bytes` of resident memory held elsewhere (a spare slab) to the
  // reserve; false, charging nothing, when they do not fit.
  bool try_charge(size_t bytes) {
    if (kept_bytes() + bytes > reserve()) return false;
    charged_ += bytes;
    return true;
  }
  void uncharge(size_t bytes) { charged_ -= bytes; }

  // Releases cached chunks to the backend until at most `keep` bytes (of
  // address space) stay; true if any went.
  bool trim(size_t keep);

 private:
  ChunkMeta* take_cached(unsigned order, bool resident_only);
  void add(ChunkMeta* m);
  void remove(ChunkMeta* m);
  // Resident bytes kept against the reserve, and the reserve.
  size_t kept_bytes() const { return resident_ + charged_; }
  static size_t reserve() { return options::get(options::kSlabReserveBytes); }

  DList<ChunkMeta> lists_[config::kRegionBits + 1];  // by order
  size_t bytes_ = 0;                                 // address space of the cached chunks
  size_t resident_ = 0;                              // of which in their dirty extents
  size_t charged_ = 0;                               // resident bytes of spare slabs
};

}  // namespace roost
