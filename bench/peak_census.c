/* bench/peak_census.c — where roost's memory is at a program's peak RSS.
 *
 * A shared object preloaded after libroost.so (bench/peak_census.py runs
 * it).  Its constructor starts a thread that reads the process's resident
 * size every millisecond and, each time it exceeds the highest seen by
 * more than 1 %, takes roost's statistics as JSON (roost_stats_json: the
 * totals and, per size class, the slabs by state and the pages they
 * touched).  At exit it writes the last of them, with the resident size it
 * was taken at, as one line:
 *
 *   peak_census rss_kib=N json={...}
 *
 * to PEAK_CENSUS_FILE, or stderr.  Under another allocator (no
 * roost_stats_json) it does nothing.  The statistics are read while the
 * program runs: approximate, as roost_stats_json says.  It allocates
 * nothing once started (its buffers are static). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef long (*stats_json_fn)(char* buf, unsigned long len);

static stats_json_fn g_stats_json;
static char g_json[2][1 << 16];
static int g_best = -1; /* which of g_json holds the census at the peak */
static long g_best_rss_kib;
static volatile int g_stop;
static pthread_t g_thread;

static long resident_kib(int fd) {
  char buf[128];
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return -1;
  buf[n] = 0;
  long size = 0, resident = 0;
  if (sscanf(buf, "%ld %ld", &size, &resident) != 2) return -1;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static void* watch(void* arg) {
  (void)arg;
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  long highest = 0;
  struct timespec tick = {0, 1000000};
  while (!g_stop) {
    long rss = resident_kib(fd);
    if (rss > highest + highest / 100) {
      highest = rss;
      int slot = g_best == 0 ? 1 : 0;
      long len = g_stats_json(g_json[slot], sizeof g_json[slot]);
      if (len > 0 && (unsigned long)len < sizeof g_json[slot]) {
        g_best = slot; /* read by finish() after the join */
        g_best_rss_kib = rss;
      }
    }
    nanosleep(&tick, NULL);
  }
  close(fd);
  return NULL;
}

__attribute__((constructor)) static void start(void) {
  g_stats_json = (stats_json_fn)dlsym(RTLD_DEFAULT, "roost_stats_json");
  if (g_stats_json == NULL) return;
  if (pthread_create(&g_thread, NULL, watch, NULL) != 0) g_stats_json = NULL;
}

__attribute__((destructor)) static void finish(void) {
  if (g_stats_json == NULL) return;
  g_stop = 1;
  pthread_join(g_thread, NULL);
  if (g_best < 0) return;
  const char* path = getenv("PEAK_CENSUS_FILE");
  int fd = path != NULL ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : 2;
  if (fd < 0) return;
  char head[64];
  int n = snprintf(head, sizeof head, "peak_census rss_kib=%ld json=", g_best_rss_kib);
  if (write(fd, head, (size_t)n) < 0 || write(fd, g_json[g_best], strlen(g_json[g_best])) < 0 ||
      write(fd, "\n", 1) < 0) {
    /* Nothing to do: the census is lost. */
  }
  if (fd != 2) close(fd);
}
