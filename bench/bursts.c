// bench/bursts.c — bursts of same-size objects, size after size, one thread.
//
// The pattern of a single-threaded allocator benchmark that glibc keeps with
// its own malloc (a burst of N objects of one size allocated, then all
// freed, for each size and each N in turn), written here from that
// description, with every byte of every object written as a program would.
// What it stresses: not the fast paths (a burst is N mallocs then N frees
// in a row) but what surrounds them: refills, a slab's turn from full to
// empty and back, the order in which freed objects come back, and, at the
// larger sizes, fresh pages and their faults.
//
// One round: for each size S from -s to -S (doubling) and each burst
// length N from -b to -B (times 4): allocate N objects of S bytes, fill
// each (every byte, with memset: the writes cost what a program's would),
// check each and free them in the order they were allocated.  Each object
// is filled with a byte and tagged at both ends with a word, both functions
// of its size, its place in the burst and the round, so a wrong or shared
// object shows.
//
// Verification: before it is freed every object's two tags and one byte
// in each 64 are checked; a malloc that fails or a check that fails prints
// a diagnostic and exits 1.
//
// Options (k/m suffixes: x1000, x1000000):
//   -n R  rounds                                    default 200
//   -s S  smallest size in bytes (>= 8)              default 16
//   -S S  largest size in bytes (a power of two up)  default 4096
//   -b N  shortest burst                             default 25
//   -B N  longest burst (times 4 from -b)            default 1600
//
// Output (stdout, one line of key=value pairs): parameters, ops (mallocs +
// frees), bytes_written, seconds, ops_per_sec, then the common tail
// (vmhwm_kib, malloc_from, verify).  The allocator under test is swapped
// with LD_PRELOAD.
#define _GNU_SOURCE
#include "bench_common.h"

static const char kProg[] = "bursts";

// Object `j` of a burst of `size`-byte objects in round `r`: its tag, and
// the byte that fills it.
static inline uint64_t TagOf(uint64_t r, uint64_t size, uint64_t j) {
  return BenchMix(r << 40 ^ size << 20 ^ j);
}

static void Fill(unsigned char* p, uint64_t r, uint64_t size, uint64_t j) {
  uint64_t tag = TagOf(r, size, j);
  memset(p, (int)(tag & 0xff), size);
  BenchStore64(p, tag);
  BenchStore64(p + size - 8, tag);
}

static int Intact(const unsigned char* p, uint64_t r, uint64_t size, uint64_t j) {
  uint64_t tag = TagOf(r, size, j);
  if (BenchLoad64(p) != tag || BenchLoad64(p + size - 8) != tag) return 0;
  for (uint64_t i = 8; i + 8 < size; i += 64)
    if (p[i] != (unsigned char)(tag & 0xff)) return 0;
  return 1;
}

int main(int argc, char** argv) {
  uint64_t rounds = 200, lo = 16, hi = 4096, shortest = 25, longest = 1600;
  const BenchOption opts[] = {
      {"-n", &rounds}, {"-s", &lo}, {"-S", &hi}, {"-b", &shortest}, {"-B", &longest}};
  if (BenchParseOptions(argc, argv, opts, sizeof opts / sizeof opts[0]) != 0 || lo < 8 || hi < lo ||
      shortest < 1 || longest < shortest || longest > 1000000) {
    fprintf(stderr, "usage: %s [-n rounds] [-s min] [-S max] [-b shortest] [-B longest]\n",
            argv[0]);
    return 2;
  }
  void** objs = BenchAllocZeroed(kProg, 64, longest * sizeof(void*));
  uint64_t ops = 0, written = 0;
  int ok = 1;
  double start = BenchNow();
  for (uint64_t r = 0; r < rounds && ok; r++) {
    for (uint64_t size = lo; size <= hi && ok; size *= 2) {
      for (uint64_t n = shortest; n <= longest && ok; n *= 4) {
        for (uint64_t j = 0; j < n; j++) {
          unsigned char* p = malloc(size);
          if (p == NULL) {
            fprintf(stderr, "%s: malloc(%llu) failed\n", kProg, (unsigned long long)size);
            return 1;
          }
          Fill(p, r, size, j);
          objs[j] = p;
        }
        for (uint64_t j = 0; j < n; j++) {
          if (!Intact(objs[j], r, size, j)) {
            fprintf(stderr, "%s: object %llu of a burst of %llu x %llu B damaged\n", kProg,
                    (unsigned long long)j, (unsigned long long)n, (unsigned long long)size);
            ok = 0;
            break;
          }
          free(objs[j]);
        }
        ops += 2 * n;
        written += n * size;
      }
    }
  }
  double seconds = BenchNow() - start;
  printf(
      "bench=bursts rounds=%llu min=%llu max=%llu shortest=%llu longest=%llu ops=%llu "
      "bytes_written=%llu seconds=%.6f ops_per_sec=%.0f",
      (unsigned long long)rounds, (unsigned long long)lo, (unsigned long long)hi,
      (unsigned long long)shortest, (unsigned long long)longest, (unsigned long long)ops,
      (unsigned long long)written, seconds, seconds > 0 ? (double)ops / seconds : 0.0);
  BenchReportTail(ok);
  free(objs);
  return ok ? 0 : 1;
}
