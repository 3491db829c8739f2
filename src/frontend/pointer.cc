// frontend/pointer.cc — the classification of frontend/pointer.h.
#include "frontend/pointer.h"

#include "backend/large.h"
#include "backend/pagemap.h"
#include "platform/error.h"
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

}  // namespace roost::pointer
