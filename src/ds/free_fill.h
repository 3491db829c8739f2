// ds/free_fill.h — the pattern a freed small object's bytes hold in the
// hardened build (config::kFillFreed), and its zero on free
// (config::kZeroOnFree).
//
// From its free (or its carve) until it is handed out again, an object's
// bytes past its link and free mark, up to config::kFillMaxBytes of them,
// and its last 16 bytes hold kPattern; the hand-out checks them
// (frontend/checks.h), so a write into a freed object there (an overflow
// from the object before it, an underflow from the one after) is caught
// at reuse.  The bytes between are zeroed at the free (those the program
// may have written).  A message's tail
// has its batch word in its last word meanwhile (ds/slab_batch.h): the
// sender checks the pattern is there before it writes the word
// (last_word_intact), and the owner puts the pattern back when the batch
// comes home.
//
// Owns: the pattern and which words carry it.  Must never: be used by the
// default build's paths.
#pragma once

#include <cstddef>
#include <cstdint>

#include "config.h"
#include "ds/bits.h"

namespace roost::free_fill {

// Freed memory reads 0xdf... (a debugger shows it at a glance).
inline constexpr uint64_t kPattern = 0xdfdfdfdfdfdfdfdfull;

// The filled words, 16 bytes at a time (objects are 16-byte aligned, and
// multiples of 16 bytes): from the object's second 16 bytes (the first
// hold the link and the free mark) to its end or config::kFillMaxBytes
// further, whichever comes first; and its last 16 bytes.
using Pair = uint64_t __attribute__((vector_size(16)));
inline constexpr Pair kPatternPair = {kPattern, kPattern};
inline constexpr size_t kFirstPair = 1;
inline constexpr size_t kMaxEndPair = kFirstPair + config::kFillMaxBytes / sizeof(Pair);
static_assert(config::kFillMaxBytes % sizeof(Pair) == 0);

// One past the last filled pair at the head of an object of `size` bytes.
ROOST_INLINE size_t end_pair(uint32_t size) {
  size_t pairs = size / sizeof(Pair);
  return pairs < kMaxEndPair ? pairs : kMaxEndPair;
}

// The object's last pair (0, the link's and the mark's, for a 16-byte
// object: then it is not filled).
ROOST_INLINE size_t last_pair(uint32_t size) { return size / sizeof(Pair) - 1; }

// (The loops run a constant few times, each pair tested against the
// object's end: they unroll into straight-line stores and loads, never
// touching a neighbour.)
ROOST_INLINE void fill(void* p, uint32_t size) {
  auto* v = static_cast<Pair*>(p);
  size_t end = end_pair(size);
  for (size_t i = kFirstPair; i < kMaxEndPair; i++)
    if (i < end) v[i] = kPatternPair;
  size_t last = last_pair(size);
  if (last >= kFirstPair) v[last] = kPatternPair;
}

ROOST_INLINE bool intact(const void* p, uint32_t size) {
  const auto* v = static_cast<const Pair*>(p);
  size_t end = end_pair(size);
  Pair diff = {0, 0};
  for (size_t i = kFirstPair; i < kMaxEndPair; i++)
    if (i < end) diff |= v[i] ^ kPatternPair;
  size_t last = last_pair(size);
  if (last >= kFirstPair) diff |= v[last] ^ kPatternPair;
  return (diff[0] | diff[1]) == 0;
}

// Zero on free: the bytes between the filled head and the last pair, of
// the first `written` (the most the program may have written: the object's
// size, or the size it was asked for where that is known).
ROOST_INLINE void zero_between(void* p, uint32_t size, size_t written) {
  size_t end = (written + sizeof(Pair) - 1) / sizeof(Pair);
  size_t last = last_pair(size);
  if (end > last) end = last;
  if (end > kMaxEndPair)
    __builtin_memset(static_cast<Pair*>(p) + kMaxEndPair, 0, (end - kMaxEndPair) * sizeof(Pair));
}

// Does the object's last word carry the pattern, if it is one of the
// filled words?  (Where a message's batch word goes.)
ROOST_INLINE bool last_word_intact(const void* p, uint32_t size) {
  return last_pair(size) < kFirstPair ||
         static_cast<const uint64_t*>(p)[size / sizeof(uint64_t) - 1] == kPattern;
}

// The object's last word carries the pattern again (it held a batch
// word), if it is one of the filled words.
ROOST_INLINE void restore_last_word(void* p, uint32_t size) {
  if (last_pair(size) >= kFirstPair)
    static_cast<uint64_t*>(p)[size / sizeof(uint64_t) - 1] = kPattern;
}

}  // namespace roost::free_fill
