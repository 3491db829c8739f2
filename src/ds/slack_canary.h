// ds/slack_canary.h — the canary after a live small object's size asked
// for, in the hardened build (config::kSlackCanaries).
//
// A small object of `size` bytes asked for takes the class of size +
// kWordBytes.  While it is live, its slot's last word holds
// word(p, size) = key ^ p ^ size, and the slack between the size asked
// for and that word (its first kWordBytes bytes) holds the canary byte.
// The free reads the size back from the word (a word that does not decode
// to a size that fits the slot was overwritten) and checks the slack: a
// write past the object's end reaches the slack first, and a write before
// the next object's start reaches this one's last word.
//
// A canary word never equals a free mark (a slab record's address, below
// 2^63, where the key's top bit is set and an address and a size are
// below 2^63), so a live 16-byte object, whose last word is where its mark
// goes, is never taken for a freed one.
//
// Owns: the key, the canary's layout, its write and its test.  Must never:
// be used where config::kSlackCanaries is off, or before set_key()
// (allocator_pool's start-up, before any object is handed out).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "config.h"
#include "ds/bits.h"

namespace roost::slack_canary {

inline constexpr size_t kWordBytes = 8;
static_assert(!config::kSlackCanaries || config::kSlackCanaryBytes == kWordBytes);

// The size a request of `size` bytes takes a small class for: with the
// canary word where there are canaries (config::kSlackCanaryBytes; 0
// elsewhere), and as it is beyond the small sizes (no wrap past SIZE_MAX).
constexpr size_t padded(size_t size) {
  return size <= config::kMaxSmall ? size + config::kSlackCanaryBytes : size;
}

inline uint64_t g_key ROOST_HIDDEN = 0;
inline uint64_t g_bytes ROOST_HIDDEN = 0;  // the canary byte, in every byte of a word

inline void set_key(uint64_t k) {
  constexpr uint64_t kTop = uint64_t{1} << 63;
  g_key = k | kTop;
  // Never zero: the byte a string's terminator writes one past its end.
  uint8_t byte = static_cast<uint8_t>(k >> 8) | 0x01;
  g_bytes = byte * 0x0101010101010101ull;
}

ROOST_INLINE uint64_t* word(void* p, size_t slot) {
  return reinterpret_cast<uint64_t*>(static_cast<char*>(p) + slot - kWordBytes);
}
ROOST_INLINE const uint64_t* word(const void* p, size_t slot) {
  return reinterpret_cast<const uint64_t*>(static_cast<const char*>(p) + slot - kWordBytes);
}

// The slack's checked bytes: its first kWordBytes, or fewer where the
// canary word comes sooner.  (A write that runs on past an object's end
// reaches them, or the word, first.)
ROOST_INLINE uint64_t checked_mask(size_t size, size_t slot) {
  size_t slack = slot - kWordBytes - size;
  return slack >= kWordBytes ? ~uint64_t{0} : (uint64_t{1} << (slack * 8)) - 1;
}

// `p`, a slot of `slot` bytes, is handed out (or resized in place) for
// `size` bytes (size + kWordBytes <= slot).  (The slack's store may reach
// into the word, which is written after it.)
ROOST_INLINE void write(void* p, size_t size, size_t slot) {
  memcpy(static_cast<char*>(p) + size, &g_bytes, sizeof(g_bytes));
  *word(p, slot) = g_key ^ reinterpret_cast<uintptr_t>(p) ^ size;
}

// The size `p` (a live slot of `slot` bytes) was asked for; false when its
// canary was overwritten.
ROOST_INLINE bool read(const void* p, size_t slot, size_t* size) {
  size_t asked = *word(p, slot) ^ g_key ^ reinterpret_cast<uintptr_t>(p);
  if (ROOST_UNLIKELY(asked > slot - kWordBytes)) return false;
  uint64_t slack;
  memcpy(&slack, static_cast<const char*>(p) + asked, sizeof(slack));
  *size = asked;
  return ((slack ^ g_bytes) & checked_mask(asked, slot)) == 0;
}

}  // namespace roost::slack_canary
