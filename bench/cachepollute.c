// bench/cachepollute.c — cache pollution: the application's own work rate
// while it allocates and frees (NextGen-Malloc's motivation).
//
// One thread walks a working set sized to the last-level cache, a random
// cyclic chain of cache lines (each step a dependent load and a store), and
// between walks replaces objects at random in a table of live ones (a free
// and a malloc of 16 to 1024 bytes, random, each written).  The allocator's
// own memory traffic (its metadata, free lists, the objects it hands out)
// evicts the working set's lines, and every evicted line costs the walk a
// miss: the figure is the walk's rate, not the allocator's, so an allocator
// that touches less memory per call, or does its work on another core,
// scores higher.
//
// Options (k/m suffixes: x1000, x1000000):
//   -n N  rounds                                   default 500000
//   -w W  working set in KiB (0: the LLC's size)   default 0
//   -k K  walk steps per round                     default 32
//   -a A  objects replaced per round               default 2
//   -l L  live objects                             default 16384
//
// Output (stdout, one line): parameters, steps, seconds, steps_per_sec (walk
// steps per second, the figure), replacements, then the common tail.
// Verification: every malloc returns a 16-byte aligned pointer, every object
// still holds its tag when freed, and the walk ends where a replay of the
// chain says it must.
#define _GNU_SOURCE
#include <unistd.h>

#include "bench_common.h"

typedef struct Line {
  uint32_t next;
  uint32_t visits;
  char pad[56];
} Line;

// The last-level cache one core sees: sysfs's highest cache index (glibc's
// sysconf can report the whole package's L3 on virtual machines), else
// sysconf, else 8 MiB.
static size_t llc_bytes(void) {
  for (int index = 4; index >= 2; index--) {
    char path[96];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
    FILE* f = fopen(path, "r");
    if (f == NULL) continue;
    unsigned long v = 0;
    char unit = 0;
    int got = fscanf(f, "%lu%c", &v, &unit);
    fclose(f);
    if (got >= 1 && v > 0) return unit == 'M' ? v << 20 : unit == 'K' ? v << 10 : v;
  }
  long v = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return v > 0 ? (size_t)v : (size_t)8 << 20;
}

static int Usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s [-n ROUNDS] [-w WORKING_SET_KIB] [-k STEPS] [-a REPLACEMENTS] [-l LIVE]\n"
          "defaults: -n 500000 -w 0 (the LLC's size) -k 32 -a 2 -l 16384\n",
          argv0);
  return 2;
}

int main(int argc, char** argv) {
  uint64_t n = 500000, w = 0, k = 32, a = 2, l = 16384;
  const BenchOption opts[] = {{"-n", &n}, {"-w", &w}, {"-k", &k}, {"-a", &a}, {"-l", &l}};
  if (BenchParseOptions(argc, argv, opts, sizeof opts / sizeof opts[0]) != 0) return Usage(argv[0]);
  size_t ws = w != 0 ? (size_t)w << 10 : llc_bytes();
  size_t lines = ws / sizeof(Line);
  if (n < 1 || k < 1 || l < 1 || l > (1u << 24) || lines < 2 || lines > (1u << 31)) {
    fprintf(stderr, "cachepollute: need n, k, l >= 1, l <= 2^24, 128 B <= working set < 128 GiB\n");
    return Usage(argv[0]);
  }

  // The chain: Sattolo's shuffle makes one cycle through every line.
  Line* set = BenchAllocZeroed("cachepollute", 64, lines * sizeof(Line));
  uint32_t* order = BenchAllocZeroed("cachepollute", 64, lines * sizeof(uint32_t));
  for (size_t i = 0; i < lines; i++) order[i] = (uint32_t)i;
  BenchRng rng = {0x63616368ULL};
  for (size_t i = lines - 1; i > 0; i--) {
    size_t j = BenchBelow(&rng, i);
    uint32_t t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  for (size_t i = 0; i < lines; i++) set[order[i]].next = order[(i + 1) % lines];
  free(order);

  size_t sizes[kBenchSizeTable];
  BenchBuildSizeTable(sizes, 16, 1024);
  void** live = BenchAllocZeroed("cachepollute", 64, l * sizeof(void*));
  uint64_t bad = 0;
  for (uint64_t i = 0; i < l; i++) {
    uint64_t* p = malloc(sizes[i % kBenchSizeTable]);
    if (p == NULL) {
      fprintf(stderr, "cachepollute: malloc failed while filling\n");
      return 1;
    }
    *p = BenchMix(i ^ (uint64_t)(uintptr_t)p);
    live[i] = p;
  }
  // Warm the working set once.
  uint32_t at = 0;
  for (size_t i = 0; i < lines; i++) at = set[at].next;

  uint64_t steps = 0, replaced = 0, size_i = 0;
  double t0 = BenchNow();
  for (uint64_t r = 0; r < n; r++) {
    for (uint64_t s = 0; s < k; s++) {
      set[at].visits++;
      at = set[at].next;
    }
    steps += k;
    for (uint64_t j = 0; j < a; j++) {
      uint64_t slot = BenchBelow(&rng, l);
      uint64_t* old = live[slot];
      if (*old != BenchMix(slot ^ (uint64_t)(uintptr_t)old)) bad++;
      free(old);
      uint64_t* p = malloc(sizes[size_i++ & (kBenchSizeTable - 1)]);
      if (p == NULL || ((uintptr_t)p & 15) != 0) {
        fprintf(stderr, "cachepollute: malloc returned %p\n", (void*)p);
        return 1;
      }
      *p = BenchMix(slot ^ (uint64_t)(uintptr_t)p);
      live[slot] = p;
      replaced++;
    }
  }
  double seconds = BenchNow() - t0;

  // The walk's end, replayed from the start of the timed part.
  uint32_t expect = 0;
  for (size_t i = 0; i < lines; i++) expect = set[expect].next;
  for (uint64_t i = 0; i < steps % lines; i++) expect = set[expect].next;
  uint64_t visits = 0;
  for (size_t i = 0; i < lines; i++) visits += set[i].visits;
  for (uint64_t i = 0; i < l; i++) free(live[i]);
  int ok = bad == 0 && at == expect && visits == steps;
  if (!ok)
    fprintf(stderr, "cachepollute: %llu damaged objects, walk end %u (expected %u), %llu visits\n",
            (unsigned long long)bad, at, expect, (unsigned long long)visits);
  printf(
      "bench=cachepollute rounds=%llu working_set_kib=%zu steps_per_round=%llu "
      "replaced_per_round=%llu live=%llu steps=%llu replacements=%llu seconds=%.6f "
      "steps_per_sec=%.0f",
      (unsigned long long)n, ws >> 10, (unsigned long long)k, (unsigned long long)a,
      (unsigned long long)l, (unsigned long long)steps, (unsigned long long)replaced, seconds,
      (double)steps / seconds);
  BenchReportTail(ok);
  return ok ? 0 : 1;
}
