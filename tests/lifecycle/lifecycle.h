/* Helpers shared by the lifecycle programs and libraries (C): failing
 * loudly without stdio or malloc, byte patterns that tell one object's
 * contents from another's, and a churn of allocations with content checks. */
#ifndef ROOST_TESTS_LIFECYCLE_H
#define ROOST_TESTS_LIFECYCLE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One line on stderr, written with write(2): usable where stdio or malloc
 * may not be (constructors, destructors, exit handlers). */
static inline void lc_say(const char* line) {
  (void)!write(2, line, strlen(line));
  (void)!write(2, "\n", 1);
}

/* Fails the whole process: "lifecycle: FAILED: what" and exit status 3,
 * without running exit handlers. */
static inline void lc_fail(const char* what) {
  const char prefix[] = "lifecycle: FAILED: ";
  (void)!write(2, prefix, sizeof(prefix) - 1);
  lc_say(what);
  _exit(3);
}

static inline void lc_check(bool ok, const char* what) {
  if (!ok) lc_fail(what);
}

/* Byte i of an object with id `id`. */
static inline unsigned char lc_pattern_byte(uint64_t id, size_t i) {
  uint64_t x = (id + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)i * 0xD6E8FEB86659FD93ull);
  return (unsigned char)(x ^ (x >> 29) ^ (x >> 47));
}

static inline void lc_fill(void* p, size_t n, uint64_t id) {
  unsigned char* b = (unsigned char*)p;
  for (size_t i = 0; i < n; i++) b[i] = lc_pattern_byte(id, i);
}

static inline bool lc_holds(const void* p, size_t n, uint64_t id) {
  const unsigned char* b = (const unsigned char*)p;
  for (size_t i = 0; i < n; i++)
    if (b[i] != lc_pattern_byte(id, i)) return false;
  return true;
}

/* Allocates `count` objects of assorted sizes (one in 16 above 256 KiB),
 * fills them, then checks and frees them; false on a failed allocation or
 * damaged contents. */
static inline bool lc_churn(int count, uint64_t seed) {
  enum { kMax = 64 };
  void* p[kMax];
  size_t n[kMax];
  if (count > kMax) count = kMax;
  uint64_t x = seed * 2654435761u + 1;
  for (int i = 0; i < count; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    n[i] = i % 16 == 15 ? 300000 + (x >> 40) % 100000 : 1 + (x >> 33) % 2000;
    p[i] = malloc(n[i]);
    if (p[i] == NULL) return false;
    lc_fill(p[i], n[i], seed + (uint64_t)i);
  }
  bool ok = true;
  for (int i = 0; i < count; i++) {
    ok &= lc_holds(p[i], n[i], seed + (uint64_t)i);
    free(p[i]);
  }
  return ok;
}

#endif
