// tests/dump/dump_program.c — a program to take dumps from
// (ROOST_DUMP_SIGNAL), driven by dump_check.py through stdin and stdout.
//
//   dump_program work     4 threads allocate and free (objects kept a while,
//                         some freed by another thread) until stdin closes;
//                         each line "round" on stdin makes the main thread
//                         allocate 1000 more objects (it answers "ok"), so
//                         the counters of a dump taken after it must have
//                         moved; prints "ready" once every thread has done a
//                         first pass.  A
//                         line "fork" forks a child that allocates (a large
//                         object freed among them: its service starts
//                         again), prints "child PID" and waits until the
//                         file "stop-child" appears in the working
//                         directory; "reap" then waits for it and answers
//                         "reaped STATUS"
//   dump_program storm N  N threads do nothing but malloc and free (small
//                         objects, and every 64th a large one) as fast as
//                         they can, until stdin closes
//   dump_program own      (built with ROOST_TEST_OWN_HANDLER, roost linked
//                         in) the program's own SIGUSR2 handler, installed
//                         by a constructor that runs before roost's; each
//                         line "count" on stdin is answered with the times
//                         it ran
// Each exits with status 0 once its threads are joined.
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static atomic_int g_stop;
// Threads that finished their first pass: "ready" waits for all of them, so
// that a dump taken after it holds every thread's allocations (its profile
// their samples), however late the threads were scheduled.
static atomic_int g_started;
static atomic_int g_own_handler_runs;

#ifdef ROOST_TEST_OWN_HANDLER
static void own_handler(int sig) {
  (void)sig;
  atomic_fetch_add(&g_own_handler_runs, 1);
}

// Before roost's start-up (a constructor of default priority, in the same
// executable): roost finds the signal taken.
__attribute__((constructor(101))) static void install_own_handler(void) {
  struct sigaction act;
  memset(&act, 0, sizeof(act));
  act.sa_handler = own_handler;
  act.sa_flags = SA_RESTART;
  sigemptyset(&act.sa_mask);
  sigaction(SIGUSR2, &act, NULL);
}
#endif

// A worker's objects, some handed to the next worker to free.
#define KEEP 256
static void* volatile g_handoff[4][KEEP];

static void* work_thread(void* arg) {
  unsigned id = (unsigned)(size_t)arg, seed = id + 1;
  void* kept[KEEP] = {0};
  int started = 0;
  while (!atomic_load(&g_stop)) {
    for (unsigned i = 0; i < KEEP; i++) {
      seed = seed * 1103515245u + 12345u;
      free(kept[i]);
      kept[i] = malloc(16 + (seed >> 16) % 2000);
      if (kept[i] != NULL) memset(kept[i], (int)i, 16);
    }
    // Hand one object to the next thread, free the one handed to us.
    unsigned slot = seed % KEEP;
    void* mine = __atomic_exchange_n(&g_handoff[(id + 1) % 4][slot], kept[slot], __ATOMIC_ACQ_REL);
    kept[slot] = NULL;
    free(mine);
    if (!started) atomic_fetch_add(&g_started, 1);
    started = 1;
  }
  for (unsigned i = 0; i < KEEP; i++) free(kept[i]);
  return NULL;
}

static void* storm_thread(void* arg) {
  unsigned seed = (unsigned)(size_t)arg + 1;
  int started = 0;
  while (!atomic_load(&g_stop)) {
    for (unsigned i = 0; i < 1024; i++) {
      seed = seed * 1103515245u + 12345u;
      size_t size = i % 64 == 63 ? 65536 + (seed >> 8) % (1 << 20) : 8 + (seed >> 16) % 1024;
      void* p = malloc(size);
      if (p == NULL) abort();
      *(volatile char*)p = 1;
      free(p);
    }
    if (!started) atomic_fetch_add(&g_started, 1);
    started = 1;
  }
  return NULL;
}

// The forked child: allocates, says it is there, waits for its stop file.
static void child(void) {
  void* kept[4000];
  for (int i = 0; i < 4000; i++) kept[i] = malloc(16 + (size_t)(i % 8) * 200);
  for (int i = 0; i < 4000; i++) free(kept[i]);
  free(malloc(1 << 20));
  printf("child %d\n", (int)getpid());
  fflush(stdout);
  struct stat st;
  while (stat("stop-child", &st) != 0) usleep(10000);
  exit(0);
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  int threads = 4;
  void* (*body)(void*) = work_thread;
  if (strcmp(argv[1], "storm") == 0) {
    threads = argc > 2 ? atoi(argv[2]) : 8;
    body = storm_thread;
  } else if (strcmp(argv[1], "own") == 0) {
    threads = 1;
  } else if (strcmp(argv[1], "work") != 0) {
    return 2;
  }
  pthread_t t[64];
  if (threads < 1 || threads > 64) return 2;
  for (int i = 0; i < threads; i++)
    if (pthread_create(&t[i], NULL, body, (void*)(size_t)i) != 0) return 3;
  while (atomic_load(&g_started) < threads) usleep(1000);
  printf("ready\n");
  fflush(stdout);
  char line[64];
  void* round[1000];
  pid_t forked = -1;
  while (fgets(line, sizeof(line), stdin) != NULL) {
    if (strcmp(line, "round\n") == 0) {
      for (int i = 0; i < 1000; i++) round[i] = malloc(100);
      for (int i = 0; i < 1000; i++) free(round[i]);
      printf("ok\n");
    } else if (strcmp(line, "fork\n") == 0) {
      forked = fork();
      if (forked == 0) child();
      if (forked < 0) printf("fork failed\n");
    } else if (strcmp(line, "reap\n") == 0) {
      int status = -1;
      if (forked > 0) waitpid(forked, &status, 0);
      printf("reaped %d\n", status);
    } else if (strcmp(line, "count\n") == 0) {
      printf("%d\n", atomic_load(&g_own_handler_runs));
    } else {
      printf("?\n");
    }
    fflush(stdout);
  }
  atomic_store(&g_stop, 1);
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  for (unsigned w = 0; w < 4; w++)
    for (unsigned i = 0; i < KEEP; i++) free(g_handoff[w][i]);
  return 0;
}
