// frontend/checks.cc — the checks of frontend/checks.h that are not inline.
#include "frontend/checks.h"

#include "backend/chunk_allocator.h"
#include "backend/large.h"
#include "backend/pagemap.h"
#include "frontend/slab.h"
#include "platform/error.h"
#include "platform/memcheck.h"

namespace roost::checks {

void fault(const char* where, const char* what, const void* p, size_t size) {
  err::fatal_object(where, what, p, size);
}

void marked_twice(const ChunkMeta* m, void* p, const char* where) {
  if constexpr (config::kMarkUnchecked) {
    // A free-list link is an object start (16-byte aligned); a message
    // tail's is the queue's, to the next message's node (its tail's link
    // word).
    auto link = reinterpret_cast<uintptr_t>(freelist::next(freelist::as_object(p)));
    if (link % sizeof(uintptr_t) != 0) {
      free_mark::wipe(p);
      return;
    }
  }
  fault(where, kDoubleFree, p, m->obj_size);
}

namespace {

constexpr const char* kReceiving = "receiving a message";

bool in_slab(const ChunkMeta* m, const void* p) {
  uintptr_t a = reinterpret_cast<uintptr_t>(p);
  return a >= m->base && a - m->base < sizeclass::slab_size(m->sizeclass) &&
         slab::is_object_start(m, p);
}

// Is `p`, whose lookup is `m` (perhaps nullptr), an object start of a slab?
bool slab_object_start(const ChunkMeta* m, const void* p) {
  return m != nullptr && m->kind == ChunkKind::kSlab && in_slab(m, p);
}

// The size class a fault about an address looked up as `m` names (0: none).
size_t class_size(const ChunkMeta* m) {
  return m != nullptr && m->kind == ChunkKind::kSlab ? m->obj_size : 0;
}

}  // namespace

void damaged(const FreeObject* holder, const void* p, unsigned sc) {
  constexpr const char* kAllocating = "allocation";
  uint32_t size = sizeclass::kInfo.info[sc].size;
  if (p != nullptr) {
    bool start = slab_object_start(pagemap::lookup(p), p);
    if (start || holder == nullptr)
      fault(kAllocating, start ? kFreedObjectWritten : kCorruptedFreeList, p, size);
  }
  fault(kAllocating, kCorruptedFreeList, holder, size);
}

void message(const ChunkMeta* m, const void* node) {
  const void* tail = slab_batch::tail_of(node);
  if (!slab_object_start(m, tail)) fault(kReceiving, kCorruptedMessage, tail, class_size(m));
}

void message_link(const void* holder, const void* next) {
  const void* tail = slab_batch::tail_of(next);
  const ChunkMeta* m = pagemap::lookup(tail);
  if (slab_object_start(m, tail) && (!config::kDetectDoubleFree || free_mark::is_set(tail, m)))
    return;
  const void* named = holder != nullptr ? slab_batch::tail_of(holder) : tail;
  fault(kReceiving, kCorruptedMessage, named, class_size(pagemap::lookup(named)));
}

void batch(const ChunkMeta* m, const slab_batch::Batch& b) {
  uint32_t capacity = sizeclass::kInfo.info[m->sizeclass].capacity;
  if (b.count == 0 || b.count > capacity || !in_slab(m, b.head))
    fault(kReceiving, kCorruptedMessage, b.tail, m->obj_size);
}

void large_intact(const ChunkMeta* m, const char* where) {
  if (large::overwritten(m) != 0)
    fault(where, kBufferOverflow, reinterpret_cast<const void*>(m->base), large::usable(m));
}

void name_access_fault(uintptr_t addr) {
  memcheck::Quiet quiet;  // (roost's own records)
  char where[48];
  err::Text(where, sizeof(where)).str("access at ").hex(addr);
  const ChunkMeta* m = pagemap::lookup(reinterpret_cast<const void*>(addr));
  if (m != nullptr && kind_of(m) == ChunkKind::kZeroSize) {
    // The allocation is the 16-byte step the access is in.
    uintptr_t step = addr & ~uintptr_t{config::kMinAlloc - 1};
    fault(where, kZeroSizeAccess, reinterpret_cast<const void*>(step), 0);
  }
  if (const ChunkMeta* g = large::guarded_by(addr))
    fault(where, kBufferOverflow, reinterpret_cast<const void*>(g->base), large::usable(g));
  // The hardened build's: a freed large object waiting in the quarantine,
  // and the guard page at a slab's end (the overflow came from the slab's
  // last objects, or ran on from further below).
  if (const ChunkMeta* q = large::quarantined_at(addr))
    fault(where, kFreedObjectWritten, reinterpret_cast<const void*>(q->base), large::usable(q));
  if (chunks::in_end_guard(addr)) {
    // A slab's: named by its last object, which the overflow ran through
    // (else by the guard page: its chunk waits empty).
    if (m != nullptr && kind_of(m) == ChunkKind::kSlab) {
      uint32_t last = sizeclass::kInfo.info[m->sizeclass].capacity - 1;
      fault(where, kBufferOverflow,
            reinterpret_cast<const void*>(m->base + size_t{last} * m->obj_size), m->obj_size);
    }
    fault(where, kBufferOverflow,
          reinterpret_cast<const void*>(addr & ~uintptr_t{config::kMinPageSize - 1}), 0);
  }
}

}  // namespace roost::checks
