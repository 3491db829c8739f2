// bench/bigstart.c — a program that starts, builds a big heap at once and
// exits: a few big buffers and many small objects, 200 MiB in all, each
// written whole, nothing freed.
//
// Written here for roost's suite (no published benchmark is followed), after
// the reports in mimalloc's tracker of programs that spend seconds in the
// kernel's compaction on start-up once huge pages are allowed: what it
// measures is the wall time of a whole short process whose first act is to
// fault in a big heap, where a huge page the kernel must assemble on the
// faulting thread (direct compaction) costs the program directly.
// bench/stalls.py runs it many times to see the slowest runs, not only the
// median.
//
// Heap: -b buffers (default 4) sharing five eighths of it (31.25 MiB each
// by default), then small objects
// of 32 to 512 bytes (the k-th one 32 + (k * 7919 mod 481) bytes) until the
// heap reaches -m MiB (default 200).  Every byte of both is written when
// allocated (a byte of the object's tag, the tag itself in its first 8
// bytes).
//
// Verification: every buffer's first, middle and last word and one small
// object in 64 are checked before the program exits; a malloc that fails or
// a check that fails prints a diagnostic and exits 1.
//
// Options (k/m suffixes: x1000, x1000000):
//   -m M  MiB in all                   default 200
//   -b N  big buffers (5/8 of it)      default 4
//
// Output (stdout, one line of key=value pairs): parameters, objects,
// seconds (from main's start to the last write), mib_per_sec (MiB written
// per second), then the common tail (vmhwm_kib, malloc_from, verify).  The
// allocator under test is swapped with LD_PRELOAD.
#define _GNU_SOURCE
#include "bench_common.h"

static const char kProg[] = "bigstart";

static inline uint64_t SizeOf(uint64_t k) { return 32 + (k * 7919) % 481; }

int main(int argc, char** argv) {
  double start = BenchNow();
  uint64_t total_mib = 200, buffers = 4;
  const BenchOption opts[] = {{"-m", &total_mib}, {"-b", &buffers}};
  if (BenchParseOptions(argc, argv, opts, sizeof opts / sizeof opts[0]) != 0 || total_mib < 1 ||
      total_mib > 65536 || buffers > 1024) {
    fprintf(stderr, "usage: %s [-m MiB in all] [-b big buffers]\n", argv[0]);
    return 2;
  }
  const uint64_t mib = 1 << 20, total = total_mib * mib;
  const uint64_t big = buffers == 0 ? 0 : (total * 5 / 8 / buffers) & ~(uint64_t)63;
  uint64_t written = 0;
  unsigned char* bufs[1024];
  for (uint64_t i = 0; i < buffers && big >= 64; i++) {
    bufs[i] = malloc(big);
    if (bufs[i] == NULL) {
      fprintf(stderr, "%s: malloc(%llu) failed\n", kProg, (unsigned long long)big);
      return 1;
    }
    uint64_t tag = BenchMix(i + 1);
    memset(bufs[i], (int)(tag & 0xff), big);
    BenchStore64(bufs[i], tag);
    BenchStore64(bufs[i] + big / 2, tag);
    BenchStore64(bufs[i] + big - 8, tag);
    written += big;
  }
  // The small objects: every 64th one kept in a list to check at the end
  // (its address and number), the rest only written.
  uint64_t cap = (total - written) / 32 / 64 + 1, kept = 0, k = 0;
  unsigned char** sample = malloc(cap * sizeof(*sample));
  uint64_t* sample_k = malloc(cap * sizeof(*sample_k));
  if (sample == NULL || sample_k == NULL) {
    fprintf(stderr, "%s: out of memory setting up\n", kProg);
    return 1;
  }
  while (written < total) {
    uint64_t size = SizeOf(k), tag = BenchMix(k ^ 0xb165ull << 40);
    unsigned char* p = malloc(size);
    if (p == NULL) {
      fprintf(stderr, "%s: malloc(%llu) failed\n", kProg, (unsigned long long)size);
      return 1;
    }
    memset(p, (int)(tag & 0xff), size);
    BenchStore64(p, tag);
    if (k % 64 == 0 && kept < cap) {
      sample[kept] = p;
      sample_k[kept++] = k;
    }
    written += size;
    k++;
  }
  double seconds = BenchNow() - start;
  int ok = 1;
  for (uint64_t i = 0; i < buffers && big >= 64 && ok; i++) {
    uint64_t tag = BenchMix(i + 1);
    if (BenchLoad64(bufs[i]) != tag || BenchLoad64(bufs[i] + big / 2) != tag ||
        BenchLoad64(bufs[i] + big - 8) != tag || bufs[i][big / 3] != (unsigned char)(tag & 0xff)) {
      fprintf(stderr, "%s: buffer %llu damaged\n", kProg, (unsigned long long)i);
      ok = 0;
    }
  }
  for (uint64_t i = 0; i < kept && ok; i++) {
    uint64_t tag = BenchMix(sample_k[i] ^ 0xb165ull << 40);
    unsigned char* p = sample[i];
    if (BenchLoad64(p) != tag || p[SizeOf(sample_k[i]) - 1] != (unsigned char)(tag & 0xff)) {
      fprintf(stderr, "%s: object %llu damaged\n", kProg, (unsigned long long)sample_k[i]);
      ok = 0;
    }
  }
  printf(
      "bench=bigstart total_mib=%llu buffers=%llu buffer_bytes=%llu objects=%llu seconds=%.6f "
      "mib_per_sec=%.1f",
      (unsigned long long)total_mib, (unsigned long long)buffers, (unsigned long long)big,
      (unsigned long long)k, seconds, seconds > 0 ? (double)written / mib / seconds : 0.0);
  BenchReportTail(ok);
  return ok ? 0 : 1;
}
