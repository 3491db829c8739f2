/* tests/timeline/timeline_probe.c — a program for timeline_check.py, run
 * with ROOST_STATS_INTERVAL: three threads allocate and hold objects, free
 * some of each other's (remote frees), then free everything; main trims and
 * forks a child that allocates and exits.  It stops twice for the checker
 * (a line on stdout, then a line on stdin) so that the checker can wait for
 * the timeline to show what it holds, and at the end prints what it did.
 *
 * Owns: the workload and its counts.  Must never: depend on timing (every
 * wait is for the checker or for its own threads). */
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { kThreads = 3, kHeld = 2000, kHeldSize = 1000, kPassed = 1000, kPassedSize = 48 };

static void* held[kThreads][kHeld];
static void* passed[kThreads][kPassed];
static pthread_barrier_t made, go, freed;

static void* worker(void* arg) {
  int me = (int)(long)arg;
  for (int i = 0; i < kHeld; i++) {
    held[me][i] = malloc(kHeldSize);
    memset(held[me][i], me, kHeldSize);
  }
  for (int i = 0; i < kPassed; i++) passed[me][i] = malloc(kPassedSize);
  pthread_barrier_wait(&made);
  pthread_barrier_wait(&go);
  /* The next thread's passed objects: frees of another thread's objects. */
  int other = (me + 1) % kThreads;
  for (int i = 0; i < kPassed; i++) free(passed[other][i]);
  for (int i = 0; i < kHeld; i++) free(held[me][i]);
  pthread_barrier_wait(&freed);
  return NULL;
}

static void wait_for_checker(const char* said) {
  printf("%s\n", said);
  fflush(stdout);
  char line[64];
  if (fgets(line, sizeof(line), stdin) == NULL) exit(3);
}

int main(void) {
  pthread_t t[kThreads];
  pthread_barrier_init(&made, NULL, kThreads + 1);
  pthread_barrier_init(&go, NULL, kThreads + 1);
  pthread_barrier_init(&freed, NULL, kThreads + 1);
  for (int i = 0; i < kThreads; i++) pthread_create(&t[i], NULL, worker, (void*)(long)i);
  pthread_barrier_wait(&made);
  char said[128];
  snprintf(said, sizeof(said), "held bytes=%d objects=%d size=%d", kThreads * kHeld * kHeldSize,
           kThreads * kHeld, kHeldSize);
  wait_for_checker(said);
  pthread_barrier_wait(&go);
  pthread_barrier_wait(&freed);
  for (int i = 0; i < kThreads; i++) pthread_join(t[i], NULL);
  malloc_trim(0);
  wait_for_checker("trimmed");
  fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    void* p[100];
    for (int i = 0; i < 100; i++) p[i] = malloc(200);
    for (int i = 0; i < 100; i++) free(p[i]);
    exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  printf("done pid=%d child=%d allocations=%d frees=%d remote_frees=%d held_bytes=%d\n",
         (int)getpid(), (int)child, kThreads * (kHeld + kPassed), kThreads * (kHeld + kPassed),
         kThreads * kPassed, kThreads * kHeld * kHeldSize);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 4;
}
