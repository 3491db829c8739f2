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

#include "false_sharing.h"

typedef struct Thread {
  _Alignas(64) unsigned id;
  uintptr_t first;  // address of its first object
  uint64_t freed, bad_bytes;
  pthread_t tid;
} Thread;

static struct {
  unsigned threads;
  uint64_t iters, writes;
  size_t size;
  Thread* t;
  pthread_barrier_t start;
  BenchClock clock;
} g;

static void* Worker(void* arg) {
  Thread* self = arg;
  const size_t size = g.size;
  uint64_t freed = 0, bad = 0;
  pthread_barrier_wait(&g.start);
  BenchClockStart(&g.clock);
  freed += HammerObjects("cachethrash", self->id, size, g.iters, g.writes, &self->first, &bad);
  BenchClockStop(&g.clock);
  self->freed = freed;
  self->bad_bytes = bad;
  return NULL;
}

int main(int argc, char** argv) {
  uint64_t t, iters, w, s;
  if (ParseFalseSharingOptions("cachethrash", argc, argv, &t, &iters, &w, &s) != 0) return 2;
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
  double secs = BenchClockSeconds(&g.clock);

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
