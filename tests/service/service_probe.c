/* The service thread at the edges of a process's life (tests/service), run
 * by tests/lifecycle/lifecycle_run.py, which checks the exit status, the
 * time limit and the lines printed.  Modes:
 *
 *   fork            3 threads churn small and large objects (the service
 *                   purges all along) while the main thread forks 200
 *                   times; every child allocates, checks, frees and exits
 *                   0; then the parent's service must still purge.
 *   exit-mid-purge  children free hundreds of MiB and exit 1 to 30 ms
 *                   later, while the service purges it.
 *   exit-thread     a thread calls exit() while others free and release.
 *   atexit          exit handlers registered before and after the service
 *                   started free and allocate.
 *   after-stop      (linked builds) a destructor that runs after roost's
 *                   own (priority 101) finds the service stopped; a thread
 *                   whose thread-local destructor frees runs then, and the
 *                   main thread frees and allocates.
 *   main-exits      the main thread ends with pthread_exit while the
 *                   service runs and a thread still works: the process
 *                   ends when that thread does (exit status 0, its exit
 *                   handlers run), as under glibc's malloc, though the
 *                   service thread is still there.
 *
 * Statistics come from roost_stats(): called directly where roost is linked
 * (ROOST_TEST_LINKED), found with dlsym where it is preloaded. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>

#include "../lifecycle/lifecycle.h"
#include "roost.h"

static int stats(struct roost_stats* out) {
#if defined(ROOST_TEST_LINKED)
  return roost_stats(out);
#else
  int (*fn)(struct roost_stats*) = (int (*)(struct roost_stats*))dlsym(RTLD_DEFAULT, "roost_stats");
  lc_check(fn != NULL, "roost_stats not found: roost is not preloaded");
  return fn(out);
#endif
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Allocates `count` objects of `size` bytes, fills, checks and frees them. */
static void churn(size_t count, size_t size, uint64_t id) {
  void* objs[64];
  lc_check(count <= 64, "churn: too many");
  for (size_t i = 0; i < count; i++) {
    objs[i] = malloc(size);
    lc_check(objs[i] != NULL, "malloc failed");
    lc_fill(objs[i], size < 256 ? size : 256, id + i);
  }
  for (size_t i = 0; i < count; i++) {
    lc_check(lc_holds(objs[i], size < 256 ? size : 256, id + i), "an object changed");
    free(objs[i]);
  }
}

/* Waits until the service has purged more than `before` bytes. */
static void expect_purge_after(uint64_t before, const char* what) {
  struct roost_stats s;
  for (int i = 0; i < 500; i++) {
    lc_check(stats(&s) == 0, "roost_stats failed");
    if (s.service_bytes_purged > before) return;
    sleep_ms(10);
  }
  lc_fail(what);
}

/* Frees `mib` MiB of large objects (released memory the service purges). */
static void release_large(size_t mib) {
  void* big[64];
  lc_check(mib <= 64, "release_large: too many");
  for (size_t i = 0; i < mib; i++) {
    big[i] = malloc(1 << 20);
    lc_check(big[i] != NULL, "malloc(1 MiB) failed");
    memset(big[i], (int)i, 1 << 20);
  }
  for (size_t i = 0; i < mib; i++) free(big[i]);
}

static atomic_bool g_stop;

static void* churner(void* arg) {
  uint64_t id = (uint64_t)(uintptr_t)arg << 32;
  while (!atomic_load(&g_stop)) {
    churn(48, 24 + (id >> 32) * 40, id);
    churn(4, 300 << 10, id + 100); /* large: released to the backend */
    id += 1000;
  }
  return NULL;
}

static int fork_mode(void) {
  pthread_t t[3];
  for (uintptr_t i = 0; i < 3; i++) pthread_create(&t[i], NULL, churner, (void*)(i + 1));
  for (int n = 0; n < 200; n++) {
    pid_t pid = fork();
    lc_check(pid >= 0, "fork failed");
    if (pid == 0) {
      churn(64, 100, 7);
      release_large(8);
      churn(8, 200 << 10, 9);
      _exit(0);
    }
    int status = 0;
    lc_check(waitpid(pid, &status, 0) == pid, "waitpid failed");
    lc_check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a child failed");
  }
  atomic_store(&g_stop, true);
  for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
  struct roost_stats s;
  lc_check(stats(&s) == 0, "roost_stats failed");
  release_large(32);
  expect_purge_after(s.service_bytes_purged, "the parent's service purged nothing after the forks");
  lc_check(stats(&s) == 0 && s.service_running == 1, "the parent's service is not running");
  lc_say("service: fork ok");
  return 0;
}

static int exit_mid_purge_mode(void) {
  for (int n = 0; n < 30; n++) {
    pid_t pid = fork();
    lc_check(pid >= 0, "fork failed");
    if (pid == 0) {
      void* objs[4096];
      for (int round = 0; round < 8; round++) {
        for (int i = 0; i < 4096; i++) objs[i] = malloc(16 << 10); /* 64 MiB */
        for (int i = 0; i < 4096; i++) memset(objs[i], round, 64);
        for (int i = 0; i < 4096; i++) free(objs[i]);
        release_large(16);
      }
      sleep_ms(1 + n);
      exit(0);
    }
    int status = 0;
    lc_check(waitpid(pid, &status, 0) == pid, "waitpid failed");
    lc_check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a child failed to exit");
  }
  lc_say("service: exit-mid-purge ok");
  return 0;
}

static void* exiting_thread(void* arg) {
  (void)arg;
  release_large(16);
  sleep_ms(5);
  lc_say("service: exit-thread ok");
  exit(0);
}

static int exit_thread_mode(void) {
  pthread_t t[2], x;
  for (uintptr_t i = 0; i < 2; i++) pthread_create(&t[i], NULL, churner, (void*)(i + 1));
  pthread_create(&x, NULL, exiting_thread, NULL);
  while (!atomic_load(&g_stop)) release_large(4); /* until the exit */
  return 1;
}

static void* g_kept[2][8];

static void handler_frees(int set) {
  for (int i = 0; i < 8; i++) free(g_kept[set][i]);
  release_large(16);
  churn(32, 64, 5);
  lc_say("service: handler ok");
}
static void first_handler(void) { handler_frees(0); }
static void second_handler(void) { handler_frees(1); }

static int atexit_mode(void) {
  for (int set = 0; set < 2; set++)
    for (int i = 0; i < 8; i++) g_kept[set][i] = malloc((size_t)(i + 1) << 18);
  atexit(first_handler); /* before the service started */
  release_large(16);
  expect_purge_after(0, "the service purged nothing");
  atexit(second_handler); /* while it runs */
  return 0;
}

#if defined(ROOST_TEST_LINKED)
static _Thread_local void* t_owned;
static pthread_key_t g_key;

static void key_destructor(void* p) {
  free(p);
  free(t_owned);
  release_large(8);
}

static void* late_thread(void* arg) {
  (void)arg;
  t_owned = malloc(100);
  pthread_setspecific(g_key, malloc(300 << 10));
  churn(16, 48, 3);
  return NULL;
}

static bool g_after_stop_mode;

/* Destructors with a priority run after those without, roost's included. */
__attribute__((destructor(101))) static void after_roost(void) {
  if (!g_after_stop_mode) return;
  struct roost_stats s;
  lc_check(stats(&s) == 0, "roost_stats failed");
  lc_check(s.service_running == 0, "the service still runs after roost's destructor");
  lc_check(pthread_key_create(&g_key, key_destructor) == 0, "pthread_key_create failed");
  for (int i = 0; i < 4; i++) {
    pthread_t t;
    lc_check(pthread_create(&t, NULL, late_thread, NULL) == 0, "pthread_create failed");
    pthread_join(t, NULL);
  }
  release_large(16);
  churn(64, 32, 11);
  lc_check(stats(&s) == 0 && s.service_running == 0, "the service started again");
  lc_say("service: after-stop ok");
}

static int after_stop_mode(void) {
  release_large(16);
  expect_purge_after(0, "the service purged nothing");
  g_after_stop_mode = true;
  return 0;
}
#endif

static void main_exits_handler(void) { lc_say("service: main-exits handler ok"); }

static void* last_worker(void* arg) {
  (void)arg;
  sleep_ms(200);
  churn(32, 64, 5);
  release_large(4);
  return NULL;
}

static int main_exits_mode(void) {
  release_large(16);
  expect_purge_after(0, "the service purged nothing");
  lc_check(atexit(main_exits_handler) == 0, "atexit failed");
  pthread_t t;
  lc_check(pthread_create(&t, NULL, last_worker, NULL) == 0, "pthread_create failed");
  pthread_exit(NULL);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "fork") == 0) return fork_mode();
  if (strcmp(mode, "exit-mid-purge") == 0) return exit_mid_purge_mode();
  if (strcmp(mode, "exit-thread") == 0) return exit_thread_mode();
  if (strcmp(mode, "atexit") == 0) return atexit_mode();
  if (strcmp(mode, "main-exits") == 0) return main_exits_mode();
#if defined(ROOST_TEST_LINKED)
  if (strcmp(mode, "after-stop") == 0) return after_stop_mode();
#endif
  fprintf(stderr, "usage: %s fork|exit-mid-purge|exit-thread|atexit|main-exits|after-stop\n",
          argv[0]);
  return 2;
}
