// bench/xmalloc.c — xmalloc-test style producer-consumer benchmark without
// back-pressure (producers allocate, consumers free, nothing slows the
// producers down).
//
// The workload of xmalloc-test (as the BatchIt paper, ISMM '24, runs it in
// mimalloc-bench as xmalloc-testN, and as the snmalloc paper's §3.1
// describes its producer/consumer benchmark), written here from those
// descriptions, with fixed work instead of a fixed duration. P producer
// threads each allocate N objects of random size in [s, S], write a tag into
// each, and push them in blocks of b onto ONE shared queue; C consumer threads
// pop blocks, check and free every object. There is no limit on the blocks in
// flight: when the producers outrun the consumers, the queue, and the memory
// it holds, grows. So the peak RSS depends on the allocator's relative speed
// on the two sides as much as on how it manages memory (the snmalloc paper
// explains why RSS is hard to compare on this benchmark, and BatchIt reports
// a faster allocator using more memory here); bench/msgpass.c and
// bench/prodcons.c are the variants with back-pressure. The peak number of
// blocks queued is reported next to the RSS so the two can be read together.
//
// What it stresses: every object is freed by a thread that did not allocate
// it, from one contended queue: producers' caches run dry and consumers'
// caches overflow, and a message-passing allocator sends every object home.
//
// Blocks: a block is a header (producer id, first sequence number, count,
// queue link) and an array of b object pointers, allocated with malloc by the
// producer when it starts the block and freed by the consumer when it has
// freed the block's objects. Blocks thus travel the same way as the objects,
// one for every b of them (1/64 more allocations with the default); they are
// not counted in objects_per_sec. The snmalloc paper's §3.1 describes its
// benchmark the same way: producers store the pointers to 4096 objects in a
// message pushed onto a global lock-protected queue. Linking the objects
// through themselves instead would need 16 bytes of every object for the link
// and tag, and leave no room to check a 16-byte object's tail.
//
// The queue is a FIFO list of blocks under one mutex (one lock round trip per
// b objects on each side). A consumer that finds it empty spins with
// sched_yield() 64 times and then sleeps on a condition variable, signalled
// by producers only when someone sleeps; producers never wait except for the
// mutex. Threads may outnumber cores many times over.
//
// Options (k/m suffixes: x1000, x1000000):
//   -p P  producers (1..1024, default 2)        -c C  consumers (1..1024, default 2)
//   -n N  objects per producer (default 1000000)
//   -s MIN, -S MAX  object sizes in bytes (16 <= MIN <= MAX, default 16, 2048)
//   -b B  objects per block (1..2^20, default 64)
// Sizes come from a 4096-entry table built before the clock starts (uniform in
// [MIN, MAX] from splitmix64 with a fixed seed, all equal when MIN == MAX);
// each producer starts at a different offset in it.
//
// Verification: every object carries a tag (a hash of producer id and
// sequence number) at offset 0, its size at offset 8 and the tag again in its
// last 8 bytes (objects of at least 24 bytes). The consumer recomputes the tag
// from the block header and checks all three before freeing. At the end,
// objects received from each producer must equal N, blocks received must
// equal blocks sent, and the sum of received tags must equal the sum of sent
// tags. Any mismatch prints a diagnostic and exits 1.
//
// Output (stdout, one line of key=value pairs): parameters, objects and blocks,
// seconds (from the first thread's start after the start barrier to the last
// thread's finish, by the threads' own clocks), objects_per_sec (objects
// allocated and freed per second, all threads together), the peak number of
// blocks queued, the checksum, then peak RSS, the shared object that provides
// malloc, and verify=ok. The allocator under test is swapped with LD_PRELOAD.
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "bench_common.h"

enum { kSpinYields = 64, kMaxThreads = 1024 };

typedef struct Block {
  struct Block* next;  // queue link
  uint32_t producer, count;
  uint64_t first_seq;
  void* objs[];  // `count` objects, sequence numbers first_seq, first_seq + 1, ...
} Block;

typedef struct Producer {
  _Alignas(64) uint64_t tag_sum, blocks;
  pthread_t tid;
} Producer;

typedef struct Consumer {
  _Alignas(64) uint64_t tag_sum, blocks, bad;
  uint64_t* per_producer;  // objects received from each producer
  pthread_t tid;
} Consumer;

static struct {
  unsigned producers, consumers;
  uint64_t per_producer;
  size_t min_size, max_size, block;
  BenchTagging tagging;
  size_t sizes[kBenchSizeTable];
  Producer* p;
  Consumer* c;
  pthread_barrier_t start;
  BenchClock clock;

  _Alignas(64) pthread_mutex_t lock;  // guards everything below
  pthread_cond_t have_block;
  Block *head, *tail;
  size_t queued, peak_queued;
  unsigned sleeping, producers_done;
  _Alignas(64) atomic_size_t queued_hint;  // `queued`, read without the lock
} g;

// A producer's objects are one stream of tagged objects (bench_common.h).
static uint64_t Stream(uint32_t producer) { return (uint64_t)producer << 40; }

static void Describe(char* buf, size_t len, uint64_t stream, uint64_t seq) {
  snprintf(buf, len, "producer %u seq %llu", (unsigned)(stream >> 40), (unsigned long long)seq);
}

static void* ProducerMain(void* arg) {
  Producer* self = arg;
  uint32_t id = (uint32_t)(self - g.p);
  size_t idx = (size_t)id * 997;  // a different walk through the size table
  pthread_barrier_wait(&g.start);
  BenchClockStart(&g.clock);
  for (uint64_t seq = 0; seq < g.per_producer;) {
    uint64_t n = g.per_producer - seq < g.block ? g.per_producer - seq : g.block;
    Block* b = malloc(sizeof(Block) + n * sizeof(void*));
    if (b == NULL) {
      fprintf(stderr, "xmalloc: malloc of a block failed\n");
      exit(1);
    }
    b->next = NULL;
    b->producer = id;
    b->first_seq = seq;
    b->count = (uint32_t)n;
    self->tag_sum += BenchMakeTagged(&g.tagging, b->objs, n, &idx, Stream(id), seq);
    seq += n;
    pthread_mutex_lock(&g.lock);
    if (g.tail != NULL) {
      g.tail->next = b;
    } else {
      g.head = b;
    }
    g.tail = b;
    if (++g.queued > g.peak_queued) g.peak_queued = g.queued;
    atomic_store_explicit(&g.queued_hint, g.queued, memory_order_relaxed);
    if (g.sleeping) pthread_cond_signal(&g.have_block);
    pthread_mutex_unlock(&g.lock);
    self->blocks++;
  }
  pthread_mutex_lock(&g.lock);
  if (++g.producers_done == g.producers) pthread_cond_broadcast(&g.have_block);
  pthread_mutex_unlock(&g.lock);
  BenchClockStop(&g.clock);
  return NULL;
}

// Takes the oldest block. While the queue looks empty (`queued_hint`, read
// without the lock) it spins with sched_yield, then takes the lock and sleeps
// until a producer signals. Returns NULL once every producer is done and the
// queue is empty (seen under the lock, after the spins).
static Block* Take(void) {
  unsigned spin = 0;
  for (;;) {
    if (atomic_load_explicit(&g.queued_hint, memory_order_relaxed) == 0 && spin < kSpinYields) {
      spin++;
      sched_yield();
      continue;
    }
    pthread_mutex_lock(&g.lock);
    if (spin >= kSpinYields) {
      while (g.head == NULL && g.producers_done != g.producers) {
        g.sleeping++;
        pthread_cond_wait(&g.have_block, &g.lock);
        g.sleeping--;
      }
    }
    Block* b = g.head;
    if (b != NULL) {
      g.head = b->next;
      if (g.head == NULL) g.tail = NULL;
      g.queued--;
      atomic_store_explicit(&g.queued_hint, g.queued, memory_order_relaxed);
    }
    int finished = b == NULL && g.producers_done == g.producers;
    pthread_mutex_unlock(&g.lock);
    if (b != NULL || finished) return b;
    spin = 0;  // another consumer was faster
  }
}

static void* ConsumerMain(void* arg) {
  Consumer* self = arg;
  pthread_barrier_wait(&g.start);
  BenchClockStart(&g.clock);
  for (;;) {
    Block* b = Take();
    if (b == NULL) break;
    if (b->producer >= g.producers || b->count < 1 || b->count > g.block) {
      if (++self->bad <= 3) {
        fprintf(stderr, "xmalloc: block %p: producer %u count %u\n", (void*)b, b->producer,
                b->count);
      }
      continue;  // leak it: its contents cannot be trusted
    }
    self->per_producer[b->producer] +=
        BenchFreeTagged(&g.tagging, b->objs, b->count, Stream(b->producer), b->first_seq,
                        &self->tag_sum, &self->bad);
    self->blocks++;
    free(b);
  }
  BenchClockStop(&g.clock);
  return NULL;
}

static int Usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s [-p PRODUCERS] [-c CONSUMERS] [-n OBJECTS_PER_PRODUCER] [-s MIN] [-S MAX]\n"
          "          [-b BLOCK]\n"
          "defaults: -p 2 -c 2 -n 1000000 -s 16 -S 2048 -b 64 (k/m suffixes: x1000, x1000000)\n",
          argv0);
  return 2;
}

int main(int argc, char** argv) {
  uint64_t p = 2, c = 2, n = 1000000, lo = 16, hi = 2048, block = 64;
  const BenchOption opts[] = {{"-p", &p},  {"-c", &c},  {"-n", &n},
                              {"-s", &lo}, {"-S", &hi}, {"-b", &block}};
  if (BenchParseOptions(argc, argv, opts, sizeof opts / sizeof opts[0]) != 0) return Usage(argv[0]);
  if (p < 1 || p > kMaxThreads || c < 1 || c > kMaxThreads || n < 1 || n > (1ull << 40) ||
      lo < 16 || hi < lo || hi > (1u << 30) || block < 1 || block > (1u << 20)) {
    fprintf(stderr,
            "xmalloc: need 1 <= p, c <= %d, 1 <= n <= 2^40, 16 <= min <= max <= 2^30, "
            "1 <= block <= 2^20\n",
            kMaxThreads);
    return Usage(argv[0]);
  }
  g.producers = (unsigned)p;
  g.consumers = (unsigned)c;
  g.per_producer = n;
  g.min_size = (size_t)lo;
  g.max_size = (size_t)hi;
  g.block = (size_t)block;
  BenchBuildSizeTable(g.sizes, g.min_size, g.max_size);
  g.tagging =
      (BenchTagging){"xmalloc", 0x786d616c6c6f6331ULL, g.sizes, g.min_size, g.max_size, Describe};

  g.p = BenchAllocZeroed("xmalloc", 64, sizeof(Producer) * g.producers);
  g.c = BenchAllocZeroed("xmalloc", 64, sizeof(Consumer) * g.consumers);
  for (unsigned j = 0; j < g.consumers; j++) {
    g.c[j].per_producer = BenchAllocZeroed("xmalloc", 64, sizeof(uint64_t) * g.producers);
  }
  pthread_mutex_init(&g.lock, NULL);
  pthread_cond_init(&g.have_block, NULL);
  atomic_init(&g.queued_hint, 0);
  pthread_barrier_init(&g.start, NULL, g.producers + g.consumers + 1);

  for (unsigned j = 0; j < g.consumers; j++) {
    BenchSpawn("xmalloc", &g.c[j].tid, NULL, ConsumerMain, &g.c[j]);
  }
  for (unsigned i = 0; i < g.producers; i++) {
    BenchSpawn("xmalloc", &g.p[i].tid, NULL, ProducerMain, &g.p[i]);
  }
  pthread_barrier_wait(&g.start);
  for (unsigned i = 0; i < g.producers; i++) pthread_join(g.p[i].tid, NULL);
  for (unsigned j = 0; j < g.consumers; j++) pthread_join(g.c[j].tid, NULL);
  double secs = BenchClockSeconds(&g.clock);

  // Verification.
  int ok = 1;
  uint64_t sent_sum = 0, recv_sum = 0, blocks = 0, blocks_recv = 0, bad = 0;
  for (unsigned i = 0; i < g.producers; i++) {
    sent_sum += g.p[i].tag_sum;
    blocks += g.p[i].blocks;
  }
  for (unsigned j = 0; j < g.consumers; j++) {
    recv_sum += g.c[j].tag_sum;
    blocks_recv += g.c[j].blocks;
    bad += g.c[j].bad;
  }
  for (unsigned i = 0; i < g.producers; i++) {
    uint64_t got = 0;
    for (unsigned j = 0; j < g.consumers; j++) got += g.c[j].per_producer[i];
    if (got != n) {
      fprintf(stderr, "xmalloc: producer %u: %llu objects received, %llu sent\n", i,
              (unsigned long long)got, (unsigned long long)n);
      ok = 0;
    }
  }
  if (bad != 0) {
    fprintf(stderr, "xmalloc: %llu objects or blocks with a wrong tag, size or count\n",
            (unsigned long long)bad);
    ok = 0;
  }
  if (blocks_recv != blocks || g.queued != 0) {
    fprintf(stderr, "xmalloc: %llu blocks received, %llu sent, %zu left queued\n",
            (unsigned long long)blocks_recv, (unsigned long long)blocks, g.queued);
    ok = 0;
  }
  if (sent_sum != recv_sum) {
    fprintf(stderr, "xmalloc: checksum mismatch: sent %llx, received %llx\n",
            (unsigned long long)sent_sum, (unsigned long long)recv_sum);
    ok = 0;
  }

  uint64_t total = (uint64_t)g.producers * n;
  printf(
      "bench=xmalloc producers=%u consumers=%u n=%llu min=%zu max=%zu block=%zu objects=%llu "
      "blocks=%llu seconds=%.6f objects_per_sec=%.0f peak_queued_blocks=%zu checksum=%016llx",
      g.producers, g.consumers, (unsigned long long)n, g.min_size, g.max_size, g.block,
      (unsigned long long)total, (unsigned long long)blocks, secs, (double)total / secs,
      g.peak_queued, (unsigned long long)recv_sum);
  BenchReportTail(ok);
  for (unsigned j = 0; j < g.consumers; j++) free(g.c[j].per_producer);
  free(g.c);
  free(g.p);
  return ok ? 0 : 1;
}
