// bench/idle_return.c — how much memory an allocator gives back while the
// program sleeps.
//
// Threads allocate small objects (16 to 1024 bytes, random), other threads
// free them all, and the process then sleeps without calling the allocator
// while this program samples its resident memory (/proc/self/statm) every
// --sample-ms.  Scenes (--scene):
//   handoff  one thread allocates --mib MiB and exits; another frees every
//            object and exits (both joined before the sleep).
//   exited   --threads threads each allocate --mib / --threads MiB and exit;
//            the main thread frees it all.
//   owner    the main thread allocates; another thread frees it all and
//            exits; the main thread (the objects' owner) then sleeps.
// The figure is the share of the peak still resident, above the baseline
// measured before the first allocation: (rss - base) / (peak - base).
//
// Prints one line: `bench=idle_return scene=... mib=... base_kib= peak_kib=`,
// then `t<ms>=<share %>` for each checkpoint (100, 250, 500, 1000, 2000 ms,
// up to --sleep-ms), `below10_ms=` (the first sample under 10 %, or -1) and
// the common tail.  With --expect-below P --within-ms T it exits 1 unless a
// sample within T ms is under P %, and stops sampling at the first that is
// (the test's use).
//
// Owns: this measurement.  Must never: allocate through malloc while it
// samples (the pointer array is mmap'ed, samples are read into the stack).
#include "bench_common.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct Objects {
  void** ptr;
  size_t count;
} Objects;

typedef struct Job {
  Objects* objs;
  size_t first, count;  // the slice of objs this thread allocates or frees
  size_t bytes;         // to allocate (allocating jobs)
  uint64_t seed;
  int ok;
} Job;

static const size_t kMinSize = 16, kMaxSize = 1024;

static long page_kib(void) { return sysconf(_SC_PAGESIZE) / 1024; }

// Resident memory in KiB, read without the allocator.
static long rss_kib(void) {
  char buf[128];
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  char* p = buf;
  while (*p != ' ' && *p != '\0') p++;  // skip the size field
  return strtol(p, NULL, 10) * page_kib();
}

static void* map_array(size_t bytes) {
  void* p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    perror("idle_return: mmap");
    exit(2);
  }
  return p;
}

// Allocates job->bytes in objects from job->first on; sets job->count.
static void* allocate(void* arg) {
  Job* j = arg;
  BenchRng rng = {j->seed};
  size_t done = 0, i = j->first;
  while (done < j->bytes) {
    size_t n = kMinSize + BenchBelow(&rng, kMaxSize - kMinSize + 1);
    char* p = malloc(n);
    if (p == NULL) {
      j->ok = 0;
      break;
    }
    p[0] = (char)n;
    p[n - 1] = (char)n;
    j->objs->ptr[i++] = p;
    done += n;
  }
  j->count = i - j->first;
  return NULL;
}

static void* release(void* arg) {
  Job* j = arg;
  for (size_t i = j->first; i < j->first + j->count; i++) free(j->objs->ptr[i]);
  return NULL;
}

static void run_thread(void* (*fn)(void*), Job* j) {
  pthread_t t;
  if (pthread_create(&t, NULL, fn, j) != 0 || pthread_join(t, NULL) != 0) {
    fprintf(stderr, "idle_return: cannot run a thread\n");
    exit(2);
  }
}

int main(int argc, char** argv) {
  const char* scene = "handoff";
  size_t mib = 256, threads = 64;
  long sleep_ms = 2000, sample_ms = 10, within_ms = -1;
  double expect_below = -1;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (v != NULL && strcmp(a, "--scene") == 0)
      scene = v;
    else if (v != NULL && strcmp(a, "--mib") == 0)
      mib = strtoul(v, NULL, 10);
    else if (v != NULL && strcmp(a, "--threads") == 0)
      threads = strtoul(v, NULL, 10);
    else if (v != NULL && strcmp(a, "--sleep-ms") == 0)
      sleep_ms = strtol(v, NULL, 10);
    else if (v != NULL && strcmp(a, "--sample-ms") == 0)
      sample_ms = strtol(v, NULL, 10);
    else if (v != NULL && strcmp(a, "--expect-below") == 0)
      expect_below = strtod(v, NULL);
    else if (v != NULL && strcmp(a, "--within-ms") == 0)
      within_ms = strtol(v, NULL, 10);
    else {
      fprintf(stderr,
              "usage: %s [--scene handoff|exited|owner] [--mib N] [--threads N] "
              "[--sleep-ms N] [--sample-ms N] [--expect-below PERCENT --within-ms N]\n",
              argv[0]);
      return 2;
    }
    i++;
  }
  if (mib == 0 || threads == 0 || sample_ms <= 0 || sleep_ms <= 0 ||
      (strcmp(scene, "handoff") != 0 && strcmp(scene, "exited") != 0 &&
       strcmp(scene, "owner") != 0)) {
    fprintf(stderr, "idle_return: bad arguments\n");
    return 2;
  }
  if (within_ms < 0) within_ms = sleep_ms;

  size_t bytes = mib << 20;
  size_t slots = bytes / kMinSize + threads + 1;
  Objects objs = {map_array(slots * sizeof(void*)), 0};
  long base = rss_kib();

  int ok = 1;
  if (strcmp(scene, "exited") == 0) {
    // Each thread its own slice of the array, one after another (so that
    // every thread's allocator is parked before the frees begin).
    size_t per = bytes / threads, next = 0;
    Job j = {&objs, 0, 0, per, 0, 1};
    for (size_t t = 0; t < threads; t++) {
      j.first = next;
      j.seed = 1000 + t;
      run_thread(allocate, &j);
      ok &= j.ok;
      next += j.count;
    }
    objs.count = next;
  } else {
    Job j = {&objs, 0, 0, bytes, 42, 1};
    if (strcmp(scene, "owner") == 0)
      allocate(&j);
    else
      run_thread(allocate, &j);
    ok &= j.ok;
    objs.count = j.count;
  }
  long peak = rss_kib();
  if (strcmp(scene, "exited") == 0) {
    Job all = {&objs, 0, objs.count, 0, 0, 1};
    release(&all);
  } else {
    Job all = {&objs, 0, objs.count, 0, 0, 1};
    run_thread(release, &all);
  }
  long after_free = rss_kib();
  if (after_free > peak) peak = after_free;
  munmap(objs.ptr, slots * sizeof(void*));

  // The sleep: sample until sleep_ms, the allocator not called.
  static const long kCheckpoints[] = {100, 250, 500, 1000, 2000, 5000, 10000};
  enum { kNumCheckpoints = sizeof kCheckpoints / sizeof kCheckpoints[0] };
  double share_at[kNumCheckpoints];
  long below10 = -1, below_expect = -1;
  double span = peak > base ? (double)(peak - base) : 1.0;
  double t0 = BenchNow();
  size_t next_cp = 0;
  for (;;) {
    long ms = (long)((BenchNow() - t0) * 1000.0);
    double share = 100.0 * (double)(rss_kib() - base) / span;
    if (share < 10.0 && below10 < 0) below10 = ms;
    if (expect_below >= 0 && share < expect_below && below_expect < 0 && ms <= within_ms)
      below_expect = ms;
    while (next_cp < kNumCheckpoints && kCheckpoints[next_cp] <= ms) share_at[next_cp++] = share;
    if (ms >= sleep_ms || below_expect >= 0) break;
    usleep((useconds_t)sample_ms * 1000u);
  }

  printf("bench=idle_return scene=%s mib=%zu threads=%zu objects=%zu base_kib=%ld peak_kib=%ld",
         scene, mib, strcmp(scene, "exited") == 0 ? threads : (size_t)1, objs.count, base, peak);
  for (size_t i = 0; i < next_cp; i++) printf(" t%ld=%.1f", kCheckpoints[i], share_at[i]);
  printf(" below10_ms=%ld seconds=%.3f", below10, BenchNow() - t0);
  int verified = ok && (expect_below < 0 || below_expect >= 0);
  BenchReportTail(verified);
  if (!verified && expect_below >= 0)
    fprintf(stderr, "idle_return: resident memory not below %.1f %% of the peak within %ld ms\n",
            expect_below, within_ms);
  return verified ? 0 : 1;
}
