// frontend/ownership.h — who owns a slab: the one place that reads or
// changes a slab's owner.
//
// The rule (docs/DESIGN.md, "Ownership"):
//   - A slab has one owner, an allocator, and only the thread that holds
//     that allocator changes the slab (carves it, takes its frees back,
//     retires it).
//   - Its owner is set when the slab starts and cleared when it retires,
//     by the owner; it changes hands only while the old owner is parked
//     (no thread holds it), under the pool lock: adoption
//     (frontend/adoption.h) gives an exited thread's slab to a running
//     thread.
//   - Any thread reads the owner, to send a freed object home.  A thread
//     that read the old owner sends it there, and the old owner forwards
//     it when it receives (frontend/messenger.h): nothing is lost to a
//     change of hands.
//   - The owner word holds the owning allocator's address; its Messenger
//     lies kMessengerOffset bytes into it, so a sender finds the owner's
//     inbox without knowing what an allocator is.
// Large, huge and zero-size chunks have no owner (backend/chunk_meta.h:
// kNoOwner), so the free fast path's test sends them to the slow path.
//
// Owns: the owner word's reads and writes, and their memory orders.  Must
// never: change an owner outside the cases above, or make the fast path's
// test more than one comparison.
#pragma once

#include <atomic>
#include <cstddef>

#include "backend/chunk_meta.h"
#include "ds/bits.h"

namespace roost {

class Messenger;

namespace ownership {

// The owner word is read and written atomically, since a slab's owner may
// change while other threads read it (adoption).  Release and acquire: a
// reader may look into the owner it read (adoption asks whether it is
// parked), which an adopter may have made just before (its fields written
// by its constructor, not atomically); plain moves on x86-64, and only
// slow paths read it so (the free fast path's test, is(), compares the
// pointer only).
inline const void* owner(const ChunkMeta* m) {
  // acquire: see above.
  return std::atomic_ref(const_cast<ChunkMeta*>(m)->owner).load(std::memory_order_acquire);
}
inline void set(ChunkMeta* m, const void* allocator) {
  // release: see above.
  std::atomic_ref(m->owner).store(const_cast<void*>(allocator), std::memory_order_release);
}

// The free fast path's test: does `allocator` own slab `m`?  True only for
// a slab the caller's own allocator owns, which nobody else can give away
// (only a parked allocator's slabs change hands), so a value read while an
// adoption changes it is some other allocator either way, and the slow path
// reads it again with owner().  A plain load, which the compiler folds into
// the comparison (an atomic load, which it does not fold, costs the free
// fast path one instruction); an atomic one where ThreadSanitizer checks
// the protocol.
ROOST_INLINE bool is(const ChunkMeta* m, const void* allocator) {
#if defined(__SANITIZE_THREAD__)
  return owner(m) == allocator;
#else
  return m->owner == allocator;
#endif
}

// Where an allocator keeps its Messenger: a constant that
// frontend/allocator.cc, which knows the allocator's layout, defines.
extern const size_t kMessengerOffset ROOST_HIDDEN;

// The Messenger of slab `m`'s owner (which must be a slab: it has one).
inline Messenger* messenger_of(const ChunkMeta* m) {
  const char* owner_bytes = static_cast<const char*>(owner(m));
  return reinterpret_cast<Messenger*>(const_cast<char*>(owner_bytes + kMessengerOffset));
}

}  // namespace ownership
}  // namespace roost
