// frontend/pointer.h — what a pointer handed back to roost is.
//
// free, realloc, malloc_usable_size and the sized frees all take a pointer
// the program says is one of its objects.  This file decides, in one place,
// which kind of live object it starts (a slab's object, a large or huge
// object, a zero-size allocation), and names the fault when it starts
// none: an interior pointer, an object start the slab never carved, a
// freed large object, memory roost does not own.
//
// Owns: that classification and the names of those faults.  Must never:
// change allocator state, or be on a fast path (the fast paths test only
// what they need: frontend/heap.h).
#pragma once

#include "backend/chunk_meta.h"
#include "frontend/checks.h"
#include "frontend/slab.h"

namespace roost::pointer {

enum class Kind : uint8_t { kSlab, kLarge, kZeroSize };

// A live object: its kind and its record (for kLarge, a huge object's or a
// sampled small object's too).
struct Object {
  Kind kind;
  ChunkMeta* m;
};

// `p`, an address in the slab `m`, is freed or asked about: it must be an
// object start within what the slab has carved.
[[noreturn]] ROOST_SLOW void interior(const char* where, const void* p, size_t size);
ROOST_INLINE void slab_object(const ChunkMeta* m, const void* p, const char* where) {
  if (!slab::is_object_start(m, p)) interior(where, p, m->obj_size);
  if (!slab::is_carved(m, p)) checks::fault(where, checks::kNeverAllocated, p, m->obj_size);
}

// The live object `p` (not null) starts, looked up as `m` (nullptr: not
// looked up yet, or not found).  Anything else ends the program with its
// fault named, for the call `where`; a freed large object's start is
// called `freed_start` (a free: a double free).
Object classify(const void* p, ChunkMeta* m, const char* where, const char* freed_start);

// Sized frees (secure build): free_sized(p, size), free_aligned_sized(p,
// align, size) and sized delete.  `size` (and `align`, 0 when none was
// given) must be ones the object could have been allocated with; else (or
// when `p` starts no live object) the fault is named.
ROOST_SLOW void check_sized_free(const void* p, size_t size, size_t align, const char* where);

}  // namespace roost::pointer
