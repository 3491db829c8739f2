// bench/cachescratch.c — cache-scratch (passive false sharing).
//
// The cache-scratch benchmark, a test of whether an allocator avoids passive
// false sharing, written here from its published description (a Hoard-style
// allocator's report of the classic benchmarks, and the roost benchmark contract): before starting
// the threads, the main thread allocates T small objects of S bytes back to back (under most
// allocators they are adjacent in memory, several to a cache line) and gives one to each thread.
// Each thread first frees the object it was given, then I times allocates an object of S bytes,
// writes each of its bytes W times, checks it and frees it.
//
// What it stresses: passive false sharing. An allocator that keeps a freed
// object in the freeing thread's cache and hands it straight back to the same
// thread's next malloc gives every thread an object on the cache line it
// shares with the other threads' objects, and the threads' writes bounce that
// line between cores for the whole run. An allocator that sends the freed
// object back to its owner (the main thread) or serves each thread from its
// own memory gives each thread its own line. The allocator's own speed barely
// matters (one malloc and one free per S x W byte writes); where the objects
// land does.
//
// The writes go through a volatile pointer, one byte at a time (round-major:
// every byte once, then every byte again, W rounds), so each one happens. The
// value of byte b in round r of object j of thread i is a simple function of
// (i, j, r, b).
//
// Verification: the main thread writes a pattern into each initial object and
// the receiving thread checks it before freeing it; after the W rounds each
// loop object must hold the last round's values in every byte, checked before
// it is freed. Per thread, objects freed must equal I + 1 and no byte may be
// wrong. Any mismatch prints a diagnostic and exits 1.
//
// Options (k/m suffixes: x1000, x1000000):
//   -t T  threads (1..1024)                    default 4
//   -i I  objects (iterations) per thread       default 200000
//   -w W  writes of each byte per object        default 800
//   -s S  object size in bytes (>= 1)           default 8 (the allocator rounds it up)
//
// Output (stdout, one line of key=value pairs): parameters, writes (T x I x S x
// W byte writes), seconds (from the first thread's start after the start
// barrier to the last thread's finish, by the threads' own clocks; the initial
// objects are allocated before the barrier), writes_per_sec; then two
// placement facts: initial_span (bytes from the lowest to the end of the
// highest initial object: about T x the rounded size when they are adjacent)
// and reused_initial (threads whose first loop object had the address of the
// initial object they had just freed, which keeps the false sharing alive);
// then the common tail (vmhwm_kib, malloc_from, verify). The allocator under
// test is swapped with LD_PRELOAD.
#define _GNU_SOURCE
#include "false_sharing.h"

// initial_span: bytes from the lowest initial object to the end of the
// highest; reused_initial: threads whose first loop object had the address of
// the initial object they had just freed.
static void Facts(char* buf, size_t len) {
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  uint64_t reused = 0;
  for (unsigned i = 0; i < fs.threads; i++) {
    uintptr_t a = fs.t[i].initial_addr;
    if (a < lo) lo = a;
    if (a + fs.size > hi) hi = a + fs.size;
    reused += fs.t[i].first == a;
  }
  snprintf(buf, len, " initial_span=%llu reused_initial=%llu", (unsigned long long)(hi - lo),
           (unsigned long long)reused);
}

int main(int argc, char** argv) { return FalseSharingMain("cachescratch", 1, Facts, argc, argv); }
