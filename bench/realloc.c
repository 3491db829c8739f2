// bench/realloc.c — realloc-heavy benchmark: buffers grown by appending and by
// doubling, shrunk, freed and restarted, their contents checked after every
// realloc.
//
// Written here for roost's suite (no published benchmark is followed). Each of
// T threads owns B buffers and performs n reallocs; each picks a buffer at
// random and takes its next step. A buffer lives a cycle in one of three
// modes, drawn when it (re)starts:
//   append (25 %): a string builder: starts at 1..48 bytes and grows by
//     1..48 bytes per realloc up to a goal drawn log-uniformly in [64 B, 16 KiB];
//   double (45 %): a vector: starts at 8..64 bytes and doubles per realloc
//     while the double stays within a goal drawn log-uniformly in [256 B, -S];
//     then it is shrunk 1..3 times (each time by up to half);
//   shrink (30 %): starts at a size drawn log-uniformly in [64 B, -S/4] and
//     shrinks by 1 byte up to a quarter of its length per realloc, down to 16
//     bytes or less.
// When its cycle ends the buffer is freed (free()) and restarts in a new mode
// with realloc(NULL, first size), which is that step's realloc. So sizes run
// from 1 byte to -S (1 MiB by default), across the small, medium and large
// objects of common allocators, and every realloc either grows in place,
// moves, or shrinks.
//
// Verification: a buffer's byte i holds byte (i mod 8) of the word
// seed + (i / 8) * 0x9e3779b97f4a7c15, where the seed is drawn anew at every
// restart. After every realloc the bytes that must have survived (the old
// length, or the new one when it shrank) are checked: every byte when there
// are at most 512; else the first and the last byte, then a rolling checksum
// over the first 64 bytes, the aligned words of the last 64 to 71 bytes and one
// 8-byte word in every 4 KiB page (at an offset drawn per check) compared with
// the checksum of what the pattern says they hold. The grown part is then
// written with the pattern. At the end every buffer gets a full check and is
// freed; reallocs done must equal -n per thread, and buffers started must
// equal buffers freed. Any mismatch: diagnostic on stderr, exit 1.
//
// Options (k/m suffixes: x1000, x1000000):
//   -t T   threads (default 2, at most 256)
//   -n N   reallocs per thread (default 2000000)
//   -b B   buffers per thread (default 32)
//   -S MAX the largest buffer in bytes (default 1m = 1000000; at least 4096)
//   -r R   seed (default 1)
//
// Output (stdout, one line of key=value pairs): parameters, seconds (from the
// first thread's start after the start barrier to the last thread's end, by the
// threads' own clocks; final checks and frees included), reallocs, restarts,
// grows, shrinks, moved (reallocs that returned a new address), bytes_written
// (pattern bytes written by the program), ops_per_sec (reallocs per second, all
// threads together), then vmhwm_kib, malloc_from and verify. The allocator
// under test is swapped with LD_PRELOAD.
#define _GNU_SOURCE
#include <pthread.h>

#include "bench_common.h"

enum { kMaxThreads = 256, kFullCheck = 512, kEdge = 64 };
enum { kAppend, kDouble, kShrink };

static const uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

typedef struct Buffer {
  unsigned char* p;  // NULL before the first step of a cycle
  size_t len;        // bytes of pattern it holds (its requested size)
  size_t goal;
  uint64_t seed;
  int mode;
  int shrinks_left;
} Buffer;

typedef struct Thread {
  unsigned id;
  BenchRng rng;
  Buffer* bufs;
  uint64_t reallocs, restarts, frees, grows, shrinks, moved, written, bad;
  pthread_t tid;
} Thread;

static struct {
  unsigned threads;
  uint64_t per_thread;
  uint64_t buffers;
  size_t max_size;
  Thread* t;
  pthread_barrier_t start;
  BenchClock clock;
} g;

// Unaligned 8-byte loads and stores. -fno-builtin turns a plain memcpy into a
// library call; the __builtin_ form stays one move.
static inline uint64_t Word(uint64_t seed, size_t k) { return seed + (uint64_t)k * kGolden; }

static inline unsigned char Byte(uint64_t seed, size_t i) {
  return (unsigned char)(Word(seed, i >> 3) >> ((i & 7) * 8));
}

// Writes the pattern into bytes [from, to) of p.
static void Fill(unsigned char* p, uint64_t seed, size_t from, size_t to) {
  size_t i = from;
  for (; i < to && (i & 7) != 0; i++) p[i] = Byte(seed, i);
  for (uint64_t w = Word(seed, i >> 3); i + 8 <= to; i += 8, w += kGolden) BenchStore64(p + i, w);
  for (; i < to; i++) p[i] = Byte(seed, i);
}

static int CheckAll(const unsigned char* p, uint64_t seed, size_t n) {
  size_t i = 0;
  for (uint64_t w = seed; i + 8 <= n; i += 8, w += kGolden)
    if (BenchLoad64(p + i) != w) return 0;
  for (; i < n; i++)
    if (p[i] != Byte(seed, i)) return 0;
  return 1;
}

static inline uint64_t Roll(uint64_t h, uint64_t w) { return ((h << 5) | (h >> 59)) ^ w; }

// Checks the first n bytes of p against the pattern (see the header).
static int CheckPreserved(Thread* th, const unsigned char* p, uint64_t seed, size_t n) {
  if (n == 0) return 1;
  if (n <= kFullCheck) return CheckAll(p, seed, n);
  if (p[0] != Byte(seed, 0) || p[n - 1] != Byte(seed, n - 1)) return 0;
  uint64_t got = 0, want = 0;
  for (size_t i = 0; i < kEdge; i += 8) {  // n > 512: the edges do not overlap
    got = Roll(got, BenchLoad64(p + i));
    want = Roll(want, Word(seed, i >> 3));
  }
  size_t tail = (n - kEdge) & ~(size_t)7;  // 8-aligned, within the last 71 bytes
  for (size_t i = tail; i + 8 <= n; i += 8) {
    got = Roll(got, BenchLoad64(p + i));
    want = Roll(want, Word(seed, i >> 3));
  }
  size_t in_page = (size_t)BenchBelow(&th->rng, 4096 / 8) * 8;
  for (size_t i = in_page; i + 8 <= n; i += 4096) {
    got = Roll(got, BenchLoad64(p + i));
    want = Roll(want, Word(seed, i >> 3));
  }
  return got == want;
}

// Log-uniform in [lo, hi] (lo >= 1).
static size_t LogUniform(BenchRng* r, size_t lo, size_t hi) {
  unsigned lo_bits = 63 - (unsigned)__builtin_clzll(lo);
  unsigned hi_bits = 63 - (unsigned)__builtin_clzll(hi);
  unsigned b = lo_bits + (unsigned)BenchBelow(r, hi_bits - lo_bits + 1);
  size_t base = (size_t)1 << b;
  size_t v = base + (size_t)BenchBelow(r, base);
  return v < lo ? lo : v > hi ? hi : v;
}

// Ends the buffer's cycle (if any) and draws a new one; returns its first size.
static size_t Restart(Thread* th, Buffer* b) {
  if (b->p != NULL) {
    free(b->p);
    b->p = NULL;
    th->frees++;
  }
  b->len = 0;
  b->seed = BenchNext(&th->rng);
  uint64_t x = BenchBelow(&th->rng, 100);
  th->restarts++;
  if (x < 25) {
    b->mode = kAppend;
    b->goal = LogUniform(&th->rng, 64, 16384);
    return 1 + (size_t)BenchBelow(&th->rng, 48);
  }
  if (x < 70) {
    b->mode = kDouble;
    b->goal = LogUniform(&th->rng, 256, g.max_size);
    b->shrinks_left = 1 + (int)BenchBelow(&th->rng, 3);
    return 8 + (size_t)BenchBelow(&th->rng, 57);
  }
  b->mode = kShrink;
  return LogUniform(&th->rng, 64, g.max_size / 4);
}

// The buffer's next size, or 0 when its cycle is over.
static size_t NextSize(Thread* th, Buffer* b) {
  switch (b->mode) {
    case kAppend:
      return b->len >= b->goal ? 0 : b->len + 1 + (size_t)BenchBelow(&th->rng, 48);
    case kDouble:
      if (b->len * 2 <= b->goal) return b->len * 2;
      if (b->shrinks_left-- <= 0) return 0;
      return b->len - (size_t)BenchBelow(&th->rng, b->len / 2 + 1);
    default:
      if (b->len <= 16) return 0;
      return b->len - 1 - (size_t)BenchBelow(&th->rng, b->len / 4);
  }
}

static void Step(Thread* th, Buffer* b) {
  size_t next = b->p == NULL ? 0 : NextSize(th, b);
  if (next == 0) next = Restart(th, b);
  size_t old = b->len;
  unsigned char* q = realloc(b->p, next);
  if (q == NULL) {
    fprintf(stderr, "realloc: thread %u: realloc(%p, %zu) failed\n", th->id, (void*)b->p, next);
    exit(1);
  }
  th->reallocs++;
  if (b->p != NULL && q != b->p) th->moved++;
  size_t kept = old < next ? old : next;
  if (!CheckPreserved(th, q, b->seed, kept)) {
    th->bad++;
    if (th->bad <= 3) {
      fprintf(stderr, "realloc: thread %u: realloc(%p, %zu) -> %p lost contents (old length %zu)\n",
              th->id, (void*)b->p, next, (void*)q, old);
    }
  }
  if (next > old) {
    Fill(q, b->seed, old, next);
    th->written += next - old;
    th->grows++;
  } else if (next < old) {
    th->shrinks++;
  }
  b->p = q;
  b->len = next;
}

static void* Run(void* arg) {
  Thread* th = arg;
  pthread_barrier_wait(&g.start);
  BenchClockStart(&g.clock);
  for (uint64_t i = 0; i < g.per_thread; i++) {
    Step(th, &th->bufs[BenchBelow(&th->rng, g.buffers)]);
  }
  for (uint64_t k = 0; k < g.buffers; k++) {
    Buffer* b = &th->bufs[k];
    if (b->p == NULL) continue;
    if (!CheckAll(b->p, b->seed, b->len)) {
      th->bad++;
      fprintf(stderr, "realloc: thread %u: buffer %p (%zu B) damaged at the end\n", th->id,
              (void*)b->p, b->len);
    }
    free(b->p);
    b->p = NULL;
    th->frees++;
  }
  BenchClockStop(&g.clock);
  return NULL;
}

static int Usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s [-t THREADS] [-n REALLOCS_PER_THREAD] [-b BUFFERS] [-S MAX] [-r SEED]\n"
          "defaults: -t 2 -n 2000000 -b 32 -S 1m -r 1 (k/m suffixes: x1000, x1000000)\n",
          argv0);
  return 2;
}

int main(int argc, char** argv) {
  uint64_t t = 2, n = 2000000, nbuf = 32, max = 1000000, seed = 1;
  const BenchOption opts[] = {{"-t", &t}, {"-n", &n}, {"-b", &nbuf}, {"-S", &max}, {"-r", &seed}};
  if (BenchParseOptions(argc, argv, opts, sizeof opts / sizeof opts[0]) != 0) return Usage(argv[0]);
  if (t < 1 || t > kMaxThreads || n < 1 || nbuf < 1 || nbuf > (1u << 20) || max < 4096 ||
      max > (1ull << 32)) {
    fprintf(stderr, "realloc: need 1 <= t <= %d, n >= 1, 1 <= b <= 2^20, 4096 <= S <= 2^32\n",
            kMaxThreads);
    return Usage(argv[0]);
  }
  g.threads = (unsigned)t;
  g.per_thread = n;
  g.buffers = nbuf;
  g.max_size = (size_t)max;
  g.t = calloc(g.threads, sizeof(Thread));
  pthread_t* tids = calloc(g.threads, sizeof(pthread_t));
  if (g.t == NULL || tids == NULL) {
    fprintf(stderr, "realloc: out of memory setting up\n");
    return 1;
  }
  for (unsigned i = 0; i < g.threads; i++) {
    g.t[i].id = i;
    g.t[i].rng.state = BenchMix(seed * kGolden + i + 1);
    g.t[i].bufs = calloc(nbuf, sizeof(Buffer));
    if (g.t[i].bufs == NULL) {
      fprintf(stderr, "realloc: out of memory setting up\n");
      return 1;
    }
  }
  pthread_barrier_init(&g.start, NULL, g.threads + 1);
  for (unsigned i = 0; i < g.threads; i++) {
    BenchSpawn("realloc", &tids[i], NULL, Run, &g.t[i]);
  }
  pthread_barrier_wait(&g.start);
  for (unsigned i = 0; i < g.threads; i++) pthread_join(tids[i], NULL);
  double secs = BenchClockSeconds(&g.clock);

  int ok = 1;
  uint64_t reallocs = 0, restarts = 0, grows = 0, shrinks = 0, moved = 0, written = 0;
  for (unsigned i = 0; i < g.threads; i++) {
    Thread* th = &g.t[i];
    if (th->bad != 0) {
      fprintf(stderr, "realloc: thread %u: %llu reallocs lost contents\n", i,
              (unsigned long long)th->bad);
      ok = 0;
    }
    if (th->reallocs != n || th->restarts != th->frees) {
      fprintf(stderr,
              "realloc: thread %u: %llu reallocs (want %llu), %llu buffers started, %llu freed\n",
              i, (unsigned long long)th->reallocs, (unsigned long long)n,
              (unsigned long long)th->restarts, (unsigned long long)th->frees);
      ok = 0;
    }
    reallocs += th->reallocs;
    restarts += th->restarts;
    grows += th->grows;
    shrinks += th->shrinks;
    moved += th->moved;
    written += th->written;
    free(th->bufs);
  }
  printf(
      "bench=realloc threads=%u n=%llu buffers=%llu max=%zu seed=%llu seconds=%.6f reallocs=%llu "
      "restarts=%llu grows=%llu shrinks=%llu moved=%llu bytes_written=%llu ops_per_sec=%.0f",
      g.threads, (unsigned long long)n, (unsigned long long)nbuf, g.max_size,
      (unsigned long long)seed, secs, (unsigned long long)reallocs, (unsigned long long)restarts,
      (unsigned long long)grows, (unsigned long long)shrinks, (unsigned long long)moved,
      (unsigned long long)written, (double)reallocs / secs);
  free(g.t);
  free(tids);
  BenchReportTail(ok);
  return ok ? 0 : 1;
}
