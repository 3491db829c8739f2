// bench/gcstress.c — an interpreter's managed heap under garbage-collector
// stress: object slots in 64 KiB heap pages, bodies from malloc, a
// mark-and-sweep collector that frees whatever died, threads taking turns
// under one interpreter lock.
//
// Written here for roost's suite from the way script interpreters with a
// global interpreter lock drive the C allocator (no interpreter's code is
// followed): the interpreter's objects live in fixed 40-byte slots of heap
// pages it takes with posix_memalign (64 KiB, aligned to their size) and
// gives back when a sweep leaves one empty; an object's variable part (a
// string's bytes, an array's elements) is a separate malloc'd body, grown
// with realloc as the program appends to it; a collection marks from the
// threads' roots and sweeps every page, freeing the bodies of dead objects
// in address order of their slots, whichever thread allocated them.
//
// T threads share the heap and take turns under a mutex (the interpreter
// lock), S operations per turn.  Each keeps R root slots.  An operation
// makes a new object (a slot, and a body of 0 to 64 KiB: 40 % none, 30 %
// 16..64 B, 20 % 65..512 B, 8 % 513 B..4 KiB, 2 % 4..64 KiB), points its
// first reference at the object of the root slot it replaces (half the
// time: chains of survivors) and its second at a random root of any thread
// (one time in eight), and stores it in a random root slot of its thread;
// one operation in twenty instead appends to a rooted object's body
// (realloc to 1.5 times its size, at most 64 KiB).  A collection runs when
// the free slots run out or when the bytes malloc'd since the last one pass
// M; a sweep that leaves fewer than a quarter of the slots free adds a heap
// page, and pages a sweep empties beyond two are freed.
//
// What it stresses: bulk frees of many small bodies in one burst (the sweep),
// half of them allocated by the other thread; aligned 64 KiB allocations
// that come and go with the heap's size; realloc growth of live bodies; a
// working set that shrinks and grows in waves.
//
// Verification: a body holds its object's tag (a hash of thread and
// operation) in its first and last 8 bytes; every body is checked when the
// sweep frees it or realloc moves it (the bytes kept must survive), and the
// tags of reachable objects' bodies are checked at each mark.  At the end
// every thread's roots are dropped and a last collection frees everything:
// bodies freed must equal bodies allocated, the sums of tags written and
// read must agree, and every heap page must be back; any mismatch prints a
// diagnostic and exits 1.
//
// Options (k/m suffixes: x1000, x1000000):
//   -t T  threads                          default 2 (1..64)
//   -n N  operations per thread            default 1000000
//   -r R  root slots per thread            default 20000
//   -s S  operations per turn              default 1000
//   -m M  malloc'd bytes between collections (at most)   default 16000000
//
// Output (stdout, one line of key=value pairs): parameters, ops (all
// threads), collections,
// peak heap pages, bodies allocated, seconds (wall time of the threads'
// run), ops_per_sec, the tag checksum, then the common tail (vmhwm_kib,
// malloc_from, verify).  The allocator under test is swapped with
// LD_PRELOAD.
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>

#include "bench_common.h"

enum {
  kMaxThreads = 64,
  kPageBytes = 64 * 1024,
  kSlotBytes = 40,
  kSlotsPerPage = kPageBytes / kSlotBytes,
  kMaxBody = 64 * 1024,
  kKeepEmptyPages = 2,
};

// One object slot (40 bytes).  A free slot has tag 0 and `next` in refs[0].
typedef struct Obj {
  uint64_t tag;         // 0: free slot
  uint32_t body_size;   // bytes of `body` (0: none)
  uint32_t marked;      // set by the mark phase
  unsigned char* body;  // malloc'd, or NULL
  struct Obj* refs[2];  // references to other objects (or NULL)
} Obj;
_Static_assert(sizeof(Obj) == kSlotBytes, "a slot is 40 bytes");

typedef struct Page {
  Obj slots[kSlotsPerPage];
} Page;

typedef struct Thread {
  _Alignas(64) unsigned id;
  uint64_t ops;  // operations this thread performs
  Obj** roots;   // R slots
  pthread_t tid;
} Thread;

// The heap and its statistics: touched only under the interpreter lock.
static struct {
  unsigned threads;
  uint64_t ops, root_slots, turn, malloc_limit;
  Thread* t;
  pthread_mutex_t lock;
  Page** pages;  // the heap pages
  size_t page_count, page_cap, pages_live, pages_peak;
  Obj* free_slots;
  size_t free_count;
  Obj** mark_stack;
  size_t mark_cap;
  uint64_t malloced_since_gc, collections;
  uint64_t bodies_allocated, bodies_freed, written_sum, read_sum, bad;
} g;

static void Fail(const char* what) {
  fprintf(stderr, "gcstress: %s\n", what);
  exit(1);
}

static void Bad(const Obj* o, const char* where) {
  if (++g.bad <= 3)
    fprintf(stderr, "gcstress: object %p (body %p, %u bytes): wrong tag %s\n", (const void*)o,
            (const void*)o->body, o->body_size, where);
}

// A body's first and last 8 bytes hold its object's tag (bodies of 16 bytes
// and up).
static void WriteBody(const Obj* o) {
  BenchStore64(o->body, o->tag);
  BenchStore64(o->body + o->body_size - 8, o->tag);
}

static int BodyIntact(const Obj* o) {
  return BenchLoad64(o->body) == o->tag && BenchLoad64(o->body + o->body_size - 8) == o->tag;
}

static void AddPage(void) {
  void* mem = NULL;
  if (posix_memalign(&mem, kPageBytes, kPageBytes) != 0)
    Fail("posix_memalign of a heap page failed");
  Page* page = mem;
  if (g.page_count == g.page_cap) {
    size_t cap = g.page_cap ? g.page_cap * 2 : 64;
    Page** pages = realloc(g.pages, cap * sizeof(Page*));
    if (pages == NULL) Fail("realloc of the page table failed");
    g.pages = pages;
    g.page_cap = cap;
  }
  g.pages[g.page_count++] = page;
  for (size_t i = 0; i < kSlotsPerPage; i++) {
    Obj* o = &page->slots[i];
    o->tag = 0;
    o->body = NULL;
    o->body_size = 0;
    o->marked = 0;
    o->refs[1] = NULL;
    o->refs[0] = g.free_slots;
    g.free_slots = o;
  }
  g.free_count += kSlotsPerPage;
  if (++g.pages_live > g.pages_peak) g.pages_peak = g.pages_live;
}

static void Mark(Obj* root) {
  if (root == NULL || root->marked) return;
  size_t depth = 0;
  root->marked = 1;
  g.mark_stack[depth++] = root;
  while (depth != 0) {
    Obj* o = g.mark_stack[--depth];
    if (o->body != NULL && !BodyIntact(o)) Bad(o, "at mark");
    for (int k = 0; k < 2; k++) {
      Obj* r = o->refs[k];
      if (r == NULL || r->marked) continue;
      r->marked = 1;
      g.mark_stack[depth++] = r;  // each object is pushed once: the stack holds every slot
    }
  }
}

static void FreeBody(Obj* o) {
  if (o->body == NULL) return;
  if (!BodyIntact(o)) Bad(o, "at sweep");
  g.read_sum += o->tag;
  g.bodies_freed++;
  free(o->body);
  o->body = NULL;
  o->body_size = 0;
}

// Mark from every thread's roots, then sweep every page.
static void Collect(void) {
  size_t slots = g.pages_live * kSlotsPerPage;
  if (slots > g.mark_cap) {
    free(g.mark_stack);
    g.mark_cap = slots * 2;
    g.mark_stack = malloc(g.mark_cap * sizeof(Obj*));
    if (g.mark_stack == NULL) Fail("malloc of the mark stack failed");
  }
  for (unsigned i = 0; i < g.threads; i++)
    for (uint64_t r = 0; r < g.root_slots; r++) Mark(g.t[i].roots[r]);
  g.free_slots = NULL;
  g.free_count = 0;
  size_t empty_kept = 0, kept = 0;
  for (size_t p = 0; p < g.page_count; p++) {
    Page* page = g.pages[p];
    // The page's free slots, listed here first (the first one listed is
    // the tail), join the heap's free list unless the page goes back.
    Obj *page_free = NULL, *page_tail = NULL;
    size_t page_free_count = 0;
    for (size_t i = 0; i < kSlotsPerPage; i++) {
      Obj* o = &page->slots[i];
      if (o->tag != 0 && o->marked) {
        o->marked = 0;
        continue;
      }
      if (o->tag != 0) {
        FreeBody(o);
        o->tag = 0;
        o->refs[1] = NULL;
      }
      o->refs[0] = page_free;
      if (page_free == NULL) page_tail = o;
      page_free = o;
      page_free_count++;
    }
    if (page_free_count == kSlotsPerPage && empty_kept++ >= kKeepEmptyPages) {
      free(page);
      g.pages_live--;
      continue;
    }
    g.pages[kept++] = page;
    if (page_free != NULL) {
      page_tail->refs[0] = g.free_slots;
      g.free_slots = page_free;
      g.free_count += page_free_count;
    }
  }
  g.page_count = kept;
  g.malloced_since_gc = 0;
  g.collections++;
}

static size_t PickBodySize(BenchRng* rng) {
  uint64_t r = BenchNext(rng), pick = r % 100, x = r >> 8;
  if (pick < 40) return 0;
  if (pick < 70) return 16 + x % 49;
  if (pick < 90) return 65 + x % 448;
  if (pick < 98) return 513 + x % 3584;
  return 4097 + x % (kMaxBody - 4096);
}

static Obj* NewObject(Thread* self, BenchRng* rng, uint64_t op) {
  if (g.free_slots == NULL || g.malloced_since_gc > g.malloc_limit) {
    Collect();
    if (g.free_count < g.pages_live * kSlotsPerPage / 4) AddPage();
  }
  Obj* o = g.free_slots;
  g.free_slots = o->refs[0];
  g.free_count--;
  o->tag = BenchMix(((uint64_t)self->id << 48) ^ op ^ 0x67637374ULL) | 1;
  o->refs[0] = o->refs[1] = NULL;
  o->marked = 0;
  size_t size = PickBodySize(rng);
  o->body_size = (uint32_t)size;
  o->body = NULL;
  if (size != 0) {
    o->body = malloc(size);
    if (o->body == NULL) Fail("malloc of a body failed");
    WriteBody(o);
    g.written_sum += o->tag;
    g.bodies_allocated++;
    g.malloced_since_gc += size;
  }
  return o;
}

// Appends to a rooted object's body: realloc to 1.5 times its size.
static void Grow(Obj* o) {
  if (o == NULL || o->body == NULL || o->body_size >= kMaxBody / 3 * 2) return;
  if (!BodyIntact(o)) Bad(o, "before realloc");
  size_t old = o->body_size, size = old + old / 2;
  unsigned char* body = realloc(o->body, size);
  if (body == NULL) Fail("realloc of a body failed");
  o->body = body;
  o->body_size = (uint32_t)size;
  // The old tail word must have survived the move; then the new tail is written.
  if (BenchLoad64(body) != o->tag || BenchLoad64(body + old - 8) != o->tag) Bad(o, "after realloc");
  BenchStore64(body + size - 8, o->tag);
  g.malloced_since_gc += size - old;
}

static void* Worker(void* arg) {
  Thread* self = arg;
  BenchRng rng = {BenchMix(((uint64_t)self->id << 32) ^ 0x726f6f74ULL)};
  uint64_t done = 0;
  while (done < self->ops) {
    pthread_mutex_lock(&g.lock);
    uint64_t end = done + g.turn < self->ops ? done + g.turn : self->ops;
    for (; done < end; done++) {
      uint64_t r = BenchNext(&rng);
      Obj** slot = &self->roots[r % g.root_slots];
      if ((r >> 40) % 20 == 0) {
        Grow(*slot);
        continue;
      }
      Obj* o = NewObject(self, &rng, done);
      if ((r >> 32) & 1) o->refs[0] = *slot;
      if ((r >> 33) % 8 == 0) {
        const Thread* other = &g.t[(r >> 36) % g.threads];
        o->refs[1] = other->roots[(r >> 44) % g.root_slots];
      }
      *slot = o;
    }
    pthread_mutex_unlock(&g.lock);
    sched_yield();  // the other threads' turn
  }
  return NULL;
}

static int Usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s [-t THREADS] [-n OPS] [-r ROOTS] [-s TURN] [-m MALLOC_LIMIT]\n"
          "defaults: -t 2 -n 1000000 -r 20000 -s 1000 -m 16000000 (k/m suffixes: x1000)\n",
          argv0);
  return 2;
}

int main(int argc, char** argv) {
  uint64_t t = 2, n = 1000000, r = 20000, s = 1000, m = 16000000;
  const BenchOption opts[] = {{"-t", &t}, {"-n", &n}, {"-r", &r}, {"-s", &s}, {"-m", &m}};
  if (BenchParseOptions(argc, argv, opts, sizeof opts / sizeof opts[0]) != 0) return Usage(argv[0]);
  if (t < 1 || t > kMaxThreads || n < 1 || n > (1ull << 40) || r < 1 || r > (1u << 24) || s < 1 ||
      m < 1) {
    fprintf(stderr, "gcstress: need 1 <= t <= %d, n >= 1, 1 <= r <= 2^24, s >= 1, m >= 1\n",
            kMaxThreads);
    return Usage(argv[0]);
  }
  g.threads = (unsigned)t;
  g.ops = n * g.threads;
  g.root_slots = r;
  g.turn = s;
  g.malloc_limit = m;
  pthread_mutex_init(&g.lock, NULL);
  g.t = BenchAllocZeroed("gcstress", 64, sizeof(Thread) * g.threads);
  for (unsigned i = 0; i < g.threads; i++) {
    g.t[i].id = i;
    g.t[i].ops = n;
    g.t[i].roots = BenchAllocZeroed("gcstress", 64, g.root_slots * sizeof(Obj*));
  }

  double start = BenchNow();
  AddPage();
  for (unsigned i = 0; i < g.threads; i++)
    BenchSpawn("gcstress", &g.t[i].tid, NULL, Worker, &g.t[i]);
  for (unsigned i = 0; i < g.threads; i++) pthread_join(g.t[i].tid, NULL);
  // The program ends: its roots go, and a last collection frees everything.
  for (unsigned i = 0; i < g.threads; i++) memset(g.t[i].roots, 0, g.root_slots * sizeof(Obj*));
  Collect();
  double secs = BenchNow() - start;

  int ok = 1;
  if (g.bad != 0) {
    fprintf(stderr, "gcstress: %llu bodies with a wrong tag\n", (unsigned long long)g.bad);
    ok = 0;
  }
  if (g.bodies_freed != g.bodies_allocated) {
    fprintf(stderr, "gcstress: %llu bodies allocated, %llu freed\n",
            (unsigned long long)g.bodies_allocated, (unsigned long long)g.bodies_freed);
    ok = 0;
  }
  if (g.written_sum != g.read_sum) {
    fprintf(stderr, "gcstress: checksum mismatch: written %llx, read %llx\n",
            (unsigned long long)g.written_sum, (unsigned long long)g.read_sum);
    ok = 0;
  }
  if (g.pages_live > kKeepEmptyPages) {
    fprintf(stderr, "gcstress: %zu heap pages left after the last collection\n", g.pages_live);
    ok = 0;
  }
  for (size_t p = 0; p < g.page_count; p++) free(g.pages[p]);
  free(g.pages);
  free(g.mark_stack);
  for (unsigned i = 0; i < g.threads; i++) free(g.t[i].roots);
  free(g.t);

  printf(
      "bench=gcstress threads=%u n=%llu ops=%llu roots=%llu turn=%llu malloc_limit=%llu "
      "collections=%llu "
      "pages_peak=%zu bodies=%llu seconds=%.6f ops_per_sec=%.0f checksum=%016llx",
      g.threads, (unsigned long long)(g.ops / g.threads), (unsigned long long)g.ops,
      (unsigned long long)g.root_slots, (unsigned long long)g.turn,
      (unsigned long long)g.malloc_limit, (unsigned long long)g.collections, g.pages_peak,
      (unsigned long long)g.bodies_allocated, secs, (double)g.ops / secs,
      (unsigned long long)g.read_sum);
  BenchReportTail(ok);
  return ok ? 0 : 1;
}
