// ds/bits.h — bit tricks used across roost.
//
// Owns: power-of-two helpers and branch hints.  Must never: depend on
// anything above ds/ or on the OS.
#pragma once

#include <cstddef>
#include <cstdint>

#define ROOST_LIKELY(x) __builtin_expect(!!(x), 1)
#define ROOST_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define ROOST_INLINE inline __attribute__((always_inline))
#define ROOST_SLOW __attribute__((noinline, cold))
#define ROOST_NOINLINE __attribute__((noinline))
// One copy of a function, not one per constant argument (GCC's clones;
// clang has no such attribute).
#if defined(__clang__)
#define ROOST_NOCLONE
#else
#define ROOST_NOCLONE __attribute__((noclone))
#endif
// For globals declared in headers: hidden, so the fast paths address them
// directly (PC-relative) rather than through the GOT.
#define ROOST_HIDDEN __attribute__((visibility("hidden")))

namespace roost::bits {

constexpr unsigned log2_floor(size_t x) { return 63u - static_cast<unsigned>(__builtin_clzl(x)); }

constexpr bool is_pow2(size_t x) { return x != 0 && (x & (x - 1)) == 0; }

// Smallest power of two >= x (x >= 1, x <= 2^63).
constexpr size_t next_pow2(size_t x) {
  return x <= 1 ? 1 : size_t{1} << (64 - __builtin_clzl(x - 1));
}

constexpr unsigned log2_ceil(size_t x) { return x <= 1 ? 0 : 64u - __builtin_clzl(x - 1); }

constexpr size_t align_up(size_t x, size_t a) { return (x + a - 1) & ~(a - 1); }
constexpr uintptr_t align_down(uintptr_t x, size_t a) { return x & ~(uintptr_t{a} - 1); }

}  // namespace roost::bits
