/* roost.h — the prefixed API of the roost allocator.
 *
 * Everything here works whether or not roost also overrides malloc: link
 * libroost-prefixed.a (CMake target roost::prefixed) to get only these
 * entry points, or libroost.a / libroost.so to get them beside the
 * overridden malloc family.  Nothing here allocates through malloc. */
#ifndef ROOST_H
#define ROOST_H

/* The version of this header (CMakeLists.txt reads it from here). */
#define ROOST_VERSION_MAJOR 0
#define ROOST_VERSION_MINOR 1
#define ROOST_VERSION_PATCH 0
/* major * 10000 + minor * 100 + patch: 0.1.0 is 100. */
#define ROOST_VERSION \
  (ROOST_VERSION_MAJOR * 10000 + ROOST_VERSION_MINOR * 100 + ROOST_VERSION_PATCH)

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the library linked or loaded, as ROOST_VERSION: compare
 * it with the header's to catch a mismatch. */
int roost_version(void);

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

/* Process-wide counters, summed over every allocator roost has created:
 * one uint64_t field per entry of roost_stats.def, in its order, each
 * described there.  Counters of other threads are read without stopping
 * them, so a snapshot taken while threads allocate is approximate; it is
 * exact once they rest. */
struct roost_stats {
#define ROOST_STAT(name, source, description) uint64_t name;
#include "roost_stats.def"
#undef ROOST_STAT
};

/* Fills *out; returns 0, or -1 if out is NULL. */
int roost_stats(struct roost_stats* out);

/* Writes the counters to stderr (one line each) with write(2). */
void roost_print_stats(void);

/* Figures of one size class, summed over every allocator: one uint64_t
 * field per ROOST_CLASS_STAT entry of roost_stats.def, in its order.  Read
 * as roost_stats() reads its counters: approximate while threads allocate. */
struct roost_class_stats {
#define ROOST_CLASS_STAT(name, description) uint64_t name;
#include "roost_stats.def"
#undef ROOST_CLASS_STAT
};

/* The number of small-object size classes (objects above the largest
 * class's size are large objects, counted in struct roost_stats only). */
unsigned roost_class_count(void);

/* Fills *out with the figures of size class `cls` (0 for the smallest);
 * returns 0, or -1 if out is NULL or cls >= roost_class_count(). */
int roost_class_stats(unsigned cls, struct roost_class_stats* out);

/* Writes the statistics as one JSON object, NUL-terminated, into buf:
 *   {"version":1,"totals":{<each roost_stats counter>:N,...},
 *    "classes":[{"class":C,<each roost_class_stats figure>:N,...},...],
 *    "huge_pages":{"heap_bytes_resident":N,"heap_bytes_huge":N,...}}
 * with the classes that have allocated or hold slabs, smallest first, and
 * no spaces or newlines; "huge_pages" (docs/STATISTICS.md) reads
 * /proc/self/smaps, so each call costs the kernel a walk of the process's
 * page tables.  Returns the length of the whole object (the NUL
 * not counted) as snprintf does: a result >= len means buf holds only its
 * first len-1 characters (a prefix, not valid JSON), so call again with a
 * bigger buffer (the figures may have grown meanwhile: leave room).  buf
 * may be NULL when len is 0 (to learn the length); returns -1 if buf is
 * NULL and len is not 0. */
int roost_stats_json(char* buf, size_t len);

/* The heap profiler (ROOST_PROFILE=1 or leaks): writes a heap profile of
 * the sampled objects now, in the format `go tool pprof` and google-pprof
 * read (see docs/PROFILING.md), to the file `path` names, where "%p" is the
 * process id; NULL: ROOST_PROFILE_FILE, or roost.%p.heap.  Returns 0, or -1
 * with errno set: ENOTSUP when profiling is off, or why the file could not
 * be written (open's errno, EIO). */
int roost_profile_dump(const char* path);

/* Writes the run-time options in force to stderr with write(2), one line
 * each: "roost: ROOST_NAME=value (where it came from)", as ROOST_VERBOSE=1
 * does at start. */
void roost_print_options(void);

#ifdef __cplusplus
}
#endif

#endif /* ROOST_H */
