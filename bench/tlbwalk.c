// bench/tlbwalk.c — a page-walk proxy: pointer chasing through a big heap
// of small objects linked in a random order, where nearly every step lands
// on another page.
//
// Written here for roost's suite (no published benchmark is followed).  The
// machines the suite runs on have no hardware counters (`perf stat` cannot
// count dTLB misses in their guests), so the TLB's share is measured by its
// effect: with 4 KiB pages a heap of 256 MiB needs 65536 TLB entries, far
// more than any TLB holds, and almost every step of the chase waits for a
// page walk as well as a cache miss; where the heap lies in 2 MiB pages it
// needs 128 entries, and the walks mostly go.  The same program timed under
// an allocator with and without huge pages (roost with ROOST_HUGEPAGES=off,
// mimalloc with MIMALLOC_ALLOW_THP=0) shows what they gain; the allocator's
// own calls are outside the timed part.
//
// Heap: objects of 64 to 256 bytes (the k-th one 64 + 16 * (k * 7919 mod
// 13) bytes) allocated one after another until -m MiB (default 256) are
// asked for, each written whole; then linked into one cycle in a random
// order (a shuffle with a fixed seed: the same order under every
// allocator).  Timed: -n million steps (default 4) from object to object
// along the cycle, each reading the next object's address from its first
// word and a counter from its last.
//
// Verification: the cycle visits every object once (a full lap counts
// them), and the sum of the counters read in the timed steps matches the
// one computed from the order; otherwise a diagnostic and exit 1.
//
// Options (k/m suffixes: x1000, x1000000):
//   -m M  MiB of objects               default 256
//   -n N  steps, in millions           default 4
//
// Output (stdout, one line of key=value pairs): parameters, objects,
// seconds (the chase), steps_per_sec, ns_per_step, setup_seconds (the
// allocation, writing and linking), then the common tail (vmhwm_kib,
// malloc_from, verify).  The allocator under test is swapped with
// LD_PRELOAD.
#define _GNU_SOURCE
#include "bench_common.h"

static const char kProg[] = "tlbwalk";

static inline uint64_t SizeOf(uint64_t k) { return 64 + 16 * ((k * 7919) % 13); }

int main(int argc, char** argv) {
  uint64_t total_mib = 256, steps_m = 4;
  const BenchOption opts[] = {{"-m", &total_mib}, {"-n", &steps_m}};
  if (BenchParseOptions(argc, argv, opts, sizeof opts / sizeof opts[0]) != 0 || total_mib < 1 ||
      total_mib > 65536 || steps_m < 1) {
    fprintf(stderr, "usage: %s [-m MiB] [-n million steps]\n", argv[0]);
    return 2;
  }
  double setup_start = BenchNow();
  const uint64_t total = total_mib << 20;
  // Enough slots for the smallest objects; the list of objects itself is
  // set-up memory, read only while linking.
  uint64_t cap = total / 64 + 1, n = 0, bytes = 0;
  unsigned char** objs = BenchAllocZeroed(kProg, 64, cap * sizeof(*objs));
  while (bytes < total && n < cap) {
    uint64_t size = SizeOf(n);
    unsigned char* p = malloc(size);
    if (p == NULL) {
      fprintf(stderr, "%s: malloc(%llu) failed\n", kProg, (unsigned long long)size);
      return 1;
    }
    memset(p, 0, size);
    objs[n++] = p;
    bytes += size;
  }
  // A random order (Fisher-Yates with a fixed seed), then each object
  // points to the next in it; its counter is its place in the order.
  BenchRng rng = {0x71bba1cull};
  for (uint64_t i = n - 1; i > 0; i--) {
    uint64_t j = BenchBelow(&rng, i + 1);
    unsigned char* t = objs[i];
    objs[i] = objs[j];
    objs[j] = t;
  }
  for (uint64_t i = 0; i < n; i++) {
    unsigned char* p = objs[i];
    BenchStore64(p, (uint64_t)(uintptr_t)objs[(i + 1) % n]);
    BenchStore64(p + 56, i);
  }
  unsigned char* first = objs[0];
  free(objs);
  double setup = BenchNow() - setup_start;
  int ok = 1;
  // One lap, untimed: it checks the cycle and warms the caches alike for
  // every allocator.
  uint64_t lap = 0;
  unsigned char* p = first;
  do {
    p = (unsigned char*)(uintptr_t)BenchLoad64(p);
    lap++;
  } while (p != first && lap <= n);
  if (lap != n) {
    fprintf(stderr, "%s: the cycle has %llu objects, not %llu\n", kProg, (unsigned long long)lap,
            (unsigned long long)n);
    ok = 0;
  }
  uint64_t steps = steps_m * 1000000, sum = 0;
  double start = BenchNow();
  p = first;
  for (uint64_t s = 0; s < steps; s++) {
    p = (unsigned char*)(uintptr_t)BenchLoad64(p);
    sum += BenchLoad64(p + 56);
  }
  double seconds = BenchNow() - start;
  // Steps 1..steps visit places 1, 2, ... of the order (mod n).
  uint64_t laps = steps / n, rest = steps % n;
  uint64_t expect = laps * (n * (n - 1) / 2) + rest * (rest + 1) / 2;
  if (ok && sum != expect) {
    fprintf(stderr, "%s: the chase read the wrong counters\n", kProg);
    ok = 0;
  }
  printf(
      "bench=tlbwalk mib=%llu objects=%llu steps=%llu seconds=%.6f steps_per_sec=%.0f "
      "ns_per_step=%.2f setup_seconds=%.3f",
      (unsigned long long)total_mib, (unsigned long long)n, (unsigned long long)steps, seconds,
      seconds > 0 ? (double)steps / seconds : 0.0,
      seconds > 0 ? seconds * 1e9 / (double)steps : 0.0, setup);
  BenchReportTail(ok);
  return ok ? 0 : 1;
}
