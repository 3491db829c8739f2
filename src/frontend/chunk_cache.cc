// frontend/chunk_cache.cc — implementation of frontend/chunk_cache.h.
#include "frontend/chunk_cache.h"

#include "backend/chunk_allocator.h"
#include "platform/text_section.h"

namespace roost {

namespace {

// Fresh memory comes from the backend in batches (config.h).
constexpr unsigned kBatchOrder = config::kFreshBatchOrder;

ChunkCache::ShortageHook g_shortage_hook = nullptr;

}  // namespace

ROOST_COMMON_TEXT ChunkCache::ShortageHook ChunkCache::set_shortage_hook(ShortageHook hook) {
  ShortageHook old = g_shortage_hook;
  g_shortage_hook = hook;
  return old;
}

void ChunkCache::add(ChunkMeta* m) {
  set_kind(m, ChunkKind::kCached);
  lists_[m->order].push_front(m);
  bytes_ += size_t{1} << m->order;
  resident_ += dirty_extent(m);
}

void ChunkCache::remove(ChunkMeta* m) {
  lists_[m->order].remove(m);
  bytes_ -= size_t{1} << m->order;
  resident_ -= dirty_extent(m);
}

ROOST_COMMON_TEXT void ChunkCache::keep(ChunkMeta* m) {
  size_t resident = dirty_extent(m);
  if (kept_bytes() + resident <= reserve()) {
    add(m);
    return;
  }
  chunks::release(m, resident);
}

ROOST_COMMON_TEXT ChunkMeta* ChunkCache::take_cached(unsigned order, bool resident_only) {
  for (unsigned j = order; j <= config::kRegionBits; j++) {
    for (ChunkMeta* m = lists_[j].head; m != nullptr; m = m->next) {
      if (resident_only && m->dirty_pages == 0) continue;
      remove(m);
      set_kind(m, ChunkKind::kUnused);  // handed out
      chunks::split_out(m, order, [this](ChunkMeta* piece) { add(piece); });
      return m;
    }
  }
  return nullptr;
}

ROOST_COMMON_TEXT ChunkMeta* ChunkCache::take(unsigned order) {
  // Resident memory first: cached chunks with resident pages, then chunks
  // released to the backend and not purged yet (split only from blocks up
  // to a batch's size: bigger ones are large objects', which reuse them
  // whole).  Then untouched cached chunks (pieces of a batch).
  if (ChunkMeta* m = take_cached(order, true)) return m;
  if (ChunkMeta* m = chunks::alloc_dirty(order, kBatchOrder)) return m;
  if (ChunkMeta* m = take_cached(order, false)) return m;
  if (g_shortage_hook != nullptr) g_shortage_hook();
  // What is cached goes back to the backend, where it merges with its
  // released buddies and can serve this request (the reserve is for reuse,
  // not for holding pieces too small to use).
  trim(0);
  // Then released memory that can serve this order, resident already; else
  // a batch when the reserve has room for the rest.
  unsigned take = order;
  if (order < kBatchOrder && !chunks::has_dirty(order) &&
      kept_bytes() + (size_t{1} << kBatchOrder) <= reserve())
    take = kBatchOrder;
  ChunkMeta* m = chunks::alloc(take);
  // Near the address-space limit a batch may not fit where the chunk does.
  if (m == nullptr && take != order) m = chunks::alloc(order);
  if (m == nullptr) return nullptr;
  chunks::split_out(m, order, [this](ChunkMeta* piece) { add(piece); });
  return m;
}

ROOST_COMMON_TEXT bool ChunkCache::trim(size_t keep) {
  bool released = false;
  for (unsigned j = 0; j <= config::kRegionBits && bytes_ > keep; j++) {
    while (bytes_ > keep) {
      ChunkMeta* m = lists_[j].head;
      if (m == nullptr) break;
      remove(m);
      chunks::release(m, dirty_extent(m));
      released = true;
    }
  }
  return released;
}

}  // namespace roost
