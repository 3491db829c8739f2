/* The lifecycle program (C): early and late calls, one mode per ctest test
 * (lifecycle_run.py runs it and checks its exit status and output).  Built
 * linked to libroost.a, linked to libroost.so (DT_NEEDED) and unlinked for
 * LD_PRELOAD; every build links needed_lib.c's library, whose constructor
 * has allocated before main.
 *
 *   needed           the library constructor's allocations came from roost
 *                    and hold their data; a library opened with dlopen()
 *                    allocates and frees in its constructor and destructor
 *   atexit           exit handlers registered before roost's start-up (by
 *                    the library, ROOSTTEST_LIB_ATEXIT=1) and after it (by
 *                    main) allocate, check and free
 *   key-rounds       a pthread key created before roost's re-arms itself in
 *                    every destructor round of many exiting threads, and
 *                    allocates and frees in each, after roost's exit hook
 *   exit-race        workers allocate, free and pass objects among
 *                    themselves while main calls exit(0)
 *   exit-race-thread the same, a worker calling exit(0) while main churns
 *   prefixed-plugin PATH  dlopen/use/dlclose of prefixed_plugin.c three
 *                    times, with threads exiting and fork after each close
 *   dlopen-roost PATH refused|shared  dlopen of libroost.so: refused with
 *                    glibc's "cannot be dlopen()ed", or (preloaded) the
 *                    library already serving malloc
 *
 * A failed check prints "lifecycle: FAILED: ..." and exits 3; a mode that
 * completes prints "lifecycle: <mode> ok". */
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lifecycle.h"
#include "needed_lib.h"
#include "roost.h"

#ifdef ROOST_TEST_LINKED
#define ROOST_ENTRY(name) (&name)
#else
#define ROOST_ENTRY(name) ((__typeof__(&name))dlsym(RTLD_DEFAULT, #name))
#endif

static struct roost_stats roost_figures(void) {
  struct roost_stats s;
  memset(&s, 0, sizeof s);
  int (*fn)(struct roost_stats*) = ROOST_ENTRY(roost_stats);
  lc_check(fn != NULL, "roost is not serving this process");
  fn(&s);
  return s;
}

/* Starts `n` threads running `body(i)` and joins them. */
static void run_threads(int n, void* (*body)(void*)) {
  pthread_t t[64];
  lc_check(n <= 64, "too many threads");
  for (int i = 0; i < n; i++)
    lc_check(pthread_create(&t[i], NULL, body, (void*)(intptr_t)i) == 0, "pthread_create");
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
}

static void* churn_thread(void* arg) {
  lc_check(lc_churn(64, 500 + (uint64_t)(intptr_t)arg), "churn in a thread");
  return NULL;
}

/* --- needed ---------------------------------------------------------------- */

static void check_library_constructor(void) {
  const struct lc_needed_report* r = lc_needed_report();
  lc_check(r->ran, "the library constructor did not run");
  if (r->failure != NULL) lc_fail(r->failure);
  lc_check(lc_holds(r->block, r->block_size, kLcNeededBlockId),
           "block from the library constructor damaged");
  /* roost aborts on a pointer it never handed out: this is roost's block. */
  lc_check(malloc_usable_size(r->block) == r->usable_size,
           "malloc_usable_size of the library constructor's block changed");
  struct roost_stats s = roost_figures();
  lc_check(s.allocations >= 5 && s.bytes_in_use >= r->block_size,
           "roost's statistics do not count the library constructor's allocations");
  void* grown = realloc(r->block, 50000);
  lc_check(grown != NULL && lc_holds(grown, r->block_size, kLcNeededBlockId),
           "realloc in main of the library constructor's block");
  free(grown);
}

static void mode_needed(const char* dl_path) {
  check_library_constructor();
  for (int cycle = 0; cycle < 3; cycle++) {
    uint64_t before = roost_figures().allocations;
    void* h = dlopen(dl_path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) lc_fail(dlerror());
    lc_check(roost_figures().allocations >= before + 64,
             "the dlopen()ed library's constructor did not allocate from roost");
    void* (*block_fn)(size_t*, uint64_t*) = (void* (*)(size_t*, uint64_t*))dlsym(h, "lc_dl_block");
    void (*report_fn)(int*) = (void (*)(int*))dlsym(h, "lc_dl_report_destructor_to");
    lc_check(block_fn != NULL && report_fn != NULL, "dlsym in the dlopen()ed library");
    size_t size;
    uint64_t id;
    void* block = block_fn(&size, &id);
    lc_check(block != NULL, "the dlopen()ed library's constructor failed");
    lc_check(lc_holds(block, size, id), "block from the dlopen()ed library damaged");
    lc_check(malloc_usable_size(block) >= size, "malloc_usable_size of the dlopen()ed block");
    int destructor_ok = -1;
    report_fn(&destructor_ok);
    lc_check(dlclose(h) == 0, "dlclose");
    lc_check(destructor_ok == 1, "the dlopen()ed library's destructor failed");
    lc_check(dlopen(dl_path, RTLD_NOW | RTLD_NOLOAD) == NULL, "dlclose left the library loaded");
  }
  run_threads(4, churn_thread);
  lc_say("lifecycle: needed ok");
}

/* --- atexit ---------------------------------------------------------------- */

static void* g_main_kept;
enum { kMainKeptSize = 70000, kMainKeptId = 55 };

static void main_exit_handler(void) {
  lc_check(lc_holds(g_main_kept, kMainKeptSize, kMainKeptId), "main's block damaged at exit");
  free(g_main_kept);
  lc_check(lc_churn(64, 66), "allocation in main's exit handler");
  char* s = strdup("an exit handler's string");
  lc_check(s != NULL && strcmp(s, "an exit handler's string") == 0, "strdup at exit");
  free(s);
  lc_say("lifecycle: main exit handler ok");
}

static void mode_atexit(void) {
  check_library_constructor();
  g_main_kept = malloc(kMainKeptSize);
  lc_check(g_main_kept != NULL, "malloc");
  lc_fill(g_main_kept, kMainKeptSize, kMainKeptId);
  lc_check(atexit(main_exit_handler) == 0, "atexit");
  run_threads(4, churn_thread);
  lc_say("lifecycle: atexit ok");
}

/* --- key-rounds ------------------------------------------------------------ */

/* PTHREAD_DESTRUCTOR_ITERATIONS: glibc calls a key's destructor again while
 * it stores a new value, up to this many rounds. */
enum { kRounds = 4, kEarly = 8, kKeyThreads = 32, kKeyWaves = 3 };

struct thread_state {
  uint64_t id;         /* pattern ids of this thread's objects start here */
  int round;           /* destructor rounds done */
  void* early[kEarly]; /* allocated by the thread before it exited */
  size_t early_size[kEarly];
  void* last; /* allocated in the previous round */
  size_t last_size;
};

static atomic_int g_rounds_run;

/* Objects made in destructors, checked and freed by main. */
static pthread_mutex_t g_handoff_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  void* p;
  size_t n;
  uint64_t id;
} g_handoffs[kKeyThreads * kKeyWaves * kRounds];
static int g_handoff_count;

static void hand_off(void* p, size_t n, uint64_t id) {
  pthread_mutex_lock(&g_handoff_lock);
  lc_check(g_handoff_count < (int)(sizeof g_handoffs / sizeof g_handoffs[0]), "too many handoffs");
  g_handoffs[g_handoff_count].p = p;
  g_handoffs[g_handoff_count].n = n;
  g_handoffs[g_handoff_count].id = id;
  g_handoff_count++;
  pthread_mutex_unlock(&g_handoff_lock);
}

static void key_round(void* v) {
  struct thread_state* s = v;
  int r = s->round++;
  atomic_fetch_add(&g_rounds_run, 1);
  /* Free two of the objects the thread made while it ran. */
  for (int i = 2 * r; i < 2 * r + 2; i++) {
    lc_check(lc_holds(s->early[i], s->early_size[i], s->id + (uint64_t)i),
             "an object of the exiting thread was damaged");
    free(s->early[i]);
  }
  if (s->last != NULL) {
    lc_check(lc_holds(s->last, s->last_size, s->id + 100 + (uint64_t)r),
             "an object allocated in the previous destructor round was damaged");
    free(s->last);
    s->last = NULL;
  }
  lc_check(lc_churn(24, s->id + 1000 + (uint64_t)r), "churn in a key destructor");
  size_t n = 100 + (size_t)r * 3000;
  void* out = malloc(n);
  lc_check(out != NULL, "malloc in a key destructor");
  lc_fill(out, n, s->id + 200 + (uint64_t)r);
  hand_off(out, n, s->id + 200 + (uint64_t)r);
  if (r + 1 < kRounds) {
    s->last_size = 40 + (size_t)r * 1000;
    s->last = malloc(s->last_size);
    lc_check(s->last != NULL, "malloc in a key destructor");
    lc_fill(s->last, s->last_size, s->id + 100 + (uint64_t)r + 1);
    s = realloc(s, sizeof *s + 64 * (size_t)(r + 1));
    lc_check(s != NULL, "realloc in a key destructor");
    pthread_setspecific(lc_needed_key(), s);
  } else {
    free(s);
  }
}

static void* key_thread(void* arg) {
  struct thread_state* s = malloc(sizeof *s);
  lc_check(s != NULL, "malloc");
  memset(s, 0, sizeof *s);
  s->id = 1000000 * (uint64_t)(1 + (intptr_t)arg);
  for (int i = 0; i < kEarly; i++) {
    s->early_size[i] = 16 + (size_t)i * 700;
    s->early[i] = malloc(s->early_size[i]);
    lc_check(s->early[i] != NULL, "malloc");
    lc_fill(s->early[i], s->early_size[i], s->id + (uint64_t)i);
  }
  lc_check(lc_churn(64, s->id), "churn in a thread");
  pthread_setspecific(lc_needed_key(), s);
  return NULL;
}

static void mode_key_rounds(void) {
  lc_check(lc_needed_report()->key_before_alloc,
           "the library's key was not created before the first allocation");
  lc_needed_set_key_hook(key_round);
  for (int wave = 0; wave < kKeyWaves; wave++) run_threads(kKeyThreads, key_thread);
  lc_check(atomic_load(&g_rounds_run) == kKeyThreads * kKeyWaves * kRounds,
           "the key destructor did not run in every round");
  for (int i = 0; i < g_handoff_count; i++) {
    lc_check(lc_holds(g_handoffs[i].p, g_handoffs[i].n, g_handoffs[i].id),
             "an object allocated in a key destructor was damaged");
    free(g_handoffs[i].p);
  }
  run_threads(8, churn_thread);
  lc_say("lifecycle: key-rounds ok");
}

/* --- exit-race ------------------------------------------------------------- */

/* Objects in flight between workers: each slot holds one or none. */
enum { kSlots = 256, kWorkers = 4 };

struct object_header {
  size_t size;
  uint64_t id;
};

static _Atomic(struct object_header*) g_slots[kSlots];
static atomic_uint_fast64_t g_next_id = 1;

static void check_and_free(struct object_header* h) {
  lc_check(lc_holds(h + 1, h->size - sizeof *h, h->id),
           "an object passed between threads was damaged");
  free(h);
}

static void* exchange_thread(void* arg) {
  uint64_t x = 88172645463325252ull ^ (uint64_t)(intptr_t)arg;
  for (;;) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    size_t n = sizeof(struct object_header) + (x % 64 == 0 ? 300000 : x % 1500);
    struct object_header* h = malloc(n);
    lc_check(h != NULL, "malloc while another thread exits the process");
    h->size = n;
    h->id = atomic_fetch_add(&g_next_id, 1);
    lc_fill(h + 1, n - sizeof *h, h->id);
    struct object_header* old = atomic_exchange(&g_slots[(x >> 20) % kSlots], h);
    if (old != NULL) check_and_free(old);
  }
  return NULL;
}

/* A short wait, different in every run: exit lands at varied moments. */
static void short_wait(void) {
  struct timespec ts = {0, (long)(getpid() % 4000) * 1000};
  nanosleep(&ts, NULL);
}

static void* exiting_thread(void* arg) {
  short_wait();
  exit(0);
}

static void race_exit_handler(void) { lc_check(lc_churn(32, 4), "churn in an exit handler"); }

static void mode_exit_race(int from_thread) {
  lc_check(atexit(race_exit_handler) == 0, "atexit");
  pthread_t t;
  for (int i = 0; i < kWorkers; i++)
    lc_check(pthread_create(&t, NULL, exchange_thread, (void*)(intptr_t)i) == 0, "pthread_create");
  if (!from_thread) {
    short_wait();
    exit(0);
  }
  lc_check(pthread_create(&t, NULL, exiting_thread, NULL) == 0, "pthread_create");
  for (uint64_t seed = 0;; seed++) lc_check(lc_churn(16, seed), "churn in main while exiting");
}

/* --- prefixed-plugin ------------------------------------------------------- */

static pthread_mutex_t g_linger_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_linger_cond = PTHREAD_COND_INITIALIZER;
static int g_linger_state; /* 1: used the plugin; 2: the plugin is closed */
static void* (*g_plugin_keep)(size_t);

/* Allocates through the plugin, then waits until main has closed it, and
 * exits: the plugin's roost armed this thread's exit hook. */
static void* lingering_thread(void* arg) {
  void* kept = g_plugin_keep(100);
  lc_check(kept != NULL, "roost_malloc in the plugin from a thread");
  pthread_mutex_lock(&g_linger_lock);
  g_linger_state = 1;
  pthread_cond_broadcast(&g_linger_cond);
  while (g_linger_state != 2) pthread_cond_wait(&g_linger_cond, &g_linger_lock);
  pthread_mutex_unlock(&g_linger_lock);
  return NULL;
}

static void set_linger_state(int state) {
  pthread_mutex_lock(&g_linger_lock);
  g_linger_state = state;
  pthread_cond_broadcast(&g_linger_cond);
  pthread_mutex_unlock(&g_linger_lock);
}

static void wait_linger_state(int state) {
  pthread_mutex_lock(&g_linger_lock);
  while (g_linger_state != state) pthread_cond_wait(&g_linger_cond, &g_linger_lock);
  pthread_mutex_unlock(&g_linger_lock);
}

static void mode_prefixed_plugin(const char* path) {
  for (int cycle = 0; cycle < 3; cycle++) {
    void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) lc_fail(dlerror());
    int (*use)(int) = (int (*)(int))dlsym(h, "lc_plugin_use");
    g_plugin_keep = (void* (*)(size_t))dlsym(h, "lc_plugin_keep");
    lc_check(use != NULL && g_plugin_keep != NULL, "dlsym in the plugin");
    lc_check(dlsym(h, "roost_malloc") == NULL, "the plugin exports roost's symbols");
    lc_check(use(1), "the plugin's first use of its roost failed");
    lc_check(use(0), "the plugin's second use of its roost failed");
    lc_check(g_plugin_keep(5000) != NULL, "roost_malloc in the plugin from main");
    pthread_t linger;
    g_linger_state = 0;
    lc_check(pthread_create(&linger, NULL, lingering_thread, NULL) == 0, "pthread_create");
    wait_linger_state(1);
    lc_check(dlclose(h) == 0, "dlclose");
    lc_check(dlopen(path, RTLD_NOW | RTLD_NOLOAD) == NULL, "dlclose left the plugin loaded");
    /* A thread that used the plugin exits after the plugin is gone. */
    set_linger_state(2);
    pthread_join(linger, NULL);
    run_threads(8, churn_thread);
    fflush(NULL);
    pid_t pid = fork();
    lc_check(pid >= 0, "fork");
    if (pid == 0) {
      lc_check(lc_churn(64, 9), "churn in the child of fork");
      run_threads(2, churn_thread);
      _exit(0);
    }
    int status = 0;
    lc_check(waitpid(pid, &status, 0) == pid, "waitpid");
    lc_check(WIFEXITED(status) && WEXITSTATUS(status) == 0,
             "the child forked after dlclose of the plugin failed");
  }
  lc_say("lifecycle: prefixed-plugin ok");
}

/* --- dlopen-roost ---------------------------------------------------------- */

static void mode_dlopen_roost(const char* path, const char* expect) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (strcmp(expect, "refused") == 0) {
    lc_check(h == NULL, "dlopen of libroost.so into a running program was not refused");
    const char* err = dlerror();
    lc_check(err != NULL && strstr(err, "shared object cannot be dlopen()ed") != NULL,
             "dlopen of libroost.so failed, but not as a library that cannot be dlopen()ed");
  } else {
    if (h == NULL) lc_fail(dlerror());
    lc_check(dlsym(h, "malloc") == dlsym(RTLD_DEFAULT, "malloc"),
             "dlopen of the preloaded libroost.so gave another malloc");
  }
  lc_check(lc_churn(64, 1), "churn after dlopen of libroost.so");
  run_threads(4, churn_thread);
  lc_say("lifecycle: dlopen-roost ok");
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "needed") == 0 && argc == 3) {
    mode_needed(argv[2]);
  } else if (strcmp(mode, "atexit") == 0) {
    mode_atexit();
  } else if (strcmp(mode, "key-rounds") == 0) {
    mode_key_rounds();
  } else if (strcmp(mode, "exit-race") == 0) {
    mode_exit_race(0);
  } else if (strcmp(mode, "exit-race-thread") == 0) {
    mode_exit_race(1);
  } else if (strcmp(mode, "prefixed-plugin") == 0 && argc == 3) {
    mode_prefixed_plugin(argv[2]);
  } else if (strcmp(mode, "dlopen-roost") == 0 && argc == 4) {
    mode_dlopen_roost(argv[2], argv[3]);
  } else {
    lc_fail("usage: lifecycle MODE [ARGS] (see the comment at the top of lifecycle_main.c)");
  }
  return 0;
}
