// tests/debugging/probe.c — a program with four bugs, run under valgrind's
// memcheck by tests/debugging/memcheck_check.py, on glibc's malloc and on
// roost's ROOST_VALGRIND build, whose reports must say the same.
//
// The four bugs come first, each in a function of its own, on a fresh heap
// (memcheck describes an address by the oldest freed block it remembers
// there, and roost reuses memory at once):
//   use_after_free   reads an int of a freed 64-byte block
//   overflow         writes one byte past an 80-byte block
//   uninitialised    branches on a byte malloc never set
//   leak             loses the only pointer to a 128-byte block
// Then it uses the heap correctly in the ways that make roost touch freed
// memory (free marks and links, remote frees in messages, a thread's exit,
// realloc, calloc, aligned and large objects, malloc_trim), and frees a
// block of the C library's strdup: none of that may be reported.
// Built with -DPREFIXED, the same through roost_malloc & co. (roost.h).
// (Sizes are sizes of roost's classes: memcheck sees a roost block with
// its usable size.)
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef PREFIXED
#include "roost.h"
#define MALLOC roost_malloc
#define CALLOC roost_calloc
#define REALLOC roost_realloc
#define FREE roost_free
#define ALIGNED_ALLOC roost_aligned_alloc
#define USABLE_SIZE roost_usable_size
#define TRIM() roost_trim()
#else
#include <malloc.h>
#define MALLOC malloc
#define CALLOC calloc
#define REALLOC realloc
#define FREE free
#define ALIGNED_ALLOC aligned_alloc
#define USABLE_SIZE malloc_usable_size
#define TRIM() malloc_trim(0)
#endif

#define kObjects 1000

static void* g_made[kObjects];
static volatile int g_sink;

static void check(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "probe: %s\n", what);
    exit(2);
  }
}

// Another thread's objects, freed here (remote frees), after it exited.
static void* make_objects(void* arg) {
  (void)arg;
  for (int i = 0; i < kObjects; i++) {
    g_made[i] = MALLOC(16 + (size_t)(i % 8) * 16);
    memset(g_made[i], i & 0xff, 16);
  }
  return NULL;
}

static void correct_use(void) {
  pthread_t t;
  check(pthread_create(&t, NULL, make_objects, NULL) == 0, "pthread_create");
  check(pthread_join(t, NULL) == 0, "pthread_join");
  for (int i = 0; i < kObjects; i++) {
    check(((unsigned char*)g_made[i])[15] == (i & 0xff), "remote object's bytes");
    FREE(g_made[i]);
    g_made[i] = NULL;  // (no stale pointer where a leak may take its place)
  }
  // Frees and reuse of every small size, and some large ones.
  for (int round = 0; round < 3; round++) {
    void* keep[64];
    for (int i = 0; i < 64; i++) {
      size_t size = (size_t)(i + 1) * 48 + (i % 3 == 0 ? 300000 : 0);
      keep[i] = MALLOC(size);
      memset(keep[i], round, size);
    }
    for (int i = 0; i < 64; i += 2) FREE(keep[i]);
    for (int i = 1; i < 64; i += 2) {
      check(((unsigned char*)keep[i])[0] == round, "kept bytes");
      FREE(keep[i]);
    }
  }
  // calloc's bytes read as zero; realloc keeps what it copies; the usable
  // size is the program's.
  unsigned char* z = CALLOC(1000, 3);
  for (int i = 0; i < 3000; i++) check(z[i] == 0, "calloc's zeroes");
  FREE(z);
  char* r = MALLOC(1);
  r[0] = 7;
  for (size_t size = 3; size <= 600000; size *= 3) {
    r = REALLOC(r, size);
    check(r[0] == 7 && r[size / 3 - 1] == 7, "realloc's copy");
    memset(r, 7, size);
  }
  r = REALLOC(r, 10);
  check(r[9] == 7, "realloc's shrink");
  size_t usable = USABLE_SIZE(r);
  memset(r, 1, usable);
  FREE(r);
  void* a = ALIGNED_ALLOC(4096, 8192);
  check(a != NULL && ((uintptr_t)a & 4095) == 0, "aligned_alloc");
  memset(a, 3, 5000);
  FREE(a);
  // A block of the C library's strdup: under ASan, of ASan's own allocator
  // even where roost is the program's malloc, and freed through roost's
  // free and realloc.
  char* d = strdup("probe");
  check(strcmp(d, "probe") == 0, "strdup");
#ifndef PREFIXED
  d = realloc(d, 4096);
  check(strcmp(d, "probe") == 0, "realloc of strdup's block");
#endif
  free(d);
  TRIM();
}

__attribute__((noinline)) static void use_after_free(void) {
  int* p = MALLOC(64);
  p[0] = 1;
  FREE(p);
  g_sink = p[1];
}

// (Through a variable the compiler cannot see, which would warn.)
static volatile size_t g_end = 80;

__attribute__((noinline)) static void overflow(void) {
  char* p = MALLOC(80);
  p[g_end] = 1;
  FREE(p);
}

__attribute__((noinline)) static void uninitialised(void) {
  char* p = MALLOC(32);
  if (p[5] == 42) printf("probe: byte 5 is 42\n");
  FREE(p);
}

static void* volatile g_lost;

__attribute__((noinline)) static void leak(void) {
  g_lost = MALLOC(128);
  memset(g_lost, 0, 128);
  g_lost = NULL;
}

int main(void) {
  use_after_free();
  overflow();
  uninitialised();
  leak();
  correct_use();
  return 0;
}
