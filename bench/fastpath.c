// bench/fastpath.c — single-thread malloc/free fast-path benchmark.
//
// Runs ITERS back-to-back malloc(n)+free(p) pairs on one thread, either with a
// fixed size or with sizes drawn from a fixed 4096-entry table of random sizes
// in [LO, HI] (built with a cheap PRNG before the measured loop). It is meant
// to be run twice under callgrind with two iteration counts: the difference of
// the two instruction totals divided by the difference of the iteration counts
// is the cost of one pair, with process startup, table building and warm-up
// cancelled out. The allocator is whatever `malloc` resolves to, so it is
// chosen with LD_PRELOAD; this program only links libc.
//
// Usage:
//   bench_fastpath [--noop] [--window W] fixed SIZE ITERS
//   bench_fastpath [--noop] [--window W] random LO HI ITERS
// Default pattern: p = malloc(n); free(p) -- nothing else is live, so in a
// slab/page-based allocator every free empties the slab again. --window W (a
// power of two, at most 4096) keeps W objects live instead: each pair frees
// the object allocated W pairs earlier, so slabs stay partly used, which is
// the steady fast path of a program that holds memory. --noop replaces malloc/free with empty local
// functions, which measures the loop and call overhead included in every
// allocator's figure.
//
// Output (stdout, one line): the parameters, the shared object that provides
// `malloc` (so a runner can check that a preload took effect) and a checksum.
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"  // the size table and BenchMallocFrom; nothing of it runs in the loop

enum {
  kTableSize = kBenchSizeTable,  // power of two: the loop indexes it with i & (kTableSize - 1)
  kWarmupPairs = 4 * kTableSize,
};

typedef void* (*MallocFn)(size_t);
typedef void (*FreeFn)(void*);

static size_t g_sizes[kTableSize];
static void* g_ring[kTableSize];  // live objects of --window, slot i & (W - 1)
static volatile uintptr_t g_sink;

// Stand-ins for --noop: as cheap as a function can be, and opaque to the loop.
static char g_noop_object[16];
__attribute__((noinline)) static void* NoopMalloc(size_t n) {
  __asm__ __volatile__("" : : "r"(n));
  return g_noop_object;
}
__attribute__((noinline)) static void NoopFree(void* p) { __asm__ __volatile__("" : : "r"(p)); }

// The pairs themselves. noinline so the same code runs in the warm-up and the
// measured loop; the function pointers are hidden from the optimiser (and the
// file is built with -fno-builtin), so the compiler can neither drop a
// malloc/free pair nor specialise the loop for a known allocator.
__attribute__((noinline)) static uintptr_t RunPairs(MallocFn m, FreeFn f, uint64_t iters) {
  __asm__ __volatile__("" : "+r"(m), "+r"(f));
  uintptr_t acc = 0;
  for (uint64_t i = 0; i < iters; i++) {
    void* p = m(g_sizes[i & (kTableSize - 1)]);
    __asm__ __volatile__("" : : "r"(p) : "memory");
    acc ^= (uintptr_t)p;
    f(p);
  }
  return acc;
}

// The --window pattern: still one malloc and one free per iteration, but the
// object freed is the one allocated `mask + 1` iterations earlier. The first
// mask + 1 frees (in the warm-up) are free(NULL).
__attribute__((noinline)) static uintptr_t RunWindow(MallocFn m, FreeFn f, uint64_t iters,
                                                     uint64_t mask) {
  __asm__ __volatile__("" : "+r"(m), "+r"(f));
  uintptr_t acc = 0;
  for (uint64_t i = 0; i < iters; i++) {
    void* p = m(g_sizes[i & (kTableSize - 1)]);
    __asm__ __volatile__("" : : "r"(p) : "memory");
    acc ^= (uintptr_t)p;
    f(g_ring[i & mask]);
    g_ring[i & mask] = p;
  }
  return acc;
}

static int ParseSize(const char* s, unsigned long long* out) {
  char* end = NULL;
  if (s[0] < '0' || s[0] > '9') return -1;
  *out = strtoull(s, &end, 10);
  return *end == '\0' ? 0 : -1;
}

static int Usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s [--noop] [--window W] fixed SIZE ITERS\n"
          "       %s [--noop] [--window W] random LO HI ITERS\n",
          argv0, argv0);
  return 2;
}

int main(int argc, char** argv) {
  const char* argv0 = argv[0];
  int noop = 0;
  unsigned long long lo = 0, hi = 0, iters = 0, window = 0;
  while (argc > 1 && argv[1][0] == '-') {
    if (strcmp(argv[1], "--noop") == 0) {
      noop = 1;
    } else if (argc > 2 && strcmp(argv[1], "--window") == 0 && ParseSize(argv[2], &window) == 0 &&
               window > 0 && window <= kTableSize && (window & (window - 1)) == 0) {
      argc--;
      argv++;
    } else {
      return Usage(argv0);
    }
    argc--;
    argv++;
  }
  if (argc == 4 && strcmp(argv[1], "fixed") == 0) {
    if (ParseSize(argv[2], &lo) != 0 || ParseSize(argv[3], &iters) != 0) return Usage(argv0);
    hi = lo;
  } else if (argc == 5 && strcmp(argv[1], "random") == 0) {
    if (ParseSize(argv[2], &lo) != 0 || ParseSize(argv[3], &hi) != 0 ||
        ParseSize(argv[4], &iters) != 0 || lo > hi) {
      return Usage(argv0);
    }
  } else {
    return Usage(argv0);
  }

  MallocFn m = noop ? NoopMalloc : malloc;
  FreeFn f = noop ? NoopFree : free;
  BenchBuildSizeTable(g_sizes, (size_t)lo, (size_t)hi);  // fixed seed: the same in every run

  // Warm-up: the first allocations of each size class take slow paths (new
  // slab, thread set-up, lazy initialisation). They are the same in every run
  // length and cancel in the difference; running them here also keeps them out
  // of any single-run reading.
  uintptr_t acc;
  if (window == 0) {
    acc = RunPairs(m, f, kWarmupPairs);
    acc ^= RunPairs(m, f, iters);
  } else {
    // Warm-up and measured loop continue one sequence, so the live set is
    // full (window objects) from the first measured pair on.
    acc = RunWindow(m, f, kWarmupPairs, window - 1);
    acc ^= RunWindow(m, f, iters, window - 1);
  }
  g_sink = acc;

  // Which object provides malloc: the first definition in global lookup order,
  // i.e. the LD_PRELOAD library if one is in effect.
  const char* provider = noop ? "noop" : BenchMallocFrom();
  printf("mode=%s lo=%llu hi=%llu window=%llu iters=%llu malloc_from=%s checksum=%lx\n", argv[1],
         lo, hi, window, iters, provider, (unsigned long)(acc & 0xffff));
  return 0;
}
