// bench/larson.c — larson server simulation (objects outlive the thread that
// allocated them; threads come and go).
//
// The larson benchmark, a simulated server whose threads allocate objects
// that other threads later free, written here from its published description
// (a Hoard-style allocator's report of the classic benchmarks, and the roost benchmark contract): T
// chains of threads each own an array of K slots, every slot holding one live
// object. One op frees the object of a random slot and allocates a new object
// of random size in [-s, -S] in its place. After N ops the thread starts a
// successor thread, which inherits the slot array (so it frees objects its
// predecessor allocated), and exits; each chain runs G generations, so
// T x G threads are created in all and T of them run at any time (T + 1
// while one hands over). The work is fixed (G x N ops per chain), not the
// time, so runs under different allocators are comparable.
//
// What it stresses: objects freed by a thread other than their allocator
// after the allocator has exited (its heap must be inherited, adopted or
// drained by messages), thread creation and exit in the middle of the
// allocation stream, and a steady working set of T x K objects of mixed
// sizes scattered over the heap by random replacement. With the default
// -t 4 on 2 cores, threads outnumber cores and are descheduled mid-op.
//
// Set-up (outside the clock): the first thread of each chain fills its K
// slots, then waits on the start barrier. The clock runs from the first
// chain's start after the barrier until the last generation of every chain
// has freed all its slots (the threads' own clocks: with more threads than
// cores, the main thread may run only long after the barrier).
//
// Sizes come from the 4096-entry table of bench_common.h (uniform in [-s, -S]
// from a fixed seed); slots and table indices come from a per-chain splitmix64
// stream with a fixed seed that the successor continues, so every allocator
// sees the same sequence of requests.
//
// Verification: each object carries a tag (a hash of chain and allocation
// sequence number) in its first 8 bytes and again in its last 8 (objects of at
// least 16 bytes). The slot remembers the tag and the size; before freeing, the
// thread checks both copies. At the end the last generation frees every slot,
// and per chain the number of allocations must equal the number of frees
// (K + G x N each) and the sum of tags written must equal the sum of tags read
// back. Any mismatch prints a diagnostic and exits 1.
//
// Options (k/m suffixes: x1000, x1000000):
//   -t T  chains = threads running at once (1..1024)        default 4
//   -g G  generations (threads) per chain                   default 40
//   -n N  ops (free + malloc) per thread                    default 200000
//   -k K  slots (live objects) per chain                    default 1000
//   -s MIN, -S MAX  object sizes in bytes (MIN >= 8)        default 16, 1024
//   -z Z  1: C++'s operator new and sized delete instead of  default 0
//         malloc and free (a C++ server's calls; the program
//         links libstdc++, so a preloaded allocator that
//         defines them is called, or else libstdc++'s own)
//
// Output (stdout, one line of key=value pairs): parameters, ops (T x G x N),
// seconds, ops_per_sec (ops per second, all threads together; one op is one
// free plus one malloc), threads_created, the tag checksum, then the common
// tail (vmhwm_kib, malloc_from, verify); with -z 1 also delete_from (the
// library whose sized delete was called). The allocator under test is swapped
// with LD_PRELOAD.
#define _GNU_SOURCE
#include <pthread.h>

#include "bench_common.h"

enum { kMaxChains = 1024 };

// The allocation calls: malloc/free, or operator new(size_t) and
// operator delete(void*, size_t) looked up by their mangled names.
static void* (*g_new)(size_t);
static void (*g_delete_sized)(void*, size_t);

static void* Alloc(size_t size) { return g_new != NULL ? g_new(size) : malloc(size); }

static void Free(void* p, size_t size) {
  if (g_delete_sized != NULL)
    g_delete_sized(p, size);
  else
    free(p);
}

typedef struct Slot {
  unsigned char* p;
  size_t size;
  uint64_t tag;
} Slot;

// One chain of threads. Only the thread currently running the chain touches
// it; pthread_create orders the predecessor's writes before the successor's
// reads.
typedef struct Chain {
  _Alignas(64) unsigned id;
  unsigned generation;  // of the thread running the chain now (0-based)
  Slot* slots;
  BenchRng rng;
  uint64_t seq;  // allocations so far: the tag of the next one is Tag(id, seq)
  uint64_t allocs, frees, alloc_sum, free_sum, bad;
} Chain;

static struct {
  unsigned chains;
  uint64_t generations, ops, slots;
  size_t min_size, max_size;
  size_t sizes[kBenchSizeTable];
  Chain* c;
  pthread_attr_t detached;
  pthread_barrier_t start;
  BenchClock clock;
  pthread_mutex_t lock;
  pthread_cond_t done_cv;
  unsigned done;
} g;

static uint64_t Tag(unsigned chain, uint64_t seq) {
  return BenchMix(((uint64_t)chain << 48) ^ seq ^ 0x6c6172736f6eULL) | 1;
}

static void Allocate(Chain* c, Slot* s) {
  size_t size = g.sizes[BenchNext(&c->rng) & (kBenchSizeTable - 1)];
  unsigned char* p = Alloc(size);
  if (p == NULL) {
    fprintf(stderr, "larson: allocation of %zu bytes failed\n", size);
    exit(1);
  }
  uint64_t tag = Tag(c->id, c->seq++);
  BenchStore64(p, tag);
  if (size >= 16) BenchStore64(p + size - 8, tag);
  s->p = p;
  s->size = size;
  s->tag = tag;
  c->allocs++;
  c->alloc_sum += tag;
}

static void Release(Chain* c, Slot* s) {
  uint64_t head, tail;
  head = BenchLoad64(s->p);
  tail = head;
  if (s->size >= 16) tail = BenchLoad64(s->p + s->size - 8);
  if (head != s->tag || tail != s->tag) {
    if (++c->bad <= 3) {
      fprintf(stderr,
              "larson: chain %u generation %u: object %p (%zu bytes): head %llx tail %llx, "
              "want %llx\n",
              c->id, c->generation, (void*)s->p, s->size, (unsigned long long)head,
              (unsigned long long)tail, (unsigned long long)s->tag);
    }
  }
  c->free_sum += head;
  c->frees++;
  Free(s->p, s->size);
  s->p = NULL;
}

static void* Worker(void* arg) {
  Chain* c = arg;
  if (c->generation == 0) {
    for (uint64_t i = 0; i < g.slots; i++) Allocate(c, &c->slots[i]);
    pthread_barrier_wait(&g.start);
    BenchClockStart(&g.clock);
  }
  for (uint64_t op = 0; op < g.ops; op++) {
    Slot* s = &c->slots[BenchBelow(&c->rng, g.slots)];
    Release(c, s);
    Allocate(c, s);
  }
  if (++c->generation < g.generations) {
    // Hand the slots to a successor and exit; from here on `c` is its.
    pthread_t next;
    if (pthread_create(&next, &g.detached, Worker, c) != 0) {
      fprintf(stderr, "larson: pthread_create failed (chain %u)\n", c->id);
      exit(1);
    }
    return NULL;
  }
  for (uint64_t i = 0; i < g.slots; i++) Release(c, &c->slots[i]);
  BenchClockStop(&g.clock);
  pthread_mutex_lock(&g.lock);
  if (++g.done == g.chains) pthread_cond_signal(&g.done_cv);
  pthread_mutex_unlock(&g.lock);
  return NULL;
}

static int Usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s [-t CHAINS] [-g GENERATIONS] [-n OPS_PER_THREAD] [-k SLOTS] [-s MIN] "
          "[-S MAX] [-z 0|1]\n"
          "defaults: -t 4 -g 40 -n 200000 -k 1000 -s 16 -S 1024 -z 0 (k/m suffixes: x1000)\n",
          argv0);
  return 2;
}

int main(int argc, char** argv) {
  uint64_t t = 4, gens = 40, n = 200000, k = 1000, lo = 16, hi = 1024, sized = 0;
  const BenchOption opts[] = {{"-t", &t},  {"-g", &gens}, {"-n", &n},    {"-k", &k},
                              {"-s", &lo}, {"-S", &hi},   {"-z", &sized}};
  if (BenchParseOptions(argc, argv, opts, sizeof opts / sizeof opts[0]) != 0) return Usage(argv[0]);
  if (t < 1 || t > kMaxChains || gens < 1 || gens > (1u << 20) || n > (1ull << 40) || k < 1 ||
      k > (1u << 24) || lo < 8 || hi < lo || hi > (1u << 30) || sized > 1) {
    fprintf(stderr,
            "larson: need 1 <= t <= %d, 1 <= g <= 2^20, 1 <= k <= 2^24, 8 <= min <= max, "
            "z 0 or 1\n",
            kMaxChains);
    return Usage(argv[0]);
  }
  g.chains = (unsigned)t;
  g.generations = gens;
  g.ops = n;
  g.slots = k;
  g.min_size = (size_t)lo;
  g.max_size = (size_t)hi;
  BenchBuildSizeTable(g.sizes, g.min_size, g.max_size);
  if (sized) {
    g_new = (void* (*)(size_t))dlsym(RTLD_DEFAULT, "_Znwm");
    g_delete_sized = (void (*)(void*, size_t))dlsym(RTLD_DEFAULT, "_ZdlPvm");
    if (g_new == NULL || g_delete_sized == NULL) {
      fprintf(stderr, "larson: operator new or sized delete not found: %s\n", dlerror());
      return 1;
    }
  }

  g.c = BenchAllocZeroed("larson", 64, sizeof(Chain) * g.chains);
  for (unsigned i = 0; i < g.chains; i++) {
    g.c[i].id = i;
    g.c[i].rng.state = BenchMix(0x6c6172ULL + i);
    g.c[i].slots = calloc(g.slots, sizeof(Slot));
    if (g.c[i].slots == NULL) {
      fprintf(stderr, "larson: out of memory setting up\n");
      return 1;
    }
  }
  pthread_attr_init(&g.detached);
  pthread_attr_setdetachstate(&g.detached, PTHREAD_CREATE_DETACHED);
  pthread_mutex_init(&g.lock, NULL);
  pthread_cond_init(&g.done_cv, NULL);
  pthread_barrier_init(&g.start, NULL, g.chains + 1);
  for (unsigned i = 0; i < g.chains; i++) {
    pthread_t tid;
    BenchSpawn("larson", &tid, &g.detached, Worker, &g.c[i]);
  }
  pthread_barrier_wait(&g.start);
  pthread_mutex_lock(&g.lock);
  while (g.done < g.chains) pthread_cond_wait(&g.done_cv, &g.lock);
  pthread_mutex_unlock(&g.lock);
  double secs = BenchClockSeconds(&g.clock);

  // Verification (the mutex above orders every chain's final writes before
  // these reads).
  int ok = 1;
  uint64_t want = g.slots + g.generations * g.ops, alloc_sum = 0, free_sum = 0, bad = 0;
  for (unsigned i = 0; i < g.chains; i++) {
    Chain* c = &g.c[i];
    if (c->allocs != want || c->frees != want || c->generation != g.generations) {
      fprintf(stderr,
              "larson: chain %u: %llu allocations, %llu frees, %u generations; want %llu, "
              "%llu, %llu\n",
              i, (unsigned long long)c->allocs, (unsigned long long)c->frees, c->generation,
              (unsigned long long)want, (unsigned long long)want,
              (unsigned long long)g.generations);
      ok = 0;
    }
    alloc_sum += c->alloc_sum;
    free_sum += c->free_sum;
    bad += c->bad;
  }
  if (bad != 0) {
    fprintf(stderr, "larson: %llu objects with a wrong tag\n", (unsigned long long)bad);
    ok = 0;
  }
  if (alloc_sum != free_sum) {
    fprintf(stderr, "larson: checksum mismatch: allocated %llx, freed %llx\n",
            (unsigned long long)alloc_sum, (unsigned long long)free_sum);
    ok = 0;
  }

  uint64_t ops = (uint64_t)g.chains * g.generations * g.ops;
  for (unsigned i = 0; i < g.chains; i++) free(g.c[i].slots);
  free(g.c);
  printf(
      "bench=larson threads=%u generations=%llu n=%llu slots=%llu min=%zu max=%zu ops=%llu "
      "sized=%d seconds=%.6f ops_per_sec=%.0f threads_created=%llu checksum=%016llx",
      g.chains, (unsigned long long)g.generations, (unsigned long long)g.ops,
      (unsigned long long)g.slots, g.min_size, g.max_size, (unsigned long long)ops, (int)sized,
      secs, (double)ops / secs, (unsigned long long)(g.chains * g.generations),
      (unsigned long long)free_sum);
  // Which library's operator delete the -z run called.
  Dl_info info;
  if (g_delete_sized != NULL && dladdr((void*)g_delete_sized, &info) != 0 && info.dli_fname)
    printf(" delete_from=%s", info.dli_fname);
  else
    printf(" delete_from=%s", sized ? "unknown" : "none");
  BenchReportTail(ok);
  return ok ? 0 : 1;
}
