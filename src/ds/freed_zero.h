// ds/freed_zero.h — what a freed small object's bytes hold in the hardened
// build: zero (config::kZeroOnFree), checked when it is handed out again
// (config::kCheckFreed).
//
// From its free (or its carve) until it is handed out again, every byte of
// an object past its first 16 (its link and its free mark) reads zero: the
// free zeroes them.  The hand-out checks they still do, so a write into a
// freed object anywhere (after its free, an overflow from the object
// before it, an underflow from the one after) is caught at reuse, and
// zeroes the first 16, so an allocation reads zero throughout.  No word
// needs a pattern to be told from zero: the link and the mark have checks
// of their own (frontend/checks.h), and a quarantined object's link word
// is zero until it leaves, checked then.
//
// A message's tail has its batch word in its last word meanwhile
// (ds/slab_batch.h): the sender checks that word is zero before it writes
// the batch word (last_word_intact), and the owner zeroes it again when
// the batch comes home (clear_last_word).
//
// Owns: which bytes are zero, their zeroing and their test.  Must never:
// be used by the default build's paths.
#pragma once

#include <cstddef>
#include <cstdint>

#include "config.h"
#include "ds/bits.h"

namespace roost::freed_zero {

// The link and the free mark: the bytes before the zeroed ones.
inline constexpr size_t kHeadBytes = 16;

// Objects are 16-byte aligned and multiples of 16 bytes: tested 16 bytes
// at a time.
using Pair = uint64_t __attribute__((vector_size(16)));

// Zeroes the bytes of an object of `size` bytes past its head.
ROOST_INLINE void zero(void* p, size_t size) {
  if (size > kHeadBytes) __builtin_memset(static_cast<char*>(p) + kHeadBytes, 0, size - kHeadBytes);
}

// Do the bytes of an object of `size` bytes past its head all read zero?
// (An OR of every pair, four at a time into four sums: the loads are not
// held up by one chain of ORs.)
ROOST_INLINE bool intact(const void* p, size_t size) {
  const auto* v = static_cast<const Pair*>(p) + kHeadBytes / sizeof(Pair);
  size_t n = size / sizeof(Pair) - kHeadBytes / sizeof(Pair);
  Pair a = {0, 0}, b = {0, 0}, c = {0, 0}, d = {0, 0};
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a |= v[i];
    b |= v[i + 1];
    c |= v[i + 2];
    d |= v[i + 3];
  }
  for (; i < n; i++) a |= v[i];
  a |= b | c | d;
  return (a[0] | a[1]) == 0;
}

// Is the object's last word zero, if it is past the head?  (Where a
// message's batch word goes.)
ROOST_INLINE bool last_word_intact(const void* p, size_t size) {
  return size <= kHeadBytes || static_cast<const uint64_t*>(p)[size / sizeof(uint64_t) - 1] == 0;
}

// The object's last word reads zero again (it held a batch word), if it is
// past the head.
ROOST_INLINE void clear_last_word(void* p, size_t size) {
  if (size > kHeadBytes) static_cast<uint64_t*>(p)[size / sizeof(uint64_t) - 1] = 0;
}

}  // namespace roost::freed_zero
