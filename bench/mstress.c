// bench/mstress.c — generations of threads that allocate random sizes and
// hand objects to threads of later generations.
//
// A stress test in the manner of the allocator stress programs that ship
// with modern allocators (the "mstress" class of the classic benchmark
// runs), written here from that description: the program runs R rounds; each
// round starts T threads and waits for all of them to exit.  A thread owns L
// local slots and takes N x (1 + i mod 4) random steps (thread i: some
// threads work longer, so others exit while they run); each step picks a
// local slot and
//   - fills it when it is empty (a new object of a random size), or else
//   - swaps it with a random slot of a global transfer array of X slots
//     (1 in E, an atomic exchange; E = 4 by default), or
//   - frees it (2 in 3 of the rest), or
//   - replaces it with a new object (1 in 3 of the rest).
// A thread frees what is left in its local slots before it exits; the
// transfer array lives on, so an object is often freed by a thread of a
// later round, after the thread that allocated it has exited.  Main frees
// what the transfer array holds at the end.
//
// Sizes: 8 x 2^e bytes with e uniform in 0..6 (8 to 512); one object in 100
// is a hundred times bigger (up to 51 KB), one in 10 000 ten thousand times
// (up to 5 MB).  Every object is written whole when made (with -w 0, only
// its first and last 8 bytes).
//
// What it stresses: allocation and free across thread exits (memory of an
// exited thread's allocator freed by a newer thread), a steady stream of new
// threads, mixed local and remote frees, and whether memory freed at a
// thread's exit is faulted in again by the next generation.
//
// Verification: each object is filled with its tag (a hash of thread, round
// and step, whose low 24 bits are the object's size).  Whoever frees an
// object checks its first and last 8 bytes.  At the end, objects freed must
// equal objects allocated and the sum of tags read must equal the sum
// written; any mismatch prints a diagnostic and exits 1.
//
// Options (k/m suffixes: x1000, x1000000):
//   -t T  threads per round (1..1024)     default 4
//   -r R  rounds (thread generations)     default 100
//   -n N  steps per round of thread 0     default 20000
//   -l L  local slots per thread          default 20000
//   -x X  transfer slots                  default 1000
//   -e E  a full slot is swapped 1 in E   default 4
//   -w W  1: write objects whole; 0: only their first and last 8 bytes
//                                         default 1
//
// Output (stdout, one line of key=value pairs): parameters, ops (steps, all
// threads and rounds), seconds (wall time of the rounds, thread starts and
// exits included), ops_per_sec, the tag checksum, then the common tail
// (vmhwm_kib, malloc_from, verify).  The allocator under test is swapped
// with LD_PRELOAD.
#define _GNU_SOURCE
#include <pthread.h>

#include "bench_common.h"

enum { kMaxThreads = 1024 };

typedef struct Thread {
  _Alignas(64) unsigned id;
  uint64_t round;
  unsigned char** local;  // L slots, allocated before the clock starts
  uint64_t allocated, freed, written_sum, read_sum, bad;
  pthread_t tid;
} Thread;

static struct {
  unsigned threads;
  uint64_t rounds, steps, local_slots, transfer_slots, exchange, write_whole;
  Thread* t;
  _Atomic(unsigned char*)* transfer;
  _Atomic uint64_t bad_reports;
} g;

enum { kSizeBits = 24 };

static size_t PickSize(BenchRng* rng) {
  uint64_t r = BenchNext(rng);
  size_t size = (size_t)8 << (r % 7);
  uint64_t scale = (r >> 8) % 10000;
  if (scale == 0) {
    size *= 10000;
  } else if (scale % 100 == 0) {
    size *= 100;
  }
  return size;
}

static unsigned char* Make(Thread* self, BenchRng* rng, uint64_t step) {
  size_t size = PickSize(rng);
  unsigned char* p = malloc(size);
  if (p == NULL) {
    fprintf(stderr, "mstress: malloc(%zu) failed\n", size);
    exit(1);
  }
  uint64_t hash = BenchMix(((uint64_t)self->id << 48) ^ (self->round << 32) ^ step);
  uint64_t tag = hash << kSizeBits | size;
  if (g.write_whole) {
    for (size_t off = 0; off < size; off += 8) BenchStore64(p + off, tag);
  } else {
    BenchStore64(p, tag);
    BenchStore64(p + size - 8, tag);
  }
  self->written_sum += tag;
  self->allocated++;
  return p;
}

// Checks an object made by any thread of any round and frees it.
static void Check(uint64_t* read_sum, uint64_t* freed, uint64_t* bad, unsigned char* p) {
  uint64_t head = BenchLoad64(p), size = head & ((1u << kSizeBits) - 1);
  uint64_t tail = size >= 8 && size % 8 == 0 ? BenchLoad64(p + size - 8) : ~head;
  if (tail != head) {
    if (++*bad <= 3 && atomic_fetch_add(&g.bad_reports, 1) < 10) {
      fprintf(stderr, "mstress: object %p: head %llx tail %llx\n", (void*)p,
              (unsigned long long)head, (unsigned long long)tail);
    }
  }
  *read_sum += head;
  ++*freed;
  free(p);
}

static void* Worker(void* arg) {
  Thread* self = arg;
  unsigned char** local = self->local;
  const uint64_t slots = g.local_slots, steps = g.steps * (1 + self->id % 4);
  BenchRng rng = {BenchMix(((uint64_t)self->id << 32) ^ self->round ^ 0x6d737472ULL)};
  for (uint64_t step = 0; step < steps; step++) {
    uint64_t r = BenchNext(&rng);
    size_t i = (size_t)(r % slots);
    unsigned char* p = local[i];
    if (p == NULL) {
      local[i] = Make(self, &rng, step);
      continue;
    }
    uint64_t c = BenchNext(&rng);
    if (c % g.exchange == 0) {
      local[i] = atomic_exchange(&g.transfer[(c >> 32) % g.transfer_slots], p);
    } else if ((c >> 20) % 3 != 0) {
      Check(&self->read_sum, &self->freed, &self->bad, p);
      local[i] = NULL;
    } else {
      Check(&self->read_sum, &self->freed, &self->bad, p);
      local[i] = Make(self, &rng, step);
    }
  }
  for (uint64_t i = 0; i < slots; i++) {
    if (local[i] != NULL) Check(&self->read_sum, &self->freed, &self->bad, local[i]);
    local[i] = NULL;
  }
  return NULL;
}

static int Usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s [-t THREADS] [-r ROUNDS] [-n STEPS] [-l LOCAL_SLOTS] [-x TRANSFER_SLOTS] "
          "[-e EXCHANGE] [-w 0|1]\n"
          "defaults: -t 4 -r 100 -n 20000 -l 20000 -x 1000 -e 4 -w 1 (k/m suffixes: x1000)\n",
          argv0);
  return 2;
}

int main(int argc, char** argv) {
  uint64_t t = 4, rounds = 100, n = 20000, l = 20000, x = 1000, e = 4, w = 1;
  const BenchOption opts[] = {{"-t", &t}, {"-r", &rounds}, {"-n", &n}, {"-l", &l},
                              {"-x", &x}, {"-e", &e},      {"-w", &w}};
  if (BenchParseOptions(argc, argv, opts, sizeof opts / sizeof opts[0]) != 0) return Usage(argv[0]);
  if (t < 1 || t > kMaxThreads || rounds < 1 || rounds > (1u << 20) || n < 1 || n > (1ull << 40) ||
      l < 1 || l > (1u << 24) || x < 1 || x > (1u << 24) || e < 1 || w > 1) {
    fprintf(stderr,
            "mstress: need 1 <= t <= %d, 1 <= r <= 2^20, n >= 1, 1 <= l <= 2^24, "
            "1 <= x <= 2^24, e >= 1, w 0 or 1\n",
            kMaxThreads);
    return Usage(argv[0]);
  }
  g.threads = (unsigned)t;
  g.rounds = rounds;
  g.steps = n;
  g.local_slots = l;
  g.transfer_slots = x;
  g.exchange = e;
  g.write_whole = w;

  g.t = BenchAllocZeroed("mstress", 64, sizeof(Thread) * g.threads);
  g.transfer = BenchAllocZeroed("mstress", 64, sizeof(*g.transfer) * g.transfer_slots);
  for (unsigned i = 0; i < g.threads; i++) {
    g.t[i].id = i;
    g.t[i].local = BenchAllocZeroed("mstress", 64, g.local_slots * sizeof(unsigned char*));
  }

  double start = BenchNow();
  for (uint64_t round = 0; round < g.rounds; round++) {
    for (unsigned i = 0; i < g.threads; i++) {
      g.t[i].round = round;
      BenchSpawn("mstress", &g.t[i].tid, NULL, Worker, &g.t[i]);
    }
    for (unsigned i = 0; i < g.threads; i++) pthread_join(g.t[i].tid, NULL);
  }
  uint64_t read = 0, freed = 0, bad = 0;
  for (uint64_t i = 0; i < g.transfer_slots; i++) {
    unsigned char* p = atomic_exchange(&g.transfer[i], NULL);
    if (p != NULL) Check(&read, &freed, &bad, p);
  }
  double secs = BenchNow() - start;

  int ok = 1;
  uint64_t allocated = 0, written = 0;
  for (unsigned i = 0; i < g.threads; i++) {
    allocated += g.t[i].allocated;
    freed += g.t[i].freed;
    written += g.t[i].written_sum;
    read += g.t[i].read_sum;
    bad += g.t[i].bad;
  }
  if (bad != 0) {
    fprintf(stderr, "mstress: %llu objects with a wrong tag\n", (unsigned long long)bad);
    ok = 0;
  }
  if (freed != allocated) {
    fprintf(stderr, "mstress: %llu objects allocated, %llu freed\n", (unsigned long long)allocated,
            (unsigned long long)freed);
    ok = 0;
  }
  if (written != read) {
    fprintf(stderr, "mstress: checksum mismatch: written %llx, read %llx\n",
            (unsigned long long)written, (unsigned long long)read);
    ok = 0;
  }

  uint64_t ops = 0;
  for (unsigned i = 0; i < g.threads; i++) ops += g.rounds * g.steps * (1 + i % 4);
  for (unsigned i = 0; i < g.threads; i++) free(g.t[i].local);
  free(g.t);
  free((void*)g.transfer);
  printf(
      "bench=mstress threads=%u rounds=%llu n=%llu local=%llu transfer=%llu exchange=%llu "
      "write_whole=%llu ops=%llu allocations=%llu seconds=%.6f ops_per_sec=%.0f "
      "checksum=%016llx",
      g.threads, (unsigned long long)g.rounds, (unsigned long long)g.steps,
      (unsigned long long)g.local_slots, (unsigned long long)g.transfer_slots,
      (unsigned long long)g.exchange, (unsigned long long)g.write_whole, (unsigned long long)ops,
      (unsigned long long)allocated, secs, (double)ops / secs, (unsigned long long)read);
  BenchReportTail(ok);
  return ok ? 0 : 1;
}
