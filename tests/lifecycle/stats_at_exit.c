/* A C program for ROOST_STATS=1 at exit, whichever way roost is linked:
 * it allocates, frees, keeps a few objects and returns; roost's report at
 * exit must then have the line "roost: allocations N ..." with N > 0.
 * Built linked to libroost.a, with -static, linked to libroost.so
 * (DT_NEEDED), and with ROOST_TEST_PREFIXED against libroost-prefixed.a,
 * where it calls roost_stats() once: a program linked with the prefixed
 * library gets the report at exit only when it calls one of roost's
 * statistics functions, which bring the report in from the archive
 * (docs/STATISTICS.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "roost.h"

#ifdef ROOST_TEST_PREFIXED
#define ALLOC roost_malloc
#define FREE roost_free
#else
#define ALLOC malloc
#define FREE free
#endif

int main(void) {
  static void* kept[10];
  for (int i = 0; i < 1000; i++) {
    void* p = ALLOC(16 + (size_t)i % 500);
    if (p == NULL) return 1;
    memset(p, i, 16);
    if (i % 100 == 0)
      kept[i / 100] = p;
    else
      FREE(p);
  }
#ifdef ROOST_TEST_PREFIXED
  struct roost_stats s;
  if (roost_stats(&s) != 0 || s.allocations < 1000) return 2;
#endif
  printf("stats_at_exit: %p\n", kept[9]);
  return 0;
}
