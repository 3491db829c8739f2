// bench/cachescratch.c — cache-scratch (passive false sharing).
//
// The cache-scratch benchmark, a test of whether an allocator avoids passive
// false sharing, written here from its published description (the seed report
// shared/seeds/002_*, and the roost benchmark contract): before starting the
// threads, the main thread allocates T small objects of S bytes back to back
// (under most allocators they are adjacent in memory, several to a cache line)
// and gives one to each thread. Each thread first frees the object it was
// given, then I times allocates an object of S bytes, writes each of its bytes
// W times, checks it and frees it.
//
// What it stresses: passive false sharing. An allocator that keeps a freed
// object in the freeing thread's cache and hands it straight back to the same
// thread's next malloc gives every thread an object on the cache line it
// shares with the other threads' objects, and the threads' writes bounce that
// line between cores for the whole run. An allocator that sends the freed
// object back to its owner (the main thread) or serves each thread from its
// own memory gives each thread its own line. The allocator's own speed barely
// matters (one malloc and one free per S x W byte writes); where the objects
// land does.
//
// The writes go through a volatile pointer, one byte at a time (round-major:
// every byte once, then every byte again, W rounds), so each one happens. The
// value of byte b in round r of object j of thread i is a simple function of
// (i, j, r, b).
//
// Verification: the main thread writes a pattern into each initial object and
// the receiving thread checks it before freeing it; after the W rounds each
// loop object must hold the last round's values in every byte, checked before
// it is freed. Per thread, objects freed must equal I + 1 and no byte may be
// wrong. Any mismatch prints a diagnostic and exits 1.
//
// Options (k/m suffixes: x1000, x1000000):
//   -t T  threads (1..1024)                    default 4
//   -i I  objects (iterations) per thread       default 200000
//   -w W  writes of each byte per object        default 800
//   -s S  object size in bytes (>= 1)           default 8 (the allocator rounds it up)
//
// Output (stdout, one line of key=value pairs): parameters, writes (T x I x S x
// W byte writes), seconds (from the first thread's start after the start
// barrier to the last thread's finish, by the threads' own clocks; the initial
// objects are allocated before the barrier), writes_per_sec; then two
// placement facts: initial_span (bytes from the lowest to the end of the
// highest initial object: about T x the rounded size when they are adjacent)
// and reused_initial (threads whose first loop object had the address of the
// initial object they had just freed, which keeps the false sharing alive);
// then the common tail (vmhwm_kib, malloc_from, verify). The allocator under
// test is swapped with LD_PRELOAD.
#define _GNU_SOURCE
#include <pthread.h>

#include "false_sharing.h"

typedef struct Thread {
  _Alignas(64) unsigned id;
  unsigned char* initial;  // given by the main thread, freed first
  uint64_t freed, bad_bytes, reused;
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

static unsigned char InitialByte(unsigned thread, size_t b) {
  return (unsigned char)(thread * 7 + b * 13 + 0x5a);
}

static void* Worker(void* arg) {
  Thread* self = arg;
  const size_t size = g.size;
  uint64_t freed = 0, bad = 0, reused = 0;
  pthread_barrier_wait(&g.start);
  BenchClockStart(&g.clock);

  uintptr_t initial = (uintptr_t)self->initial;
  for (size_t b = 0; b < size; b++) bad += self->initial[b] != InitialByte(self->id, b);
  free(self->initial);
  freed++;

  uintptr_t first = 0;
  freed += HammerObjects("cachescratch", self->id, size, g.iters, g.writes, &first, &bad);
  reused = first == initial;
  BenchClockStop(&g.clock);
  self->freed = freed;
  self->bad_bytes = bad;
  self->reused = reused;
  return NULL;
}

int main(int argc, char** argv) {
  uint64_t t, iters, w, s;
  if (ParseFalseSharingOptions("cachescratch", argc, argv, &t, &iters, &w, &s) != 0) return 2;
  g.threads = (unsigned)t;
  g.iters = iters;
  g.writes = w;
  g.size = (size_t)s;

  g.t = aligned_alloc(64, ((sizeof(Thread) * g.threads + 63) / 64) * 64);
  if (g.t == NULL) {
    fprintf(stderr, "cachescratch: out of memory setting up\n");
    return 1;
  }
  memset(g.t, 0, sizeof(Thread) * g.threads);
  // The initial objects, back to back and nothing else allocated in between.
  for (unsigned i = 0; i < g.threads; i++) {
    g.t[i].id = i;
    g.t[i].initial = malloc(g.size);
    if (g.t[i].initial == NULL) {
      fprintf(stderr, "cachescratch: out of memory setting up\n");
      return 1;
    }
  }
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (unsigned i = 0; i < g.threads; i++) {
    for (size_t b = 0; b < g.size; b++) g.t[i].initial[b] = InitialByte(i, b);
    uintptr_t a = (uintptr_t)g.t[i].initial;
    if (a < lo) lo = a;
    if (a + g.size > hi) hi = a + g.size;
  }
  pthread_barrier_init(&g.start, NULL, g.threads + 1);
  for (unsigned i = 0; i < g.threads; i++) {
    if (pthread_create(&g.t[i].tid, NULL, Worker, &g.t[i]) != 0) {
      fprintf(stderr, "cachescratch: pthread_create failed\n");
      return 1;
    }
  }
  pthread_barrier_wait(&g.start);
  for (unsigned i = 0; i < g.threads; i++) pthread_join(g.t[i].tid, NULL);
  double secs = BenchClockSeconds(&g.clock);

  int ok = 1;
  uint64_t bad = 0, reused = 0;
  for (unsigned i = 0; i < g.threads; i++) {
    if (g.t[i].freed != g.iters + 1) {
      fprintf(stderr, "cachescratch: thread %u freed %llu objects, want %llu\n", i,
              (unsigned long long)g.t[i].freed, (unsigned long long)(g.iters + 1));
      ok = 0;
    }
    bad += g.t[i].bad_bytes;
    reused += g.t[i].reused;
  }
  if (bad != 0) {
    fprintf(stderr, "cachescratch: %llu bytes held a wrong value\n", (unsigned long long)bad);
    ok = 0;
  }

  uint64_t writes = (uint64_t)g.threads * g.iters * g.size * g.writes;
  free(g.t);
  printf(
      "bench=cachescratch threads=%u iterations=%llu writes_per_byte=%llu size=%zu "
      "writes=%llu seconds=%.6f writes_per_sec=%.0f initial_span=%llu reused_initial=%llu",
      g.threads, (unsigned long long)g.iters, (unsigned long long)g.writes, g.size,
      (unsigned long long)writes, secs, (double)writes / secs, (unsigned long long)(hi - lo),
      (unsigned long long)reused);
  BenchReportTail(ok);
  return ok ? 0 : 1;
}
