// backend/chunk_allocator.h — power-of-two chunks carved from reserved
// regions, buddy style: the backend's chunk component, as the rest of roost
// calls it.
//
// Owns: the regions (up to 1 GiB, aligned to their size, lazily committed;
// backend/address_space.h places and sizes them), their ChunkMeta tables
// (one per 1 GiB slot of the address space), the fresh extent (the newest
// region's unused top, cut from the bottom up so that its table is
// written only where memory went out) and the buddy free lists with
// coalescing (chunk_allocator.cc); what stays resident of released memory
// (backend/residency.cc: a released chunk stays "dirty", its pages
// resident and reusable without a page fault, for one to two purge delays,
// ROOST_PURGE_DELAY, stretched while the program faults back in what was
// just purged, then is purged and merged with its free buddies; sooner
// while more is dirty than the program holds, dirty_cap; docs/DESIGN.md,
// "What stays resident"); and released pages moved into a big chunk
// handed out (backend/page_moves.cc).  Every chunk handed out is
// naturally aligned to its size; its first `dirty_pages` pages may hold old
// bytes, the rest reads as zero.  Must never: be called on a fast path (it
// takes a lock), decide what chunks are used for, or purge under its lock.
#pragma once

#include <atomic>
#include <cstdint>

#include "backend/chunk_meta.h"
#include "config.h"
#include "platform/os.h"

namespace roost::chunks {

inline constexpr unsigned kMinOrder = config::kGranuleBits;
inline constexpr unsigned kMaxOrder = config::kRegionBits;

// The metadata record of the granule at `addr`, which must lie in a region.
ChunkMeta* meta_of(uintptr_t addr);

// Each region's table also keeps one byte per huge-page-sized block of the
// region, whose meaning is backend/huge_pages.cc's (its dense-block state):
// the byte of the block at `addr`; nullptr where no region's table covers
// `addr` (any address may be asked).  Zero when the table is made.
inline constexpr unsigned kBlockBits = config::kHugePageBits;
std::atomic<uint8_t>* block_state_of(uintptr_t addr);
// Whether every granule of the block at `addr` is in a chunk handed out
// (slabs, a large object, an allocator's cache): read without the lock, so
// a hint the caller confirms (backend/huge_pages.cc's looks skip the
// records of every other block with it); false where no region's table
// covers `addr`.
bool block_handed_out(uintptr_t addr);
// The 1 GiB slots of the address space that may hold regions: [first, end)
// in units of config::kRegion (empty before the first region).  Read
// without the lock (backend/huge_pages.cc's looks).
struct Slots {
  size_t first, end;
};
Slots slots();

// A chunk of 2^order bytes (kMinOrder <= order <= kMaxOrder) with kind
// kUnused and `base`/`order`/`dirty_pages` set: recently released memory
// first (dirty_pages > 0: that many leading pages may hold old bytes), else
// memory that reads as zero (dirty_pages == 0).  nullptr when the OS refuses
// (nothing changed: a later call may succeed).
ChunkMeta* alloc(unsigned order);

// alloc(order), of the released chunks of its size the one whose dirty
// extent fits `fill` (the bytes its caller will use) best, with the resident
// pages of other released chunks moved into its first `fill` bytes where
// they read as zero (its dirty_pages then covers them): config::kMoveBits
// says when.
ChunkMeta* alloc(unsigned order, size_t fill);

// Moves the pages of [from, from + bytes) to [to, to + bytes) (`bytes` a
// multiple of 2^config::kMoveBits, both ranges roost's and apart), one such
// stretch at a time: each lies within one kernel mapping (kernels before
// 6.17 move none that spans two, and the mappings moves and huge-page
// advice make begin and end on the stretch), and is moved whole by the
// page table where both ends are aligned to it.  Stops at the first
// stretch the OS refuses.  Returns the bytes moved, and in *result the OS's
// answer to the last try (os::move_pages: kLost means `to` past what moved
// is no longer all roost's).
size_t move(uintptr_t from, uintptr_t to, size_t bytes, os::Moved* result);

// A released, unpurged chunk of 2^order bytes, split from one of at most
// 2^max_order bytes; nullptr if there is none.
ChunkMeta* alloc_dirty(unsigned order, unsigned max_order);

// Is a released, unpurged chunk of at least this order at hand?  A hint,
// read without the lock: callers choose between reusing one and a batch.
bool has_dirty(unsigned order);

// Returns a chunk whose first `dirty_bytes` may have been written (since it
// was handed out, plus its `dirty_pages` then: the caller's account).  Untouched
// chunks merge with their free buddies at once; dirty ones wait to be reused
// or purged (see the top of this file).
void release(ChunkMeta* m, size_t dirty_bytes);

// Purges every dirty chunk now (malloc_trim); true if there was any.
// Also sets the purge delay back to the option's.
bool purge_all();

// The purge delay in force: ROOST_PURGE_DELAY's, stretched while the
// program faults back in memory just purged (chunk_allocator.cc).  Read
// without the lock (statistics).
uint64_t purge_delay_now_ns();

// ---- purging on time while the program sleeps (the service thread) ----

// `hook` is called, outside the lock, after a release leaves dirty memory
// behind (set once, at start-up; it must not allocate).  Returns the hook
// it replaces.
using ReleaseHook = void (*)();
ReleaseHook set_release_hook(ReleaseHook hook);

// Ages the dirty generations if a purge delay has passed (purging the old
// one).  Returns the bytes purged and, in *next_ns, the time (os::now_ns)
// at which calling again has work, or UINT64_MAX when nothing is dirty.
size_t purge_due(uint64_t now, uint64_t* next_ns);

// Splits the chunk `m` down to `order`, calling keep(piece) for each upper
// piece split off (kind kUnused, base/order set).  `m`'s dirty extent is
// shared out: each piece gets the part of it that reaches the piece (its
// `dirty_pages`, zero when none), and `m` keeps the rest.  Used by caches
// that took a bigger chunk than they needed.
template <typename Keep>
void split(ChunkMeta* m, unsigned order, Keep&& keep) {
  size_t dirty = dirty_extent(m);
  while (m->order > order) {
    set_order(m, m->order - 1u);
    size_t half = size_t{1} << m->order;
    ChunkMeta* upper = meta_of(m->base + half);
    upper->base = m->base + half;
    set_order(upper, m->order);
    set_kind(upper, ChunkKind::kUnused);
    size_t piece = dirty > half ? dirty - half : 0;
    upper->dirty_pages =
        static_cast<uint32_t>((piece < half ? piece : half) >> config::kMinPageBits);
    if (dirty > half) dirty = half;
    keep(upper);
  }
  m->dirty_pages = static_cast<uint32_t>(dirty >> config::kMinPageBits);
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

// Calls visit(m, ctx) for every record of every region whose kind reads
// as `kind`, without the lock (statistics): records change hands as they
// are visited, a record inside a larger chunk may keep a stale kind, and
// `visit` must read any other field as a record that may be changing.
void for_each_record(ChunkKind kind, void (*visit)(const ChunkMeta* m, void* ctx), void* ctx);

// The fresh extent: the unused top of the newest region, from which
// clean chunks are cut when the buddy lists have none (chunk_allocator.cc).
// No record of a granule in it reads as anything but kUnused.  Empty (begin
// == end) before the first region and when the newest is used up.  Takes
// the lock (tests, statistics).
struct Extent {
  uintptr_t begin, end;
};
Extent fresh_extent();

// ---- guard pages at chunks' ends (the hardened build: config::kGuardSlabs) ----
//
// Beside each granule's record its region's table keeps one bit: the
// granule's last small page (config::kMinPageSize) is inaccessible.  A
// chunk has a guard page at its end when its last granule's bit is set,
// and nowhere else: a merge of clean chunks (merge_free: purged, or never
// written) lifts the lower half's before the halves join, and a released,
// unpurged chunk with one does not merge with its upper buddy until it is
// purged; so splitting a chunk leaves the guard with the upper piece (the
// bit stays with its page) and the lower pieces with none.  A slab places one as it starts
// (frontend/slab.cc), and it stays while the chunk waits in a ChunkCache or on the backend's
// released or free lists, purged or not: a chunk that serves a slab of its size again costs no
// system call.  In the other builds no chunk has one.

// Does chunk `m` (base and order set) end at a guard page?
bool has_end_guard(const ChunkMeta* m);
// The page at `m`'s end made inaccessible (if it is not already); false,
// counting a refusal, when config::kMaxSlabGuards guards are in place or
// the OS refused (or the build places none, or the OS's page is not the
// small page).
bool place_end_guard(ChunkMeta* m);
// `m`'s end guard lifted, if it has one; false if the OS refused (it stays).
bool lift_end_guard(ChunkMeta* m);
// Is `addr` in a chunk's end guard page?  Reads only (a fault's
// diagnostic: async-signal-safe).
bool in_end_guard(uintptr_t addr);
// End guards in place now, and slabs that got none (the cap, or the OS
// refused) since start.
size_t end_guards();
size_t end_guards_refused();

// Counters for statistics.
size_t reserved_bytes();  // address space of all regions
size_t bytes_out();       // bytes in chunks handed out (not in free lists)
size_t dirty_bytes();     // bytes released but not purged yet (resident)
size_t dirty_cap();       // dirty bytes purged at once beyond: bytes_out(), a floor at least
size_t purged_bytes();    // bytes purged since start
size_t moved_bytes();     // bytes move() moved since start
size_t chunks_out();

void lock_for_fork();
void unlock_after_fork(bool child);

}  // namespace roost::chunks
