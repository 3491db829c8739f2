// ds/fence.h — a full fence, for store-then-load handshakes between two
// threads (Dekker style: each stores its flag, fences, and loads the
// other's; at least one sees the other's store).
//
// Owns: that one fence.  Must never: be used on a fast path (it costs tens
// of cycles), or stand in for acquire/release pairs.
//
// Why seq_cst: acquire and release order a thread's accesses around one
// location's hand-over; they never stop a store from passing a later load
// of another location (x86-64's store buffer does that; AArch64 more).
// Only seq_cst fences on both sides give "one of the two sees the other"
// (tests/unit/litmus_test.cc).
#pragma once

#include <atomic>

#include "ds/bits.h"

namespace roost {

#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer does not model fences: a read-modify-write of one shared
// word orders the two sides for it instead.
inline std::atomic<unsigned> g_fence_word{0};
ROOST_INLINE void full_fence() { g_fence_word.fetch_add(0, std::memory_order_seq_cst); }
#else
ROOST_INLINE void full_fence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
#endif

}  // namespace roost
