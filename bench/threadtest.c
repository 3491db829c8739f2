// bench/threadtest.c — Hoard's threadtest (batches of same-size objects
// allocated and freed by the same thread).
//
// Hoard's threadtest, a plain allocator-throughput test, written here from its
// published description (a Hoard-style allocator's report of the classic benchmarks, and the roost
// benchmark contract): each of T threads runs I iterations of: allocate N
// objects of S bytes, write them, then free them all, in allocation order. No
// object leaves its thread.
//
// What it stresses: the local allocate-then-free cycle of a thread at a
// working set of N objects (N x S bytes per thread: the default 10000 x 64 B
// is 640 KB, beyond a small per-thread cache, so objects go back to and come
// from the allocator's slabs or bins in bulk), and whether T threads doing it
// at once scale or fight over shared structures. Nothing is remote: a
// message-passing allocator should send no message at all.
//
// Verification: every object gets a tag (a hash of thread, iteration and
// index) in its first 8 bytes and again in its last 8 (objects of at least 16
// bytes). Before freeing, the thread checks both. At the end, per thread,
// objects freed must equal I x N, and the sum of tags written must equal the
// sum of tags read back. Any mismatch prints a diagnostic and exits 1.
//
// Options (k/m suffixes: x1000, x1000000):
//   -t T  threads (1..1024)                      default 4
//   -i I  iterations per thread                  default 1000
//   -n N  objects per iteration                  default 10000
//   -s S  object size in bytes (>= 8)            default 64
//
// Output (stdout, one line of key=value pairs): parameters, ops (T x I x N),
// seconds (from the first thread's start after the start barrier to the last
// thread's finish, by the threads' own clocks), ops_per_sec (objects allocated
// and freed per second, all threads together), the tag checksum, then the
// common tail (vmhwm_kib, malloc_from, verify). The allocator under test is
// swapped with LD_PRELOAD.
#define _GNU_SOURCE
#include <pthread.h>

#include "bench_common.h"

enum { kMaxThreads = 1024 };

typedef struct Thread {
  _Alignas(64) unsigned id;
  unsigned char** objs;  // N pointers, allocated before the clock starts
  uint64_t freed, written_sum, read_sum, bad;
  pthread_t tid;
} Thread;

static struct {
  unsigned threads;
  uint64_t iters, objects;
  size_t size;
  Thread* t;
  pthread_barrier_t start;
  BenchClock clock;
} g;

static uint64_t Tag(unsigned thread, uint64_t iter, uint64_t i) {
  return BenchMix(((uint64_t)thread << 48) ^ (iter << 24) ^ i ^ 0x746872656164ULL) | 1;
}

static void* Worker(void* arg) {
  Thread* self = arg;
  unsigned char** objs = self->objs;
  const size_t size = g.size;
  uint64_t written = 0, read = 0, freed = 0, bad = 0;
  pthread_barrier_wait(&g.start);
  BenchClockStart(&g.clock);
  for (uint64_t it = 0; it < g.iters; it++) {
    for (uint64_t i = 0; i < g.objects; i++) {
      unsigned char* p = malloc(size);
      if (p == NULL) {
        fprintf(stderr, "threadtest: malloc(%zu) failed\n", size);
        exit(1);
      }
      uint64_t tag = Tag(self->id, it, i);
      BenchStore64(p, tag);
      if (size >= 16) BenchStore64(p + size - 8, tag);
      written += tag;
      objs[i] = p;
    }
    for (uint64_t i = 0; i < g.objects; i++) {
      unsigned char* p = objs[i];
      uint64_t head, tail, want = Tag(self->id, it, i);
      head = BenchLoad64(p);
      tail = head;
      if (size >= 16) tail = BenchLoad64(p + size - 8);
      if (head != want || tail != want) {
        if (++bad <= 3) {
          fprintf(stderr,
                  "threadtest: thread %u iteration %llu object %llu (%p): head %llx tail %llx, "
                  "want %llx\n",
                  self->id, (unsigned long long)it, (unsigned long long)i, (void*)p,
                  (unsigned long long)head, (unsigned long long)tail, (unsigned long long)want);
        }
      }
      read += head;
      freed++;
      free(p);
    }
  }
  BenchClockStop(&g.clock);
  self->written_sum = written;
  self->read_sum = read;
  self->freed = freed;
  self->bad = bad;
  return NULL;
}

static int Usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s [-t THREADS] [-i ITERATIONS] [-n OBJECTS] [-s SIZE]\n"
          "defaults: -t 4 -i 1000 -n 10000 -s 64 (k/m suffixes: x1000)\n",
          argv0);
  return 2;
}

int main(int argc, char** argv) {
  uint64_t t = 4, iters = 1000, n = 10000, s = 64;
  const BenchOption opts[] = {{"-t", &t}, {"-i", &iters}, {"-n", &n}, {"-s", &s}};
  if (BenchParseOptions(argc, argv, opts, sizeof opts / sizeof opts[0]) != 0) return Usage(argv[0]);
  if (t < 1 || t > kMaxThreads || iters < 1 || iters > (1ull << 40) || n < 1 || n > (1u << 24) ||
      s < 8 || s > (1u << 30)) {
    fprintf(stderr, "threadtest: need 1 <= t <= %d, i >= 1, 1 <= n <= 2^24, 8 <= s <= 2^30\n",
            kMaxThreads);
    return Usage(argv[0]);
  }
  g.threads = (unsigned)t;
  g.iters = iters;
  g.objects = n;
  g.size = (size_t)s;

  g.t = BenchAllocZeroed("threadtest", 64, sizeof(Thread) * g.threads);
  for (unsigned i = 0; i < g.threads; i++) {
    g.t[i].id = i;
    g.t[i].objs = malloc(g.objects * sizeof(unsigned char*));
    if (g.t[i].objs == NULL) {
      fprintf(stderr, "threadtest: out of memory setting up\n");
      return 1;
    }
  }
  pthread_barrier_init(&g.start, NULL, g.threads + 1);
  for (unsigned i = 0; i < g.threads; i++) {
    BenchSpawn("threadtest", &g.t[i].tid, NULL, Worker, &g.t[i]);
  }
  pthread_barrier_wait(&g.start);
  for (unsigned i = 0; i < g.threads; i++) pthread_join(g.t[i].tid, NULL);
  double secs = BenchClockSeconds(&g.clock);

  int ok = 1;
  uint64_t want = g.iters * g.objects, written = 0, read = 0, bad = 0;
  for (unsigned i = 0; i < g.threads; i++) {
    if (g.t[i].freed != want) {
      fprintf(stderr, "threadtest: thread %u freed %llu objects, want %llu\n", i,
              (unsigned long long)g.t[i].freed, (unsigned long long)want);
      ok = 0;
    }
    written += g.t[i].written_sum;
    read += g.t[i].read_sum;
    bad += g.t[i].bad;
  }
  if (bad != 0) {
    fprintf(stderr, "threadtest: %llu objects with a wrong tag\n", (unsigned long long)bad);
    ok = 0;
  }
  if (written != read) {
    fprintf(stderr, "threadtest: checksum mismatch: written %llx, read %llx\n",
            (unsigned long long)written, (unsigned long long)read);
    ok = 0;
  }

  uint64_t ops = (uint64_t)g.threads * want;
  for (unsigned i = 0; i < g.threads; i++) free(g.t[i].objs);
  free(g.t);
  printf(
      "bench=threadtest threads=%u iterations=%llu n=%llu size=%zu ops=%llu seconds=%.6f "
      "ops_per_sec=%.0f checksum=%016llx",
      g.threads, (unsigned long long)g.iters, (unsigned long long)g.objects, g.size,
      (unsigned long long)ops, secs, (double)ops / secs, (unsigned long long)read);
  BenchReportTail(ok);
  return ok ? 0 : 1;
}
