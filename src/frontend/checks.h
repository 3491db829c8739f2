// frontend/checks.h — the checks that catch heap misuse and corruption,
// each named for what it guards, and the diagnostic each ends in.
//
// Every check here is either free on the fast paths (the default build's)
// or switched on by the secure build (config.h: kDetectDoubleFree,
// kCheckSizedFree, kCheckMessages).  A failed check writes one line naming
// the fault, the address and the size class, then aborts
// (platform/error.h): nothing on that path allocates or takes a lock.
//
// Owns: the tests and the fault names.  Must never: change allocator state
// on a path that found a fault, or cost the default build's fast paths an
// instruction.
#pragma once

#include "backend/chunk_meta.h"
#include "config.h"
#include "ds/bits.h"
#include "ds/free_mark.h"
#include "ds/sizeclass.h"
#include "ds/slab_batch.h"

namespace roost::checks {

// The fault names, as the diagnostics print them.
inline constexpr const char* kDoubleFree = "double free";
inline constexpr const char* kCorruptedMessage = "corrupted message";
inline constexpr const char* kSizeMismatch = "size mismatch";

[[noreturn]] ROOST_SLOW void fault(const char* where, const char* what, const void* p, size_t size);

// ---- double free (secure build: every small object) ----

// The API's free of `p`, an object start of slab `m` (secure build): a
// second free of it is caught here; else it is marked freed.
ROOST_INLINE void note_small_free(const ChunkMeta* m, void* p, const char* where) {
  if (ROOST_UNLIKELY(free_mark::is_set(p))) fault(where, kDoubleFree, p, m->obj_size);
  free_mark::set(p);
}

// An object handed out: its mark goes.
ROOST_INLINE void note_handed_out(void* p) { free_mark::wipe(p); }

// ---- double free (every build, found without a scan) ----

// A slab's free list about to be handed out (a slow path): its head linked
// to itself is an object freed twice in a row with no other free of the
// slab between (the second push made it its own successor).
ROOST_INLINE void free_list_head(const ChunkMeta* m, const FreeObject* head) {
  if (ROOST_UNLIKELY(head != nullptr && head->next == head))
    fault("allocation", kDoubleFree, head, m->obj_size);
}

// ---- messages received (secure build) ----

// The message `node` is about to be received: it must lie at an object
// start of a slab...
void message(const ChunkMeta* m, const void* node);
// ...and its batch hold 1 to capacity objects of that slab, its head an
// object start.
void batch(const ChunkMeta* m, const slab_batch::Batch& b);

// ---- sized frees (secure build) ----

// free_sized(p, size), free_aligned_sized(p, align, size) and sized
// delete: `size` (and `align`, 0 when none was given) must be ones the
// object could have been allocated with.
void sized_free(const void* p, size_t size, size_t align, const char* where);

}  // namespace roost::checks
