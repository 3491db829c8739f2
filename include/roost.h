/* roost.h — the prefixed API of the roost allocator.
 *
 * Everything here works whether or not roost also overrides malloc: link
 * libroost-prefixed.a (CMake target roost::prefixed) to get only these
 * entry points, or libroost.a / libroost.so to get them beside the
 * overridden malloc family.  Nothing here allocates through malloc. */
#ifndef ROOST_H
#define ROOST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

void* roost_malloc(size_t size);
void roost_free(void* ptr);
void* roost_calloc(size_t count, size_t size);
void* roost_realloc(void* ptr, size_t size);
void* roost_aligned_alloc(size_t alignment, size_t size);
size_t roost_usable_size(const void* ptr);

/* malloc_trim(0) by another name: delivers the frees still in flight to
 * allocators of exited threads, and returns cached memory to the OS.
 * Returns 1 if memory was released, else 0. */
int roost_trim(void);

/* Process-wide counters, summed over every allocator roost has created.
 * Counters of other threads are read without stopping them, so a snapshot
 * taken while threads allocate is approximate; it is exact once they rest. */
struct roost_stats {
  uint64_t bytes_in_use;      /* usable bytes of live objects, small and large */
  uint64_t bytes_committed;   /* bytes of address space roost holds not purged */
  uint64_t bytes_reserved;    /* address space reserved from the OS */
  uint64_t allocations;       /* successful allocations since start */
  uint64_t frees;             /* frees of non-NULL pointers since start */
  uint64_t large_allocations; /* of which served by the large-object path */
  uint64_t slabs;             /* small-object slabs currently held */
  uint64_t chunks;            /* backend chunks currently handed out */
  uint64_t allocators;        /* per-thread allocators created so far */
  /* Message passing (frees of objects another thread's allocator owns). */
  uint64_t remote_frees;       /* frees of objects owned by another allocator */
  uint64_t messages_sent;      /* objects posted to an inbox, forwarded ones included */
  uint64_t batches_sent;       /* inbox enqueues (one atomic exchange each) */
  uint64_t messages_received;  /* objects taken from an inbox */
  uint64_t messages_forwarded; /* received objects owned by a third allocator, sent on */
  uint64_t inbox_drains;       /* inbox visits that found messages */
  /* BatchIt: each message is a batch of objects of one slab (one object
   * when BatchIt is off); objects per batch = messages_sent / slab_batches_sent. */
  uint64_t slab_batches_sent;     /* batch messages posted, forwarded ones included */
  uint64_t slab_batches_received; /* batch messages taken from an inbox */
  uint64_t batchit_evictions;     /* batches evicted from a full cache set */
  uint64_t bytes_dirty;           /* of bytes_committed: released, purged after a delay */
};

/* Fills *out; returns 0, or -1 if out is NULL. */
int roost_stats(struct roost_stats* out);

/* Writes the counters to stderr (one line each) with write(2). */
void roost_print_stats(void);

/* Writes the run-time options in force to stderr with write(2), one line
 * each: "roost: ROOST_NAME=value (where it came from)", as ROOST_VERBOSE=1
 * does at start. */
void roost_print_options(void);

#ifdef __cplusplus
}
#endif

#endif /* ROOST_H */
