// ds/secret.h — the per-process secret: a random word drawn at start-up
// that the secure builds' keys and seeds are made from (the large-object
// canaries, the hardened build's carve order, quarantine and slack-canary
// key).
//
// Owns: the secret.  Must never: be read before set() (allocator_pool's
// start-up, before any object is handed out), or be handed to the program.
#pragma once

#include <cstdint>

#include "ds/bits.h"

namespace roost::secret {

inline uint64_t g_value ROOST_HIDDEN = 0;

inline void set(uint64_t s) { g_value = s | 1; }

}  // namespace roost::secret
