// backend/chunk_meta.h — the out-of-band metadata record of one chunk.
//
// Owns: the layout of ChunkMeta, one 64-byte line per granule-aligned chunk
// head, kept in region tables far from user memory (NextGen-Malloc's
// segregated layout).  The backend uses the kind/order/links; the frontend
// uses the slab fields.  Must never: live inside user memory.
#pragma once

#include <atomic>
#include <cstdint>

#include "config.h"
#include "ds/freelist.h"

namespace roost {

enum class ChunkKind : uint8_t {
  kUnused = 0,  // never handed out, or inside a larger block
  kFree,        // in the backend's buddy free lists (purged, reads as zero)
  kDirty,       // released to the backend, not purged yet (not merged)
  kCached,      // held free by an allocator (its first `dirty_pages` pages resident)
  kSlab,        // small objects of one size class, owned by one allocator
  kLarge,       // one large object inside a region
  kHuge,        // one object mapped on its own, beyond a region's size
  // large::is_freed() records' kind: the pagemap entry of a freed large or
  // huge object's first granule until that granule is used again, so that a
  // second free of the object is told as one.  Also the region record of a
  // freed large object while it waits in the hardened build's quarantine
  // (backend/large.cc), inaccessible.
  kFreedLarge,
  // The secure build's inaccessible range of zero-size allocations
  // (backend/zero_size.h).
  kZeroSize,
};

enum class SlabState : uint8_t {
  kSleeping = 0,  // free objects handed out; `needed` counts frees to wake
  kAvailable,     // on its allocator's available list; `needed` counts to empty
  kActive,        // its class's active slab; `needed` never reaches zero
};

// Owner value of large and huge chunks: never equal to an allocator, so the
// free fast path's owner comparison sends them to the slow path.
inline void* const kNoOwner = nullptr;

struct alignas(64) ChunkMeta {
  // Read by every free.
  void* owner;  // slab: owning Allocator (frontend/ownership.h)
  union {
    FreeObject* free_head;  // slab: objects freed into it since last taken
    // Large, huge: the heap profiler's record of the object when it was
    // sampled (frontend/profile.h), else nullptr.
    void* sample;
  };
  int32_t needed;     // slab: frees until the next state change
  uint8_t sizeclass;  // slab: size class
  ChunkKind kind;
  uint8_t order;  // log2 of the chunk size (huge: log2 of granules span)
  union {
    SlabState state;      // slab: see SlabState
    uint8_t dirty_epoch;  // dirty: the backend's epoch when it was released
    bool guarded;         // large, huge (hardened build): its guard page is in place
  };
  uintptr_t base;  // first byte of the chunk
  union {
    struct {
      uint32_t inverse;  // slab: sizeclass::inverse_of(object size)
      // Slab: the last byte of its carved objects, the address's low 32
      // bits (frontend/slab.h: is_carved).
      uint32_t carve_last;
    };
    uint64_t large_size;  // large, huge: page-rounded bytes (the guard page follows)
  };
  union {
    uint32_t obj_size;     // slab: object size
    uint32_t large_slack;  // large, huge: usable bytes past the size asked for (secure build)
  };
  union {
    // Large, dirty, cached: the leading pages written since the chunk was
    // last purged (the rest reads as zero).
    uint32_t dirty_pages;
    struct {
      uint16_t carved;         // slab: objects carved from the bump tail so far
      uint16_t touched_pages;  // slab: leading pages that may be resident
    };
  };
  // (Whether the chunk ends at a guard page, the hardened build's slab
  // guard, which stays with it through the cache and the backend's lists,
  // is a bit beside this record in its region's table:
  // chunks::has_end_guard.  The record has no bit to spare.)
  // Links for whichever list the chunk is on (buddy, cache, available).
  ChunkMeta* prev;
  ChunkMeta* next;
};
static_assert(sizeof(ChunkMeta) == 64);

// A chunk handed out as a large, huge or zero-size object has no owner:
// the backend clears the word (release, as frontend/ownership.h writes it;
// that file reads and changes a slab's owner, and holds the rule).
inline void set_no_owner(ChunkMeta* m) {
  std::atomic_ref(m->owner).store(kNoOwner, std::memory_order_release);
}

// Bytes of a large, dirty or cached chunk's leading pages that may be
// resident (written since it was last purged).
inline size_t dirty_extent(const ChunkMeta* m) {
  return size_t{m->dirty_pages} << config::kMinPageBits;
}

// The backend reads a chunk's kind and order when it looks at the chunk's
// buddy, which may be held (and be changing hands) elsewhere without the
// backend's lock: those two fields are written and read through these,
// atomically.  Relaxed is enough: the backend acts only on kinds it set
// itself, under its lock.
// (std::atomic_ref: the fields stay plain for the holder's own reads.)
inline ChunkKind kind_of(const ChunkMeta* m) {
  return std::atomic_ref(const_cast<ChunkMeta*>(m)->kind).load(std::memory_order_relaxed);
}
inline void set_kind(ChunkMeta* m, ChunkKind k) {
  std::atomic_ref(m->kind).store(k, std::memory_order_relaxed);
}
inline unsigned order_of(const ChunkMeta* m) {
  return std::atomic_ref(const_cast<ChunkMeta*>(m)->order).load(std::memory_order_relaxed);
}
inline void set_order(ChunkMeta* m, unsigned o) {
  std::atomic_ref(m->order).store(static_cast<uint8_t>(o), std::memory_order_relaxed);
}

}  // namespace roost
