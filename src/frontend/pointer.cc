// frontend/pointer.cc — the classification of frontend/pointer.h.
#include "frontend/pointer.h"

#include "backend/large.h"
#include "backend/pagemap.h"
#include "frontend/profile.h"
#include "platform/error.h"
#include "platform/os.h"
#include "platform/text_section.h"

namespace roost::pointer {

namespace {

[[noreturn]] ROOST_SLOW void invalid(const char* where, const char* fault, const void* p) {
  err::fatal(where, fault, p);
}

// A pointer whose lookup found no live object: a freed large object's start
// (its first granule still maps to a large::is_freed() record), told as
// `freed_start` with the object's size while its record tells it; inside
// such a granule; or not roost's.
[[noreturn]] ROOST_SLOW void not_live(const char* where, const void* p, const ChunkMeta* m,
                                      const char* freed_start) {
  if (!large::is_freed(m)) invalid(where, "invalid pointer (not allocated by roost)", p);
  if (reinterpret_cast<uintptr_t>(p) % config::kGranule != 0)
    invalid(where, "invalid pointer (inside a freed object)", p);
  if (size_t size = large::freed_size(m, p)) checks::fault(where, freed_start, p, size);
  invalid(where, freed_start, p);
}

}  // namespace

void interior(const char* where, const void* p, size_t size) {
  checks::fault(where, "invalid pointer (interior of an object)", p, size);
}

ROOST_COMMON_TEXT Object classify(const void* p, ChunkMeta* m, const char* where,
                                  const char* freed_start) {
  // (An address the aligned lookup missed is misaligned or foreign: roost's
  // pointers are 16-byte aligned, so a hit here is an interior pointer,
  // which the tests below name.)
  if (m == nullptr || pagemap::is_stray(m)) m = pagemap::lookup(p);
  if (m == nullptr) invalid(where, "invalid pointer (not allocated by roost)", p);
  switch (m->kind) {
    case ChunkKind::kSlab:
      slab_object(m, p, where);
      return Object{Kind::kSlab, m};
    case ChunkKind::kLarge:
    case ChunkKind::kHuge:
      if (reinterpret_cast<uintptr_t>(p) != m->base) interior(where, p, large::usable(m));
      return Object{Kind::kLarge, m};
    case ChunkKind::kZeroSize:
      // One of the range's 16-byte steps.
      if (reinterpret_cast<uintptr_t>(p) % config::kMinAlloc != 0)
        invalid(where, "invalid pointer (not a zero-size allocation)", p);
      return Object{Kind::kZeroSize, m};
    default:
      not_live(where, p, m, freed_start);
  }
}

ROOST_SLOW void check_sized_free(const void* p, size_t size, size_t align, const char* where) {
  // (What is no live object's start is named as the free would name it.)
  Object o = classify(p, nullptr, where, checks::kDoubleFree);
  const ChunkMeta* m = o.m;
  // A small object's class is that of its size and its canary (hardened
  // build).
  size_t padded = slack_canary::padded(size);
  switch (o.kind) {
    case Kind::kSlab: {
      // The class of the size given, or (no alignment beyond malloc's:
      // realloc keeps none) a size realloc shrank the object to in place.
      bool shrunk = align <= config::kMinAlloc && slab::stays_in_place(m, padded);
      if (sizeclass::for_aligned(padded, align) != m->sizeclass && !shrunk)
        checks::fault(where, checks::kSizeMismatch, p, m->obj_size);
      return;
    }
    case Kind::kLarge:
      break;
    case Kind::kZeroSize:
      return;
  }
  // A small object the heap profiler sampled (served as a large one): the
  // sizes of its class.
  if (m->sample != nullptr) {
    unsigned sc = profile::sampled_class(m);
    if (sc < sizeclass::kCount) {
      if (sizeclass::for_aligned(padded, align) != sc)
        checks::fault(where, checks::kSizeMismatch, p, sizeclass::kInfo.info[sc].size);
      return;
    }
  }
  // (A class served as a large object has its class's size: the class of
  // the size and its canary, as it was allocated.)
  unsigned sc = sizeclass::for_aligned(padded, align);
  size_t expected =
      sc < sizeclass::kCount && large::serves_class(sc) ? sizeclass::to_size(sc) : size;
  if (large::usable_for(expected, os::page_size()) != m->large_size)
    checks::fault(where, checks::kSizeMismatch, p, large::usable(m));
}

}  // namespace roost::pointer
