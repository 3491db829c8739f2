// bench/cachethrash.c — cache-thrash (active false sharing).
//
// The cache-thrash benchmark, a test of whether an allocator avoids active
// false sharing, written here from its published description (a Hoard-style
// allocator's report of the classic benchmarks, and the roost benchmark contract): each of T
// threads I times allocates an object of S bytes, writes each of its bytes W times, checks it and
// frees it. The objects are small (default 8 bytes), so several fit in one cache line.
//
// What it stresses: active false sharing. An allocator that serves
// concurrently running threads from the same memory (one shared heap, or
// per-CPU heaps shared by the threads scheduled on them) can hand objects on
// one cache line to different threads at the same time, and their writes
// bounce the line between cores. An allocator that gives each thread its own
// memory (thread caches, per-thread heaps or arenas) avoids it. The
// allocator's own speed barely matters (one malloc and one free per S x W
// byte writes); where the objects land does. cachescratch is the passive
// variant (the sharing is set up by the main thread's allocations).
//
// The writes go through a volatile pointer, one byte at a time (round-major:
// every byte once, then every byte again, W rounds), so each one happens. The
// value of byte b in round r of object j of thread i is a simple function of
// (i, j, r, b).
//
// Verification: after the W rounds each object must hold the last round's
// values in every byte, checked before it is freed. Per thread, objects freed
// must equal I and no byte may be wrong. Any mismatch prints a diagnostic and
// exits 1.
//
// Options (k/m suffixes: x1000, x1000000):
//   -t T  threads (1..1024)                    default 4
//   -i I  objects (iterations) per thread       default 200000
//   -w W  writes of each byte per object        default 800
//   -s S  object size in bytes (>= 1)           default 8 (the allocator rounds it up)
//
// Output (stdout, one line of key=value pairs): parameters, writes (T x I x S x
// W byte writes), seconds (from the first thread's start after the start
// barrier to the last thread's finish, by the threads' own clocks),
// writes_per_sec; then a placement fact, shared_lines: the number of
// threads whose first object lies on a 64-byte cache line that also holds
// another thread's first object (0 when every thread has its own memory); then
// the common tail (vmhwm_kib, malloc_from, verify). The allocator under test
// is swapped with LD_PRELOAD.
#define _GNU_SOURCE
#include "false_sharing.h"

// shared_lines: threads whose first object lies on a 64-byte cache line that
// also holds another thread's first object.
static void Facts(char* buf, size_t len) {
  uint64_t shared = 0;
  for (unsigned i = 0; i < fs.threads; i++) {
    for (unsigned j = 0; j < fs.threads; j++) {
      if (j != i && (fs.t[j].first >> 6) == (fs.t[i].first >> 6)) {
        shared++;
        break;
      }
    }
  }
  snprintf(buf, len, " shared_lines=%llu", (unsigned long long)shared);
}

int main(int argc, char** argv) { return FalseSharingMain("cachethrash", 0, Facts, argc, argv); }
