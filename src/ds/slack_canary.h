// ds/slack_canary.h — the canary after a live small object's size asked
// for, in the hardened build (config::kSlackCanaries), and the test of the
// byte before an object that the canary words make possible.
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
// The byte before an object (config::kCheckByteBefore).  The top byte of
// a slot's last word (the byte right before the next slot: little-endian)
// is, at every instant from the slot's carve on, either 0 or the key's top
// byte (its top bit set, 7 random bits), whatever state the slot is in and
// whichever thread is changing it:
//   carved, not handed out yet (on a fast or free list, an offload ring):
//     zero but for its first 16 bytes (slab::carve zeroes what an earlier
//     use left; the rest of a slab reads zero), its link and its mark (a
//     slab record's address, below 2^56): a 16-byte slot's last word is
//     its mark;
//   handed out: its first 16 bytes zeroed too (checks::note_handed_out);
//   live: its canary word, whose top byte is the key's (an address and a
//     size are below 2^56); write() stores the slack's 8 bytes first, and
//     where the slack is empty (size = slot - kWordBytes) they are the
//     word itself: the canary byte is the key's top byte, so the word's
//     top byte is one of the two throughout.  A resize in place rewrites
//     them the same way; the bytes a shrink zeroes end before the word;
//   freed: its free sets the mark (a 16-byte slot's last word: top byte 0)
//     and zeroes the bytes past its first 16 (each byte goes from its old
//     value to 0), and the quarantine zeroes its first word;
//   linked (free lists, BatchIt caches, the inbox queue): a link is the
//     first word (config::kLinkWord), never a last one: every slot has two
//     words at least;
//   a message's tail (slots over 16 bytes): its batch word in its last
//     word, whose top byte is 0 (ds/slab_batch.h) and which the owner
//     zeroes again on receipt; a 16-byte tail travels alone with its mark.
// The program writes only within the size it asked for, which ends before
// the word.  So a free (realloc, malloc_usable_size) of an object that is
// not its slab's first finds any other value in the byte before it: a
// write before its start (an underflow), or one past its neighbour's end
// that missed its canary bytes.  It misses a store of 0 or of the key's
// top byte, and an XOR with that byte (never an ASCII one: its top bit is
// set).  The byte is read while other threads may be changing it (the
// neighbour allocated, freed, sent home meanwhile); each byte a store
// writes is seen whole (old or new), so what the read finds is one of the
// two either way.  Needs canary words and freed objects zeroed at the
// free and at the carve (config::kZeroOnFree): without them a freed or
// carved slot's last word holds whatever an earlier user left there.
//
// Owns: the key, the canary's layout, its write and its test; the test of
// the byte before an object.  Must never: be used where
// config::kSlackCanaries is off, or before set_key() (allocator_pool's
// start-up, before any object is handed out).
#pragma once

#include <atomic>
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

inline constexpr uint64_t kTop = uint64_t{1} << 63;

// The canary byte is the key's top byte: never zero (the byte a string's
// terminator writes one past its end), never an ASCII byte, and what a
// slot's last word's top byte may read while write() stores the slack's
// bytes over it (the byte before an object, above).
inline void set_key(uint64_t k) {
  g_key = k | kTop;
  auto byte = static_cast<uint8_t>(g_key >> 56);
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
// into the word, which is written after it: the word's top byte reads 0
// or the key's top byte meanwhile, as the byte before an object must.)
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

// Is the byte before `p`, an object start that is not its slab's first
// (the last byte of the slot before), 0 or the key's top byte, as it is
// unless the program wrote it?  (See the top of this file.)  Another
// thread may be writing it meanwhile, and each byte it stores is read
// whole: a plain load, a relaxed atomic one under ThreadSanitizer.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the byte before a slot is its last word's top");
ROOST_INLINE bool byte_before_intact(const void* p) {
  const uint8_t* at = static_cast<const uint8_t*>(p) - 1;
#if defined(__SANITIZE_THREAD__)
  // Relaxed: a byte that is 0 or the key's top byte whatever the slot's
  // owner writes meanwhile; nothing is read through it.
  uint8_t byte = std::atomic_ref(*const_cast<uint8_t*>(at)).load(std::memory_order_relaxed);
#else
  uint8_t byte = *at;
#endif
  return byte == 0 || byte == static_cast<uint8_t>(g_key >> 56);
}

}  // namespace roost::slack_canary
