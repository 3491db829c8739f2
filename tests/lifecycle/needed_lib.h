/* The interface of needed_lib.c, the library the lifecycle programs link
 * (DT_NEEDED), to the program. */
#ifndef ROOST_TESTS_LIFECYCLE_NEEDED_LIB_H
#define ROOST_TESTS_LIFECYCLE_NEEDED_LIB_H

#include <pthread.h>
#include <stddef.h>

/* What the library's constructor did. */
struct lc_needed_report {
  int ran;             /* the constructor ran */
  const char* failure; /* NULL, or the first check that failed */
  void* block;         /* allocated and filled (id kLcNeededBlockId), kept */
  size_t block_size;
  size_t usable_size;   /* malloc_usable_size(block) in the constructor */
  int key_before_alloc; /* the key was created before anything was allocated */
};

enum { kLcNeededBlockId = 4242 };

const struct lc_needed_report* lc_needed_report(void);

/* A pthread key the constructor created, before its first allocation.  Its
 * destructor calls the hook set here (none: it does nothing). */
pthread_key_t lc_needed_key(void);
void lc_needed_set_key_hook(void (*hook)(void*));

#endif
