// backend/chunk_allocator.h — power-of-two chunks carved from reserved
// regions, buddy style.
//
// Owns: the regions (1 GiB, aligned, lazily committed), their ChunkMeta
// tables, and the buddy free lists with coalescing.  Every chunk handed out
// is naturally aligned to its size and reads as zero.  Must never: be called
// on a fast path (it takes a lock), or decide what chunks are used for.
#pragma once

#include "backend/chunk_meta.h"
#include "config.h"

namespace roost::chunks {

inline constexpr unsigned kMinOrder = config::kGranuleBits;
inline constexpr unsigned kMaxOrder = config::kRegionBits;

// The metadata record of the granule at `addr`, which must lie in a region.
ChunkMeta* meta_of(uintptr_t addr);

// A chunk of 2^order bytes (kMinOrder <= order <= kMaxOrder), zeroed, with
// kind kUnused and `base`/`order` set; nullptr when the OS refuses memory.
ChunkMeta* alloc(unsigned order);

// Returns a chunk to the free lists, merging it with free buddies.  The first
// `dirty_bytes` of it are purged first so that free chunks read as zero.
void release(ChunkMeta* m, size_t dirty_bytes);

// Splits the chunk `m` down to `order`, calling keep(piece) for each upper
// piece split off (kind kUnused, base/order set).  Used by caches that took a
// bigger chunk than they needed.
template <typename Keep>
void split(ChunkMeta* m, unsigned order, Keep&& keep) {
  while (m->order > order) {
    m->order--;
    ChunkMeta* upper = meta_of(m->base + (uintptr_t{1} << m->order));
    upper->base = m->base + (uintptr_t{1} << m->order);
    upper->order = m->order;
    upper->kind = ChunkKind::kUnused;
    keep(upper);
  }
}

void note_split_piece();

// Splits a chunk that was handed out, as split() does, and counts each
// piece as a chunk handed out of its own (each is released on its own).
template <typename Keep>
void split_out(ChunkMeta* m, unsigned order, Keep&& keep) {
  split(m, order, [&](ChunkMeta* piece) {
    note_split_piece();
    keep(piece);
  });
}

// Counters for statistics.
size_t reserved_bytes();  // address space of all regions
size_t bytes_out();       // bytes in chunks handed out (not in free lists)
size_t chunks_out();

void lock_for_fork();
void unlock_after_fork(bool child);

}  // namespace roost::chunks
