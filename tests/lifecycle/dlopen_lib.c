/* A library the lifecycle program opens with dlopen() at run time: its
 * constructor allocates and keeps a block, its destructor (run by dlclose)
 * checks and frees that block, allocates and frees more, and reports
 * through a flag the program gave it. */
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>

#include "lifecycle.h"

enum { kBlockSize = 3000, kBlockId = 999 };

static void* g_block;
static size_t g_usable;
static int g_constructor_ok;
static int* g_destructor_ok;

__attribute__((constructor)) static void allocate_when_opened(void) {
  g_block = malloc(kBlockSize);
  if (g_block == NULL) return;
  lc_fill(g_block, kBlockSize, kBlockId);
  g_usable = malloc_usable_size(g_block);
  g_constructor_ok = g_usable >= kBlockSize && lc_churn(64, 17);
}

__attribute__((destructor)) static void free_when_closed(void) {
  int ok = g_block != NULL && lc_holds(g_block, kBlockSize, kBlockId) &&
           malloc_usable_size(g_block) == g_usable;
  free(g_block);
  ok = ok && lc_churn(64, 18);
  if (g_destructor_ok != NULL) *g_destructor_ok = ok;
}

/* The kept block and its id, or NULL when the constructor failed. */
void* lc_dl_block(size_t* size, uint64_t* id) {
  *size = kBlockSize;
  *id = kBlockId;
  return g_constructor_ok ? g_block : NULL;
}

void lc_dl_report_destructor_to(int* ok) { g_destructor_ok = ok; }
