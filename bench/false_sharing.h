// bench/false_sharing.h — the program that cache-scratch and cache-thrash
// both are: the options, the threads, the write loop, one thread's
// allocate-write-check-free rounds, the verification and the report line
// (FalseSharingMain). The two differ only in whether the main thread hands
// each thread an initial object before the start (cache-scratch: passive
// false sharing) and in the placement facts they report; each .c file is its
// description and those facts.
//
// Owns: the code of the two false-sharing programs (one includer per
// program: it defines their state).  Must never: allocate anything in the
// measured loop but the objects written.
#ifndef ROOST_BENCH_FALSE_SHARING_H
#define ROOST_BENCH_FALSE_SHARING_H

#include "bench_common.h"

enum { kFalseSharingMaxThreads = 1024 };

typedef struct FalseSharingThread {
  _Alignas(64) unsigned id;
  unsigned char* initial;  // passive: given by the main thread, freed first
  uintptr_t initial_addr;  // passive: where the initial object was
  uintptr_t first;         // address of its first loop object
  uint64_t freed, bad_bytes;
  pthread_t tid;
} FalseSharingThread;

// The run: options, threads and their results (read by the program's facts).
static struct {
  const char* name;  // "cachescratch" or "cachethrash"
  int passive;       // the main thread allocates one initial object per thread
  unsigned threads;
  uint64_t iters, writes;
  size_t size;
  FalseSharingThread* t;
  pthread_barrier_t start;
  BenchClock clock;
} fs;

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

// The byte the main thread writes at offset b of thread `thread`'s initial object.
static unsigned char InitialByte(unsigned thread, size_t b) {
  return (unsigned char)(thread * 7 + b * 13 + 0x5a);
}

static void* FalseSharingWorker(void* arg) {
  FalseSharingThread* self = arg;
  const size_t size = fs.size;
  uint64_t freed = 0, bad = 0;
  pthread_barrier_wait(&fs.start);
  BenchClockStart(&fs.clock);
  if (fs.passive) {
    for (size_t b = 0; b < size; b++) bad += self->initial[b] != InitialByte(self->id, b);
    free(self->initial);
    freed++;
  }
  freed += HammerObjects(fs.name, self->id, size, fs.iters, fs.writes, &self->first, &bad);
  BenchClockStop(&fs.clock);
  self->freed = freed;
  self->bad_bytes = bad;
  return NULL;
}

// The whole program. `facts` formats the program's placement facts (" key=value"
// pairs) from `fs` once the threads are joined; they go into the report line
// after writes_per_sec. Returns main's exit status.
static int FalseSharingMain(const char* name, int passive, void (*facts)(char* buf, size_t len),
                            int argc, char** argv) {
  uint64_t t, iters, w, s;
  if (ParseFalseSharingOptions(name, argc, argv, &t, &iters, &w, &s) != 0) return 2;
  fs.name = name;
  fs.passive = passive;
  fs.threads = (unsigned)t;
  fs.iters = iters;
  fs.writes = w;
  fs.size = (size_t)s;

  fs.t = BenchAllocZeroed(name, 64, sizeof(FalseSharingThread) * fs.threads);
  for (unsigned i = 0; i < fs.threads; i++) fs.t[i].id = i;
  if (passive) {
    // The initial objects, back to back and nothing else allocated in between.
    for (unsigned i = 0; i < fs.threads; i++) {
      fs.t[i].initial = malloc(fs.size);
      if (fs.t[i].initial == NULL) {
        fprintf(stderr, "%s: out of memory setting up\n", name);
        return 1;
      }
      fs.t[i].initial_addr = (uintptr_t)fs.t[i].initial;
    }
    for (unsigned i = 0; i < fs.threads; i++) {
      for (size_t b = 0; b < fs.size; b++) fs.t[i].initial[b] = InitialByte(i, b);
    }
  }
  pthread_barrier_init(&fs.start, NULL, fs.threads + 1);
  for (unsigned i = 0; i < fs.threads; i++) {
    BenchSpawn(name, &fs.t[i].tid, NULL, FalseSharingWorker, &fs.t[i]);
  }
  pthread_barrier_wait(&fs.start);
  for (unsigned i = 0; i < fs.threads; i++) pthread_join(fs.t[i].tid, NULL);
  double secs = BenchClockSeconds(&fs.clock);

  int ok = 1;
  uint64_t bad = 0, want = fs.iters + (passive ? 1 : 0);
  for (unsigned i = 0; i < fs.threads; i++) {
    if (fs.t[i].freed != want) {
      fprintf(stderr, "%s: thread %u freed %llu objects, want %llu\n", name, i,
              (unsigned long long)fs.t[i].freed, (unsigned long long)want);
      ok = 0;
    }
    bad += fs.t[i].bad_bytes;
  }
  if (bad != 0) {
    fprintf(stderr, "%s: %llu bytes held a wrong value\n", name, (unsigned long long)bad);
    ok = 0;
  }

  uint64_t writes = (uint64_t)fs.threads * fs.iters * fs.size * fs.writes;
  char placement[128];
  facts(placement, sizeof placement);
  free(fs.t);
  printf(
      "bench=%s threads=%u iterations=%llu writes_per_byte=%llu size=%zu writes=%llu "
      "seconds=%.6f writes_per_sec=%.0f%s",
      name, fs.threads, (unsigned long long)fs.iters, (unsigned long long)fs.writes, fs.size,
      (unsigned long long)writes, secs, (double)writes / secs, placement);
  BenchReportTail(ok);
  return ok ? 0 : 1;
}

#endif  // ROOST_BENCH_FALSE_SHARING_H
