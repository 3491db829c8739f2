// ds/free_mark.h — what a freed small object's word beside its link says:
// the secure build's mark and the per-process secret it is made from, or
// the default build's tag.
//
// In the secure build a freed object's second word holds mark(p) =
// secret ^ p from its free until it is handed out again (then the word is
// wiped), so a second free finds it: a double free, caught at the free
// whichever thread makes it and wherever the object waits meanwhile (a
// fast list, a BatchIt cache, a message).  A message's tail carries its
// batch word elsewhere for that reason (ds/slab_batch.h).  The test is one
// exact comparison: a live object trips it only if its second word equals
// secret ^ p, which a program cannot arrange without the secret.
//
// The default build (config::kTagFreed) writes a tag instead, in the
// object's first word (its link is the second: config::kLinkWord): the
// address of the object's slab record, which the free fast path has in a
// register (no secret to load, no XOR).  The record lives apart from user
// memory and roost never gives its address to the program, so a live
// object's first word equals it only where the program stored that address
// after reading it from a freed object.  The word is wiped at hand-out as
// the mark is.
//
// Owns: the secret, the mark's and the tag's layout.  Must never: read the
// secret before set_secret() (allocator_pool's start-up, before any object
// is handed out), or be used for the mark where config::kDetectDoubleFree
// is off, or for the tag where config::kTagFreed is off.
#pragma once

#include <cstdint>

#include "config.h"
#include "ds/bits.h"

namespace roost::free_mark {

inline uint64_t g_secret ROOST_HIDDEN = 0;

inline void set_secret(uint64_t s) { g_secret = s | 1; }

// The word of a free object beside its link (config::kLinkWord): the
// secure build's second, the default build's first (every object has at
// least two).
inline constexpr unsigned kWord = 1 - config::kLinkWord;
ROOST_INLINE uint64_t* word(void* p) { return static_cast<uint64_t*>(p) + kWord; }
ROOST_INLINE const uint64_t* word(const void* p) { return static_cast<const uint64_t*>(p) + kWord; }

ROOST_INLINE uint64_t mark(const void* p) { return g_secret ^ reinterpret_cast<uintptr_t>(p); }

// A 16-byte object travelling home alone carries this beside its mark
// (there is no room for a batch word elsewhere).
inline constexpr uint64_t kAloneTag = 1;

ROOST_INLINE void set(void* p) { *word(p) = mark(p); }
ROOST_INLINE void wipe(void* p) { *word(p) = 0; }
ROOST_INLINE bool is_set(const void* p) {
  uint64_t v = *word(p) ^ mark(p);
  return v == 0 || v == kAloneTag;
}

// The default build's tag: `p`, an object of the slab whose record is `m`.
ROOST_INLINE void tag(void* p, const void* m) { *word(p) = reinterpret_cast<uintptr_t>(m); }
ROOST_INLINE bool is_tagged(const void* p, const void* m) {
  return *word(p) == reinterpret_cast<uintptr_t>(m);
}

}  // namespace roost::free_mark
