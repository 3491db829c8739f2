// bench/false_sharing.h — what cache-scratch and cache-thrash share: the
// write loop, one thread's allocate-write-check-free rounds, and the
// options.
//
// Owns: those pieces of the two false-sharing programs.  Must never: be
// used by a program that allocates anything in the measured loop but its
// objects.
#ifndef ROOST_BENCH_FALSE_SHARING_H
#define ROOST_BENCH_FALSE_SHARING_H

#include "bench_common.h"

enum { kFalseSharingMaxThreads = 1024 };

// Writes every byte of p[0..size) w times (round-major), then counts the bytes
// that do not hold the last round's value. The loops are aligned to 32 bytes:
// otherwise where the linker happens to put the byte loop (across a 32-byte
// fetch window or not) changes its speed by up to 2x on Intel cores.
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("align-loops=32")))
#endif
static uint64_t
WriteAndCheck(unsigned char* p, size_t size, uint64_t w, unsigned base) {
  volatile unsigned char* v = p;
  for (uint64_t r = 0; r < w; r++) {
    unsigned char rb = (unsigned char)(base + r * 31);
    for (size_t b = 0; b < size; b++) v[b] = (unsigned char)(rb + b);
  }
  unsigned char last = (unsigned char)(base + (w - 1) * 31);
  uint64_t wrong = 0;
  for (size_t b = 0; b < size; b++) wrong += v[b] != (unsigned char)(last + b);
  return wrong;
}

// One thread's rounds: `iters` times allocate `size` bytes, write and check
// every byte `writes` times, free.  Returns the objects freed; adds the
// wrong bytes to *bad (the first damaged object is reported on stderr) and
// stores the first object's address in *first.
static uint64_t HammerObjects(const char* prog, unsigned id, size_t size, uint64_t iters,
                              uint64_t writes, uintptr_t* first, uint64_t* bad) {
  uint64_t freed = 0;
  for (uint64_t it = 0; it < iters; it++) {
    unsigned char* p = malloc(size);
    if (p == NULL) {
      fprintf(stderr, "%s: malloc(%zu) failed\n", prog, size);
      exit(1);
    }
    if (it == 0) *first = (uintptr_t)p;
    uint64_t wrong = WriteAndCheck(p, size, writes, id * 131u + (unsigned)it * 17u);
    if (wrong != 0 && *bad == 0) {
      fprintf(stderr, "%s: thread %u object %llu (%p): %llu bytes wrong\n", prog, id,
              (unsigned long long)it, (void*)p, (unsigned long long)wrong);
    }
    *bad += wrong;
    free(p);
    freed++;
  }
  return freed;
}

// -t THREADS -i ITERATIONS -w WRITES -s SIZE (defaults 4, 200000, 800, 8).
// Returns 0, or 2 after printing the usage line.
static int ParseFalseSharingOptions(const char* prog, int argc, char** argv, uint64_t* t,
                                    uint64_t* iters, uint64_t* w, uint64_t* s) {
  *t = 4;
  *iters = 200000;
  *w = 800;
  *s = 8;
  const BenchOption opts[] = {{"-t", t}, {"-i", iters}, {"-w", w}, {"-s", s}};
  int ok = BenchParseOptions(argc, argv, opts, sizeof opts / sizeof opts[0]) == 0;
  if (ok && (*t < 1 || *t > kFalseSharingMaxThreads || *iters < 1 || *iters > (1ull << 40) ||
             *w < 1 || *w > (1ull << 40) || *s < 1 || *s > (1u << 30))) {
    fprintf(stderr, "%s: need 1 <= t <= %d, i >= 1, w >= 1, 1 <= s <= 2^30\n", prog,
            kFalseSharingMaxThreads);
    ok = 0;
  }
  if (ok) return 0;
  fprintf(stderr,
          "usage: %s [-t THREADS] [-i ITERATIONS] [-w WRITES] [-s SIZE]\n"
          "defaults: -t 4 -i 200000 -w 800 -s 8 (k/m suffixes: x1000)\n",
          argv[0]);
  return 2;
}

#endif  // ROOST_BENCH_FALSE_SHARING_H
