// frontend/checks.h — the checks that catch heap misuse and corruption,
// each named for what it guards, and the diagnostic each ends in.
//
// Every check here is either free on the fast paths (the default build's)
// or switched on by the secure and hardened builds (config.h:
// kDetectDoubleFree, kEncodeLinks, kZeroOnFree, kCheckFreed, kSlackCanaries,
// kCheckSizedFree, kCheckMessages, kGuardLarge).
// A failed check writes one line naming the fault, the address and the
// size class, then aborts (platform/error.h): nothing on that path
// allocates or takes a lock.
//
// Owns: the tests and the fault names.  Must never: change allocator state
// on a path that found a fault, or cost the default build's fast paths an
// instruction.
#pragma once

#include "backend/chunk_meta.h"
#include "backend/pagemap.h"
#include "config.h"
#include "ds/bits.h"
#include "ds/free_mark.h"
#include "ds/freed_zero.h"
#include "ds/freelist.h"
#include "ds/sizeclass.h"
#include "ds/slab_batch.h"
#include "ds/slack_canary.h"

namespace roost::checks {

// The fault names, as the diagnostics print them.
inline constexpr const char* kDoubleFree = "double free";
inline constexpr const char* kCorruptedMessage = "corrupted message";
inline constexpr const char* kCorruptedFreeList = "corrupted free list";
inline constexpr const char* kFreedObjectWritten = "write to a freed object";
inline constexpr const char* kSizeMismatch = "size mismatch";
inline constexpr const char* kBufferOverflow = "buffer overflow";
// The byte before an object written (checks::slack_intact).
inline constexpr const char* kBufferUnderflow = "buffer underflow";
inline constexpr const char* kZeroSizeAccess = "access to a zero-size allocation";
// An object start its slab has not carved yet: memory roost never handed out.
inline constexpr const char* kNeverAllocated = "invalid pointer (never allocated)";

[[noreturn]] ROOST_SLOW void fault(const char* where, const char* what, const void* p, size_t size);

// ---- canaries after small objects (hardened build) ----

// `p`, a live object start of slab `m`: the size it was asked for, from
// its canary; a canary overwritten is a buffer overflow (or an underflow
// from the object after it), named here.  Then, unless `p` is its slab's
// first object, the byte before it (slack_canary::byte_before_intact):
// written, it is a buffer underflow from `p` (or an overflow from the
// object before that skipped that one's canary bytes), named here too.
ROOST_INLINE size_t slack_intact(const ChunkMeta* m, const void* p, const char* where) {
  size_t size;
  if (ROOST_UNLIKELY(!slack_canary::read(p, m->obj_size, &size)))
    fault(where, kBufferOverflow, p, m->obj_size);
  if constexpr (config::kCheckByteBefore) {
    if (ROOST_LIKELY(reinterpret_cast<uintptr_t>(p) != m->base)) {
      if (ROOST_UNLIKELY(!slack_canary::byte_before_intact(p)))
        fault(where, kBufferUnderflow, p, m->obj_size);
    }
  }
  return size;
}

// ---- the free mark (every build: ds/free_mark.h) ----

// The API's free of `p`, an object start its slab `m` has carved: false
// when `p` carries its free mark already, which the caller hands to
// marked_twice() (through Allocator::free_found_marked on the fast paths).
// Else `p` is marked freed, after the hardened build's canary check, and
// (hardened) its other bytes zeroed.  Each free of the program's is marked
// here once, at the first level of heap::dealloc that takes it.
ROOST_INLINE bool mark_freed(const ChunkMeta* m, void* p, const char* where) {
  if constexpr (config::kMarkFreed) {
    if (ROOST_UNLIKELY(free_mark::is_set(p, m))) return false;
    if constexpr (config::kSlackCanaries) slack_intact(m, p, where);
    free_mark::set(p, m);
    if constexpr (config::kZeroOnFree) freed_zero::zero(p, m->obj_size);
    // Where its link will be: zero while it waits in the quarantine.
    if constexpr (config::kQuarantine) *static_cast<uint64_t*>(p) = 0;
  }
  return true;
}

// `p`, an object start of slab `m`, was found marked by a free.  The
// secure build reports a double free.  The default build does once the
// word where the link goes reads as a link too (null or 8-byte aligned: an
// object start, or a message's queue link); else the program wrote the
// mark into a live object, and it returns with the mark wiped, for its
// caller to free the object.
ROOST_SLOW void marked_twice(const ChunkMeta* m, void* p, const char* where);

// mark_freed() and marked_twice() in one, for the slow paths.
ROOST_INLINE void note_free(const ChunkMeta* m, void* p, const char* where) {
  if (ROOST_UNLIKELY(!mark_freed(m, p, where))) {
    marked_twice(m, p, where);
    mark_freed(m, p, where);
  }
}

// `p`, an object of slab `m`, leaves the quarantine (hardened build): the
// word where its link goes must be zero as its free left it, and its mark
// must be in place, or the program wrote to it while it waited.  (The link
// is written now; the rest is checked when it is handed out.)
ROOST_INLINE void left_quarantine(const ChunkMeta* m, const void* p, const char* where) {
  bool intact = *static_cast<const uint64_t*>(p) == 0 && free_mark::is_set(p, m);
  if (ROOST_UNLIKELY(!intact)) fault(where, kFreedObjectWritten, p, m->obj_size);
}

// An object handed out: its mark goes; in the hardened build its link too,
// so that it reads zero throughout.
ROOST_INLINE void note_handed_out(void* p) {
  if constexpr (config::kZeroOnFree) {
    static_assert(freed_zero::kHeadBytes == 2 * sizeof(uint64_t));
    static_cast<uint64_t*>(p)[0] = 0;
    static_cast<uint64_t*>(p)[1] = 0;
  } else if constexpr (config::kMarkFreed) {
    free_mark::wipe(p);
  }
}

// ---- free lists and freed objects (secure build) ----

// An object of slab `m` that waits to be handed out without having been
// freed (one carved from a slab's tail, or one the service put on an
// offload ring) is kept as a freed object would be: marked (a free of it
// is then caught as a double free).  (Its bytes past its head
// are zero already in the hardened build: carved ones, slab::carve; parked
// ones were just handed out.)
ROOST_INLINE void note_unused(const ChunkMeta* m, void* p) {
  if constexpr (config::kMarkFreed) free_mark::set(p, m);
}

// A check below failed: `p`, reached through `holder`'s link (nullptr: `p`
// was a list's head), is not a freed object of class `sc` as it was left.
// An object start was written after it was freed; anything else means the
// link was.
[[noreturn]] ROOST_SLOW void damaged(const FreeObject* holder, const void* p, unsigned sc);

// The successor of `o` (a free object of class `sc`, its mark checked) on
// its list.  The secure build follows the link only to an object of the
// same slab that carries the same free mark.
ROOST_INLINE FreeObject* next_checked(unsigned sc, const FreeObject* o) {
  FreeObject* n = freelist::next(o);
  if constexpr (config::kEncodeLinks) {
    if (n != nullptr) {
      uintptr_t apart = reinterpret_cast<uintptr_t>(n) ^ reinterpret_cast<uintptr_t>(o);
      if (ROOST_UNLIKELY((apart >> sizeclass::kInfo.info[sc].slab_bits) != 0))
        damaged(o, nullptr, sc);
      if (ROOST_UNLIKELY(!free_mark::same(n, o))) damaged(o, n, sc);
    }
  }
  return n;
}

// next_checked()'s test without its branch for the list's end, for the
// malloc fast path (secure build): the successor `o`'s link names, when it
// lies in o's slab (`slab_bytes`, a power of two, aligned so) and carries
// o's free mark; else nullptr, for the list's end too (the fast path's slow
// branch, Allocator::take_last, tells the end from damage).
ROOST_INLINE FreeObject* fast_next(const FreeObject* o, uint64_t slab_bytes) {
  uintptr_t apart = freelist::next_apart(o);
  auto* n = reinterpret_cast<FreeObject*>(apart ^ reinterpret_cast<uintptr_t>(o));
  if (ROOST_LIKELY(apart < slab_bytes && free_mark::same(n, o))) return n;
  return nullptr;
}

// `p`, the head of a free list of class `sc`: in the hardened build its
// bytes past its link and mark must read zero still...
ROOST_INLINE void freed_intact(unsigned sc, const FreeObject* p) {
  if constexpr (config::kCheckFreed) {
    if (ROOST_UNLIKELY(!freed_zero::intact(p, sizeclass::kInfo.info[sc].size)))
      damaged(nullptr, p, sc);
  }
}

// ...and, for a head no link was checked on the way to, its mark too: its
// slab's, `m`...
ROOST_INLINE void head_intact(const ChunkMeta* m, unsigned sc, const FreeObject* p) {
  if constexpr (config::kEncodeLinks) {
    if (ROOST_UNLIKELY(!free_mark::is_set(p, m))) damaged(nullptr, p, sc);
  }
  freed_intact(sc, p);
}
// ...which the pagemap names when the caller does not know it.
ROOST_INLINE void head_intact(unsigned sc, const FreeObject* p) {
  if constexpr (config::kEncodeLinks)
    head_intact(pagemap::lookup(p), sc, p);
  else
    freed_intact(sc, p);
}

// `p`, the head of a free list of class `sc` (a list just taken from a
// slab or carved), is being handed out.  Returns its successor, the list's
// new head.
ROOST_INLINE FreeObject* take_first(unsigned sc, FreeObject* p) {
  head_intact(sc, p);
  return next_checked(sc, p);
}

// An object of slab `m` the service puts on an offload ring
// (frontend/offload.h) waits there as an unused object whose link ends the
// list...
ROOST_INLINE void note_parked(const ChunkMeta* m, void* p) {
  note_unused(m, p);
  if constexpr (config::kEncodeLinks) freelist::set_next(freelist::as_object(p), nullptr);
}

// ...and is checked as a list's head when a thread takes it.
ROOST_INLINE void parked_intact(unsigned sc, void* p) {
  auto* o = freelist::as_object(p);
  head_intact(sc, o);
  if constexpr (config::kEncodeLinks) {
    if (ROOST_UNLIKELY(freelist::next(o) != nullptr)) damaged(o, nullptr, sc);
  }
}

// take_first() for the head of a fast list: its mark was checked when it
// became the head (next_checked), so only its zeroed bytes are.
ROOST_INLINE FreeObject* take(unsigned sc, FreeObject* p) {
  freed_intact(sc, p);
  return next_checked(sc, p);
}

// ---- the free mark in messages (default build) ----

// A received message `node` of slab `m` (default build): a 16-byte tail
// carries its batch word where its mark was, so a mark there means a free
// of it while it travelled (its link, the queue's, was overwritten then
// too).
ROOST_INLINE void batch_word_intact(const ChunkMeta* m, const void* node) {
  if constexpr (config::kMarkUnchecked) {
    const void* tail = slab_batch::tail_of(node);
    if (ROOST_UNLIKELY(slab_batch::batch_word_beside_link(m->obj_size) &&
                       free_mark::is_set(tail, m)))
      fault("receiving a message", kDoubleFree, tail, m->obj_size);
  }
}

// ---- double free (every build, found without a scan) ----

// A slab's free list about to be handed out (a slow path): its head linked
// to itself is an object freed twice in a row with no other free of the
// slab between (the second push made it its own successor).
ROOST_INLINE void free_list_head(const ChunkMeta* m, const FreeObject* head) {
  if (ROOST_UNLIKELY(head != nullptr && freelist::next(head) == head))
    fault("allocation", kDoubleFree, head, m->obj_size);
}

// An object about to go back to slab `m` that is its free list's head: a
// double free with no other free of the slab between.  (For frees off any
// thread's fast path: the offload service's.)
ROOST_INLINE void not_free_list_head(const ChunkMeta* m, const void* p) {
  if (ROOST_UNLIKELY(m->free_head == p)) fault("free", kDoubleFree, p, m->obj_size);
}

// ---- messages sent (hardened build) ----

// `tail`, an object of slab `m`, is about to go home as a message's tail:
// where its last word is one of its zeroed bytes, the batch word goes there
// (slab_batch::batch_word) and the receiver zeroes it again, so it must be
// zero still, or the program wrote to the object since its free, and the
// batch word would hide it.  A freed object can wait a while before it is
// sent (in a BatchIt cache; under full offload, until the service carries
// out the free).  A 16-byte tail has no zeroed bytes and carries no batch
// word.
ROOST_INLINE void tail_unwritten(const ChunkMeta* m, const void* tail) {
  if constexpr (config::kCheckFreed) {
    if (ROOST_UNLIKELY(!freed_zero::last_word_intact(tail, m->obj_size)))
      fault("sending a message", kFreedObjectWritten, tail, m->obj_size);
  }
}

// ---- messages received (secure build) ----

// The inbox is about to follow `holder`'s link (nullptr: its stub's) to
// `next`: `next` must be an object start of a slab, and carry its free
// mark (secure build), or `holder`'s link was overwritten.
void message_link(const void* holder, const void* next);
// The message `node` is about to be received: it must lie at an object
// start of a slab...
void message(const ChunkMeta* m, const void* node);
// ...and its batch hold 1 to capacity objects of that slab, its head an
// object start.
void batch(const ChunkMeta* m, const slab_batch::Batch& b);

// ---- large objects (secure build) ----

// The large or huge object `m` is about to be freed or resized: the bytes
// between the size asked for and its guard page must hold their canary
// still (backend/large_guard.h), or it overflowed.  Names the object.
void large_intact(const ChunkMeta* m, const char* where);

// ---- accesses that fault (secure and hardened builds) ----

// The fault at `addr` that roost's own inaccessible memory stopped, named:
// a store or load in a large object's guard page (a buffer overflow, naming
// the object), or through a zero-size allocation.  Returns when `addr` is
// none of roost's.  Runs in the SIGSEGV handler (platform/access_fault.h):
// it only reads, and writes its line with write(2).
void name_access_fault(uintptr_t addr);

}  // namespace roost::checks
