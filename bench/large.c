// bench/large.c — large-object benchmark: threads allocate objects of 1 to
// 64 MiB, touch part of them, keep a few alive and free the oldest.
//
// Written here for roost's suite (no published benchmark is followed). Each of
// T threads performs n allocations. Sizes come from a 4096-entry table built
// before the clock starts, uniform in [-s, -S] (bench_common.h's fixed seed;
// each thread starts at a different offset), so every allocator sees the same
// sequence. After each malloc the thread writes one 8-byte word per 4 KiB page
// over the first min(size, 1 MiB) bytes (at offsets 0, 4096, 8192, ...) and one
// in the last page (the object's last 8 bytes): about 257 pages touched per
// object, so what is measured is the allocator's path to and from the OS
// (mmap/munmap, page faults, purging, caching of freed large objects), not
// memset. Each thread keeps its last -k objects alive in a ring; the new
// object's slot is freed first (the oldest, or with -r one at random), after
// its words have been checked. With -z each object is zeroed whole as it is
// allocated (what `new char[n]()` does; every page is written), and the words
// are written after it.
//
// Verification: each word is the object's tag (a hash of thread and sequence
// number) plus its offset; all of an object's words are checked before it is
// freed. At the end the ring is checked and emptied; per thread, objects
// allocated must equal objects freed and the sum of tags written the sum of
// tags checked. Any mismatch: diagnostic on stderr, exit 1.
//
// Options (k/m suffixes: x1000, x1000000; so -s 1m is 1000000 bytes):
//   -t T   threads (default 2, at most 256)
//   -n N   allocations per thread (default 2000)
//   -s MIN smallest size in bytes (default 1048576 = 1 MiB; at least 16)
//   -S MAX largest size in bytes (default 67108864 = 64 MiB)
//   -k K   objects each thread keeps alive (default 4)
//   -z Z   1: zero each object whole after malloc (memset); default 0
//   -r R   1: replace a slot drawn at random (a fixed sequence per thread)
//          instead of the oldest; default 0
//   -a A   1: allocate the slot's new object before freeing the old one
//          (a smart pointer assigned a new buffer); default 0: free first
//
// Output (stdout, one line of key=value pairs): parameters, seconds (from the
// first thread's start after the start barrier to the last thread's end, by the
// threads' own clocks; final frees included), allocations, bytes_allocated (sum
// of the sizes requested), pages_touched, ops_per_sec (allocations per second,
// all threads together; each is one malloc and, by the end, one free), then
// vmhwm_kib, malloc_from and verify. Peak RSS is the figure to watch next to
// ops_per_sec: the live touched memory is about T x K x 1 MiB, everything above
// it is the allocator's caching. The allocator under test is swapped with
// LD_PRELOAD.
#define _GNU_SOURCE
#include <pthread.h>

#include "bench_common.h"

enum { kMaxThreads = 256, kPage = 4096, kTouchPrefix = 1 << 20 };

typedef struct Slot {
  unsigned char* p;
  size_t size;
  uint64_t tag;
} Slot;

typedef struct Thread {
  unsigned id;
  Slot* ring;
  uint64_t allocs, frees, bytes, pages, written_sum, checked_sum, bad;
  pthread_t tid;
} Thread;

static struct {
  unsigned threads;
  uint64_t per_thread;
  size_t min_size, max_size, keep;
  int zero, random_slot, alloc_first;
  size_t sizes[kBenchSizeTable];
  Thread* t;
  pthread_barrier_t start;
  BenchClock clock;
} g;

static uint64_t Tag(unsigned thread, uint64_t seq) {
  return BenchMix(((uint64_t)thread << 48) ^ seq ^ 0x6c61726765ULL) | 1;
}

// The touched words: one per page of the first min(size, 1 MiB) bytes, then
// the last 8 bytes (when they lie beyond that prefix). Returns pages touched.
static uint64_t Touch(unsigned char* p, size_t size, uint64_t tag) {
  size_t prefix = size < kTouchPrefix ? size : kTouchPrefix;
  uint64_t pages = 0;
  for (size_t off = 0; off + 8 <= prefix; off += kPage, pages++) BenchStore64(p + off, tag + off);
  if (size > prefix) {
    BenchStore64(p + size - 8, tag + size - 8);
    pages++;
  }
  return pages;
}

static int Check(const unsigned char* p, size_t size, uint64_t tag) {
  size_t prefix = size < kTouchPrefix ? size : kTouchPrefix;
  for (size_t off = 0; off + 8 <= prefix; off += kPage)
    if (BenchLoad64(p + off) != tag + off) return 0;
  return size <= prefix || BenchLoad64(p + size - 8) == tag + size - 8;
}

static void Release(Thread* th, Slot* s) {
  if (!Check(s->p, s->size, s->tag)) {
    th->bad++;
    if (th->bad <= 3) {
      fprintf(stderr, "large: thread %u: object %p (%zu B) damaged before its free\n", th->id,
              (void*)s->p, s->size);
    }
  } else {
    free(s->p);
  }
  th->checked_sum += s->tag;
  th->frees++;
  s->p = NULL;
}

static void* Run(void* arg) {
  Thread* th = arg;
  size_t idx = (size_t)th->id * 997;  // a different walk through the size table
  pthread_barrier_wait(&g.start);
  BenchClockStart(&g.clock);
  for (uint64_t seq = 0; seq < g.per_thread; seq++) {
    size_t slot = g.random_slot ? (size_t)(BenchMix(((uint64_t)th->id << 40) ^ seq) % g.keep)
                                : (size_t)(seq % g.keep);
    Slot* s = &th->ring[slot];
    if (s->p != NULL && !g.alloc_first) Release(th, s);
    size_t size = g.sizes[idx++ & (kBenchSizeTable - 1)];
    unsigned char* p = malloc(size);
    if (p == NULL) {
      fprintf(stderr, "large: thread %u: malloc(%zu) failed\n", th->id, size);
      exit(1);
    }
    if (g.zero) memset(p, 0, size);
    if (s->p != NULL) Release(th, s);
    s->p = p;
    s->size = size;
    s->tag = Tag(th->id, seq);
    th->pages += Touch(p, size, s->tag);
    th->written_sum += s->tag;
    th->allocs++;
    th->bytes += size;
  }
  for (size_t k = 0; k < g.keep; k++)
    if (th->ring[k].p != NULL) Release(th, &th->ring[k]);
  BenchClockStop(&g.clock);
  return NULL;
}

static int Usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s [-t THREADS] [-n ALLOCATIONS_PER_THREAD] [-s MIN] [-S MAX] [-k KEEP] [-z 0|1] "
          "[-r 0|1] [-a 0|1]\n"
          "defaults: -t 2 -n 2000 -s 1048576 -S 67108864 -k 4 (k/m suffixes: x1000, x1000000)\n",
          argv0);
  return 2;
}

int main(int argc, char** argv) {
  uint64_t t = 2, n = 2000, lo = 1 << 20, hi = 64 << 20, keep = 4, zero = 0, random_slot = 0,
           alloc_first = 0;
  const BenchOption opts[] = {{"-t", &t},           {"-n", &n},          {"-s", &lo},
                              {"-S", &hi},          {"-k", &keep},       {"-z", &zero},
                              {"-r", &random_slot}, {"-a", &alloc_first}};
  if (BenchParseOptions(argc, argv, opts, sizeof opts / sizeof opts[0]) != 0) return Usage(argv[0]);
  if (t < 1 || t > kMaxThreads || n < 1 || lo < 16 || hi < lo || hi > (1ull << 40) || keep < 1 ||
      keep > (1u << 20) || zero > 1 || random_slot > 1 || alloc_first > 1) {
    fprintf(stderr,
            "large: need 1 <= t <= %d, n >= 1, 16 <= min <= max, 1 <= k, z, r and a 0 or 1\n",
            kMaxThreads);
    return Usage(argv[0]);
  }
  g.threads = (unsigned)t;
  g.per_thread = n;
  g.min_size = (size_t)lo;
  g.max_size = (size_t)hi;
  g.keep = (size_t)keep;
  g.zero = (int)zero;
  g.random_slot = (int)random_slot;
  g.alloc_first = (int)alloc_first;
  BenchBuildSizeTable(g.sizes, g.min_size, g.max_size);
  g.t = calloc(g.threads, sizeof(Thread));
  pthread_t* tids = calloc(g.threads, sizeof(pthread_t));
  if (g.t == NULL || tids == NULL) {
    fprintf(stderr, "large: out of memory setting up\n");
    return 1;
  }
  for (unsigned i = 0; i < g.threads; i++) {
    g.t[i].id = i;
    g.t[i].ring = calloc(g.keep, sizeof(Slot));
    if (g.t[i].ring == NULL) {
      fprintf(stderr, "large: out of memory setting up\n");
      return 1;
    }
  }
  pthread_barrier_init(&g.start, NULL, g.threads + 1);
  for (unsigned i = 0; i < g.threads; i++) {
    BenchSpawn("large", &tids[i], NULL, Run, &g.t[i]);
  }
  pthread_barrier_wait(&g.start);
  for (unsigned i = 0; i < g.threads; i++) pthread_join(tids[i], NULL);
  double secs = BenchClockSeconds(&g.clock);

  int ok = 1;
  uint64_t allocs = 0, bytes = 0, pages = 0;
  for (unsigned i = 0; i < g.threads; i++) {
    Thread* th = &g.t[i];
    if (th->bad != 0) {
      fprintf(stderr, "large: thread %u: %llu damaged objects\n", i, (unsigned long long)th->bad);
      ok = 0;
    }
    if (th->allocs != n || th->frees != th->allocs) {
      fprintf(stderr, "large: thread %u: %llu allocations (want %llu), %llu frees\n", i,
              (unsigned long long)th->allocs, (unsigned long long)n, (unsigned long long)th->frees);
      ok = 0;
    }
    if (th->written_sum != th->checked_sum) {
      fprintf(stderr, "large: thread %u: tag sum written %016llx, checked %016llx\n", i,
              (unsigned long long)th->written_sum, (unsigned long long)th->checked_sum);
      ok = 0;
    }
    allocs += th->allocs;
    bytes += th->bytes;
    pages += th->pages;
    free(th->ring);
  }
  printf(
      "bench=large threads=%u n=%llu min=%zu max=%zu keep=%zu zero=%d random=%d "
      "alloc_first=%d seconds=%.6f "
      "allocations=%llu "
      "bytes_allocated=%llu pages_touched=%llu ops_per_sec=%.0f",
      g.threads, (unsigned long long)n, g.min_size, g.max_size, g.keep, g.zero, g.random_slot,
      g.alloc_first, secs, (unsigned long long)allocs, (unsigned long long)bytes,
      (unsigned long long)pages, (double)allocs / secs);
  free(g.t);
  free(tids);
  BenchReportTail(ok);
  return ok ? 0 : 1;
}
