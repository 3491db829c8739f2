// bench/prodcons.c — producer-consumer malloc benchmark (one thread allocates,
// another frees).
//
// The workload of the snmalloc paper's §3.1 "Producer/Consumer" micro-benchmark
// (after SuperMalloc's malloc-test and xmalloc), written here from that
// description. P producer threads allocate objects and pass them, in batches of
// B pointers, through one global bounded queue to C consumer threads, which
// check and free them. Every object is therefore freed by a thread other than
// the one that allocated it: thread-caching allocators see their producers'
// caches run dry and their consumers' caches overflow; a message-passing
// allocator sends every object home.
//
// Queue and back-pressure: a fixed pool of Q batch buffers (allocated before
// the clock starts) circulates between an "empty" and a "full" queue, both
// under one mutex. A producer takes an empty buffer (waiting when there is
// none), fills it with B fresh objects and appends it to the full queue; a
// consumer takes the oldest full buffer, frees its objects and gives the
// buffer back. So at most Q * B objects are in flight, whatever the relative
// speed of the two sides, and peak memory stays comparable between allocators.
// Waiting is spin-then-block: a few sched_yield() rounds, then a condition
// variable; a waker signals only when someone sleeps.
//
// Verification: every object carries three words written by its producer: a
// tag at offset 0 (a hash of producer id and sequence number), the size at
// offset 8, and the tag again in the last 8 bytes of the object (when it is at
// least 24 bytes long, so that the three do not overlap). The consumer
// recomputes the tag from the batch header (producer, first sequence number)
// and checks all three before freeing. At the end, objects received per
// producer must equal -n, and the sum of received tags must equal the sum of
// produced tags. Any mismatch prints a diagnostic and exits 1.
//
// Sizes come from a 4096-entry table built before the clock starts: uniform in
// [-s, -S] from splitmix64 with a fixed seed, or all equal when -s == -S. Each
// producer starts at a different offset in the table.
//
// Output (stdout, one line of key=value pairs): parameters, seconds (from the
// first thread's start after the start barrier to the last thread's finish, by
// the threads' own clocks), objects_per_sec (objects allocated and freed per
// second, all threads together), the peak number of full batches waiting, the
// shared object that provides malloc, and verify=ok. The allocator under test
// is swapped with LD_PRELOAD.
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>

#include "bench_common.h"

enum { kSpinYields = 64 };

typedef struct Batch {
  uint32_t producer;
  uint32_t count;
  uint64_t first_seq;
  void* objs[];  // `count` objects, sequence numbers first_seq, first_seq + 1, ...
} Batch;

typedef struct Queue {  // FIFO ring of Batch pointers; capacity = pool size
  Batch** slot;
  size_t head, len, cap;
} Queue;

static struct {
  unsigned producers, consumers;
  uint64_t per_producer;
  size_t min_size, max_size, batch;
  size_t pool;
  BenchTagging tagging;
  size_t sizes[kBenchSizeTable];

  pthread_mutex_t lock;
  pthread_cond_t have_empty, have_full;
  unsigned sleeping_producers, sleeping_consumers;
  unsigned producers_done;
  Queue empty, full;
  size_t peak_full;

  pthread_barrier_t start;
  BenchClock clock;
  uint64_t produced_sum[256];
} g;

typedef struct ConsumerResult {
  uint64_t tag_sum;
  uint64_t bad;
  uint64_t per_producer[256];
} ConsumerResult;

// A producer's objects are one stream of tagged objects (bench_common.h).
static uint64_t Stream(uint32_t producer) { return (uint64_t)producer << 48; }

static void Describe(char* buf, size_t len, uint64_t stream, uint64_t seq) {
  snprintf(buf, len, "producer %u seq %llu", (unsigned)(stream >> 48), (unsigned long long)seq);
}

static void QueuePush(Queue* q, Batch* b) {
  q->slot[(q->head + q->len) % q->cap] = b;
  q->len++;
}

static Batch* QueuePop(Queue* q) {
  Batch* b = q->slot[q->head];
  q->head = (q->head + 1) % q->cap;
  q->len--;
  return b;
}

// Takes a buffer from `q`, spinning with sched_yield a little and then sleeping
// on `cv`. Returns NULL only for consumers once every producer is done and the
// full queue is drained.
static Batch* Take(Queue* q, pthread_cond_t* cv, unsigned* sleepers, int consumer) {
  for (int spin = 0;; spin++) {
    pthread_mutex_lock(&g.lock);
    if (q->len > 0) {
      Batch* b = QueuePop(q);
      pthread_mutex_unlock(&g.lock);
      return b;
    }
    if (consumer && g.producers_done == g.producers) {
      pthread_mutex_unlock(&g.lock);
      return NULL;
    }
    if (spin >= kSpinYields) {
      (*sleepers)++;
      while (q->len == 0 && !(consumer && g.producers_done == g.producers)) {
        pthread_cond_wait(cv, &g.lock);
      }
      (*sleepers)--;
      pthread_mutex_unlock(&g.lock);
      continue;
    }
    pthread_mutex_unlock(&g.lock);
    sched_yield();
  }
}

static void* Producer(void* arg) {
  uint32_t id = (uint32_t)(uintptr_t)arg;
  size_t idx = (size_t)id * 997;  // a different walk through the size table
  uint64_t sum = 0;
  pthread_barrier_wait(&g.start);
  BenchClockStart(&g.clock);
  for (uint64_t seq = 0; seq < g.per_producer;) {
    Batch* b = Take(&g.empty, &g.have_empty, &g.sleeping_producers, 0);
    uint64_t n = g.per_producer - seq < g.batch ? g.per_producer - seq : g.batch;
    b->producer = id;
    b->first_seq = seq;
    b->count = (uint32_t)n;
    sum += BenchMakeTagged(&g.tagging, b->objs, n, &idx, Stream(id), seq);
    seq += n;
    pthread_mutex_lock(&g.lock);
    QueuePush(&g.full, b);
    if (g.full.len > g.peak_full) g.peak_full = g.full.len;
    if (g.sleeping_consumers) pthread_cond_signal(&g.have_full);
    pthread_mutex_unlock(&g.lock);
  }
  g.produced_sum[id] = sum;
  pthread_mutex_lock(&g.lock);
  if (++g.producers_done == g.producers) pthread_cond_broadcast(&g.have_full);
  pthread_mutex_unlock(&g.lock);
  BenchClockStop(&g.clock);
  return NULL;
}

static void* Consumer(void* arg) {
  ConsumerResult* r = arg;
  pthread_barrier_wait(&g.start);
  BenchClockStart(&g.clock);
  for (;;) {
    Batch* b = Take(&g.full, &g.have_full, &g.sleeping_consumers, 1);
    if (b == NULL) break;
    r->per_producer[b->producer] += BenchFreeTagged(
        &g.tagging, b->objs, b->count, Stream(b->producer), b->first_seq, &r->tag_sum, &r->bad);
    pthread_mutex_lock(&g.lock);
    QueuePush(&g.empty, b);
    if (g.sleeping_producers) pthread_cond_signal(&g.have_empty);
    pthread_mutex_unlock(&g.lock);
  }
  BenchClockStop(&g.clock);
  return NULL;
}

static int Usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s [-p PRODUCERS] [-c CONSUMERS] [-n OBJECTS_PER_PRODUCER] [-s MIN] [-S MAX]\n"
          "          [-b BATCH] [-q BATCHES_IN_FLIGHT]\n"
          "defaults: -p 1 -c 1 -n 2000000 -s 16 -S 2048 -b 256 -q 16 (k/m suffixes: x1000)\n",
          argv0);
  return 2;
}

int main(int argc, char** argv) {
  uint64_t p = 1, c = 1, n = 2000000, lo = 16, hi = 2048, batch = 256, pool = 16;
  const BenchOption opts[] = {{"-p", &p},  {"-c", &c},     {"-n", &n},   {"-s", &lo},
                              {"-S", &hi}, {"-b", &batch}, {"-q", &pool}};
  if (BenchParseOptions(argc, argv, opts, sizeof opts / sizeof opts[0]) != 0) return Usage(argv[0]);
  if (p < 1 || p > 256 || c < 1 || c > 1024 || n < 1 || lo < 16 || hi < lo || hi > (1u << 30) ||
      batch < 1 || batch > (1u << 24) || pool < 1 || pool > (1u << 20)) {
    fprintf(stderr,
            "prodcons: need 1 <= p <= 256, 1 <= c <= 1024, n >= 1, 16 <= min <= max, "
            "1 <= batch, 1 <= q\n");
    return Usage(argv[0]);
  }
  g.producers = (unsigned)p;
  g.consumers = (unsigned)c;
  g.per_producer = n;
  g.min_size = (size_t)lo;
  g.max_size = (size_t)hi;
  g.batch = (size_t)batch;
  // Every producer needs a buffer to fill, so the pool is at least P + 1.
  g.pool = (size_t)pool < g.producers + 1 ? g.producers + 1 : (size_t)pool;
  BenchBuildSizeTable(g.sizes, g.min_size, g.max_size);
  g.tagging =
      (BenchTagging){"prodcons", 0x70726f64636f6e73ULL, g.sizes, g.min_size, g.max_size, Describe};

  pthread_mutex_init(&g.lock, NULL);
  pthread_cond_init(&g.have_empty, NULL);
  pthread_cond_init(&g.have_full, NULL);
  g.empty.slot = calloc(g.pool, sizeof(Batch*));
  g.full.slot = calloc(g.pool, sizeof(Batch*));
  g.empty.cap = g.full.cap = g.pool;
  ConsumerResult* results = calloc(g.consumers, sizeof(ConsumerResult));
  pthread_t* threads = calloc(g.producers + g.consumers, sizeof(pthread_t));
  if (g.empty.slot == NULL || g.full.slot == NULL || results == NULL || threads == NULL) {
    fprintf(stderr, "prodcons: out of memory setting up\n");
    return 1;
  }
  for (size_t i = 0; i < g.pool; i++) {
    Batch* b = malloc(sizeof(Batch) + g.batch * sizeof(void*));
    if (b == NULL) {
      fprintf(stderr, "prodcons: out of memory setting up\n");
      return 1;
    }
    QueuePush(&g.empty, b);
  }
  pthread_barrier_init(&g.start, NULL, g.producers + g.consumers + 1);

  for (unsigned i = 0; i < g.consumers; i++) {
    BenchSpawn("prodcons", &threads[g.producers + i], NULL, Consumer, &results[i]);
  }
  for (unsigned i = 0; i < g.producers; i++) {
    BenchSpawn("prodcons", &threads[i], NULL, Producer, (void*)(uintptr_t)i);
  }
  pthread_barrier_wait(&g.start);
  for (unsigned i = 0; i < g.producers + g.consumers; i++) pthread_join(threads[i], NULL);
  double secs = BenchClockSeconds(&g.clock);

  // Verification.
  int ok = 1;
  uint64_t produced = 0, received = 0, bad = 0;
  for (unsigned i = 0; i < g.producers; i++) produced += g.produced_sum[i];
  for (unsigned j = 0; j < g.consumers; j++) {
    received += results[j].tag_sum;
    bad += results[j].bad;
  }
  for (unsigned i = 0; i < g.producers; i++) {
    uint64_t got = 0;
    for (unsigned j = 0; j < g.consumers; j++) got += results[j].per_producer[i];
    if (got != n) {
      fprintf(stderr, "prodcons: producer %u: %llu objects received, %llu sent\n", i,
              (unsigned long long)got, (unsigned long long)n);
      ok = 0;
    }
  }
  if (bad != 0) {
    fprintf(stderr, "prodcons: %llu objects with a wrong tag or size\n", (unsigned long long)bad);
    ok = 0;
  }
  if (produced != received) {
    fprintf(stderr, "prodcons: checksum mismatch: produced %llx, received %llx\n",
            (unsigned long long)produced, (unsigned long long)received);
    ok = 0;
  }

  uint64_t total = (uint64_t)g.producers * n;
  for (size_t i = 0; i < g.pool; i++) free(QueuePop(&g.empty));
  printf(
      "bench=prodcons producers=%u consumers=%u n=%llu min=%zu max=%zu batch=%zu q=%zu "
      "objects=%llu seconds=%.6f objects_per_sec=%.0f peak_full_batches=%zu checksum=%016llx",
      g.producers, g.consumers, (unsigned long long)n, g.min_size, g.max_size, g.batch, g.pool,
      (unsigned long long)total, secs, (double)total / secs, g.peak_full,
      (unsigned long long)received);
  BenchReportTail(ok);
  return ok ? 0 : 1;
}
