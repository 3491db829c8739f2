// bench/churn.c — thread churn with objects passed between threads through a
// shared array: many threads at once, each short-lived, zeroed objects
// written whole and checked whole.
//
// A workload in the manner of mimalloc's stress test (the "thread churn"
// class of the classic benchmark runs), written here from its description:
// the program runs R rounds; each round starts T threads at once and waits
// for all of them.  Thread i makes A = 100 x S x (1 + i mod 8) short-lived
// objects and A / 2 kept ones, interleaved at random (a short-lived one at
// least half the time, while any are left).  After each new object it
//   - frees a random short-lived slot (2 in 3; the slot may already be
//     empty), and
//   - swaps a random short-lived slot with a random slot of a global transfer
//     array of X slots (1 in 4, an atomic exchange).
// The short-lived slots are an array that grows by realloc, 100 000 slots at
// a time, as a program's vector would.  A thread frees everything it still
// holds before it exits.  Between rounds the main thread frees each transfer
// slot with probability 1/2 (all of them after the last round), so objects
// made in one round are freed by threads of later rounds, after the thread
// that made them has exited.
//
// Sizes, in 8-byte words: 2^k with k uniform in 0..4 for short-lived objects
// (8 B to 128 B) and 0..6 for kept ones (to 512 B); one object in 100 is a
// hundred times bigger, and of those one in ten a thousand times and one in
// a hundred ten thousand times (up to 5 MB) unless -L 0.  Every object comes
// from calloc; its maker checks that it is zero and writes every word, and
// whoever frees it checks every word.
//
// What it stresses: thread start and exit under load (T threads on a few
// cores), calloc's zeroing, remote frees of objects whose allocating thread
// has exited, a large object now and then among small ones.
//
// Verification: word j of an object of n words holds (n - j) ^ cookie.  A
// non-zero word from calloc, a wrong word at free, or a count of frees that
// differs from the count of objects made prints a diagnostic and exits 1.
//
// Options (k/m suffixes: x1000, x1000000):
//   -t T  threads per round (1..1024)     default 32
//   -r R  rounds                          default 4
//   -s S  scale of each thread's work     default 50
//   -x X  transfer slots                  default 1000
//   -L 0|1  large objects (x1000, x10000) default 1
//
// Output (stdout, one line of key=value pairs): parameters, ops (objects
// made, all threads and rounds), seconds (wall time of the rounds, thread
// starts and exits included), ops_per_sec, then the common tail (vmhwm_kib,
// malloc_from, verify).  The allocator under test is swapped with LD_PRELOAD.
#define _GNU_SOURCE
#include <pthread.h>

#include "bench_common.h"

enum { kMaxThreads = 1024, kSlotStep = 100000 };

static const uint64_t kCookie = 0x636875726e636b31ULL;

typedef struct Thread {
  _Alignas(64) unsigned id;
  uint64_t round;
  uint64_t made, freed, bad;
  pthread_t tid;
} Thread;

static struct {
  unsigned threads;
  uint64_t rounds, scale, transfer_slots, large;
  Thread* t;
  _Atomic(uint64_t*)* transfer;
  _Atomic uint64_t bad_reports;
} g;

static void Report(uint64_t* bad, const char* what, const uint64_t* p, uint64_t word) {
  if (++*bad <= 3 && atomic_fetch_add(&g.bad_reports, 1) < 10) {
    fprintf(stderr, "churn: object %p: %s at word %llu\n", (const void*)p, what,
            (unsigned long long)word);
  }
}

// A new object of 2^k words, k uniform below `max_shift`, sometimes bigger.
static uint64_t* Make(Thread* self, BenchRng* rng, unsigned max_shift) {
  uint64_t r = BenchNext(rng);
  size_t words = (size_t)1 << (r % max_shift);
  if ((r >> 8) % 100 == 0) {
    uint64_t big = (r >> 16) % 100;
    if (g.large && big == 0) {
      words *= 10000;
    } else if (g.large && big % 10 == 0) {
      words *= 1000;
    } else {
      words *= 100;
    }
  }
  uint64_t* p = calloc(words, sizeof(uint64_t));
  if (p == NULL) {
    fprintf(stderr, "churn: calloc(%zu, 8) failed\n", words);
    exit(1);
  }
  for (size_t j = 0; j < words; j++) {
    if (p[j] != 0) {
      Report(&self->bad, "calloc gave a non-zero word", p, j);
      break;
    }
  }
  for (size_t j = 0; j < words; j++) p[j] = (words - j) ^ kCookie;
  self->made++;
  return p;
}

// Checks an object made by any thread of any round and frees it (NULL: none).
static void Check(uint64_t* freed, uint64_t* bad, uint64_t* p) {
  if (p == NULL) return;
  uint64_t words = p[0] ^ kCookie;
  if (words == 0 || words > 64 * 10000) {
    Report(bad, "a size word out of range", p, 0);
  } else {
    for (size_t j = 1; j < words; j++) {
      if (p[j] != ((words - j) ^ kCookie)) {
        Report(bad, "a word overwritten", p, j);
        break;
      }
    }
  }
  ++*freed;
  free(p);
}

static void* Worker(void* arg) {
  Thread* self = arg;
  BenchRng rng = {BenchMix(((uint64_t)self->id << 32) ^ self->round ^ 0x6368726eULL)};
  uint64_t to_make = 100 * g.scale * (1 + self->id % 8), to_keep = to_make / 2;
  uint64_t** kept = calloc(to_keep + 1, sizeof(uint64_t*));
  uint64_t **slots = NULL, used = 0, capacity = 0, nkept = 0;
  if (kept == NULL) {
    fprintf(stderr, "churn: out of memory for the kept slots\n");
    exit(1);
  }
  while (to_make > 0 || to_keep > 0) {
    uint64_t r = BenchNext(&rng);
    if (to_keep == 0 || (r % 2 == 0 && to_make > 0)) {
      if (used == capacity) {
        capacity += kSlotStep;
        uint64_t** grown = realloc(slots, capacity * sizeof(uint64_t*));
        if (grown == NULL) {
          fprintf(stderr, "churn: out of memory growing the slots\n");
          exit(1);
        }
        slots = grown;
      }
      slots[used++] = Make(self, &rng, 5);
      to_make--;
    } else {
      kept[nkept++] = Make(self, &rng, 7);
      to_keep--;
    }
    if (used > 0 && (r >> 8) % 3 != 0) {
      uint64_t i = BenchNext(&rng) % used;
      Check(&self->freed, &self->bad, slots[i]);
      slots[i] = NULL;
    }
    if (used > 0 && (r >> 24) % 4 == 0) {
      uint64_t i = BenchNext(&rng) % used, x = BenchNext(&rng) % g.transfer_slots;
      slots[i] = atomic_exchange(&g.transfer[x], slots[i]);
    }
  }
  for (uint64_t i = 0; i < nkept; i++) Check(&self->freed, &self->bad, kept[i]);
  for (uint64_t i = 0; i < used; i++) Check(&self->freed, &self->bad, slots[i]);
  free(kept);
  free(slots);
  return NULL;
}

static int Usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s [-t THREADS] [-r ROUNDS] [-s SCALE] [-x TRANSFER_SLOTS] [-L 0|1]\n"
          "defaults: -t 32 -r 4 -s 50 -x 1000 -L 1 (k/m suffixes: x1000)\n",
          argv0);
  return 2;
}

int main(int argc, char** argv) {
  uint64_t t = 32, rounds = 4, s = 50, x = 1000, large = 1;
  const BenchOption opts[] = {{"-t", &t}, {"-r", &rounds}, {"-s", &s}, {"-x", &x}, {"-L", &large}};
  if (BenchParseOptions(argc, argv, opts, sizeof opts / sizeof opts[0]) != 0) return Usage(argv[0]);
  if (t < 1 || t > kMaxThreads || rounds < 1 || rounds > (1u << 20) || s < 1 || s > (1u << 20) ||
      x < 1 || x > (1u << 24) || large > 1) {
    fprintf(stderr,
            "churn: need 1 <= t <= %d, 1 <= r <= 2^20, 1 <= s <= 2^20, 1 <= x <= 2^24, "
            "L 0 or 1\n",
            kMaxThreads);
    return Usage(argv[0]);
  }
  g.threads = (unsigned)t;
  g.rounds = rounds;
  g.scale = s;
  g.transfer_slots = x;
  g.large = large;
  g.t = BenchAllocZeroed("churn", 64, sizeof(Thread) * g.threads);
  g.transfer = BenchAllocZeroed("churn", 64, sizeof(*g.transfer) * g.transfer_slots);
  for (unsigned i = 0; i < g.threads; i++) g.t[i].id = i;

  uint64_t freed = 0, bad = 0;
  BenchRng rng = {0x6d61696e ^ kCookie};
  double start = BenchNow();
  for (uint64_t round = 0; round < g.rounds; round++) {
    for (unsigned i = 0; i < g.threads; i++) {
      g.t[i].round = round;
      BenchSpawn("churn", &g.t[i].tid, NULL, Worker, &g.t[i]);
    }
    for (unsigned i = 0; i < g.threads; i++) pthread_join(g.t[i].tid, NULL);
    for (uint64_t i = 0; i < g.transfer_slots; i++) {
      if (round + 1 == g.rounds || BenchNext(&rng) % 2 == 0) {
        Check(&freed, &bad, atomic_exchange(&g.transfer[i], NULL));
      }
    }
  }
  double secs = BenchNow() - start;

  int ok = 1;
  uint64_t made = 0;
  for (unsigned i = 0; i < g.threads; i++) {
    made += g.t[i].made;
    freed += g.t[i].freed;
    bad += g.t[i].bad;
  }
  if (bad != 0) {
    fprintf(stderr, "churn: %llu damaged objects\n", (unsigned long long)bad);
    ok = 0;
  }
  if (freed != made) {
    fprintf(stderr, "churn: %llu objects made, %llu freed\n", (unsigned long long)made,
            (unsigned long long)freed);
    ok = 0;
  }
  free(g.t);
  free((void*)g.transfer);
  printf(
      "bench=churn threads=%u rounds=%llu scale=%llu transfer=%llu large=%llu ops=%llu "
      "seconds=%.6f ops_per_sec=%.0f",
      g.threads, (unsigned long long)g.rounds, (unsigned long long)g.scale,
      (unsigned long long)g.transfer_slots, (unsigned long long)g.large, (unsigned long long)made,
      secs, (double)made / secs);
  BenchReportTail(ok);
  return ok ? 0 : 1;
}
