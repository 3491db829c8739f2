/* A library the lifecycle programs link (DT_NEEDED), so that its
 * constructor allocates during start-up: before roost's own constructor
 * where roost is linked into the program (libroost.a) or preloaded, after
 * it where this library itself links libroost.so (built twice, see
 * CMakeLists.txt).  The constructor mallocs, callocs, reallocs and frees
 * with content checks and keeps one block for the program to check; it
 * creates a pthread key before its first allocation (so before roost's
 * own thread-exit key, created at roost's first allocation); and with
 * ROOSTTEST_LIB_ATEXIT=1 it registers an exit handler, which glibc runs
 * when it finalizes this library: after the program's destructors (with
 * libroost.a, roost's report at exit) and before those of the libraries
 * this one needs (libroost.so's report, when it links it). */
#include "needed_lib.h"

#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lifecycle.h"

static struct lc_needed_report g_report;
static pthread_key_t g_key;
static void (*g_key_hook)(void*);
static void* g_kept_for_exit;
enum { kKeptForExitSize = 5000, kKeptForExitId = 77 };

static void key_destructor(void* v) {
  if (g_key_hook != NULL) g_key_hook(v);
}

static void note(const char* failure) {
  if (g_report.failure == NULL) g_report.failure = failure;
}

/* Registered by the constructor: allocates after the program's destructors
 * have run, and frees a block allocated in the constructor. */
static void library_exit_handler(void) {
  lc_check(lc_holds(g_kept_for_exit, kKeptForExitSize, kKeptForExitId),
           "block allocated in a library constructor damaged at exit");
  free(g_kept_for_exit);
  lc_check(lc_churn(40, 91), "allocation in a library's exit handler");
  void* p = calloc(1000, 10);
  lc_check(p != NULL, "calloc in a library's exit handler");
  for (size_t i = 0; i < 10000; i++)
    lc_check(((unsigned char*)p)[i] == 0, "calloc not zero at exit");
  p = realloc(p, 200000);
  lc_check(p != NULL, "realloc in a library's exit handler");
  free(p);
  lc_say("lifecycle: library exit handler ok");
}

__attribute__((constructor)) static void allocate_at_start(void) {
  g_report.ran = 1;
  /* Nothing has been allocated yet in this process: mallinfo2's arena is
   * the bytes the allocator has taken from the system. */
  g_report.key_before_alloc = mallinfo2().arena == 0;
  if (pthread_key_create(&g_key, key_destructor) != 0) note("pthread_key_create");

  g_report.block_size = 1000;
  g_report.block = malloc(g_report.block_size);
  if (g_report.block == NULL) {
    note("malloc in a library constructor");
    return;
  }
  lc_fill(g_report.block, g_report.block_size, kLcNeededBlockId);
  g_report.usable_size = malloc_usable_size(g_report.block);
  if (g_report.usable_size < g_report.block_size) note("malloc_usable_size below the request");

  unsigned char* z = calloc(300, 10);
  if (z == NULL) note("calloc in a library constructor");
  for (size_t i = 0; z != NULL && i < 3000; i++)
    if (z[i] != 0) {
      note("calloc not zero in a library constructor");
      break;
    }
  free(z);

  char* r = malloc(16);
  if (r == NULL) {
    note("malloc(16) in a library constructor");
    return;
  }
  memcpy(r, "library start-up", 16);
  r = realloc(r, 100000);
  if (r == NULL || memcmp(r, "library start-up", 16) != 0)
    note("realloc lost the contents in a library constructor");
  r = realloc(r, 40);
  if (r == NULL || memcmp(r, "library start-up", 16) != 0)
    note("shrinking realloc lost the contents in a library constructor");
  free(r);

  if (!lc_churn(64, 5)) note("churn in a library constructor");

  const char* e = getenv("ROOSTTEST_LIB_ATEXIT");
  if (e != NULL && strcmp(e, "1") == 0) {
    g_kept_for_exit = malloc(kKeptForExitSize);
    if (g_kept_for_exit == NULL) {
      note("malloc for the exit handler");
      return;
    }
    lc_fill(g_kept_for_exit, kKeptForExitSize, kKeptForExitId);
    if (atexit(library_exit_handler) != 0) note("atexit in a library constructor");
  }
}

const struct lc_needed_report* lc_needed_report(void) { return &g_report; }

pthread_key_t lc_needed_key(void) { return g_key; }

void lc_needed_set_key_hook(void (*hook)(void*)) { g_key_hook = hook; }
