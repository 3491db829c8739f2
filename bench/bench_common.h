// bench/bench_common.h — what every benchmark program shares: the size
// table, hashing, tagged objects (made by one thread, checked and freed by
// another), the clocks (BenchNow, and BenchClock: the workers' own clock of a
// multithreaded run), set-up (zeroed records, thread start), peak RSS, option
// parsing and the report line's common fields.
//
// Owns: helpers for the C benchmark programs under bench/ (header-only,
// static functions).  Must never: link anything but libc (and libdl), or
// allocate before the caller's clock starts unless the caller wants it to:
// the allocator under test is whatever `malloc` resolves to (LD_PRELOAD).
//
// The report contract (bench/suite.py relies on it): each program prints ONE
// line on stdout of space-separated key=value pairs, beginning with
// `bench=<name>`, containing its parameters, `seconds=` (wall time of the
// measured part: BenchClockSeconds() in a multithreaded program), its figure
// (e.g. `ops_per_sec=`), and ending with the fields BenchReportTail() writes:
// `vmhwm_kib=`, `malloc_from=` and `verify=ok|FAILED`.  It exits 0 only when
// its own verification passed.
#ifndef ROOST_BENCH_COMMON_H
#define ROOST_BENCH_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// splitmix64's finaliser: a good 64-bit mix for tags and random streams.
static inline uint64_t BenchMix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A small per-thread random stream (splitmix64).
typedef struct BenchRng {
  uint64_t state;
} BenchRng;

static inline uint64_t BenchNext(BenchRng* r) {
  r->state += 0x9e3779b97f4a7c15ULL;
  return BenchMix(r->state);
}

// Uniform in [0, n) (n >= 1); the modulo bias is irrelevant at these ranges.
static inline uint64_t BenchBelow(BenchRng* r, uint64_t n) { return BenchNext(r) % n; }

enum { kBenchSizeTable = 4096 };

// Fills table[0..kBenchSizeTable) with sizes uniform in [lo, hi] from a fixed
// seed (all equal to lo when lo == hi), so every allocator sees the same
// sequence.  Built before the clock starts.
static inline void BenchBuildSizeTable(size_t* table, size_t lo, size_t hi) {
  uint64_t state = 0x726f6f7374ULL;
  uint64_t span = (uint64_t)(hi - lo) + 1;
  for (size_t i = 0; i < kBenchSizeTable; i++) {
    state += 0x9e3779b97f4a7c15ULL;
    table[i] = lo == hi ? lo : lo + (size_t)(BenchMix(state) % span);
  }
}

// Unaligned 8-byte loads and stores that compile to one move: the programs
// are built with -fno-builtin (so the allocation calls under test stay
// calls), which would otherwise turn every memcpy of a tag into a libc call
// and dilute the allocator's share of the time.
static inline uint64_t BenchLoad64(const void* p) {
  uint64_t w;
  __builtin_memcpy(&w, p, 8);
  return w;
}

static inline void BenchStore64(void* p, uint64_t w) { __builtin_memcpy(p, &w, 8); }

// Tagged objects, as prodcons, xmalloc and symmetric pass them between
// threads: the thread that allocates an object writes its tag at offset 0, its
// size at offset 8 and the tag again in its last 8 bytes (objects of at least
// 24 bytes, so that the three do not overlap); the thread that frees it first
// checks all three. A tag is a hash of a stream (the producing thread's id,
// and in symmetric the round, in bits above any sequence number the stream
// reaches), the object's sequence number within the stream and the program's
// salt.
typedef struct BenchTagging {
  const char* prog;     // the program's name, for diagnostics
  uint64_t salt;        // mixed into every tag
  const size_t* sizes;  // the size table (kBenchSizeTable entries), all in [min, max]
  size_t min, max;      // the size words a consumer accepts
  // Names object `seq` of `stream` in a diagnostic ("producer 3 seq 17").
  void (*describe)(char* buf, size_t len, uint64_t stream, uint64_t seq);
} BenchTagging;

static inline uint64_t BenchTag(const BenchTagging* t, uint64_t stream, uint64_t seq) {
  return BenchMix(stream ^ seq ^ t->salt) | 1;
}

// The producer's loop: allocates n objects into objs[0..n), sizes from the
// table starting at entry *idx (which advances), object i tagged with sequence
// number first_seq + i of `stream`. Returns the sum of their tags. A failed
// malloc is fatal (diagnostic, exit 1).
static inline uint64_t BenchMakeTagged(const BenchTagging* t, void** objs, uint64_t n, size_t* idx,
                                       uint64_t stream, uint64_t first_seq) {
  uint64_t sum = 0;
  for (uint64_t i = 0; i < n; i++) {
    size_t size = t->sizes[(*idx)++ & (kBenchSizeTable - 1)];
    unsigned char* p = malloc(size);
    if (p == NULL) {
      fprintf(stderr, "%s: malloc(%zu) failed\n", t->prog, size);
      exit(1);
    }
    uint64_t tag = BenchTag(t, stream, first_seq + i), sz = size;
    BenchStore64(p, tag);
    BenchStore64(p + 8, sz);
    if (size >= 24) BenchStore64(p + size - 8, tag);
    sum += tag;
    objs[i] = p;
  }
  return sum;
}

// The consumer's loop: checks the objects BenchMakeTagged made into
// objs[0..n) with the same stream and first sequence number, and frees them.
// An object whose size word is outside [min, max] is leaked (its size cannot
// be trusted), one with a wrong tag is freed. Adds the damaged ones to *bad
// (the first three of a counter get a diagnostic on stderr) and the tags of
// those freed to *tag_sum; returns how many were freed.
static inline uint64_t BenchFreeTagged(const BenchTagging* t, void* const* objs, uint64_t n,
                                       uint64_t stream, uint64_t first_seq, uint64_t* tag_sum,
                                       uint64_t* bad) {
  uint64_t freed = 0;
  for (uint64_t i = 0; i < n; i++) {
    unsigned char* p = objs[i];
    uint64_t want = BenchTag(t, stream, first_seq + i), tag, sz, tail;
    char who[64];
    tag = BenchLoad64(p);
    sz = BenchLoad64(p + 8);
    if (sz < t->min || sz > t->max) {
      if (++*bad <= 3) {
        t->describe(who, sizeof who, stream, first_seq + i);
        fprintf(stderr, "%s: object %p (%s): size word %llu\n", t->prog, (void*)p, who,
                (unsigned long long)sz);
      }
      continue;  // leak it: its size cannot be trusted
    }
    tail = want;
    if (sz >= 24) tail = BenchLoad64(p + sz - 8);
    if (tag != want || tail != want) {
      if (++*bad <= 3) {
        t->describe(who, sizeof who, stream, first_seq + i);
        fprintf(stderr, "%s: object %p (%s): tag %llx tail %llx, want %llx\n", t->prog, (void*)p,
                who, (unsigned long long)tag, (unsigned long long)tail, (unsigned long long)want);
      }
    }
    *tag_sum += tag;
    freed++;
    free(p);
  }
  return freed;
}

// Monotonic seconds.
static inline double BenchNow(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// Monotonic nanoseconds (never 0: the clock counts from boot).
static inline uint64_t BenchNowNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

// The measured interval of a multithreaded run, by the worker threads' own
// clocks: from the first worker's start after the start barrier to the last
// worker's finish. The main thread's clock will not do: with more threads than
// cores it may run only long after the barrier has released the workers (or
// after they have all finished). Every worker calls BenchClockStart() right
// after the barrier and BenchClockStop() when its measured work is done; once
// the workers are joined, BenchClockSeconds() is the interval. A BenchClock
// in static storage (zero-initialised) is ready to use: 0 means "not yet".
typedef struct BenchClock {
  _Atomic uint64_t start_ns;  // earliest start, or 0
  _Atomic uint64_t end_ns;    // latest finish, or 0
} BenchClock;

static inline void BenchClockStart(BenchClock* c) {
  uint64_t now = BenchNowNs();
  uint64_t cur = atomic_load_explicit(&c->start_ns, memory_order_relaxed);
  while ((cur == 0 || now < cur) &&
         !atomic_compare_exchange_weak_explicit(&c->start_ns, &cur, now, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
}

static inline void BenchClockStop(BenchClock* c) {
  uint64_t now = BenchNowNs();
  uint64_t cur = atomic_load_explicit(&c->end_ns, memory_order_relaxed);
  while (now > cur && !atomic_compare_exchange_weak_explicit(
                          &c->end_ns, &cur, now, memory_order_relaxed, memory_order_relaxed)) {
  }
}

// Seconds from the first start to the last stop (0 if none was recorded). Call
// it after joining the workers (or another synchronisation with their stops).
static inline double BenchClockSeconds(BenchClock* c) {
  uint64_t start = atomic_load(&c->start_ns), end = atomic_load(&c->end_ns);
  return start != 0 && end > start ? (double)(end - start) * 1e-9 : 0.0;
}

// Set-up memory for per-thread records: `bytes` rounded up to a multiple of
// `align` (64: a cache line, so that no two threads' records share one),
// aligned to it and zeroed. Running out is fatal ("<prog>: out of memory
// setting up", exit 1).
static inline void* BenchAllocZeroed(const char* prog, size_t align, size_t bytes) {
  bytes = (bytes + align - 1) / align * align;
  void* p = aligned_alloc(align, bytes);
  if (p == NULL) {
    fprintf(stderr, "%s: out of memory setting up\n", prog);
    exit(1);
  }
  return memset(p, 0, bytes);
}

// pthread_create, for which failure is fatal ("<prog>: pthread_create failed",
// exit 1).
static inline void BenchSpawn(const char* prog, pthread_t* tid, const pthread_attr_t* attr,
                              void* (*fn)(void*), void* arg) {
  if (pthread_create(tid, attr, fn, arg) != 0) {
    fprintf(stderr, "%s: pthread_create failed\n", prog);
    exit(1);
  }
}

// Peak resident set of this process's address space (VmHWM), in KiB, or -1.
// Unlike getrusage's ru_maxrss it is not inherited across execve from the
// process that started us (a runner's fork child carries the runner's RSS).
static inline long BenchPeakRssKib(void) {
  FILE* f = fopen("/proc/self/status", "r");
  if (f == NULL) return -1;
  char line[256];
  long kib = -1;
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "VmHWM:", 6) == 0) {
      kib = strtol(line + 6, NULL, 10);
      break;
    }
  }
  fclose(f);
  return kib;
}

// The shared object that provides `malloc` in this process.
static inline const char* BenchMallocFrom(void) {
  Dl_info info;
  void* sym = dlsym(RTLD_DEFAULT, "malloc");
  if (sym != NULL && dladdr(sym, &info) != 0 && info.dli_fname != NULL) return info.dli_fname;
  return "unknown";
}

// Parses an unsigned decimal with an optional k/m suffix (x1000, x1000000).
static inline int BenchParseU64(const char* s, uint64_t* out) {
  char* end = NULL;
  if (s == NULL || s[0] < '0' || s[0] > '9') return -1;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0) return -1;
  if (*end == 'k' || *end == 'K') {
    v *= 1000;
    end++;
  } else if (*end == 'm' || *end == 'M') {
    v *= 1000000;
    end++;
  }
  if (*end != '\0') return -1;
  *out = v;
  return 0;
}

// One numeric option: `-x VALUE` stores VALUE in *dst.
typedef struct BenchOption {
  const char* flag;
  uint64_t* dst;
} BenchOption;

// Parses argv against `opts` (n entries).  Returns 0, or -1 on an unknown
// flag, a missing value or a malformed number (the caller prints its usage).
static inline int BenchParseOptions(int argc, char** argv, const BenchOption* opts, size_t n) {
  for (int i = 1; i < argc; i++) {
    uint64_t* dst = NULL;
    for (size_t k = 0; k < n && dst == NULL; k++)
      if (strcmp(argv[i], opts[k].flag) == 0) dst = opts[k].dst;
    if (dst == NULL || i + 1 >= argc || BenchParseU64(argv[i + 1], dst) != 0) return -1;
    i++;
  }
  return 0;
}

// Writes the report line's common tail and its newline.
static inline void BenchReportTail(int ok) {
  printf(" vmhwm_kib=%ld malloc_from=%s verify=%s\n", BenchPeakRssKib(), BenchMallocFrom(),
         ok ? "ok" : "FAILED");
  fflush(stdout);
}

#endif  // ROOST_BENCH_COMMON_H
