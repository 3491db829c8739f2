// frontend/heap.cc — slow paths behind frontend/heap.h.
#include "frontend/heap.h"

#include <atomic>
#include <cerrno>

#include "backend/chunk_allocator.h"
#include "backend/large.h"
#include "backend/zero_size.h"
#include "config.h"
#include "ds/bits.h"
#include "frontend/pointer.h"
#include "frontend/profile.h"
#include "frontend/service.h"
#include "options.h"
#include "platform/error.h"
#include "platform/os.h"
#include "platform/text_section.h"

namespace roost::heap {

namespace {

// Frees by threads past their exit hook, which have no allocator to count
// them in (any thread adds, atomically; relaxed: statistics).
std::atomic<uint64_t> g_unbound_frees[sizeclass::kCount];

// malloc_trim and roost_trim calls (any thread adds, atomically; relaxed:
// statistics).
std::atomic<uint64_t> g_trims{0};

}  // namespace

// Relaxed: a statistic, ordering nothing (approximate while such threads free).
uint64_t unbound_frees(unsigned sc) { return g_unbound_frees[sc].load(std::memory_order_relaxed); }

namespace {

// calloc's part for a large object of `size` bytes at `p` whose first
// `dirty` bytes may hold old data: those are cleared; the rest reads as
// zero already.  Up to ROOST_CALLOC_POPULATE its pages are mapped written
// now: a program that reads zeroed memory before it writes it (a table
// looked up while it fills) would otherwise fault twice per page, once to
// map the kernel's zero page and once to copy it, and the copy flushes the
// page from every core that runs the program's threads.
void zero_large(void* p, size_t size, size_t dirty) {
  if (dirty >= size) {
    __builtin_memset(p, 0, size);
    return;
  }
  if (dirty != 0) __builtin_memset(p, 0, dirty);
  if (size > options::get(options::kCallocPopulate)) return;
  const size_t page = os::page_size();
  uintptr_t from = bits::align_up(reinterpret_cast<uintptr_t>(p) + dirty, page);
  uintptr_t to = bits::align_up(reinterpret_cast<uintptr_t>(p) + size, page);
  if (to > from) os::populate_write(reinterpret_cast<void*>(from), to - from);
}

}  // namespace

ROOST_COMMON_TEXT void* alloc_large(size_t size, size_t align, bool zero) {
  if (size > config::kMaxRequest || !pool::global_init()) {
    errno = ENOMEM;
    return nullptr;
  }
  size_t dirty = 0;
  void* p = large::alloc(size, align, &dirty);
  if (p == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  if (zero) zero_large(p, size, dirty);
  if (ROOST_UNLIKELY(profile::on()))
    profile::note_large(pagemap::lookup(p), __builtin_return_address(0));
  return p;
}

void* alloc_zero_size(size_t align) {
  if (config::kZeroSizeFaults && pool::global_init()) {
    if (void* p = zero_size::alloc(align)) return p;
  }
  return alloc_aligned(align, 1);
}

namespace {

// Every free the remote path does not take: null, foreign and interior
// pointers, large objects, and slab objects freed by a thread that has no
// allocator yet (or no longer has one).
ROOST_COMMON_TEXT ROOST_NOINLINE void dealloc_other(void* p, ChunkMeta* m, Allocator* a,
                                                    const char* where) {
  pointer::Object o = pointer::classify(p, m, where, checks::kDoubleFree);
  m = o.m;
  switch (o.kind) {
    case pointer::Kind::kSlab:
      checks::note_free(m, p, where);
      // A thread's first free binds its allocator, so a thread that only
      // frees (a consumer) batches its frees like any other.
      if (pool::is_unbound(a)) a = pool::bind();
      if (a == nullptr) {
        // Past the thread's exit hook: count here (relaxed: statistics, as
        // g_unbound_frees says) and post the object alone.
        g_unbound_frees[m->sizeclass].fetch_add(1, std::memory_order_relaxed);
        Messenger::send_alone(m, p);
      } else {
        a->free_marked(m, p);  // (owned: a pooled allocator came back)
      }
      return;
    case pointer::Kind::kLarge:
      if constexpr (config::kGuardLarge) checks::large_intact(m, where);
      if (m->sample != nullptr) {
        unsigned sc = profile::sampled_class(m);
        profile::forget(m);
        // A sampled small object: an object of its class to the statistics,
        // its chunk kept for the next sample.
        if (sc != sizeclass::kCount) {
          if (a != nullptr && !pool::is_unbound(a)) {
            a->free_sampled(m, sc);
          } else {
            // Relaxed: statistics (as g_unbound_frees says).
            g_unbound_frees[sc].fetch_add(1, std::memory_order_relaxed);
            Allocator::free_sampled_chunk(m);
          }
          service::at_safe_point();
          return;
        }
      }
      service::start_before_release();
      large::free(m);
      service::at_safe_point();
      return;
    case pointer::Kind::kZeroSize:
      if (!zero_size::free(p)) checks::fault(where, checks::kDoubleFree, p, 0);
      return;
  }
}

// Another allocator's object, checked and marked, freed by a thread with an
// offload port: onto the port's free ring, or (ring full) the remote-free
// path.  Apart from dealloc_slow so that its call does not make the common
// remote free keep a stack frame.  (The service frees it without another
// check: offload.cc.)
ROOST_NOINLINE void dealloc_through_port(void* p, ChunkMeta* m, Allocator* a) {
  // The class first: once on the ring, the object may be freed and its slab
  // reused at any moment.
  unsigned sc = m->sizeclass;
  if (offload::give(a->port(), p, sc)) return;
  a->send_remote(m, p);
}

}  // namespace

ROOST_COMMON_TEXT void dealloc_unmapped(void* p, Allocator* a, const char* where) {
  if (p == nullptr) return;
  dealloc_other(p, nullptr, a, where);
}

ROOST_COMMON_TEXT void dealloc_slow(void* p, ChunkMeta* m, Allocator* a, const char* where) {
  // The common case: an object of another allocator's slab, whose lane
  // holds another slab's batch.  (The owner's own objects took the fast
  // path, but for interior pointers, which the checked and secure builds
  // test there, and object starts beyond what the slab carved:
  // pointer::slab_object() names them here.)
  if (ROOST_LIKELY(m->kind == ChunkKind::kSlab && !pool::is_unbound(a))) {
    pointer::slab_object(m, p, where);
    checks::note_free(m, p, where);
    if (ROOST_UNLIKELY(a->port() != nullptr)) {
      dealloc_through_port(p, m, a);
      return;
    }
    a->send_remote(m, p);
    return;
  }
  if (pagemap::is_stray(m)) {  // (null among them)
    dealloc_unmapped(p, a, where);
    return;
  }
  dealloc_other(p, m, a, where);
}

ROOST_COMMON_TEXT void* alloc_aligned(size_t align, size_t size) {
  if (align <= config::kMinAlloc) return alloc(size);
  if (config::kZeroSizeFaults && size == 0 && align <= config::kZeroSizeMaxAlign)
    return alloc_zero_size(align);
  unsigned sc = sizeclass::for_aligned(slack_canary::padded(size), align);
  if (sc < sizeclass::kCount) {
    if constexpr (config::kSlackCanaries) return alloc_with_canary(sc, size);
    return pool::current()->alloc(sc);
  }
  return alloc_large(size, align, false);
}

ROOST_COMMON_TEXT void* alloc_zeroed(size_t size) {
  if (size <= config::kMaxSmall) {
    void* p = alloc(size);
    // The hardened build's slab objects read zero throughout when handed
    // out (ds/freed_zero.h: zeroed at the free, checked at the hand-out);
    // a class served as a large object, or a sampled one, is not a slab's.
    if constexpr (config::kZeroOnFree && config::kCheckFreed) {
      if (p == nullptr) return p;
      const ChunkMeta* m = pagemap::lookup(p);
      if (m == nullptr || m->kind != ChunkKind::kSlab) __builtin_memset(p, 0, size);
      return p;
    }
    if (p != nullptr) __builtin_memset(p, 0, size);
    return p;
  }
  return alloc_large(size, 1, true);
}

namespace {

// The usable size of the live object `o` that `p` starts (the hardened
// build's small objects: the size asked for, their canary checked).
ROOST_COMMON_TEXT size_t usable(const pointer::Object& o, const void* p, const char* where) {
  switch (o.kind) {
    case pointer::Kind::kSlab:
      if constexpr (config::kSlackCanaries) return checks::slack_intact(o.m, p, where);
      return o.m->obj_size;
    case pointer::Kind::kLarge:
      return large::usable(o.m);
    case pointer::Kind::kZeroSize:
      return 0;
  }
  return 0;
}

constexpr const char* kFreedObject = "invalid pointer (a freed object)";

}  // namespace

ROOST_NOINLINE size_t usable_size_slow(const void* p, const char* where) {
  if (p == nullptr) return 0;
  return usable(pointer::classify(p, nullptr, where, kFreedObject), p, where);
}

namespace {

// Forgets the large object `m` (just allocated, not handed out): its
// memory is lost to roost (large::lose).
void forget(ChunkMeta* m) {
  if (m->sample != nullptr) profile::forget(m);
  large::lose(m);
}

// realloc's move of the large object `p` (record `m`) to `*q`, just
// allocated with `size` bytes (both large or huge: they hold `n` bytes, 2 MiB
// or more, beyond any size class): the whole stretches of its first `n` bytes
// move without a copy (large::move_into).  Returns how many leading bytes
// are in place (the caller copies the rest).  Where a failed move left
// `*q` unusable, it is forgotten and another object of `size` bytes takes
// its place, the moved bytes copied in; where none can be had, the moved
// bytes go back to `p` and SIZE_MAX says so (errno ENOMEM).
ROOST_NOINLINE size_t move_large(void* p, ChunkMeta* m, void** q, size_t size, size_t n) {
  ChunkMeta* to = pagemap::lookup(*q);
  large::Moved r = large::move_into(m, to, n);
  if (!r.lost) return r.moved;
  void* other = alloc(size);
  if (other == nullptr) {
    __builtin_memcpy(p, *q, r.moved);
    forget(to);
    return SIZE_MAX;
  }
  __builtin_memcpy(other, *q, r.moved);
  forget(to);
  *q = other;
  return r.moved;
}

}  // namespace

ROOST_COMMON_TEXT void* resize(void* p, size_t size) {
  pointer::Object o = pointer::classify(p, nullptr, "realloc", kFreedObject);
  size_t old = usable(o, p, "realloc");
  ChunkMeta* m = o.m;
  if (o.kind == pointer::Kind::kSlab) {
    // A shrink to half of it or more, or any size of its class (below half
    // of the smallest class's objects too).
    if constexpr (config::kSlackCanaries) {
      // (usable_size() checked the canary: it is rewritten for the new size.)
      // Also a shrink to half of the size asked for or more.
      size_t padded = size + config::kSlackCanaryBytes;
      if (size <= config::kMaxSmall - config::kSlackCanaryBytes &&
          (slab::stays_in_place(m, padded) || sizeclass::from_size(padded) == m->sizeclass ||
           (padded <= m->obj_size && size >= old - old / 2))) {
        // What a shrink leaves behind is zeroed, as a free would.
        if (config::kZeroOnFree && size < old)
          __builtin_memset(static_cast<char*>(p) + size, 0, old - size);
        slack_canary::write(p, size, m->obj_size);
        return p;
      }
    } else {
      if (slab::stays_in_place(m, size)) return p;
      if (size <= config::kMaxSmall && sizeclass::from_size(size) == m->sizeclass) return p;
    }
  } else if (o.kind == pointer::Kind::kLarge && size > config::kMaxSmall &&
             profile::sampled_class(m) == sizeclass::kCount) {  // (a sampled small one: moved)
    // (The canary is rewritten in place: check it first.)
    if constexpr (config::kGuardLarge) checks::large_intact(m, "realloc");
    if (large::resize_in_place(m, size)) {
      if (ROOST_UNLIKELY(profile::on())) profile::note_resized(m, __builtin_return_address(0));
      return p;
    }
  }
  void* q = alloc(size);
  if (q == nullptr) return nullptr;
  size_t n = old < size ? old : size;
  size_t moved = n >> config::kMoveBits != 0 ? move_large(p, m, &q, size, n) : 0;
  if (moved == SIZE_MAX) return nullptr;  // (p holds its bytes again)
  __builtin_memcpy(static_cast<char*>(q) + moved, static_cast<char*>(p) + moved, n - moved);
  dealloc(p, "realloc");
  return q;
}

bool trim() {
  g_trims.fetch_add(1, std::memory_order_relaxed);  // relaxed: see g_trims
  // The calling thread's quarantine first: its objects can then go back.
  if constexpr (config::kQuarantine) {
    Allocator* a = pool::current();
    if (!pool::is_unbound(a)) a->drain_quarantine("malloc_trim");
  }
  // The hardened build's quarantine of freed large objects too.
  bool released = large::drain_quarantine();
  released = pool::trim_all() || released;
  return chunks::purge_all() || released;
}

// Relaxed: see g_trims.
uint64_t trims() { return g_trims.load(std::memory_order_relaxed); }

}  // namespace roost::heap
