// ds/free_mark.h — the mark a freed small object carries in the secure
// build, and the per-process secret it is made from.
//
// A freed object's second word holds mark(p) = secret ^ p from its free
// until it is handed out again (then the word is wiped), so a second free
// finds it: a double free, caught at the free whichever thread makes it and
// wherever the object waits meanwhile (a fast list, a BatchIt cache, a
// message).  A message's tail carries its batch word elsewhere for that
// reason (ds/slab_batch.h).  The test is one exact comparison: a live
// object trips it only if its second word equals secret ^ p, which a
// program cannot arrange without the secret.
//
// Owns: the secret and the mark's layout.  Must never: be used by the
// default build's paths (config::kDetectDoubleFree is off there), or read
// the secret before set_secret() (allocator_pool's start-up, before any
// object is handed out).
#pragma once

#include <cstdint>

#include "config.h"
#include "ds/bits.h"

namespace roost::free_mark {

inline uint64_t g_secret ROOST_HIDDEN = 0;

inline void set_secret(uint64_t s) { g_secret = s | 1; }

// The second word of an object (every object has at least two).
ROOST_INLINE uint64_t* word(void* p) { return static_cast<uint64_t*>(p) + 1; }
ROOST_INLINE const uint64_t* word(const void* p) { return static_cast<const uint64_t*>(p) + 1; }

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

}  // namespace roost::free_mark
