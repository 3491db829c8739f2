// platform/memcheck.h — what valgrind's memcheck is told, in a
// ROOST_VALGRIND build (config::kValgrind; docs/DEBUGGING.md).
//
// Owns: the client requests (valgrind/memcheck.h, from Debian's valgrind
// package).  A block handed to the program, with its usable size; a block
// the program frees, before roost touches it again; roost's own memory
// (metadata, memory not handed out) unaddressable, so that memcheck's leak
// checker finds no pointer of roost's to a block (a chunk record holds its
// first object's address).  Roost's own code runs quiet (Quiet: the API's
// entry points, the thread-exit hook, the service thread's work, the
// readers of statistics): it reads and writes what memcheck counts as
// freed or unaddressable memory (free marks, free-list links,
// messages and their batch words, the hardened build's patterns, its own
// records).  Memcheck still follows what that code does (a word read from
// unaddressable memory counts as defined); it reports none of it, so the
// program's own accesses are reported as under glibc's malloc.  And a table
// of roost's own blocks: what glibc allocates through malloc for roost (its
// thread's TLS), which the program never frees, and which memcheck would
// count as possibly lost at exit (a live thread's TLS has only an interior
// pointer to it): the table points at them, so they are still reachable,
// as glibc's own blocks are.
// Must never: be compiled into another build: without ROOST_VALGRIND,
// valgrind's headers are not included and every function here is empty
// (no instruction).
#pragma once

#include <atomic>
#include <cstddef>

#include "config.h"

#if ROOST_VALGRIND
#include <valgrind/memcheck.h>
#endif

namespace roost::memcheck {

inline constexpr bool kOn = config::kValgrind;

// `p` (not null) now holds a block of the program of `size` bytes, which
// read as undefined, or as zeroes when `zeroed`.  Its accesses beyond that
// size, and its leak, are reported.
inline void allocated(void* p, size_t size, bool zeroed) {
#if ROOST_VALGRIND
  VALGRIND_MALLOCLIKE_BLOCK(p, size, 0, zeroed ? 1 : 0);
#else
  (void)p, (void)size, (void)zeroed;
#endif
}

// The program frees `p` (not null): memcheck reports an invalid free here
// (a pointer it does not know as a block: freed already, or never one),
// then every later access by the program.
inline void freed(void* p) {
#if ROOST_VALGRIND
  VALGRIND_FREELIKE_BLOCK(p, 0);
#else
  (void)p;
#endif
}

// [p, p + size) is roost's own (metadata, memory not handed out): the
// program's accesses to it are reported, and the leak checker looks for
// no pointers in it.
inline void unaddressable(void* p, size_t size) {
#if ROOST_VALGRIND
  VALGRIND_MAKE_MEM_NOACCESS(p, size);
#else
  (void)p, (void)size;
#endif
}

// Roost's own blocks (above); a full table keeps no more.
inline constexpr size_t kOwnBlocks = 16;
inline std::atomic<void*> g_own_blocks[kOwnBlocks];

// `p`, just allocated for roost itself, stays reachable in memcheck's view.
inline void keep_reachable(void* p) {
  // Relaxed: memcheck reads the table, not another thread.
  for (auto& slot : g_own_blocks) {
    void* none = nullptr;
    if (slot.compare_exchange_strong(none, p, std::memory_order_relaxed)) return;
  }
}

// `p` is freed: if the table held it, no longer (a pointer to a freed
// block would hide the leak of whatever takes its place).
inline void forget(void* p) {
  for (auto& slot : g_own_blocks) {
    void* was = p;
    slot.compare_exchange_strong(was, nullptr, std::memory_order_relaxed);  // relaxed: as above
  }
}

// While one lives, the calling thread's errors are not reported (nested
// ones count: reports come back with the outermost's end).
class Quiet {
 public:
  Quiet() {
#if ROOST_VALGRIND
    VALGRIND_DISABLE_ERROR_REPORTING;
#endif
  }
  ~Quiet() {
#if ROOST_VALGRIND
    VALGRIND_ENABLE_ERROR_REPORTING;
#endif
  }
  Quiet(const Quiet&) = delete;
  Quiet& operator=(const Quiet&) = delete;
};

}  // namespace roost::memcheck
