// bench/linuxscal.c — linux-scalability (immediate malloc/free pairs on every
// thread at once).
//
// The linux-scalability throughput benchmark, written here from the roost
// benchmark contract (a Hoard-style allocator's report of the classic benchmarks names it as a
// throughput test): each of T threads performs N immediate malloc(S)/free
// pairs, i.e. it frees every object right after allocating it. (That
// report describes its linux-scalability as allocating a long batch and then
// freeing it; that is threadtest's pattern, which bench_threadtest covers, so
// this program keeps the pairs immediate, as the contract says.)
//
// What it stresses: the bare fast paths of malloc and free with a working set
// of one object per thread, and whether T threads running them at once scale:
// any shared counter, lock or cache line touched per call shows up directly.
// Nothing is remote.
//
// Each object's first word is written with a value derived from the thread and
// the pair's index (through a volatile pointer, so the store happens; the
// build also has -fno-builtin, so the compiler cannot drop the pair) and read
// back before the free.
//
// Verification (cheap, to keep the pair the measured thing): every pointer must
// be non-NULL and, when S >= 16, 16-byte aligned; the word read back must be
// the word written (a sum of read words against the sum of written words, per
// thread). At the end, per thread, pairs completed must equal N. Any mismatch
// prints a diagnostic and exits 1.
//
// Options (k/m suffixes: x1000, x1000000):
//   -t T  threads (1..1024)                  default 4
//   -n N  malloc/free pairs per thread       default 30000000
//   -s S  object size in bytes (>= 8)        default 64
//
// Output (stdout, one line of key=value pairs): parameters, ops (T x N),
// seconds (from the first thread's start after the start barrier to the last
// thread's finish, by the threads' own clocks), ops_per_sec (pairs per second,
// all threads together), the checksum, then the common tail (vmhwm_kib,
// malloc_from, verify). The allocator under test is swapped with LD_PRELOAD.
#define _GNU_SOURCE
#include <pthread.h>

#include "bench_common.h"

enum { kMaxThreads = 1024 };

typedef struct Thread {
  _Alignas(64) unsigned id;
  uint64_t pairs, written_sum, read_sum, bad;
  pthread_t tid;
} Thread;

static struct {
  unsigned threads;
  uint64_t pairs;
  size_t size;
  Thread* t;
  pthread_barrier_t start;
  BenchClock clock;
} g;

static void* Worker(void* arg) {
  Thread* self = arg;
  const size_t size = g.size;
  const uintptr_t align_mask = size >= 16 ? 15 : 0;
  const uint64_t salt = BenchMix(0x6c696e7578ULL + self->id);
  uint64_t written = 0, read = 0, pairs = 0, bad = 0;
  pthread_barrier_wait(&g.start);
  BenchClockStart(&g.clock);
  for (uint64_t i = 0; i < g.pairs; i++) {
    void* p = malloc(size);
    if (p == NULL || ((uintptr_t)p & align_mask) != 0) {
      if (++bad <= 3) {
        fprintf(stderr, "linuxscal: thread %u pair %llu: malloc(%zu) returned %p\n", self->id,
                (unsigned long long)i, size, p);
      }
      if (p == NULL) break;
    }
    volatile uint64_t* w = p;
    uint64_t v = salt + i;
    *w = v;
    written += v;
    read += *w;
    free(p);
    pairs++;
  }
  BenchClockStop(&g.clock);
  self->written_sum = written;
  self->read_sum = read;
  self->pairs = pairs;
  self->bad = bad;
  return NULL;
}

static int Usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s [-t THREADS] [-n PAIRS_PER_THREAD] [-s SIZE]\n"
          "defaults: -t 4 -n 30000000 -s 64 (k/m suffixes: x1000)\n",
          argv0);
  return 2;
}

int main(int argc, char** argv) {
  uint64_t t = 4, n = 30000000, s = 64;
  const BenchOption opts[] = {{"-t", &t}, {"-n", &n}, {"-s", &s}};
  if (BenchParseOptions(argc, argv, opts, sizeof opts / sizeof opts[0]) != 0) return Usage(argv[0]);
  if (t < 1 || t > kMaxThreads || n < 1 || n > (1ull << 40) || s < 8 || s > (1u << 30)) {
    fprintf(stderr, "linuxscal: need 1 <= t <= %d, n >= 1, 8 <= s <= 2^30\n", kMaxThreads);
    return Usage(argv[0]);
  }
  g.threads = (unsigned)t;
  g.pairs = n;
  g.size = (size_t)s;

  g.t = BenchAllocZeroed("linuxscal", 64, sizeof(Thread) * g.threads);
  for (unsigned i = 0; i < g.threads; i++) g.t[i].id = i;
  pthread_barrier_init(&g.start, NULL, g.threads + 1);
  for (unsigned i = 0; i < g.threads; i++) {
    BenchSpawn("linuxscal", &g.t[i].tid, NULL, Worker, &g.t[i]);
  }
  pthread_barrier_wait(&g.start);
  for (unsigned i = 0; i < g.threads; i++) pthread_join(g.t[i].tid, NULL);
  double secs = BenchClockSeconds(&g.clock);

  int ok = 1;
  uint64_t written = 0, read = 0, bad = 0;
  for (unsigned i = 0; i < g.threads; i++) {
    if (g.t[i].pairs != g.pairs) {
      fprintf(stderr, "linuxscal: thread %u completed %llu pairs, want %llu\n", i,
              (unsigned long long)g.t[i].pairs, (unsigned long long)g.pairs);
      ok = 0;
    }
    written += g.t[i].written_sum;
    read += g.t[i].read_sum;
    bad += g.t[i].bad;
  }
  if (bad != 0) {
    fprintf(stderr, "linuxscal: %llu NULL or misaligned pointers\n", (unsigned long long)bad);
    ok = 0;
  }
  if (written != read) {
    fprintf(stderr, "linuxscal: checksum mismatch: written %llx, read %llx\n",
            (unsigned long long)written, (unsigned long long)read);
    ok = 0;
  }

  uint64_t ops = (uint64_t)g.threads * g.pairs;
  free(g.t);
  printf(
      "bench=linuxscal threads=%u n=%llu size=%zu ops=%llu seconds=%.6f ops_per_sec=%.0f "
      "checksum=%016llx",
      g.threads, (unsigned long long)g.pairs, g.size, (unsigned long long)ops, secs,
      (double)ops / secs, (unsigned long long)read);
  BenchReportTail(ok);
  return ok ? 0 : 1;
}
