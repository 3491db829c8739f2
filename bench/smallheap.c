// bench/smallheap.c — a small program's heap: a few thousand objects of a
// few hundred bytes, one thread, half of them replaced each round.
//
// Written here for roost's suite (no published benchmark is followed), after
// the footprint of the classic benchmarks' small programs (cfrac, espresso,
// a leak test): a process whose whole heap is a few MiB, where what the
// allocator maps and touches at start and per size class weighs against
// the program's own bytes.  What it measures is the peak RSS (next to the
// peak of live bytes it prints); its time is a few milliseconds.
//
// The objects' sizes are 16 + (k * 7919 mod 1000) bytes for the k-th
// object allocated (16 to 1015, all sizes alike often).  Start: -n objects
// allocated and kept.  Each of -r rounds frees every other object (the
// even ones in even rounds, the odd ones in odd rounds) and allocates it
// again at the next size of the sequence.  End: every object freed (inside
// the measured time).  Each object is written whole when allocated (a byte
// of its tag everywhere, the tag itself in its first and last 8 bytes).
//
// Verification: before it is freed every object's two tags and one byte in
// each 64 are checked; a malloc that fails or a check that fails prints a
// diagnostic and exits 1.
//
// Options (k/m suffixes: x1000, x1000000):
//   -n N  objects live                 default 5000
//   -r R  rounds of replacing half     default 20
//
// Output (stdout, one line of key=value pairs): parameters, ops (mallocs +
// frees), seconds, ops_per_sec, peak_live_kib (the most bytes asked for
// that were live at once), then the common tail (vmhwm_kib, malloc_from,
// verify).  The allocator under test is swapped with LD_PRELOAD.
#define _GNU_SOURCE
#include "bench_common.h"

static const char kProg[] = "smallheap";

static inline uint64_t SizeOf(uint64_t k) { return 16 + (k * 7919) % 1000; }

// The k-th object's tag, and the byte that fills it.
static inline uint64_t TagOf(uint64_t k) { return BenchMix(k ^ 0x5a11ea9ull << 32); }

static void Fill(unsigned char* p, uint64_t k) {
  uint64_t size = SizeOf(k), tag = TagOf(k);
  memset(p, (int)(tag & 0xff), size);
  BenchStore64(p, tag);
  BenchStore64(p + size - 8, tag);
}

static int Intact(const unsigned char* p, uint64_t k) {
  uint64_t size = SizeOf(k), tag = TagOf(k);
  if (BenchLoad64(p) != tag || BenchLoad64(p + size - 8) != tag) return 0;
  for (uint64_t i = 8; i + 8 < size; i += 64)
    if (p[i] != (unsigned char)(tag & 0xff)) return 0;
  return 1;
}

int main(int argc, char** argv) {
  uint64_t n = 5000, rounds = 20;
  const BenchOption opts[] = {{"-n", &n}, {"-r", &rounds}};
  if (BenchParseOptions(argc, argv, opts, sizeof opts / sizeof opts[0]) != 0 || n < 1 ||
      n > 10000000) {
    fprintf(stderr, "usage: %s [-n objects] [-r rounds]\n", argv[0]);
    return 2;
  }
  // Per object: its address and its number in the sequence (what its size
  // and tag come from).
  unsigned char** objs = BenchAllocZeroed(kProg, 64, n * sizeof(*objs));
  uint64_t* seq = BenchAllocZeroed(kProg, 64, n * sizeof(*seq));
  uint64_t next = 0, ops = 0, live = 0, peak_live = 0;
  int ok = 1;
  double start = BenchNow();
  for (uint64_t r = 0; r <= rounds && ok; r++) {
    for (uint64_t i = 0; i < n && ok; i++) {
      if (r > 0) {
        if (i % 2 != r % 2) continue;
        if (!Intact(objs[i], seq[i])) {
          fprintf(stderr, "%s: object %llu (round %llu) damaged\n", kProg, (unsigned long long)i,
                  (unsigned long long)r);
          ok = 0;
          break;
        }
        free(objs[i]);
        live -= SizeOf(seq[i]);
        ops++;
      }
      seq[i] = next++;
      objs[i] = malloc(SizeOf(seq[i]));
      if (objs[i] == NULL) {
        fprintf(stderr, "%s: malloc(%llu) failed\n", kProg, (unsigned long long)SizeOf(seq[i]));
        return 1;
      }
      Fill(objs[i], seq[i]);
      live += SizeOf(seq[i]);
      if (live > peak_live) peak_live = live;
      ops++;
    }
  }
  for (uint64_t i = 0; i < n && ok; i++) {
    if (!Intact(objs[i], seq[i])) {
      fprintf(stderr, "%s: object %llu damaged at the end\n", kProg, (unsigned long long)i);
      ok = 0;
      break;
    }
    free(objs[i]);
    ops++;
  }
  double seconds = BenchNow() - start;
  printf(
      "bench=smallheap objects=%llu rounds=%llu ops=%llu seconds=%.6f ops_per_sec=%.0f "
      "peak_live_kib=%llu",
      (unsigned long long)n, (unsigned long long)rounds, (unsigned long long)ops, seconds,
      seconds > 0 ? (double)ops / seconds : 0.0, (unsigned long long)(peak_live / 1024));
  BenchReportTail(ok);
  free(seq);
  free(objs);
  return ok ? 0 : 1;
}
