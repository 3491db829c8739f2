// bench/cachethrash.c — cache-thrash (active false sharing).
//
// The cache-thrash benchmark, a test of whether an allocator avoids active
// false sharing, written here from its published description (the seed report
// shared/seeds/002_*, and the roost benchmark contract): each of T threads I
// times allocates an object of S bytes, writes each of its bytes W times,
// checks it and frees it. The objects are small (default 8 bytes), so several
// fit in one cache line.
//
// What it stresses: active false sharing. An allocator that serves
// concurrently running threads from the same memory (one shared heap, or
// per-CPU heaps shared by the threads scheduled on them) can hand objects on
// one cache line to different threads at the same time, and their writes
// bounce the line between cores. An allocator that gives each thread its own
// memory (thread caches, per-thread heaps or arenas) avoids it. The
// allocator's own speed barely matters (one malloc and one free per S x W
// byte writes); where the objects land does. cachescratch is the passive
// variant (the sharing is set up by the main thread's allocations).
//
// The writes go through a volatile pointer, one byte at a time (round-major:
// every byte once, then every byte again, W rounds), so each one happens. The
// value of byte b in round r of object j of thread i is a simple function of
// (i, j, r, b).
//
// Verification: after the W rounds each object must hold the last round's
// values in every byte, checked before it is freed. Per thread, objects freed
// must equal I and no byte may be wrong. Any mismatch prints a diagnostic and
// exits 1.
//
// Options (k/m suffixes: x1000, x1000000):
//   -t T  threads (1..1024)                    default 4
//   -i I  objects (iterations) per thread       default 200000
//   -w W  writes of each byte per object        default 800
//   -s S  object size in bytes (>= 1)           default 8 (the allocator rounds it up)
//
// Output (stdout, one line of key=value pairs): parameters, writes (T x I x S x
// W byte writes), seconds (from the first thread's start after the start
// barrier to the last thread's finish, by the threads' own clocks),
// writes_per_sec; then a placement fact, shared_lines: the number of
// threads whose first object lies on a 64-byte cache line that also holds
// another thread's first object (0 when every thread has its own memory); then
// the common tail (vmhwm_kib, malloc_from, verify). The allocator under test
// is swapped with LD_PRELOAD.
#define _GNU_SOURCE
#include <pthread.h>

#include "bench_common.h"

enum { kMaxThreads = 1024 };

typedef struct Thread {
  _Alignas(64) unsigned id;
  uintptr_t first;  // address of its first object
  uint64_t freed, bad_bytes;
  double start, end;  // BenchNow() after the start barrier, at the finish
  pthread_t tid;
} Thread;

static struct {
  unsigned threads;
  uint64_t iters, writes;
  size_t size;
  Thread* t;
  pthread_barrier_t start;
} g;

// Writes every byte of p[0..size) w times (round-major), then counts the bytes
// that do not hold the last round's value. The loops are aligned to 32 bytes:
// otherwise where the linker happens to put the byte loop (across a 32-byte
// fetch window or not) changes its speed by up to 2x on Intel cores.
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("align-loops=32")))
#endif
static uint64_t WriteAndCheck(unsigned char* p, size_t size, uint64_t w, unsigned base) {
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

static void* Worker(void* arg) {
  Thread* self = arg;
  const size_t size = g.size;
  uint64_t freed = 0, bad = 0;
  pthread_barrier_wait(&g.start);
  self->start = BenchNow();
  for (uint64_t it = 0; it < g.iters; it++) {
    unsigned char* p = malloc(size);
    if (p == NULL) {
      fprintf(stderr, "cachethrash: malloc(%zu) failed\n", size);
      exit(1);
    }
    if (it == 0) self->first = (uintptr_t)p;
    uint64_t wrong = WriteAndCheck(p, size, g.writes, self->id * 131u + (unsigned)it * 17u);
    if (wrong != 0 && bad == 0) {
      fprintf(stderr, "cachethrash: thread %u object %llu (%p): %llu bytes wrong\n", self->id,
              (unsigned long long)it, (void*)p, (unsigned long long)wrong);
    }
    bad += wrong;
    free(p);
    freed++;
  }
  self->end = BenchNow();
  self->freed = freed;
  self->bad_bytes = bad;
  return NULL;
}

static int Usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s [-t THREADS] [-i ITERATIONS] [-w WRITES] [-s SIZE]\n"
          "defaults: -t 4 -i 200000 -w 800 -s 8 (k/m suffixes: x1000)\n",
          argv0);
  return 2;
}

int main(int argc, char** argv) {
  uint64_t t = 4, iters = 200000, w = 800, s = 8;
  const BenchOption opts[] = {{"-t", &t}, {"-i", &iters}, {"-w", &w}, {"-s", &s}};
  if (BenchParseOptions(argc, argv, opts, sizeof opts / sizeof opts[0]) != 0) return Usage(argv[0]);
  if (t < 1 || t > kMaxThreads || iters < 1 || iters > (1ull << 40) || w < 1 || w > (1ull << 40) ||
      s < 1 || s > (1u << 30)) {
    fprintf(stderr, "cachethrash: need 1 <= t <= %d, i >= 1, w >= 1, 1 <= s <= 2^30\n",
            kMaxThreads);
    return Usage(argv[0]);
  }
  g.threads = (unsigned)t;
  g.iters = iters;
  g.writes = w;
  g.size = (size_t)s;

  g.t = aligned_alloc(64, ((sizeof(Thread) * g.threads + 63) / 64) * 64);
  if (g.t == NULL) {
    fprintf(stderr, "cachethrash: out of memory setting up\n");
    return 1;
  }
  memset(g.t, 0, sizeof(Thread) * g.threads);
  for (unsigned i = 0; i < g.threads; i++) g.t[i].id = i;
  pthread_barrier_init(&g.start, NULL, g.threads + 1);
  for (unsigned i = 0; i < g.threads; i++) {
    if (pthread_create(&g.t[i].tid, NULL, Worker, &g.t[i]) != 0) {
      fprintf(stderr, "cachethrash: pthread_create failed\n");
      return 1;
    }
  }
  pthread_barrier_wait(&g.start);
  for (unsigned i = 0; i < g.threads; i++) pthread_join(g.t[i].tid, NULL);
  // Measured: from the first thread's start to the last one's finish, by the
  // threads' own clocks (with more threads than cores, the main thread may run
  // only long after the barrier has released the workers).
  double t0 = g.t[0].start, t1 = g.t[0].end;
  for (unsigned i = 1; i < g.threads; i++) {
    if (g.t[i].start < t0) t0 = g.t[i].start;
    if (g.t[i].end > t1) t1 = g.t[i].end;
  }
  double secs = t1 - t0;

  int ok = 1;
  uint64_t bad = 0, shared = 0;
  for (unsigned i = 0; i < g.threads; i++) {
    if (g.t[i].freed != g.iters) {
      fprintf(stderr, "cachethrash: thread %u freed %llu objects, want %llu\n", i,
              (unsigned long long)g.t[i].freed, (unsigned long long)g.iters);
      ok = 0;
    }
    bad += g.t[i].bad_bytes;
    for (unsigned j = 0; j < g.threads; j++) {
      if (j != i && (g.t[j].first >> 6) == (g.t[i].first >> 6)) {
        shared++;
        break;
      }
    }
  }
  if (bad != 0) {
    fprintf(stderr, "cachethrash: %llu bytes held a wrong value\n", (unsigned long long)bad);
    ok = 0;
  }

  uint64_t writes = (uint64_t)g.threads * g.iters * g.size * g.writes;
  free(g.t);
  printf(
      "bench=cachethrash threads=%u iterations=%llu writes_per_byte=%llu size=%zu writes=%llu "
      "seconds=%.6f writes_per_sec=%.0f shared_lines=%llu",
      g.threads, (unsigned long long)g.iters, (unsigned long long)g.writes, g.size,
      (unsigned long long)writes, secs, (double)writes / secs, (unsigned long long)shared);
  BenchReportTail(ok);
  return ok ? 0 : 1;
}
