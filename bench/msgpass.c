// bench/msgpass.c — message-passing benchmark with back-pressure (producers
// send batches of messages to random consumers, which free them).
//
// The msgpass benchmark of the BatchIt paper's §4.3 (Parkinson et al., ISMM
// '24), written here from that description. P producer threads repeatedly
// pick one of four message sizes and a batch size k, uniform in 1..B, allocate
// k messages of that size, and send the batch to a consumer chosen uniformly
// at random among C; consumers check and free every message. Unlike xmalloc
// (bench/xmalloc.c) a global limit of I messages in flight (allocated and not
// yet freed) gives back-pressure, so the memory the program needs does not
// depend on how fast the allocator lets either side run, and each producer
// sends a fixed number of messages (fixed work).
//
// What it stresses: every free is remote, and the frees a consumer does come
// from many producers and four size classes in short same-class runs. A
// message-passing allocator can batch the remote frees that hit one slab
// (BatchIt); a thread-caching allocator sees its producers' caches run dry and
// its consumers' caches overflow, in four classes at once.
//
// Sizes: 48, 160, 512 and 1536 bytes. Each is exactly a size class of roost
// (16..128 in steps of 16, then four classes per power of two: ..., 160, ...,
// 512, ..., 1536, ...), and of jemalloc, mimalloc and snmalloc, which space
// their classes the same way, so no allocator there wastes space rounding up.
// Neighbours differ by a factor of at least 3, far more than the spacing of
// any common allocator's classes at these sizes (tcmalloc's own table
// included), so the four always land in four different size classes, hence
// different slabs or spans. 48 is the smallest multiple of 16 that holds the
// 40-byte header and the tail tag; 1536 lies beyond glibc's per-thread cache
// (requests up to 1032 bytes), as real messages sometimes do.
//
// Messages carry their own links, so the only allocations during the run are
// the messages themselves: word 0 the tag, word 1 the next message of the same
// batch, word 2 the sequence number, word 3 producer id, batch count and size
// index, word 4 (batch head only) the link in the consumer's inbox; the tag
// again in the last 8 bytes. Each consumer's inbox is a lock-free stack of
// batches (producers push with a compare-and-swap; the consumer takes the
// whole stack with one exchange, so there is no ABA). The in-flight limit is
// one atomic counter: a producer reserves k before allocating a batch, a
// consumer gives k back after freeing it (so the peak reserved, which is
// reported, bounds the messages allocated and not freed). Waiting (a producer
// for room under the limit, a consumer for a batch) spins with sched_yield()
// 64 times and then sleeps on a condition variable; wakers signal only when
// someone sleeps. Threads may outnumber cores many times over.
//
// Options (k/m suffixes: x1000, x1000000):
//   -p P  producers (1..1024, default 1)        -c C  consumers (1..1024, default 1)
//   -n N  messages per producer (default 5000000)
//   -i I  messages in flight at most (B..2^30, default 4096)
//   -B B  largest batch (1..4096, default 16)
//   -a A  thread placement over the CPUs the process may use (default 0):
//         0 the kernel's; 1 paired: producer i and consumer i on CPU i mod n;
//         2 split: producers on the first half of the CPUs, consumers on the
//         rest. With more threads than cores the kernel's placement decides
//         who shares a core, and with it the run time: 2P/2C on two cores
//         is slower when both producers share one (the consumers then keep
//         up and spin, and the producers are the bottleneck) than when each
//         core has a producer and a consumer (measured in
//         docs/experiments/2026-11-22-msgpass-placement.md). -a 1 and -a 2
//         fix the placement, so that repeated runs compare like with like
//         (the suite's msgpass-paired and msgpass-split).
// Each producer's choices come from its own splitmix64 stream with a fixed
// seed, so every allocator sees the same sizes, batches and destinations.
//
// Verification: the tag is a hash of producer id and sequence number. The
// consumer recomputes it from the batch head (producer, first sequence number)
// and the message's place in the batch, and checks the head word, the tail
// word, the sequence and the producer/count/size word of every message before
// freeing it; a batch must hold exactly its count. At the end, messages
// received from each producer must equal N, batches received must equal
// batches sent, the sum of received tags must equal the sum of sent tags, the
// peak reserved must not exceed I, and nothing may remain in flight. Any
// mismatch prints a diagnostic and exits 1.
//
// Output (stdout, one line of key=value pairs): parameters, the sizes, the
// messages and batches sent, seconds (from the first thread's start after the
// start barrier to the last thread's finish, by the threads' own clocks),
// msgs_per_sec (messages allocated, sent and freed per second, all threads
// together), the peak number of messages in flight and their mean (sampled
// at every batch's reservation: the live data peak RSS is to be read
// against, since a faster producer keeps more in flight), how many batches
// had to wait for room, the checksum, then peak RSS, the shared object that provides
// malloc, and verify=ok. The allocator under test is swapped with LD_PRELOAD.
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "bench_common.h"

enum { kSpinYields = 64, kMaxThreads = 1024, kMaxBatch = 4096, kNumSizes = 4 };

static const size_t kSizes[kNumSizes] = {48, 160, 512, 1536};

// The first 40 bytes of every message; its tail tag is at size - 8 >= 40.
typedef struct Msg {
  uint64_t tag;
  struct Msg* next;        // next message of the same batch, in sequence order
  uint64_t seq;            // sequence number within its producer
  uint64_t meta;           // producer << 32 | batch count << 8 | size index
  struct Msg* next_batch;  // the batch head's link in the consumer's inbox
} Msg;

typedef struct Consumer {
  _Alignas(64) _Atomic(Msg*) inbox;  // stack of batch heads, pushed by producers
  atomic_int sleeping;               // the consumer waits on `wake`
  pthread_mutex_t lock;
  pthread_cond_t wake;
  _Alignas(64) uint64_t tag_sum, received, batches, bad;
  uint64_t* per_producer;  // messages received from each producer
  pthread_t tid;
} Consumer;

typedef struct Producer {
  _Alignas(64) uint64_t tag_sum, batches, waits, peak, in_flight_sum;
  pthread_t tid;
} Producer;

static struct {
  unsigned producers, consumers, placement;
  cpu_set_t cpus;  // the CPUs the process may use, for -a
  uint64_t per_producer, limit, max_batch;
  Producer* p;
  Consumer* c;
  pthread_barrier_t start;
  BenchClock clock;

  _Alignas(64) _Atomic uint64_t in_flight;  // messages reserved and not yet freed
  _Alignas(64) atomic_uint budget_waiters;  // producers asleep on `budget`
  pthread_mutex_t budget_lock;
  pthread_cond_t budget;
  _Alignas(64) atomic_uint producers_done;
} g;

static uint64_t Tag(uint32_t producer, uint64_t seq) {
  return BenchMix(((uint64_t)producer << 40) ^ seq ^ 0x6d73677061737331ULL) | 1;
}

// Reserves room for k messages under the in-flight limit, waiting if needed.
static void Reserve(Producer* self, uint64_t k) {
  uint64_t cur = atomic_load_explicit(&g.in_flight, memory_order_relaxed);
  unsigned spin = 0;
  for (;;) {
    if (cur + k <= g.limit) {
      if (atomic_compare_exchange_weak(&g.in_flight, &cur, cur + k)) break;
      continue;  // `cur` was reloaded
    }
    if (spin == 0) self->waits++;
    if (++spin < kSpinYields) {
      sched_yield();
      cur = atomic_load_explicit(&g.in_flight, memory_order_relaxed);
      continue;
    }
    // Sleep. The waiter count is raised before in_flight is read again, and a
    // consumer lowers in_flight before reading the count (both seq_cst), so
    // one of the two sees the other: no lost wake-up.
    pthread_mutex_lock(&g.budget_lock);
    atomic_fetch_add(&g.budget_waiters, 1);
    while (atomic_load(&g.in_flight) + k > g.limit) pthread_cond_wait(&g.budget, &g.budget_lock);
    atomic_fetch_sub(&g.budget_waiters, 1);
    pthread_mutex_unlock(&g.budget_lock);
    spin = 0;
    cur = atomic_load_explicit(&g.in_flight, memory_order_relaxed);
  }
  if (cur + k > self->peak) self->peak = cur + k;
  self->in_flight_sum += cur + k;  // sampled once per batch: mean_in_flight
}

// Gives back room for k freed messages.
static void Release(uint64_t k) {
  atomic_fetch_sub(&g.in_flight, k);
  if (atomic_load(&g.budget_waiters) != 0) {
    pthread_mutex_lock(&g.budget_lock);
    pthread_cond_broadcast(&g.budget);
    pthread_mutex_unlock(&g.budget_lock);
  }
}

static void Wake(Consumer* c) {
  if (atomic_load(&c->sleeping)) {
    pthread_mutex_lock(&c->lock);
    pthread_cond_signal(&c->wake);
    pthread_mutex_unlock(&c->lock);
  }
}

// The k-th CPU of g.cpus (k < CPU_COUNT(&g.cpus)).
static int NthCpu(unsigned k) {
  for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
    if (CPU_ISSET(cpu, &g.cpus) && k-- == 0) return cpu;
  return -1;
}

// Pins the calling thread, the index-th of its role, as -a asks.
static void Place(int producer, unsigned index) {
  unsigned n = (unsigned)CPU_COUNT(&g.cpus), k;
  if (g.placement == 0 || n == 0) return;
  if (g.placement == 1) {
    k = index % n;
  } else {
    // Producers get the first (n + 1) / 2 CPUs, consumers the rest (with
    // one CPU, everyone shares it).
    unsigned first = (n + 1) / 2;
    k = producer ? index % first : n == 1 ? 0 : first + index % (n - first);
  }
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(NthCpu(k), &one);
  if (pthread_setaffinity_np(pthread_self(), sizeof one, &one) != 0) {
    fprintf(stderr, "msgpass: pthread_setaffinity_np failed\n");
    exit(1);
  }
}

static void* ProducerMain(void* arg) {
  Producer* self = arg;
  Place(1, (unsigned)(self - g.p));
  uint32_t id = (uint32_t)(self - g.p);
  BenchRng rng = {BenchMix(0x6d736770ULL + id)};
  pthread_barrier_wait(&g.start);
  BenchClockStart(&g.clock);
  for (uint64_t seq = 0; seq < g.per_producer;) {
    unsigned si = (unsigned)BenchBelow(&rng, kNumSizes);
    uint64_t k = 1 + BenchBelow(&rng, g.max_batch);
    Consumer* to = &g.c[BenchBelow(&rng, g.consumers)];
    if (k > g.per_producer - seq) k = g.per_producer - seq;
    size_t size = kSizes[si];
    uint64_t meta = (uint64_t)id << 32 | k << 8 | si;
    Reserve(self, k);
    Msg* head = NULL;
    Msg** link = &head;
    for (uint64_t i = 0; i < k; i++, seq++) {
      Msg* m = malloc(size);
      if (m == NULL) {
        fprintf(stderr, "msgpass: malloc(%zu) failed\n", size);
        exit(1);
      }
      uint64_t tag = Tag(id, seq);
      m->tag = tag;
      m->seq = seq;
      m->meta = meta;
      m->next_batch = NULL;
      BenchStore64((unsigned char*)m + size - 8, tag);
      self->tag_sum += tag;
      *link = m;
      link = &m->next;
    }
    *link = NULL;
    // Publish the batch (the CAS releases the messages' contents), then look
    // whether the consumer sleeps (seq_cst, paired with its store of
    // `sleeping` before it looks at the inbox again).
    Msg* old = atomic_load_explicit(&to->inbox, memory_order_relaxed);
    do {
      head->next_batch = old;
    } while (!atomic_compare_exchange_weak(&to->inbox, &old, head));
    Wake(to);
    self->batches++;
  }
  if (atomic_fetch_add(&g.producers_done, 1) + 1 == g.producers) {
    for (unsigned j = 0; j < g.consumers; j++) Wake(&g.c[j]);
  }
  BenchClockStop(&g.clock);
  return NULL;
}

// Takes every batch in the consumer's inbox, waiting if it is empty. Returns
// NULL once all producers are done and the inbox is empty.
static Msg* TakeAll(Consumer* self) {
  for (unsigned spin = 0;; spin++) {
    if (atomic_load_explicit(&self->inbox, memory_order_relaxed) != NULL) {
      return atomic_exchange(&self->inbox, NULL);
    }
    if (atomic_load(&g.producers_done) == g.producers) {
      return atomic_exchange(&self->inbox, NULL);  // pushes came before `done`
    }
    if (spin < kSpinYields) {
      sched_yield();
      continue;
    }
    pthread_mutex_lock(&self->lock);
    atomic_store(&self->sleeping, 1);
    while (atomic_load(&self->inbox) == NULL && atomic_load(&g.producers_done) != g.producers) {
      pthread_cond_wait(&self->wake, &self->lock);
    }
    atomic_store(&self->sleeping, 0);
    pthread_mutex_unlock(&self->lock);
    spin = 0;
  }
}

static void Report(Consumer* self, const Msg* m, const char* what, uint64_t got, uint64_t want) {
  if (++self->bad <= 3) {
    fprintf(stderr, "msgpass: consumer %u: message %p: %s %llx, want %llx\n",
            (unsigned)(self - g.c), (const void*)m, what, (unsigned long long)got,
            (unsigned long long)want);
  }
}

static void* ConsumerMain(void* arg) {
  Consumer* self = arg;
  Place(0, (unsigned)(self - g.c));
  pthread_barrier_wait(&g.start);
  BenchClockStart(&g.clock);
  for (;;) {
    Msg* b = TakeAll(self);
    if (b == NULL) break;
    while (b != NULL) {
      Msg* next_batch = b->next_batch;
      uint64_t meta = b->meta, first = b->seq;
      uint32_t producer = (uint32_t)(meta >> 32);
      uint64_t count = (meta >> 8) & 0xffffff;
      unsigned si = (unsigned)(meta & 0xff);
      if (producer >= g.producers || si >= kNumSizes || count < 1 || count > g.max_batch) {
        Report(self, b, "batch head word", meta, 0);
        b = next_batch;  // leak the batch: its links cannot be trusted
        continue;
      }
      size_t size = kSizes[si];
      uint64_t i = 0;
      for (Msg* m = b; m != NULL && i <= count; i++) {
        Msg* next = m->next;
        uint64_t want = Tag(producer, first + i), tail;
        tail = BenchLoad64((unsigned char*)m + size - 8);
        if (m->tag != want) Report(self, m, "tag", m->tag, want);
        if (tail != want) Report(self, m, "tail tag", tail, want);
        if (m->seq != first + i) Report(self, m, "sequence", m->seq, first + i);
        if (m->meta != meta) Report(self, m, "producer/count/size word", m->meta, meta);
        self->tag_sum += m->tag;
        self->received++;
        self->per_producer[producer]++;
        free(m);
        m = next;
      }
      if (i != count) Report(self, b, "batch length", i, count);
      self->batches++;
      Release(count);
      b = next_batch;
    }
  }
  BenchClockStop(&g.clock);
  return NULL;
}

static int Usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s [-p PRODUCERS] [-c CONSUMERS] [-n MESSAGES_PER_PRODUCER] [-i IN_FLIGHT]\n"
          "          [-B MAX_BATCH] [-a PLACEMENT]\n"
          "defaults: -p 1 -c 1 -n 5000000 -i 4096 -B 16 -a 0 (k/m suffixes: x1000, x1000000)\n"
          "placement: 0 the kernel's, 1 producer i and consumer i share a CPU, 2 producers\n"
          "           on the first half of the CPUs, consumers on the rest\n",
          argv0);
  return 2;
}

int main(int argc, char** argv) {
  uint64_t p = 1, c = 1, n = 5000000, limit = 4096, max_batch = 16, placement = 0;
  const BenchOption opts[] = {{"-p", &p},     {"-c", &c},         {"-n", &n},
                              {"-i", &limit}, {"-B", &max_batch}, {"-a", &placement}};
  if (BenchParseOptions(argc, argv, opts, sizeof opts / sizeof opts[0]) != 0) return Usage(argv[0]);
  if (p < 1 || p > kMaxThreads || c < 1 || c > kMaxThreads || n < 1 || n > (1ull << 40) ||
      max_batch < 1 || max_batch > kMaxBatch || limit < max_batch || limit > (1u << 30) ||
      placement > 2) {
    fprintf(stderr,
            "msgpass: need 1 <= p, c <= %d, 1 <= n <= 2^40, 1 <= B <= %d, B <= i <= 2^30, a <= 2\n",
            kMaxThreads, kMaxBatch);
    return Usage(argv[0]);
  }
  g.producers = (unsigned)p;
  g.consumers = (unsigned)c;
  g.per_producer = n;
  g.limit = limit;
  g.max_batch = max_batch;
  g.placement = (unsigned)placement;
  if (g.placement != 0 && sched_getaffinity(0, sizeof g.cpus, &g.cpus) != 0) {
    fprintf(stderr, "msgpass: sched_getaffinity failed\n");
    return 1;
  }

  g.p = BenchAllocZeroed("msgpass", 64, sizeof(Producer) * g.producers);
  g.c = BenchAllocZeroed("msgpass", 64, sizeof(Consumer) * g.consumers);
  for (unsigned j = 0; j < g.consumers; j++) {
    Consumer* cj = &g.c[j];
    atomic_init(&cj->inbox, NULL);
    atomic_init(&cj->sleeping, 0);
    pthread_mutex_init(&cj->lock, NULL);
    pthread_cond_init(&cj->wake, NULL);
    cj->per_producer = BenchAllocZeroed("msgpass", 64, sizeof(uint64_t) * g.producers);
  }
  atomic_init(&g.in_flight, 0);
  atomic_init(&g.budget_waiters, 0);
  atomic_init(&g.producers_done, 0);
  pthread_mutex_init(&g.budget_lock, NULL);
  pthread_cond_init(&g.budget, NULL);
  pthread_barrier_init(&g.start, NULL, g.producers + g.consumers + 1);

  for (unsigned j = 0; j < g.consumers; j++) {
    BenchSpawn("msgpass", &g.c[j].tid, NULL, ConsumerMain, &g.c[j]);
  }
  for (unsigned i = 0; i < g.producers; i++) {
    BenchSpawn("msgpass", &g.p[i].tid, NULL, ProducerMain, &g.p[i]);
  }
  pthread_barrier_wait(&g.start);
  for (unsigned i = 0; i < g.producers; i++) pthread_join(g.p[i].tid, NULL);
  for (unsigned j = 0; j < g.consumers; j++) pthread_join(g.c[j].tid, NULL);
  double secs = BenchClockSeconds(&g.clock);

  // Verification.
  int ok = 1;
  uint64_t sent_sum = 0, recv_sum = 0, batches = 0, batches_recv = 0, waits = 0, peak = 0;
  uint64_t bad = 0, in_flight_sum = 0;
  for (unsigned i = 0; i < g.producers; i++) {
    sent_sum += g.p[i].tag_sum;
    batches += g.p[i].batches;
    waits += g.p[i].waits;
    in_flight_sum += g.p[i].in_flight_sum;
    if (g.p[i].peak > peak) peak = g.p[i].peak;
  }
  for (unsigned j = 0; j < g.consumers; j++) {
    recv_sum += g.c[j].tag_sum;
    batches_recv += g.c[j].batches;
    bad += g.c[j].bad;
  }
  for (unsigned i = 0; i < g.producers; i++) {
    uint64_t got = 0;
    for (unsigned j = 0; j < g.consumers; j++) got += g.c[j].per_producer[i];
    if (got != n) {
      fprintf(stderr, "msgpass: producer %u: %llu messages received, %llu sent\n", i,
              (unsigned long long)got, (unsigned long long)n);
      ok = 0;
    }
  }
  if (bad != 0) {
    fprintf(stderr, "msgpass: %llu damaged messages or batches\n", (unsigned long long)bad);
    ok = 0;
  }
  if (batches_recv != batches) {
    fprintf(stderr, "msgpass: %llu batches received, %llu sent\n", (unsigned long long)batches_recv,
            (unsigned long long)batches);
    ok = 0;
  }
  if (sent_sum != recv_sum) {
    fprintf(stderr, "msgpass: checksum mismatch: sent %llx, received %llx\n",
            (unsigned long long)sent_sum, (unsigned long long)recv_sum);
    ok = 0;
  }
  if (peak > g.limit || atomic_load(&g.in_flight) != 0) {
    fprintf(stderr, "msgpass: in-flight accounting: peak %llu (limit %llu), %llu left at the end\n",
            (unsigned long long)peak, (unsigned long long)g.limit,
            (unsigned long long)atomic_load(&g.in_flight));
    ok = 0;
  }

  uint64_t total = (uint64_t)g.producers * n;
  printf(
      "bench=msgpass producers=%u consumers=%u n=%llu inflight=%llu max_batch=%llu placement=%u "
      "sizes=%zu,%zu,%zu,%zu messages=%llu batches=%llu seconds=%.6f msgs_per_sec=%.0f "
      "peak_in_flight=%llu mean_in_flight=%.0f waited_batches=%llu checksum=%016llx",
      g.producers, g.consumers, (unsigned long long)n, (unsigned long long)g.limit,
      (unsigned long long)g.max_batch, g.placement, kSizes[0], kSizes[1], kSizes[2], kSizes[3],
      (unsigned long long)total, (unsigned long long)batches, secs, (double)total / secs,
      (unsigned long long)peak, batches ? (double)in_flight_sum / (double)batches : 0.0,
      (unsigned long long)waits, (unsigned long long)recv_sum);
  BenchReportTail(ok);
  for (unsigned j = 0; j < g.consumers; j++) free(g.c[j].per_producer);
  free(g.c);
  free(g.p);
  return ok ? 0 : 1;
}
