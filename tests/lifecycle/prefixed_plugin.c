/* A plugin that embeds roost privately: linked with libroost-prefixed.a
 * (its roost_* symbols kept local by --exclude-libs), opened and closed
 * with dlopen()/dlclose() by the lifecycle program, possibly several times.
 * It allocates with roost_malloc in the calling thread and in a thread it
 * starts, passes objects between the two, and reads roost_stats: each load
 * has a fresh roost whose figures start at zero.  The thread-exit key, the
 * fork handlers its roost registers and its service thread must not outlive
 * the plugin. */
#include <pthread.h>
#include <stdint.h>

#include "lifecycle.h"
#include "roost.h"

enum { kObjects = 400 };

struct batch {
  void* p[kObjects];
  size_t n[kObjects];
  uint64_t seed;
};

static void batch_fill(struct batch* b, uint64_t seed) {
  b->seed = seed;
  for (int i = 0; i < kObjects; i++) {
    b->n[i] = i % 50 == 49 ? 300000 : 1 + (size_t)(i * 37 % 3000);
    b->p[i] = roost_malloc(b->n[i]);
    if (b->p[i] != NULL) lc_fill(b->p[i], b->n[i], seed + (uint64_t)i);
  }
}

/* Checks and frees a batch; false when an object is missing or damaged. */
static int batch_free(struct batch* b) {
  int ok = 1;
  for (int i = 0; i < kObjects; i++) {
    ok &= b->p[i] != NULL && lc_holds(b->p[i], b->n[i], b->seed + (uint64_t)i);
    roost_free(b->p[i]);
  }
  return ok;
}

static struct batch g_from_caller, g_from_thread;
static int g_thread_ok;

/* Frees the caller's objects (remote frees), makes its own for the caller. */
static void* plugin_thread(void* arg) {
  g_thread_ok = batch_free(&g_from_caller);
  batch_fill(&g_from_thread, 20000);
  return NULL;
}

/* Uses this load's roost from the calling thread and from a thread of the
 * plugin's own; 1 when everything held, 0 otherwise.  `fresh`: this is the
 * first use since the plugin was loaded, so roost's figures start at 0. */
int lc_plugin_use(int fresh) {
  struct roost_stats s;
  if (roost_stats(&s) != 0) return 0;
  if (fresh && s.allocations != 0) return 0;
  batch_fill(&g_from_caller, 10000);
  pthread_t t;
  if (pthread_create(&t, NULL, plugin_thread, NULL) != 0) return 0;
  pthread_join(t, NULL);
  if (!g_thread_ok || !batch_free(&g_from_thread)) return 0;
  if (roost_stats(&s) != 0) return 0;
  /* The large objects freed started this roost's service thread, which its
   * destructor must stop and join before dlclose() unmaps its code. */
  return s.allocations >= (fresh ? 2u : 1u) * kObjects && s.remote_frees > 0 &&
         s.service_running == 1;
}

/* Allocates in the calling thread and keeps the object, so the thread's
 * allocator stays bound (its exit hook armed) past this call. */
void* lc_plugin_keep(size_t n) {
  void* p = roost_malloc(n);
  if (p != NULL) lc_fill(p, n, 31337);
  return p;
}
