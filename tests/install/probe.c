/* tests/install/probe.c — a program built against an installed roost (by
 * tests/install_test.sh, through pkg-config or find_package).  It proves its
 * allocations come from roost: roost's counters move by what it allocates.
 * Built with PROBE_PREFIXED it allocates through roost_malloc (the prefixed
 * library), otherwise through malloc (the overriding one).  Prints
 * "roost VERSION: N allocations counted" and exits 0, or says what failed
 * and exits 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "roost.h"

#ifdef PROBE_PREFIXED
#define ALLOC roost_malloc
#define FREE roost_free
#else
#define ALLOC malloc
#define FREE free
#endif

enum { kObjects = 1000 };

int main(void) {
  if (roost_version() != ROOST_VERSION) {
    printf("library version %d, header %d\n", roost_version(), ROOST_VERSION);
    return 1;
  }
  struct roost_stats before, after;
  roost_stats(&before);
  static void* objects[kObjects];
  for (int i = 0; i < kObjects; i++) {
    objects[i] = ALLOC(64 + (size_t)i);
    if (objects[i] == NULL) return 1;
    memset(objects[i], 1, 64);
  }
  roost_stats(&after);
  for (int i = 0; i < kObjects; i++) FREE(objects[i]);
  unsigned long long counted = (unsigned long long)(after.allocations - before.allocations);
  if (counted < kObjects || after.bytes_in_use < before.bytes_in_use + 64 * kObjects) {
    printf("roost counted %llu allocations of %d, bytes in use %llu -> %llu\n", counted, kObjects,
           (unsigned long long)before.bytes_in_use, (unsigned long long)after.bytes_in_use);
    return 1;
  }
  printf("roost %d.%d.%d: %d allocations counted\n", ROOST_VERSION_MAJOR, ROOST_VERSION_MINOR,
         ROOST_VERSION_PATCH, kObjects);
  return 0;
}
