// bench/symmetric.c — symmetric swap malloc benchmark (every thread allocates
// and frees the same amount; all frees are of another thread's objects).
//
// The "Symmetric Workload" micro-benchmark of the snmalloc paper's §3.1,
// written here from that description: each of T threads repeatedly allocates
// an object, swaps it with another thread, and frees the object it received.
// Here objects travel in batches of B (one exchange per batch instead of one per
// object, so the benchmark measures the allocator rather than the hand-off).
//
// Per round r (R rounds in all), threads are paired by the round-robin
// tournament schedule (circle method), so over T - 1 rounds (T even) every
// thread swaps with every other; with T odd one thread sits out each round.
// Thread i allocates B objects, writes a tag into each, publishes the batch in
// its own exchange slot (waiting until its previous batch has been taken),
// waits until its partner's slot holds the batch addressed to it for round r,
// copies the pointers out, empties the slot, then checks and frees the objects.
// Waiting spins with sched_yield().
//
// Every object is freed by a thread other than its allocator, but each thread
// allocates as much of each size as it frees: a thread-caching allocator can
// reuse what it frees locally; a message-passing allocator sends every object
// home.
//
// Verification: each object carries a tag (a hash of allocating thread, round
// and index) at offset 0, its size at offset 8 and the tag again in its last 8
// bytes (objects of at least 24 bytes). The receiver recomputes the tag and
// checks all three; objects received must equal objects allocated and the sum of
// received tags must equal the sum of sent tags. Any mismatch: diagnostic, exit
// 1.
//
// Output (stdout, one line of key=value pairs): parameters, seconds (from the
// first thread's start after the start barrier to the last thread's finish, by
// the threads' own clocks), ops_per_sec (objects allocated, swapped and freed
// per second, all threads together: each op is one malloc plus one free), the
// shared object that provides malloc, and verify=ok. The allocator under test
// is swapped with LD_PRELOAD.
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "bench_common.h"

enum { kMaxThreads = 1024 };

// The exchange slot of a thread is one word: 0 when empty, else
// Offer(round, to): the thread's `out` buffer holds its batch for `to` in that
// round. Only the addressee empties it, after copying the pointers out; only
// the owner refills `out`, after seeing the slot empty.
static uint64_t Offer(uint64_t round, unsigned to) { return ((round + 1) << 10) | to; }

typedef struct Thread {
  _Alignas(64) _Atomic uint64_t slot;  // exchange slot: 0 or Offer(round, to); polled
                                       // by the partner, so alone on its cache line
  _Alignas(64) void** out;             // the batch it offers (reused after each take)
  void** in;                           // pointers copied out of the partner's batch
  uint64_t sent_sum, recv_sum, received, bad;
  pthread_t tid;
} Thread;

static struct {
  unsigned threads;
  uint64_t rounds;
  size_t min_size, max_size, batch;
  BenchTagging tagging;
  size_t sizes[kBenchSizeTable];
  Thread* t;
  pthread_barrier_t start;
  BenchClock clock;
} g;

// A batch is a stream of tagged objects (bench_common.h) named by the thread
// that allocated it and the round (< 2^28), its objects numbered from 0 (< 2^20).
static uint64_t Stream(unsigned from, uint64_t round) {
  return ((uint64_t)from << 48) ^ (round << 20);
}

static void Describe(char* buf, size_t len, uint64_t stream, uint64_t seq) {
  snprintf(buf, len, "thread %u round %llu #%llu", (unsigned)(stream >> 48),
           (unsigned long long)((stream >> 20) & ((1ull << 28) - 1)), (unsigned long long)seq);
}

// Round-robin tournament (circle method) over n = T rounded up to even
// players: player n-1 stays put, players 0..n-2 rotate. In round r, with
// m = n - 1 and k = r mod m, player k meets player n-1 and every other player
// i meets (2k - i) mod m (m is odd, so that is never i itself). Returns the
// partner of `me`, or -1 when `me` sits out (its partner is the phantom player
// T, which exists only when T is odd).
static int Partner(unsigned me, uint64_t r) {
  unsigned n = g.threads + (g.threads & 1);
  unsigned m = n - 1;
  unsigned k = (unsigned)(r % m);
  unsigned partner;
  if (me == n - 1) {
    partner = k;
  } else if (me == k) {
    partner = n - 1;
  } else {
    partner = (2 * k + m - me) % m;
  }
  return partner >= g.threads ? -1 : (int)partner;
}

static void Wait(unsigned* spins) {
  if (++*spins < 32) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  } else {
    sched_yield();
  }
}

static void* Worker(void* arg) {
  Thread* self = arg;
  unsigned me = (unsigned)(self - g.t);
  size_t idx = (size_t)me * 997;
  pthread_barrier_wait(&g.start);
  BenchClockStart(&g.clock);
  for (uint64_t r = 0; r < g.rounds; r++) {
    int partner = Partner(me, r);
    if (partner < 0) continue;  // odd T: sitting out this round
    // Our previous batch must have been taken before the buffer is refilled.
    unsigned spins = 0;
    while (atomic_load_explicit(&self->slot, memory_order_acquire) != 0) Wait(&spins);
    self->sent_sum += BenchMakeTagged(&g.tagging, self->out, g.batch, &idx, Stream(me, r), 0);
    atomic_store_explicit(&self->slot, Offer(r, (unsigned)partner), memory_order_release);

    // Take the partner's batch for this round (its slot may still hold the
    // batch of its previous round, addressed to someone else).
    Thread* other = &g.t[partner];
    spins = 0;
    while (atomic_load_explicit(&other->slot, memory_order_acquire) != Offer(r, me)) Wait(&spins);
    memcpy(self->in, other->out, g.batch * sizeof(void*));
    atomic_store_explicit(&other->slot, 0, memory_order_release);

    self->received += BenchFreeTagged(&g.tagging, self->in, g.batch, Stream((unsigned)partner, r),
                                      0, &self->recv_sum, &self->bad);
  }
  BenchClockStop(&g.clock);
  return NULL;
}

static int Usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s [-t THREADS] [-r ROUNDS] [-b BATCH] [-s MIN] [-S MAX]\n"
          "defaults: -t 4 -r 4000 -b 256 -s 16 -S 2048 (k/m suffixes: x1000)\n",
          argv0);
  return 2;
}

int main(int argc, char** argv) {
  uint64_t t = 4, rounds = 4000, batch = 256, lo = 16, hi = 2048;
  const BenchOption opts[] = {
      {"-t", &t}, {"-r", &rounds}, {"-b", &batch}, {"-s", &lo}, {"-S", &hi}};
  if (BenchParseOptions(argc, argv, opts, sizeof opts / sizeof opts[0]) != 0) return Usage(argv[0]);
  if (t < 2 || t > kMaxThreads || rounds < 1 || batch < 1 || batch > (1u << 24) || lo < 16 ||
      hi < lo || hi > (1u << 30) || rounds > (1ull << 28) || batch > (1u << 20)) {
    fprintf(stderr,
            "symmetric: need 2 <= t <= %d, rounds >= 1, 1 <= batch <= 2^20, "
            "16 <= min <= max\n",
            kMaxThreads);
    return Usage(argv[0]);
  }
  g.threads = (unsigned)t;
  g.rounds = rounds;
  g.batch = (size_t)batch;
  g.min_size = (size_t)lo;
  g.max_size = (size_t)hi;
  BenchBuildSizeTable(g.sizes, g.min_size, g.max_size);
  g.tagging =
      (BenchTagging){"symmetric", 0x73796d6d6574ULL, g.sizes, g.min_size, g.max_size, Describe};

  g.t = BenchAllocZeroed("symmetric", 64, sizeof(Thread) * g.threads);
  for (unsigned i = 0; i < g.threads; i++) {
    atomic_init(&g.t[i].slot, 0);
    g.t[i].out = malloc(g.batch * sizeof(void*));
    g.t[i].in = malloc(g.batch * sizeof(void*));
    if (g.t[i].out == NULL || g.t[i].in == NULL) {
      fprintf(stderr, "symmetric: out of memory setting up\n");
      return 1;
    }
  }
  pthread_barrier_init(&g.start, NULL, g.threads + 1);
  for (unsigned i = 0; i < g.threads; i++) {
    BenchSpawn("symmetric", &g.t[i].tid, NULL, Worker, &g.t[i]);
  }
  pthread_barrier_wait(&g.start);
  for (unsigned i = 0; i < g.threads; i++) pthread_join(g.t[i].tid, NULL);
  double secs = BenchClockSeconds(&g.clock);

  // Verification. Expected objects: every thread takes part in every round when
  // T is even; with T odd, each round has (T - 1) / 2 pairs.
  uint64_t pairs_per_round = g.threads / 2;
  uint64_t expected = g.rounds * pairs_per_round * 2 * g.batch;
  uint64_t sent = 0, recv = 0, received = 0, bad = 0;
  for (unsigned i = 0; i < g.threads; i++) {
    sent += g.t[i].sent_sum;
    recv += g.t[i].recv_sum;
    received += g.t[i].received;
    bad += g.t[i].bad;
  }
  int ok = 1;
  if (received != expected) {
    fprintf(stderr, "symmetric: %llu objects received, %llu expected\n",
            (unsigned long long)received, (unsigned long long)expected);
    ok = 0;
  }
  if (bad != 0) {
    fprintf(stderr, "symmetric: %llu objects with a wrong tag or size\n", (unsigned long long)bad);
    ok = 0;
  }
  if (sent != recv) {
    fprintf(stderr, "symmetric: checksum mismatch: sent %llx, received %llx\n",
            (unsigned long long)sent, (unsigned long long)recv);
    ok = 0;
  }

  for (unsigned i = 0; i < g.threads; i++) {
    free(g.t[i].out);
    free(g.t[i].in);
  }
  free(g.t);
  printf(
      "bench=symmetric threads=%u rounds=%llu batch=%zu min=%zu max=%zu objects=%llu "
      "seconds=%.6f ops_per_sec=%.0f checksum=%016llx",
      g.threads, (unsigned long long)g.rounds, g.batch, g.min_size, g.max_size,
      (unsigned long long)expected, secs, (double)expected / secs, (unsigned long long)recv);
  BenchReportTail(ok);
  return ok ? 0 : 1;
}
