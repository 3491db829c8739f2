// backend/large.h — large objects: page-granular chunks straight from the
// backend, freed by any thread without messaging.
//
// Owns: large (inside a region) and huge (mapped alone) objects, their
// dirty extents and their counters, and in the secure build where their
// guard page and canary are (backend/large_guard.h; how many guard pages
// exist at once).  Freed large chunks go back to the backend, which keeps
// them resident for a purge delay (reused first; longer while the program
// keeps taking chunks of their size) and then purges them (the hardened
// build's after a wait in its quarantine of freed objects, inaccessible,
// large.cc); a few of the
// heap profiler's sampled objects stay with the allocator that freed them.
// Must never: be used for sizes a slab can serve (but for the classes
// served as large where address space is scarce, below, and sampled
// objects), or keep freed memory of its own beyond that quarantine's bounds.
#pragma once

#include <cstddef>

#include "backend/address_space.h"
#include "backend/chunk_meta.h"
#include "config.h"
#include "ds/bits.h"
#include "ds/sizeclass.h"

namespace roost::large {

// The arithmetic of a large object's pages, for the OS's page of `page`
// bytes (os::page_size(): 4, 16 or 64 KiB; the unit tests try each).  Its
// bytes are whole pages, and its chunk (or a huge object's mapping) starts
// on a granule, so its end, where the hardened build's guard page goes and
// where an in-place shrink gives the tail back, is page-aligned as
// mprotect, munmap and madvise require.  Where a canary follows the
// object (config::kGuardLarge) they reach at least one byte past the size
// asked for, so that every size has slack for it: a size of whole pages
// gets a page more.
inline constexpr size_t kCanarySlackMin = config::kGuardLarge ? 1 : 0;
constexpr size_t usable_for(size_t size, size_t page) {
  return bits::align_up(size + kCanarySlackMin, page);
}
// The guard page after those bytes: one page in the secure and hardened
// builds (made inaccessible in the hardened one), none in the default build.
constexpr size_t guard_for(size_t page) { return config::kGuardLarge ? page : 0; }
// The address space an object of `usable` bytes followed by `guard` bytes
// and aligned to `align` takes: both, or the alignment where that is more
// (a chunk, or a huge object's mapping, is aligned to its size).
constexpr size_t span_for(size_t usable, size_t guard, size_t align) {
  return usable + guard > align ? usable + guard : align;
}
// Whether an object resized in place to `usable` bytes (and `guard`) stays
// in its region chunk of `chunk` bytes: it fits, and uses more than a
// quarter of the chunk.
constexpr bool stays_in_chunk(size_t usable, size_t guard, size_t chunk) {
  return usable + guard <= chunk && usable * 4 > chunk;
}

// An object of at least `size` bytes aligned to `align` (power of two).
// *dirty: how many of its leading bytes may hold old data (the rest reads
// as zero).  nullptr when the OS refuses memory.
void* alloc(size_t size, size_t align, size_t* dirty);

// Where address space is scarce (address_space::scarce()), the size
// classes whose slabs span a megabyte or more (16 objects of over 32 KiB)
// are served as large objects of the class's size: a large object takes
// at most twice its size, where one such slab reserves a megabyte or more
// for a class the program may use once.
inline constexpr unsigned kFirstClassServedWhenScarce = [] {
  unsigned sc = 0;
  while (sc < sizeclass::kCount && sizeclass::slab_size(sc) < (size_t{1} << 20)) sc++;
  return sc;
}();
inline bool serves_class(unsigned sc) {
  return sc >= kFirstClassServedWhenScarce && address_space::scarce();
}

// Frees the large or huge object whose metadata is `m`.
void free(ChunkMeta* m);

// Objects apart: large objects that counters() leaves to their caller (the
// heap profiler's sampled small objects, which the statistics count as
// objects of their class), in chunks the caller may keep between them
// (frontend/sampler.h's spares), so that the common case takes no lock.
// chunk_order(): the order of the chunk an object of `size` bytes needs;
// alloc_apart(): such an object in a chunk of the backend's (nullptr when
// memory runs out); place(): the empty chunk `m` (kind kUnused, dirty
// extent set, of at least that order) made that object (nullptr, `m`
// untouched, when it is too small); retire(): such an object freed like
// free() does, its chunk left to the caller as an empty chunk (kind
// kUnused, dirty extent set); false when it is lost instead (a guard page
// the OS would not lift).  Not for huge sizes; never resized in place.
unsigned chunk_order(size_t size);
void* alloc_apart(size_t size);
void* place(ChunkMeta* m, size_t size);
bool retire(ChunkMeta* m);

// The bytes the program may use: the size asked for in the secure build
// (past it lies the canary, then the guard page: backend/large_guard.h),
// else every byte up to the page boundary.
inline size_t usable(const ChunkMeta* m) {
  return config::kGuardLarge ? m->large_size - m->large_slack : m->large_size;
}

// Secure build: the first byte past usable(m) that the program overwrote
// (a buffer overflow), or 0.  Always 0 in the default build.
uintptr_t overwritten(const ChunkMeta* m);

// The large or huge object whose guard page (hardened build) holds `addr`,
// or nullptr: for a fault's diagnostic (platform/access_fault.h), so it
// only reads (the pagemap, back from `addr` to the nearest record, and that
// record) and is async-signal-safe.
const ChunkMeta* guarded_by(uintptr_t addr);

// The hardened build's quarantine of freed large objects
// (config::kQuarantineLarge): the freed region object that holds `addr`
// while it waits there inaccessible, or nullptr: for a fault's diagnostic
// (reads only, as guarded_by()).
const ChunkMeta* quarantined_at(uintptr_t addr);
// Empties the quarantine (malloc_trim); true if an object left it.
bool drain_quarantine();
// Objects waiting in it now.
size_t quarantined();

// Is `m` a record a freed object's first granule maps to until the granule
// is used again (kind kFreedLarge; no owner; one for large objects, one for
// huge ones)?  A free there is a double free, or a pointer into memory that
// once held a large object.
bool is_freed(const ChunkMeta* m);
// The size (usable bytes) of the freed object that started at `p`, whose
// first granule maps to `m` (is_freed(m)), for a diagnostic: 0 once its
// record has served another object.
size_t freed_size(const ChunkMeta* m, const void* p);

// Grows or shrinks the object in place when its chunk allows; true if done
// (the secure build's guard page and canary move with its end).
bool resize_in_place(ChunkMeta* m, size_t new_size);

// realloc's move of an object to a new place without copying its bytes:
// the first `bytes` (at most either object's usable bytes) of the large or
// huge object `from` into the one `to`, in whole stretches of
// 2^config::kMoveBits bytes whose pages the OS moves (ROOST_MOVE_PAGES, and
// not where huge pages are on); `from` reads as zero where they were.
// `moved`: how many leading bytes moved (the rest is the caller's to copy).
// `lost`: a move failed after the OS had unmapped part of `to`, which must
// not be used (lose() it); what moved before lies in `to` still.
struct Moved {
  size_t moved;
  bool lost;
};
Moved move_into(const ChunkMeta* from, ChunkMeta* to, size_t bytes);
// Forgets the large or huge object `m`, which nobody holds, as free() would
// but keeping its memory, which is lost to roost (move_into's `lost`).
void lose(ChunkMeta* m);

struct Counters {
  size_t bytes_in_use;
  size_t allocations;
  size_t frees;
  // Of them, the huge objects (mapped alone): now, and the most at once.
  size_t huge_bytes;
  size_t huge_objects;
  size_t huge_peak_bytes;
  size_t huge_peak_objects;
};
Counters counters();

void lock_for_fork();
void unlock_after_fork(bool child);

}  // namespace roost::large
