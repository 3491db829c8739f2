// bench/sharedcache.c — a shared cache: N threads look up and insert into one
// hash map with LRU eviction, bounded by a budget in bytes.
//
// Owns: the cache (shards, their hash tables, LRU lists and locks), the
// workers' request streams and the checks.  Must never: link anything but
// libc (and libdl), allocate inside the measured loop except the cache's own
// entries and values, or call the allocator with a shard's lock held (as the
// caches it stands for: values are made before the lock is taken and freed
// after it is let go).
//
// The pattern of a block cache (RocksDB's LRUCache) or of a memcached-style
// server, written here from that description: the cache is cut into S shards
// (a key's hash picks one), each with its own mutex, hash table, LRU list and
// a 1/S share of the budget B; with S = 1 one lock guards everything.  Each
// thread makes N requests for keys drawn from a skewed distribution (key =
// K * u^3 for u uniform in [0, 1): key k is asked with a density falling as
// k^(-2/3), so a few keys are hot and most are cold).  A request is a lookup;
// on a hit the thread reads the whole value under the shard's lock and
// checks its checksum; on a miss it mallocs a value (1 to 4 KiB, the size a
// function of the key, so every allocator sees the same sizes) and an entry
// (the handle, holding the key, the size and the checksum, as a cache's
// handle does), writes the value, and inserts both; the shard then evicts
// least recently used entries, most often inserted by another thread, until
// its charge (value bytes plus handle bytes) fits its share, and the thread
// frees them once it has let the lock go.  When another thread inserted the
// key meanwhile, the older entry is replaced and freed the same way.
//
// Verification: a hit recomputes the value's checksum (every 8-byte word)
// and checks it against its handle; an evicted or replaced value's header
// (tag, size, key) is checked before it is freed; every inserted value is
// freed exactly once (evicted, replaced, or at the end), and the sum of the
// tags freed equals the sum of the tags inserted. Any mismatch: a diagnostic,
// exit 1.
//
// Output (one line of key=value pairs, bench_common.h): the parameters,
// seconds (the workers' clock), ops_per_sec (requests per second, all threads
// together), hits, misses, hit_rate, evictions, replaced, remote_frees (values
// and handles a worker freed that another worker made) and remote_share (of
// the workers' frees), left (entries the main thread freed at the end),
// budget_kib (the suite shows peak RSS against it), vmhwm_kib, malloc_from
// and verify=ok.  The allocator under test is swapped with LD_PRELOAD.
#define _GNU_SOURCE
#include <pthread.h>

#include "bench_common.h"

enum { kMaxThreads = 1024, kMaxShards = 4096 };

// An entry: the cache's handle for one value.  Made by the thread that
// missed, freed by whichever thread evicts or replaces it.
typedef struct Handle {
  struct Handle* chain;  // the hash bucket's next
  struct Handle* prev;   // LRU list: towards the most recently used
  struct Handle* next;   // towards the least recently used
  uint64_t key;
  uint64_t tag;  // the value's, also in its header
  uint64_t sum;  // checksum of the value's words
  unsigned char* value;
  uint32_t size;   // the value's bytes
  uint32_t maker;  // the thread that made it
} Handle;

typedef struct Shard {
  _Alignas(64) pthread_mutex_t lock;
  Handle** buckets;
  uint64_t mask;            // buckets - 1
  Handle lru;               // the LRU list's sentinel (see Unlink)
  uint64_t charge, budget;  // bytes charged, and the shard's share of the budget
} Shard;

typedef struct Worker {
  _Alignas(64) uint64_t hits, misses, evictions, replaced, remote_frees, bad;
  uint64_t inserted_tags, freed_tags, inserted, freed;
  pthread_t tid;
} Worker;

static struct {
  unsigned threads, shards;
  uint64_t ops, budget, keys;
  size_t min_size, max_size;
  Shard* shard;
  Worker* w;
  pthread_barrier_t start;
  BenchClock clock;
} g;

static const uint64_t kSalt = 0x7368617265646361ULL;  // "sharedca"

static uint64_t KeyHash(uint64_t key) { return BenchMix(key ^ kSalt); }

static size_t ValueSize(uint64_t key) {
  uint64_t span = (uint64_t)(g.max_size - g.min_size) + 1;
  size_t size = g.min_size + (size_t)(BenchMix(key * 0x9e3779b97f4a7c15ULL + 1) % span);
  return size & ~(size_t)7;  // whole words
}

// The charge of an entry against its shard's budget.
static uint64_t Charge(const Handle* h) { return h->size + sizeof(Handle); }

// A skewed key: K * u^3.
static uint64_t NextKey(BenchRng* r) {
  double u = (double)(BenchNext(r) >> 11) * (1.0 / 9007199254740992.0);
  uint64_t k = (uint64_t)((double)g.keys * u * u * u);
  return k < g.keys ? k : g.keys - 1;
}

// Writes the value: its header (tag, size, key), then word i = tag * (i + 1)
// + key; returns the sum of all its words.
static uint64_t FillValue(unsigned char* v, size_t size, uint64_t tag, uint64_t key) {
  BenchStore64(v, tag);
  BenchStore64(v + 8, size);
  BenchStore64(v + 16, key);
  uint64_t sum = tag + size + key;
  for (size_t i = 3; i < size / 8; i++) {
    uint64_t w = tag * (i + 1) + key;
    BenchStore64(v + 8 * i, w);
    sum += w;
  }
  return sum;
}

static uint64_t SumValue(const unsigned char* v, size_t size) {
  uint64_t sum = 0;
  for (size_t i = 0; i < size / 8; i++) sum += BenchLoad64(v + 8 * i);
  return sum;
}

// LRU list: lru.next is the most recently used, lru.prev the least.
static void Unlink(Handle* h) {
  h->prev->next = h->next;
  h->next->prev = h->prev;
}

static void PushFront(Shard* s, Handle* h) {
  h->prev = &s->lru;
  h->next = s->lru.next;
  s->lru.next->prev = h;
  s->lru.next = h;
}

// Removes h from its bucket (it is there).
static void Unchain(Shard* s, Handle* h, uint64_t hash) {
  Handle** pp = &s->buckets[(hash >> 32) & s->mask];
  while (*pp != h) pp = &(*pp)->chain;
  *pp = h->chain;
}

// Checks a value leaving the cache and frees it with its handle.
static void Retire(Worker* me, unsigned self, Handle* h) {
  const unsigned char* v = h->value;
  if (BenchLoad64(v) != h->tag || BenchLoad64(v + 8) != h->size || BenchLoad64(v + 16) != h->key) {
    if (++me->bad <= 3)
      fprintf(stderr, "sharedcache: evicted key %llu (thread %u's): header %llx/%llu/%llu\n",
              (unsigned long long)h->key, h->maker, (unsigned long long)BenchLoad64(v),
              (unsigned long long)BenchLoad64(v + 8), (unsigned long long)BenchLoad64(v + 16));
  }
  me->freed_tags += h->tag;
  me->freed++;
  if (h->maker != self) me->remote_frees += 2;
  free(h->value);
  free(h);
}

static void* Work(void* arg) {
  Worker* me = arg;
  unsigned self = (unsigned)(me - g.w);
  BenchRng rng = {0x6361636865ULL + (uint64_t)self * 0x1000193ULL};
  uint64_t seq = 0;
  Handle* doomed = NULL;  // evicted under the lock, freed after it (linked by chain)
  pthread_barrier_wait(&g.start);
  BenchClockStart(&g.clock);
  for (uint64_t op = 0; op < g.ops; op++) {
    uint64_t key = NextKey(&rng);
    uint64_t hash = KeyHash(key);
    Shard* s = &g.shard[hash % g.shards];
    pthread_mutex_lock(&s->lock);
    Handle* h = s->buckets[(hash >> 32) & s->mask];
    while (h != NULL && h->key != key) h = h->chain;
    if (h != NULL) {
      Unlink(h);
      PushFront(s, h);
      uint64_t sum = SumValue(h->value, h->size);
      if (sum != h->sum && ++me->bad <= 3)
        fprintf(stderr, "sharedcache: key %llu (thread %u's): checksum %llx, want %llx\n",
                (unsigned long long)key, h->maker, (unsigned long long)sum,
                (unsigned long long)h->sum);
      pthread_mutex_unlock(&s->lock);
      me->hits++;
      continue;
    }
    pthread_mutex_unlock(&s->lock);
    // A miss: make the value outside the lock.
    me->misses++;
    size_t size = ValueSize(key);
    Handle* n = malloc(sizeof(Handle));
    unsigned char* v = malloc(size);
    if (n == NULL || v == NULL) {
      fprintf(stderr, "sharedcache: malloc(%zu) failed\n", n == NULL ? sizeof(Handle) : size);
      exit(1);
    }
    uint64_t tag = BenchMix(kSalt ^ ((uint64_t)self << 44) ^ seq++) | 1;
    n->key = key;
    n->tag = tag;
    n->size = (uint32_t)size;
    n->maker = self;
    n->value = v;
    n->sum = FillValue(v, size, tag, key);
    me->inserted_tags += tag;
    me->inserted++;
    pthread_mutex_lock(&s->lock);
    Handle** bucket = &s->buckets[(hash >> 32) & s->mask];
    for (h = *bucket; h != NULL && h->key != key; h = h->chain) {
    }
    if (h != NULL) {  // another thread inserted it meanwhile: ours replaces it
      Unchain(s, h, hash);
      Unlink(h);
      s->charge -= Charge(h);
      h->chain = doomed;
      doomed = h;
      me->replaced++;
    }
    n->chain = *bucket;
    *bucket = n;
    PushFront(s, n);
    s->charge += Charge(n);
    while (s->charge > s->budget && s->lru.prev != n) {
      Handle* old = s->lru.prev;
      Unlink(old);
      Unchain(s, old, KeyHash(old->key));
      s->charge -= Charge(old);
      old->chain = doomed;
      doomed = old;
      me->evictions++;
    }
    pthread_mutex_unlock(&s->lock);
    while (doomed != NULL) {
      Handle* next = doomed->chain;
      Retire(me, self, doomed);
      doomed = next;
    }
  }
  BenchClockStop(&g.clock);
  return NULL;
}

static int Usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s [-t threads (4)] [-n requests per thread (1000000)] [-b budget bytes "
          "(64m)]\n"
          "          [-h shards (16; 1: one lock)] [-k keys (131072)] [-s min (1024)] [-S max "
          "(4096)]\n",
          argv0);
  return 2;
}

int main(int argc, char** argv) {
  uint64_t t = 4, n = 1000000, budget = 64ull << 20, shards = 16, keys = 131072, lo = 1024,
           hi = 4096;
  BenchOption opts[] = {{"-t", &t},    {"-n", &n},  {"-b", &budget}, {"-h", &shards},
                        {"-k", &keys}, {"-s", &lo}, {"-S", &hi}};
  if (BenchParseOptions(argc, argv, opts, sizeof opts / sizeof opts[0]) != 0 || t < 1 ||
      t > kMaxThreads || n < 1 || shards < 1 || shards > kMaxShards || keys < 1 || lo < 24 ||
      hi < lo || hi > (1u << 30) || budget < shards * (hi + sizeof(Handle))) {
    fprintf(stderr,
            "sharedcache: need 1 <= threads <= %d, requests >= 1, 1 <= shards <= %d, keys >= 1, "
            "24 <= min <= max <= 2^30, budget >= shards x (max + %zu)\n",
            kMaxThreads, kMaxShards, sizeof(Handle));
    return Usage(argv[0]);
  }
  g.threads = (unsigned)t;
  g.ops = n;
  g.budget = budget;
  g.shards = (unsigned)shards;
  g.keys = keys;
  g.min_size = (size_t)lo;
  g.max_size = (size_t)hi;

  // Set-up, before the clock: the shards and their hash tables (a bucket per
  // smallest entry the share can hold, rounded up to a power of two).
  g.shard = BenchAllocZeroed("sharedcache", 64, sizeof(Shard) * g.shards);
  uint64_t share = g.budget / g.shards;
  uint64_t nb = 1;
  while (nb < share / (lo + sizeof(Handle))) nb <<= 1;
  for (unsigned i = 0; i < g.shards; i++) {
    Shard* s = &g.shard[i];
    pthread_mutex_init(&s->lock, NULL);
    s->buckets = BenchAllocZeroed("sharedcache", 64, nb * sizeof(Handle*));
    s->mask = nb - 1;
    s->lru.next = s->lru.prev = &s->lru;
    s->budget = share;
  }
  g.w = BenchAllocZeroed("sharedcache", 64, sizeof(Worker) * g.threads);
  pthread_barrier_init(&g.start, NULL, g.threads + 1);
  for (unsigned i = 0; i < g.threads; i++)
    BenchSpawn("sharedcache", &g.w[i].tid, NULL, Work, &g.w[i]);
  pthread_barrier_wait(&g.start);
  for (unsigned i = 0; i < g.threads; i++) pthread_join(g.w[i].tid, NULL);
  double secs = BenchClockSeconds(&g.clock);

  // Drain what the cache holds (the main thread frees it: counted with
  // worker 0's frees, not as the workers' remote frees).
  Worker drain = {0};
  uint64_t left = 0;
  for (unsigned i = 0; i < g.shards; i++) {
    Shard* s = &g.shard[i];
    for (Handle* h = s->lru.next; h != &s->lru;) {
      Handle* next = h->next;
      s->charge -= Charge(h);
      Retire(&drain, g.threads, h);
      left++;
      h = next;
    }
    if (s->charge != 0) {
      fprintf(stderr, "sharedcache: shard %u's charge is %llu once empty\n", i,
              (unsigned long long)s->charge);
      drain.bad++;
    }
  }
  uint64_t hits = 0, misses = 0, evictions = 0, replaced = 0, remote = 0, bad = drain.bad;
  uint64_t in_tags = 0, out_tags = drain.freed_tags, inserted = 0, freed = drain.freed;
  for (unsigned i = 0; i < g.threads; i++) {
    Worker* w = &g.w[i];
    hits += w->hits;
    misses += w->misses;
    evictions += w->evictions;
    replaced += w->replaced;
    remote += w->remote_frees;
    bad += w->bad;
    in_tags += w->inserted_tags;
    out_tags += w->freed_tags;
    inserted += w->inserted;
    freed += w->freed;
  }
  int ok = bad == 0;
  if (hits + misses != g.ops * g.threads || inserted != misses) {
    fprintf(stderr, "sharedcache: %llu hits + %llu misses (%llu inserted), %llu requests\n",
            (unsigned long long)hits, (unsigned long long)misses, (unsigned long long)inserted,
            (unsigned long long)(g.ops * g.threads));
    ok = 0;
  }
  if (freed != inserted || in_tags != out_tags) {
    fprintf(stderr, "sharedcache: %llu values inserted, %llu freed; tags %llx in, %llx out\n",
            (unsigned long long)inserted, (unsigned long long)freed, (unsigned long long)in_tags,
            (unsigned long long)out_tags);
    ok = 0;
  }
  if (bad != 0) {
    fprintf(stderr, "sharedcache: %llu damaged values\n", (unsigned long long)bad);
    ok = 0;
  }
  for (unsigned i = 0; i < g.shards; i++) {
    free(g.shard[i].buckets);
    pthread_mutex_destroy(&g.shard[i].lock);
  }
  free(g.shard);
  free(g.w);
  uint64_t ops = g.ops * g.threads;
  // Both objects of an entry count as frees: handles and values.
  printf(
      "bench=sharedcache threads=%u requests=%llu budget=%llu shards=%u keys=%llu min=%zu "
      "max=%zu seconds=%.6f ops_per_sec=%.0f hits=%llu misses=%llu hit_rate=%.3f "
      "evictions=%llu replaced=%llu remote_frees=%llu remote_share=%.3f left=%llu "
      "budget_kib=%llu",
      g.threads, (unsigned long long)g.ops, (unsigned long long)g.budget, g.shards,
      (unsigned long long)g.keys, g.min_size, g.max_size, secs, (double)ops / secs,
      (unsigned long long)hits, (unsigned long long)misses, (double)hits / (double)ops,
      (unsigned long long)evictions, (unsigned long long)replaced, (unsigned long long)remote,
      freed > left ? (double)remote / (2.0 * (double)(freed - left)) : 0.0,
      (unsigned long long)left, (unsigned long long)(g.budget / 1024));
  BenchReportTail(ok);
  return ok ? 0 : 1;
}
