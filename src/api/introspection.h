// api/introspection.h — glibc's malloc introspection calls, answered with
// roost's figures: mallinfo2, mallinfo, malloc_stats, malloc_info, mallopt.
//
// Owns: what each glibc field and element means under roost, and which
// mallopt parameters roost honours (the table in docs/STATISTICS.md).  The names
// themselves are in api/override_malloc.cc, beside malloc: a static link
// that took glibc's mallinfo2 would take glibc's malloc with it.  Must
// never: stop threads, or call stdio (which may allocate) while it holds a
// lock or before its figures are read.
#pragma once

#include <malloc.h>
#include <stdio.h>

namespace roost::api {

// glibc's fields from roost's figures: arena is roost's committed bytes
// (chunks handed out and released ones not yet purged), hblks/hblkhd the
// objects mapped alone (beyond a region's size) and their bytes, uordblks
// the bytes in use within arena, fordblks arena less uordblks, keepcost the
// released bytes awaiting their purge (what malloc_trim gives back at
// once); ordblks, smblks, usmblks and fsmblks (glibc's free lists and an
// obsolete field) are 0.
struct mallinfo2 mallinfo2();
// The same in int fields: each saturates at INT_MAX (glibc wraps).
struct mallinfo mallinfo();

// Writes to stderr, with write(2): glibc's figures in glibc's layout (one
// "Arena 0", the total including mapped objects), then roost's counters as
// roost_print_stats() writes them.
void malloc_stats();

// Writes glibc's XML document to `fp`: per size class holding slabs, a
// <size> element with the class's free objects (in its slabs and not
// handed out) and their bytes; the totals; roost's committed and reserved
// bytes.  Returns 0; -1 with errno EINVAL if `options` is not 0 (glibc's
// rule) or `fp` is NULL; -1 if writing to `fp` failed.
int malloc_info(int options, FILE* fp);

// 1 when roost honours `param` (M_TRIM_THRESHOLD sets ROOST_SLAB_RESERVE)
// or the parameter tunes glibc machinery roost does not have (arenas,
// fastbins, the heap top, the mmap threshold: the call changes nothing);
// 0 for what roost cannot do (M_PERTURB, M_CHECK_ACTION), for unknown
// parameters, and for a negative M_TRIM_THRESHOLD.
int mallopt(int param, int value);

}  // namespace roost::api
