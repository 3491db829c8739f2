// bench/slowleak.c — a long-running program with heavy churn and a slow
// leak: most objects are freed soon after they are made, a few are kept to
// the end, scattered among the short-lived ones.
//
// Each of T threads runs on its own (its own random stream, seeded from its
// index, its own window and its own leak list) and performs N operations.
// An operation makes one new object (malloc) and puts it in a random slot of
// the thread's window of W slots; if the slot held an object, that object
// dies first: 1 in K is leaked (appended to the thread's leak list and kept
// until the end), the others are checked and freed. So the window holds the
// short-lived objects (each lives about W operations) and the leak list
// grows by about one object every K operations for the whole run.
//
// Sizes, drawn per object: 60 % uniform in 16..128 bytes, 30 % in
// 129..1024, 9 % in 1025..8192 and 1 % in 8193..65536 (about 1 KB on
// average).
//
// What it stresses: allocation throughput under steady churn of mixed
// sizes, and whether the peak RSS stays close to the live bytes when the
// long-lived objects are scattered among short-lived ones: an allocator
// that keeps a page (or a whole span) in use for one surviving object, and
// cannot reuse the rest of it for the churn, grows its footprint with every
// leak well beyond the leaked bytes themselves.
//
// The leak list is an array of {object, tag} records grown by doubling with
// realloc, inside the measured time, from the allocator under test (as a
// leaking program's own bookkeeping would be); the window (16 bytes a slot)
// is allocated before the clock starts. Neither counts in the live bytes.
//
// Verification: every object gets a tag (a hash of the thread's index and
// the operation's number, whose low 24 bits are the object's size), written
// in its first 8 bytes, in its last 8 bytes and in one 8-byte word at every
// 4 KiB offset before those (so every page it spans is touched and the RSS
// reflects the live bytes). Before an object is freed, all those words are
// checked against the tag the thread recorded for it. At the end each thread
// checks and frees what its window and its leak list hold (inside the
// measured time); then objects freed must equal objects allocated, the sum
// of tags read must equal the sum written and no tag may be wrong; any
// mismatch prints a diagnostic and exits 1.
//
// Options (k/m suffixes: x1000, x1000000):
//   -t T  threads, each on its own (1..256)   default 1
//   -n N  operations per thread                default 10000000
//   -w W  window slots per thread (1..2^24)    default 4096
//   -k K  a dying object is leaked 1 in K      default 1000
//         (K >= 1; 1: every dying object is leaked)
//
// Output (stdout, one line of key=value pairs): parameters, ops (all
// threads), leaked (objects leaked, all threads), leaked_kib (their bytes,
// as requested), peak_live_kib (the largest sum of requested bytes live at
// once in the threads' windows and leak lists; threads publish their
// changes in steps of 64 KiB, so with T > 1 it is exact to within T x 64
// KiB; with one thread it is exact), seconds (from the first thread's start
// after the start barrier to the last thread's end, by the threads' own
// clocks; the final checks and frees included), ops_per_sec, the tag
// checksum, then the common tail (vmhwm_kib, malloc_from, verify). Peak RSS
// (vmhwm_kib) against peak_live_kib is the footprint figure. The allocator
// under test is swapped with LD_PRELOAD.
#define _GNU_SOURCE
#include <pthread.h>

#include "bench_common.h"

enum {
  kMaxThreads = 256,
  kSizeBits = 24,
  kPage = 4096,
  kFirstLeakCap = 64,
  kPublishBytes = 64 * 1024,
};

// An object and its tag: a window slot (p NULL when empty) or a leak record.
typedef struct Slot {
  unsigned char* p;
  uint64_t tag;
} Slot;

typedef struct Thread {
  _Alignas(64) unsigned id;
  Slot* window;  // W slots, allocated before the clock starts
  Slot* leaks;   // the leak list, grown by doubling
  uint64_t nleaks, leak_cap;
  uint64_t live, peak_live, leaked_bytes;
  int64_t unpublished;  // change of `live` not yet added to g.live
  uint64_t allocated, freed, written_sum, read_sum, bad;
  pthread_t tid;
} Thread;

static struct {
  unsigned threads;
  uint64_t ops, window, keep;
  Thread* t;
  pthread_barrier_t start;
  BenchClock clock;
  _Atomic int64_t live, peak;  // all threads' live bytes, as published
  _Atomic uint64_t bad_reports;
} g;

// Adds the thread's unpublished change to the global live bytes and raises
// the global peak to it.
static void Publish(Thread* self) {
  int64_t now = atomic_fetch_add_explicit(&g.live, self->unpublished, memory_order_relaxed) +
                self->unpublished;
  self->unpublished = 0;
  int64_t peak = atomic_load_explicit(&g.peak, memory_order_relaxed);
  while (now > peak && !atomic_compare_exchange_weak_explicit(
                           &g.peak, &peak, now, memory_order_relaxed, memory_order_relaxed)) {
  }
}

static size_t PickSize(BenchRng* rng) {
  uint64_t c = BenchBelow(rng, 100);
  if (c < 60) return 16 + (size_t)BenchBelow(rng, 128 - 16 + 1);
  if (c < 90) return 129 + (size_t)BenchBelow(rng, 1024 - 129 + 1);
  if (c < 99) return 1025 + (size_t)BenchBelow(rng, 8192 - 1025 + 1);
  return 8193 + (size_t)BenchBelow(rng, 65536 - 8193 + 1);
}

// Makes operation `op`'s object into *slot: allocates it, writes its tag in
// its first and last words and at every 4 KiB offset short of the last word
// (sizes are not multiples of 8: the last word is at size - 8, and a word
// overlapping it would be overwritten), and counts its bytes.
static void Make(Thread* self, BenchRng* rng, uint64_t op, Slot* slot) {
  size_t size = PickSize(rng);
  unsigned char* p = malloc(size);
  if (p == NULL) {
    fprintf(stderr, "slowleak: thread %u: malloc(%zu) failed\n", self->id, size);
    exit(1);
  }
  uint64_t hash = BenchMix(((uint64_t)self->id << 48) ^ op ^ 0x736c6f776c65616bULL);
  uint64_t tag = hash << kSizeBits | size;
  BenchStore64(p, tag);
  for (size_t off = kPage; off + 8 <= size - 8; off += kPage) BenchStore64(p + off, tag);
  BenchStore64(p + size - 8, tag);
  slot->p = p;
  slot->tag = tag;
  self->written_sum += tag;
  self->allocated++;
  self->live += size;
  self->unpublished += (int64_t)size;
  if (self->live > self->peak_live) self->peak_live = self->live;
}

// Checks an object's words against its tag and frees it.
static void Release(Thread* self, const Slot* slot) {
  unsigned char* p = slot->p;
  size_t size = (size_t)(slot->tag & ((1u << kSizeBits) - 1));
  uint64_t head = BenchLoad64(p), tail = BenchLoad64(p + size - 8);
  int damaged = head != slot->tag || tail != slot->tag;
  for (size_t off = kPage; off + 8 <= size - 8 && !damaged; off += kPage) {
    damaged = BenchLoad64(p + off) != slot->tag;
  }
  if (damaged && ++self->bad <= 3 && atomic_fetch_add(&g.bad_reports, 1) < 10) {
    fprintf(stderr, "slowleak: thread %u: object %p (%zu B): head %llx tail %llx, want %llx\n",
            self->id, (void*)p, size, (unsigned long long)head, (unsigned long long)tail,
            (unsigned long long)slot->tag);
  }
  self->read_sum += head;
  self->freed++;
  self->live -= size;
  self->unpublished -= (int64_t)size;
  free(p);
}

// Appends a dying object to the leak list (its bytes stay live).
static void Leak(Thread* self, const Slot* slot) {
  if (self->nleaks == self->leak_cap) {
    uint64_t cap = self->leak_cap == 0 ? kFirstLeakCap : self->leak_cap * 2;
    Slot* grown = realloc(self->leaks, cap * sizeof(Slot));
    if (grown == NULL) {
      fprintf(stderr, "slowleak: thread %u: out of memory growing the leak list\n", self->id);
      exit(1);
    }
    self->leaks = grown;
    self->leak_cap = cap;
  }
  self->leaks[self->nleaks++] = *slot;
  self->leaked_bytes += slot->tag & ((1u << kSizeBits) - 1);
}

static void* Worker(void* arg) {
  Thread* self = arg;
  Slot* window = self->window;
  const uint64_t ops = g.ops, slots = g.window, keep = g.keep;
  BenchRng rng = {BenchMix(((uint64_t)self->id << 32) ^ 0x6c65616bULL)};
  pthread_barrier_wait(&g.start);
  BenchClockStart(&g.clock);
  for (uint64_t op = 0; op < ops; op++) {
    Slot* slot = &window[BenchBelow(&rng, slots)];
    if (slot->p != NULL) {
      if (BenchBelow(&rng, keep) == 0) {
        Leak(self, slot);
      } else {
        Release(self, slot);
      }
    }
    Make(self, &rng, op, slot);
    if (self->unpublished >= kPublishBytes || self->unpublished <= -kPublishBytes) Publish(self);
  }
  Publish(self);
  for (uint64_t i = 0; i < slots; i++) {
    if (window[i].p != NULL) Release(self, &window[i]);
    window[i].p = NULL;
  }
  for (uint64_t i = 0; i < self->nleaks; i++) Release(self, &self->leaks[i]);
  free(self->leaks);
  self->leaks = NULL;
  Publish(self);
  BenchClockStop(&g.clock);
  return NULL;
}

static int Usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s [-t THREADS] [-n OPS_PER_THREAD] [-w WINDOW_SLOTS] [-k KEEP_ONE_IN]\n"
          "defaults: -t 1 -n 10m -w 4096 -k 1000 (k/m suffixes: x1000, x1000000)\n",
          argv0);
  return 2;
}

int main(int argc, char** argv) {
  uint64_t t = 1, n = 10000000, w = 4096, k = 1000;
  const BenchOption opts[] = {{"-t", &t}, {"-n", &n}, {"-w", &w}, {"-k", &k}};
  if (BenchParseOptions(argc, argv, opts, sizeof opts / sizeof opts[0]) != 0) return Usage(argv[0]);
  if (t < 1 || t > kMaxThreads || n < 1 || n > (1ull << 40) || w < 1 || w > (1u << 24) || k < 1) {
    fprintf(stderr, "slowleak: need 1 <= t <= %d, 1 <= n <= 2^40, 1 <= w <= 2^24, k >= 1\n",
            kMaxThreads);
    return Usage(argv[0]);
  }
  g.threads = (unsigned)t;
  g.ops = n;
  g.window = w;
  g.keep = k;

  g.t = BenchAllocZeroed("slowleak", 64, sizeof(Thread) * g.threads);
  for (unsigned i = 0; i < g.threads; i++) {
    g.t[i].id = i;
    g.t[i].window = BenchAllocZeroed("slowleak", 64, g.window * sizeof(Slot));
  }
  pthread_barrier_init(&g.start, NULL, g.threads + 1);
  for (unsigned i = 0; i < g.threads; i++) {
    BenchSpawn("slowleak", &g.t[i].tid, NULL, Worker, &g.t[i]);
  }
  pthread_barrier_wait(&g.start);
  for (unsigned i = 0; i < g.threads; i++) pthread_join(g.t[i].tid, NULL);
  double secs = BenchClockSeconds(&g.clock);
  pthread_barrier_destroy(&g.start);

  int ok = 1;
  uint64_t allocated = 0, freed = 0, written = 0, read = 0, bad = 0;
  uint64_t leaked = 0, leaked_bytes = 0, peak_live = 0;
  for (unsigned i = 0; i < g.threads; i++) {
    Thread* th = &g.t[i];
    if (th->live != 0) {
      fprintf(stderr, "slowleak: thread %u: %llu bytes still counted live at the end\n", i,
              (unsigned long long)th->live);
      ok = 0;
    }
    allocated += th->allocated;
    freed += th->freed;
    written += th->written_sum;
    read += th->read_sum;
    bad += th->bad;
    leaked += th->nleaks;
    leaked_bytes += th->leaked_bytes;
    if (th->peak_live > peak_live) peak_live = th->peak_live;
  }
  if (atomic_load(&g.live) != 0) {
    fprintf(stderr, "slowleak: %lld live bytes left in the global count\n",
            (long long)atomic_load(&g.live));
    ok = 0;
  }
  if ((uint64_t)atomic_load(&g.peak) > peak_live) peak_live = (uint64_t)atomic_load(&g.peak);
  if (bad != 0) {
    fprintf(stderr, "slowleak: %llu objects with a wrong tag\n", (unsigned long long)bad);
    ok = 0;
  }
  if (freed != allocated) {
    fprintf(stderr, "slowleak: %llu objects allocated, %llu freed\n", (unsigned long long)allocated,
            (unsigned long long)freed);
    ok = 0;
  }
  if (written != read) {
    fprintf(stderr, "slowleak: checksum mismatch: written %llx, read %llx\n",
            (unsigned long long)written, (unsigned long long)read);
    ok = 0;
  }

  uint64_t ops = (uint64_t)g.threads * g.ops;
  for (unsigned i = 0; i < g.threads; i++) free(g.t[i].window);
  free(g.t);
  printf(
      "bench=slowleak threads=%u n=%llu window=%llu keep_one_in=%llu ops=%llu leaked=%llu "
      "leaked_kib=%llu peak_live_kib=%llu seconds=%.6f ops_per_sec=%.0f checksum=%016llx",
      g.threads, (unsigned long long)g.ops, (unsigned long long)g.window,
      (unsigned long long)g.keep, (unsigned long long)ops, (unsigned long long)leaked,
      (unsigned long long)(leaked_bytes / 1024), (unsigned long long)(peak_live / 1024), secs,
      (double)ops / secs, (unsigned long long)read);
  BenchReportTail(ok);
  return ok ? 0 : 1;
}
