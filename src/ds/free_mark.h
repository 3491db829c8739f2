// ds/free_mark.h — the free mark: what a freed small object's word beside
// its link says from its free until it is handed out again.
//
// Every build marks a freed object with the address of its slab's record,
// which the free fast path has in a register already (no secret to load,
// no XOR), and wipes the word at hand-out.  The record lives apart from
// user memory and roost never gives its address to the program, so a live
// object's word holds it only where the program stored that address after
// reading it from a freed object.  A free that finds the mark is a second
// free of an object still free, wherever it waits (a fast or free list, a
// BatchIt cache, a message).  The secure build keeps the mark in the
// second word (its link is the first: config::kLinkWord), reports a hit at
// once, and checks the mark again on every object a free list hands out;
// the default build keeps it in the first word and confirms a hit on a
// slow path first (frontend/checks.h: the free mark's section).
//
// Owns: the mark's place and value.  Must never: know a slab's layout
// beyond its record's address, or be used where config::kMarkFreed is off.
#pragma once

#include <cstdint>

#include "config.h"
#include "ds/bits.h"

namespace roost::free_mark {

// The word of a free object beside its link (config::kLinkWord): the
// secure build's second, the default build's first (every object has at
// least two).
inline constexpr unsigned kWord = 1 - config::kLinkWord;
ROOST_INLINE uint64_t* word(void* p) { return static_cast<uint64_t*>(p) + kWord; }
ROOST_INLINE const uint64_t* word(const void* p) { return static_cast<const uint64_t*>(p) + kWord; }

// `p`, an object of the slab whose record is `m`, is freed; is it marked
// so?
ROOST_INLINE void set(void* p, const void* m) { *word(p) = reinterpret_cast<uintptr_t>(m); }
ROOST_INLINE bool is_set(const void* p, const void* m) {
  return *word(p) == reinterpret_cast<uintptr_t>(m);
}
// Do `p` and `q` carry the same mark?  (Two objects of one slab, `q` known
// to be marked: `p` is too.)
ROOST_INLINE bool same(const void* p, const void* q) { return *word(p) == *word(q); }

ROOST_INLINE void wipe(void* p) { *word(p) = 0; }

}  // namespace roost::free_mark
