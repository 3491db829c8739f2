// Byte patterns for checking objects' contents, shared by the tests and
// the soak: byte i of an object with id `id` depends on both, so that a
// copy shifted by any amount, or another object's bytes, is detected.
// Word-at-a-time fills and checks of byte ranges.  No test framework here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace roost_test {

inline uint64_t pattern_word(uint64_t id, uint64_t index) {
  uint64_t x = (id + 1) * 0x9E3779B97F4A7C15ull ^ (index * 0xD6E8FEB86659FD93ull);
  x ^= x >> 29;
  return x;
}

inline unsigned char pattern_byte(uint64_t id, size_t offset) {
  return static_cast<unsigned char>(pattern_word(id, offset / 8) >> (8 * (offset % 8)));
}

// Writes the pattern of `id` into bytes [from, to) of `b`.
inline void fill_range(unsigned char* b, size_t from, size_t to, uint64_t id) {
  size_t o = from;
  for (; o < to && (o & 7) != 0; o++) b[o] = pattern_byte(id, o);
  for (; o + 8 <= to; o += 8) {
    uint64_t w = pattern_word(id, o / 8);
    memcpy(b + o, &w, 8);
  }
  for (; o < to; o++) b[o] = pattern_byte(id, o);
}

// First offset in [from, to) that does not hold the pattern, or SIZE_MAX.
inline size_t check_range(const unsigned char* b, size_t from, size_t to, uint64_t id) {
  size_t o = from;
  for (; o < to && (o & 7) != 0; o++)
    if (b[o] != pattern_byte(id, o)) return o;
  for (; o + 8 <= to; o += 8) {
    uint64_t w = pattern_word(id, o / 8), got;
    memcpy(&got, b + o, 8);
    if (got != w)
      for (size_t k = o; k < o + 8; k++)
        if (b[k] != pattern_byte(id, k)) return k;
  }
  for (; o < to; o++)
    if (b[o] != pattern_byte(id, o)) return o;
  return SIZE_MAX;
}

}  // namespace roost_test
