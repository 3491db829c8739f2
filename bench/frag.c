// bench/frag.c — fragmentation benchmark: phases whose size distributions
// shift, random lifetimes, a few long-lived objects that pin pages, and a
// target of live bytes.
//
// In the spirit of phong (described in a Hoard-style allocator's report of the
// classic benchmarks as one that intersperses frees between allocations to
// induce fragmentation), written here from that description. Each of T threads
// runs its own seeded random sequence of n operations (one malloc or one free
// each), independent of the other threads.
//
// Phases: the sequence is cut into phases. Each phase draws a kind different
// from the previous one, with its own size distribution:
//   small   16..128 B
//   medium  1..8 KiB
//   mixed   60 % 16..256 B, 30 % 256 B..8 KiB, 8 % 8..64 KiB, 2 % 64..512 KiB
//   odd     129..1024 B (between the classes of the other two)
// A phase ends after it has allocated a byte budget drawn uniformly in
// [L/2, L] (L = the thread's share of -l), or after max(n/16, 1000) allocations,
// whichever comes first (so small-object phases do not take the whole run).
//
// Lifetimes are measured in bytes allocated by the thread (its clock). At birth
// every object draws one: 50 % temporary, uniform in [0, L/32]; 35 % short, in
// [0, 3 L]; 13 % medium, in [L, 3 L); 2 % long, in [3 L, 8 L), which outlive
// several phases and keep the pages under them in use (alone, these lifetimes
// would keep about 0.9 L live). An operation frees the object that dies first
// when its death is due or when the live bytes exceed L, so the live bytes
// track the target (the lifetimes decide who dies, the target when); otherwise
// it allocates. Deaths are kept in a timing wheel of 1024 buckets (O(1) per
// operation), each bucket L/64 bytes of clock wide; within a bucket the newest
// object goes first. The program's own record of the live objects is 16 bytes
// each, touched only as needed (about 5 MiB at the defaults).
//
// So an allocator that cannot give memory freed by one size class to another
// (and cannot return what the long-lived objects leave nearly empty) shows a
// peak RSS well above the peak of live bytes, which the program prints.
//
// Verification: every object gets a tag (a hash of its address, size, a
// sequence number and the thread's seed), written at offset 0, at every 4 KiB
// offset inside it and in its last 8 bytes (so every page it spans is touched
// and the RSS reflects the live bytes), each word the tag plus its offset. All
// words are checked before the object is freed. At the end every live object
// is checked and freed (inside the measured time), and per thread the objects
// allocated must equal the objects freed and the sum of tags written the sum of
// tags checked. Any mismatch: diagnostic on stderr, exit 1.
//
// Options (k/m suffixes: x1000, x1000000):
//   -t T   threads, each its own sequence (default 1, at most 256)
//   -n N   operations (mallocs + frees) per thread before the final drain
//          (default 3000000)
//   -l L   target live bytes, all threads together (default 64m = 64000000);
//          each thread gets L/T (at least 16k)
//   -r R   seed (default 1); thread i's stream is seeded from R and i
//
// Output (stdout, one line of key=value pairs): parameters, seconds (from the
// first thread's start after the start barrier to the last thread's end, by the
// threads' own clocks; final drain included), ops (mallocs + frees, drain
// included), mallocs, phases (and phases_<kind> per kind), ops_per_sec,
// peak_live_kib (the largest sum of requested bytes live at once over all
// threads; threads publish their changes in steps of 64 KiB, so with T > 1 it
// is exact to within T x 64 KiB), final_live_kib (live bytes when the last
// operation ran, before the drain), then vmhwm_kib, malloc_from and verify.
// Peak RSS (vmhwm_kib) against peak_live_kib is the fragmentation figure. The
// allocator under test is swapped with LD_PRELOAD.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>

#include "bench_common.h"

enum {
  kMaxThreads = 256,
  kWheelBits = 10,
  kWheel = 1 << kWheelBits,
  kBucketsPerTarget = 64,  // bucket width = L / 64
  kMaxObject = 512 * 1024,
  kPublishBytes = 64 * 1024,
};
#define kNil UINT32_MAX

enum { kSmall, kMedium, kMixed, kOdd, kKinds };
static const char* const kKindName[kKinds] = {"small", "medium", "mixed", "odd"};

// One live object: 16 bytes. `meta` packs the size (20 bits) and 12 bits of
// the object's sequence number (which enters its tag).
typedef struct Rec {
  unsigned char* p;
  uint32_t meta;
  uint32_t next;  // next in its wheel bucket, or in the free list of records
} Rec;

typedef struct Thread {
  unsigned id;
  uint64_t salt;
  BenchRng rng;
  Rec* recs;
  uint32_t nrecs, used_recs, free_rec;  // free_rec: a list of recycled records
  uint32_t* wheel;                      // kWheel bucket heads
  uint64_t cursor;                      // absolute bucket number that may hold the earliest death
  uint64_t width;                       // bytes of clock per bucket
  uint64_t target;                      // this thread's live-bytes target
  uint64_t clock;                       // bytes allocated so far
  uint64_t live_bytes, live_count, peak_live;
  int64_t unpublished;
  uint64_t mallocs, frees, phases, seq;
  uint64_t written_sum, checked_sum, bad;
  uint64_t phase_count[kKinds];
  uint64_t final_live;
  pthread_t tid;
} Thread;

static struct {
  unsigned threads;
  uint64_t ops;
  Thread* t;
  pthread_barrier_t start;
  BenchClock clock;
  _Atomic int64_t live;
  _Atomic int64_t peak;
} g;

static uint64_t Tag(const Thread* th, const unsigned char* p, uint32_t meta) {
  return BenchMix(th->salt ^ ((uint64_t)(uintptr_t)p << 16) ^ meta);
}

static void Publish(Thread* th) {
  int64_t now =
      atomic_fetch_add_explicit(&g.live, th->unpublished, memory_order_relaxed) + th->unpublished;
  th->unpublished = 0;
  int64_t peak = atomic_load_explicit(&g.peak, memory_order_relaxed);
  while (now > peak && !atomic_compare_exchange_weak_explicit(
                           &g.peak, &peak, now, memory_order_relaxed, memory_order_relaxed)) {
  }
}

// Unaligned 8-byte loads and stores. -fno-builtin turns a plain memcpy into a
// library call; the __builtin_ form stays one move.
// Writes the object's words: the tag plus the offset at 0, at every 4 KiB
// offset and in the last 8 bytes. Returns the tag.
static uint64_t Fill(unsigned char* p, size_t size, uint64_t tag) {
  for (size_t off = 0; off + 8 <= size - 8; off += 4096) BenchStore64(p + off, tag + off);
  BenchStore64(p + size - 8, tag + size - 8);
  return tag;
}

static int Check(const unsigned char* p, size_t size, uint64_t tag) {
  for (size_t off = 0; off + 8 <= size - 8; off += 4096)
    if (BenchLoad64(p + off) != tag + off) return 0;
  return BenchLoad64(p + size - 8) == tag + size - 8;
}

static size_t DrawSize(BenchRng* r, int kind) {
  switch (kind) {
    case kSmall:
      return 16 + (size_t)BenchBelow(r, 128 - 16 + 1);
    case kMedium:
      return 1024 + (size_t)BenchBelow(r, 8192 - 1024 + 1);
    case kOdd:
      return 129 + (size_t)BenchBelow(r, 1024 - 129 + 1);
    default: {
      uint64_t x = BenchBelow(r, 100);
      if (x < 60) return 16 + (size_t)BenchBelow(r, 256 - 16 + 1);
      if (x < 90) return 256 + (size_t)BenchBelow(r, 8192 - 256 + 1);
      if (x < 98) return 8192 + (size_t)BenchBelow(r, 65536 - 8192 + 1);
      return 65536 + (size_t)BenchBelow(r, kMaxObject - 65536 + 1);
    }
  }
}

static uint64_t DrawLifetime(BenchRng* r, uint64_t target) {
  uint64_t x = BenchBelow(r, 100);
  if (x < 50) return BenchBelow(r, target / 32 + 1);
  if (x < 85) return BenchBelow(r, 3 * target + 1);
  if (x < 98) return target + BenchBelow(r, 2 * target);
  return 3 * target + BenchBelow(r, 5 * target);
}

static void Insert(Thread* th, uint32_t i, uint64_t death) {
  uint64_t abs = death / th->width;
  uint32_t* head = &th->wheel[abs & (kWheel - 1)];
  th->recs[i].next = *head;
  *head = i;
  if (th->live_count == 0 || abs < th->cursor) th->cursor = abs;
  th->live_count++;
}

static void Allocate(Thread* th, int kind) {
  size_t size = DrawSize(&th->rng, kind);
  unsigned char* p = malloc(size);
  if (p == NULL) {
    fprintf(stderr, "frag: thread %u: malloc(%zu) failed\n", th->id, size);
    exit(1);
  }
  uint32_t i = th->free_rec;
  if (i != kNil) {
    th->free_rec = th->recs[i].next;
  } else if (th->used_recs < th->nrecs) {
    i = th->used_recs++;  // records are touched only as they are first needed
  } else {
    fprintf(stderr, "frag: thread %u: out of object records\n", th->id);
    exit(1);
  }
  uint32_t meta = (uint32_t)size | (uint32_t)(th->seq++ & 0xfff) << 20;
  th->recs[i].p = p;
  th->recs[i].meta = meta;
  th->written_sum += Fill(p, size, Tag(th, p, meta));
  uint64_t death = th->clock + DrawLifetime(&th->rng, th->target);
  th->clock += size;
  Insert(th, i, death);
  th->live_bytes += size;
  th->unpublished += (int64_t)size;
  if (th->live_bytes > th->peak_live) th->peak_live = th->live_bytes;
  th->mallocs++;
}

// Frees the newest object of the earliest non-empty bucket (live_count > 0;
// the caller has moved the cursor there).
static void FreeEarliest(Thread* th) {
  uint32_t* head = &th->wheel[th->cursor & (kWheel - 1)];
  uint32_t i = *head;
  Rec* rec = &th->recs[i];
  *head = rec->next;
  size_t size = rec->meta & 0xfffff;
  uint64_t tag = Tag(th, rec->p, rec->meta);
  if (!Check(rec->p, size, tag)) {
    th->bad++;
    if (th->bad <= 3) {
      fprintf(stderr, "frag: thread %u: object %p (%zu B) damaged before its free\n", th->id,
              (void*)rec->p, size);
    }
  } else {
    free(rec->p);
  }
  th->checked_sum += tag;
  rec->next = th->free_rec;
  th->free_rec = i;
  th->live_count--;
  th->live_bytes -= size;
  th->unpublished -= (int64_t)size;
  th->frees++;
}

static void MoveCursor(Thread* th) {
  while (th->wheel[th->cursor & (kWheel - 1)] == kNil) th->cursor++;
}

static void* Run(void* arg) {
  Thread* th = arg;
  uint64_t max_allocs = g.ops / 16 < 1000 ? 1000 : g.ops / 16;
  int kind = (int)BenchBelow(&th->rng, kKinds);
  uint64_t budget_end = th->clock + th->target / 2 + BenchBelow(&th->rng, th->target / 2 + 1);
  uint64_t allocs_end = max_allocs;
  th->phases = 1;
  th->phase_count[kind]++;
  pthread_barrier_wait(&g.start);
  BenchClockStart(&g.clock);
  for (uint64_t op = 0; op < g.ops; op++) {
    if (th->live_count > 0) {
      MoveCursor(th);
      if (th->live_bytes > th->target || th->cursor < th->clock / th->width) {
        FreeEarliest(th);
        goto next;
      }
    }
    if (th->clock >= budget_end || th->mallocs >= allocs_end) {
      int k = (int)BenchBelow(&th->rng, kKinds - 1);
      kind = k >= kind ? k + 1 : k;
      budget_end = th->clock + th->target / 2 + BenchBelow(&th->rng, th->target / 2 + 1);
      allocs_end = th->mallocs + max_allocs;
      th->phases++;
      th->phase_count[kind]++;
    }
    Allocate(th, kind);
  next:
    if (th->unpublished >= kPublishBytes || th->unpublished <= -kPublishBytes) Publish(th);
  }
  th->final_live = th->live_bytes;
  Publish(th);
  while (th->live_count > 0) {
    MoveCursor(th);
    FreeEarliest(th);
  }
  Publish(th);
  BenchClockStop(&g.clock);
  return NULL;
}

static int Usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s [-t THREADS] [-n OPS_PER_THREAD] [-l TARGET_LIVE_BYTES] [-r SEED]\n"
          "defaults: -t 1 -n 3000000 -l 64m -r 1 (k/m suffixes: x1000, x1000000)\n",
          argv0);
  return 2;
}

int main(int argc, char** argv) {
  uint64_t t = 1, n = 3000000, l = 64000000, seed = 1;
  const BenchOption opts[] = {{"-t", &t}, {"-n", &n}, {"-l", &l}, {"-r", &seed}};
  if (BenchParseOptions(argc, argv, opts, sizeof opts / sizeof opts[0]) != 0) return Usage(argv[0]);
  if (t < 1 || t > kMaxThreads || n < 1 || n > (1ull << 40) || l / t < 16000 || l > (1ull << 40)) {
    fprintf(stderr, "frag: need 1 <= t <= %d, n >= 1, l / t >= 16k\n", kMaxThreads);
    return Usage(argv[0]);
  }
  g.threads = (unsigned)t;
  g.ops = n;
  g.t = calloc(g.threads, sizeof(Thread));
  pthread_t* tids = calloc(g.threads, sizeof(pthread_t));
  if (g.t == NULL || tids == NULL) {
    fprintf(stderr, "frag: out of memory setting up\n");
    return 1;
  }
  for (unsigned i = 0; i < g.threads; i++) {
    Thread* th = &g.t[i];
    th->id = i;
    th->salt = BenchMix(seed * 0x9e3779b97f4a7c15ULL + i + 1);
    th->rng.state = th->salt;
    th->target = l / t;
    th->width = th->target / kBucketsPerTarget;
    // Live bytes never exceed target + one object, and every object is at
    // least 16 bytes (and no more objects than operations are ever live).
    uint64_t most = (th->target + kMaxObject) / 16 + 2;
    if (most > n + 2) most = n + 2;
    if (most >= kNil) {
      fprintf(stderr, "frag: too many objects per thread (lower -l or -n)\n");
      return 2;
    }
    th->nrecs = (uint32_t)most;
    th->recs = malloc(most * sizeof(Rec));
    th->wheel = malloc(kWheel * sizeof(uint32_t));
    if (th->recs == NULL || th->wheel == NULL) {
      fprintf(stderr, "frag: out of memory setting up\n");
      return 1;
    }
    th->free_rec = kNil;
    for (unsigned k = 0; k < kWheel; k++) th->wheel[k] = kNil;
  }
  pthread_barrier_init(&g.start, NULL, g.threads + 1);
  for (unsigned i = 0; i < g.threads; i++) {
    BenchSpawn("frag", &tids[i], NULL, Run, &g.t[i]);
  }
  pthread_barrier_wait(&g.start);
  for (unsigned i = 0; i < g.threads; i++) pthread_join(tids[i], NULL);
  double secs = BenchClockSeconds(&g.clock);

  int ok = 1;
  uint64_t mallocs = 0, frees = 0, phases = 0, final_live = 0, peak = 0;
  uint64_t kinds[kKinds] = {0};
  for (unsigned i = 0; i < g.threads; i++) {
    Thread* th = &g.t[i];
    if (th->bad != 0) {
      fprintf(stderr, "frag: thread %u: %llu damaged objects\n", i, (unsigned long long)th->bad);
      ok = 0;
    }
    if (th->mallocs != th->frees || th->live_count != 0 || th->live_bytes != 0) {
      fprintf(stderr, "frag: thread %u: %llu mallocs, %llu frees, %llu objects left\n", i,
              (unsigned long long)th->mallocs, (unsigned long long)th->frees,
              (unsigned long long)th->live_count);
      ok = 0;
    }
    if (th->written_sum != th->checked_sum) {
      fprintf(stderr, "frag: thread %u: tag sum written %016llx, checked %016llx\n", i,
              (unsigned long long)th->written_sum, (unsigned long long)th->checked_sum);
      ok = 0;
    }
    mallocs += th->mallocs;
    frees += th->frees;
    phases += th->phases;
    final_live += th->final_live;
    if (th->peak_live > peak) peak = th->peak_live;
    for (int k = 0; k < kKinds; k++) kinds[k] += th->phase_count[k];
  }
  if (atomic_load(&g.live) != 0) {
    fprintf(stderr, "frag: %lld live bytes left in the global count\n",
            (long long)atomic_load(&g.live));
    ok = 0;
  }
  if ((uint64_t)atomic_load(&g.peak) > peak) peak = (uint64_t)atomic_load(&g.peak);

  uint64_t ops = mallocs + frees;
  printf(
      "bench=frag threads=%u n=%llu target_live=%llu seed=%llu seconds=%.6f ops=%llu mallocs=%llu "
      "phases=%llu",
      g.threads, (unsigned long long)n, (unsigned long long)l, (unsigned long long)seed, secs,
      (unsigned long long)ops, (unsigned long long)mallocs, (unsigned long long)phases);
  for (int k = 0; k < kKinds; k++) {
    printf(" phases_%s=%llu", kKindName[k], (unsigned long long)kinds[k]);
  }
  printf(" ops_per_sec=%.0f peak_live_kib=%llu final_live_kib=%llu", (double)ops / secs,
         (unsigned long long)(peak / 1024), (unsigned long long)(final_live / 1024));
  for (unsigned i = 0; i < g.threads; i++) {
    free(g.t[i].recs);
    free(g.t[i].wheel);
  }
  free(g.t);
  free(tids);
  BenchReportTail(ok);
  return ok ? 0 : 1;
}
