// backend/large.cc — implementation of backend/large.h.
#include "backend/large.h"

#include <atomic>

#include "backend/address_space.h"
#include "backend/chunk_allocator.h"
#include "backend/huge_pages.h"
#include "backend/large_guard.h"
#include "backend/meta_arena.h"
#include "backend/pagemap.h"
#include "config.h"
#include "ds/bits.h"
#include "ds/secret.h"
#include "ds/spinlock.h"
#include "options.h"
#include "platform/access_fault.h"
#include "platform/os.h"
#include "platform/text_section.h"

namespace roost::large {

namespace {

SpinLock g_lock;  // guards the huge-record free list
constexpr ChunkMeta make_freed_record() {
  ChunkMeta m{};
  m.kind = ChunkKind::kFreedLarge;
  return m;
}
// A freed large object's record stays in its region's table, where the
// backend keeps its large_size; a freed huge object's goes to the spare
// list (g_spare_huge_meta) until the next huge object takes it.
constinit ChunkMeta g_freed_record = make_freed_record();
constinit ChunkMeta g_freed_huge_record = make_freed_record();
ChunkMeta* g_spare_huge_meta = nullptr;  // records of freed huge objects

// Any thread allocates and frees large objects.
std::atomic<size_t> g_in_use{0};
std::atomic<size_t> g_allocs{0};
std::atomic<size_t> g_frees{0};
std::atomic<size_t> g_huge_bytes{0}, g_huge_objects{0};
std::atomic<size_t> g_huge_peak_bytes{0}, g_huge_peak_objects{0};

void account(ptrdiff_t bytes, size_t allocs, size_t frees) {
  g_in_use.fetch_add(static_cast<size_t>(bytes), std::memory_order_relaxed);
  if (allocs) g_allocs.fetch_add(allocs, std::memory_order_relaxed);
  if (frees) g_frees.fetch_add(frees, std::memory_order_relaxed);
}

void raise_peak(std::atomic<size_t>& peak, size_t now) {
  size_t seen = peak.load(std::memory_order_relaxed);
  while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}

// Huge objects apart (statistics: mallinfo's mapped blocks).
void account_huge(ptrdiff_t bytes, ptrdiff_t objects) {
  size_t b = g_huge_bytes.fetch_add(static_cast<size_t>(bytes), std::memory_order_relaxed) +
             static_cast<size_t>(bytes);
  size_t n = g_huge_objects.fetch_add(static_cast<size_t>(objects), std::memory_order_relaxed) +
             static_cast<size_t>(objects);
  raise_peak(g_huge_peak_bytes, b);
  raise_peak(g_huge_peak_objects, n);
}

// The pages a user may have written since the last purge: a cached chunk
// reused for a smaller object still holds the bigger one's bytes.
void note_dirty(ChunkMeta* m, size_t usable) {
  uint32_t pages = static_cast<uint32_t>(usable / config::kMinPageSize);
  if (pages > m->dirty_pages) m->dirty_pages = pages;
}

// The secure and hardened builds' guard page after an object's usable bytes
// (none in the default build): one of the OS's pages.
size_t guard_bytes() { return guard_for(os::page_size()); }

ChunkMeta* alloc_huge(size_t usable, size_t align) {
  void* p = address_space::reserve_huge(usable + guard_bytes(),
                                        align < config::kGranule ? config::kGranule : align);
  if (p == nullptr) return nullptr;
  ChunkMeta* m;
  {
    LockGuard guard(g_lock);
    m = g_spare_huge_meta;
    if (m != nullptr) g_spare_huge_meta = m->next;
  }
  if (m == nullptr) m = static_cast<ChunkMeta*>(meta_arena::alloc(sizeof(ChunkMeta), 64));
  if (m == nullptr) {
    address_space::release_huge(p, usable + guard_bytes());
    return nullptr;
  }
  set_kind(m, ChunkKind::kHuge);
  set_no_owner(m);
  m->sample = nullptr;
  m->base = reinterpret_cast<uintptr_t>(p);
  m->large_size = usable;
  m->next = m->prev = nullptr;
  pagemap::set_range(m->base, 1, m);
  huge_pages::fit_mapped(m->base, usable, false);
  account(static_cast<ptrdiff_t>(usable), 1, 0);
  account_huge(static_cast<ptrdiff_t>(usable), 1);
  return m;
}

unsigned order_for(size_t span) {
  unsigned order = bits::log2_ceil(span);
  return order < chunks::kMinOrder ? chunks::kMinOrder : order;
}

// The region chunk `m` becomes the large object of `usable` bytes.
// (Counted by the caller.)
void become_object(ChunkMeta* m, size_t usable) {
  note_dirty(m, usable);
  set_kind(m, ChunkKind::kLarge);
  set_no_owner(m);
  m->sample = nullptr;
  m->large_size = usable;
  pagemap::set_range(m->base, 1, m);
}

ROOST_COMMON_TEXT ChunkMeta* alloc_in_region(size_t usable, size_t span, size_t* dirty) {
  unsigned order = order_for(span);
  // Recently freed memory first (the backend keeps it resident for a purge
  // delay), so a program that frees and allocates big buffers in turn does
  // not fault them in again: a chunk of the size, and for big objects the
  // one whose written part fits what this one will use best, with other
  // freed chunks' pages moved in where it falls short (not where they would
  // carry huge-page advice along).
  bool moves =
      order > config::kMoveBits && options::get(options::kMovePages) != 0 && !huge_pages::active();
  ChunkMeta* m = moves ? chunks::alloc(order, usable) : chunks::alloc(order);
  if (m == nullptr) return nullptr;
  // Beyond its dirty extent a backend chunk was never touched or was
  // purged; with MADV_FREE purging it may still hold old bytes.
  if (options::get(options::kPurgeZero) == 0)
    m->dirty_pages = static_cast<uint32_t>((size_t{1} << order) / config::kMinPageSize);
  *dirty = dirty_extent(m);
  become_object(m, usable);
  return m;
}

// The canary's key of the object `m` (large_guard.h).
uint64_t canary_key(const ChunkMeta* m) { return secret::g_value ^ m->base; }

// Guard pages in place now.  Each splits a mapping in three, and the kernel
// limits how many a process has (vm.max_map_count), so at most
// config::kMaxLargeGuards objects have one at a time; the others have
// their canary only, as all have under ROOST_LARGE_GUARDS=0.
std::atomic<size_t> g_guards{0};

bool place_guard(uintptr_t end) {
  if (config::kMaxLargeGuards == 0 || options::get(options::kLargeGuards) == 0) return false;
  if (g_guards.fetch_add(1, std::memory_order_relaxed) < config::kMaxLargeGuards &&
      large_guard::place(end)) {
    // A store into it then ends in roost's diagnostic, not a bare SIGSEGV.
    access_fault::arm();
    return true;
  }
  g_guards.fetch_sub(1, std::memory_order_relaxed);
  return false;
}

// `m`'s guard page, if it had one, is gone (lifted, or unmapped with the
// range it was in).
void guard_gone(ChunkMeta* m) {
  if (!m->guarded) return;
  m->guarded = false;
  g_guards.fetch_sub(1, std::memory_order_relaxed);
}

// Is `m`'s guard page (right after its usable bytes) the end guard of its
// chunk, left by the slab the chunk served before (the hardened build's
// slab guards: chunks::has_end_guard)?  Then the object keeps it as its
// own: no mprotect to place it, none to lift it (it stays with the chunk).
// (A large object never reaches its chunk's last page: the guard's room
// is part of its span.)
bool guard_is_chunks(const ChunkMeta* m) {
  if constexpr (!config::kGuardSlabs) return false;
  return m->kind == ChunkKind::kLarge && m->large_size + os::page_size() == size_t{1} << m->order &&
         chunks::has_end_guard(m);
}

// guard_is_chunks() of a quarantined object's record (kind kFreedLarge).
bool guard_is_chunks_of_freed(const ChunkMeta* m) {
  if constexpr (!config::kGuardSlabs) return false;
  return m->large_size + os::page_size() == size_t{1} << m->order && chunks::has_end_guard(m);
}

// The canary from `size`, the size asked for, to `m`'s page boundary.
void set_canary(ChunkMeta* m, size_t size) {
  m->large_slack = static_cast<uint32_t>(m->large_size - size);
  large_guard::fill_slack(m->base, size, m->large_size, canary_key(m));
}

// The guard page after `m`'s usable bytes, tried (without it the object
// still works), and the canary.  Called only where config::kGuardLarge.
[[maybe_unused]] void arm_guard(ChunkMeta* m, size_t size) {
  if (guard_is_chunks(m) && options::get(options::kLargeGuards) != 0) {
    m->guarded = true;
  } else {
    // (Without large guards (ROOST_LARGE_GUARDS=0) a chunk's end guard
    // where this guard would be is lifted too, so that the object has
    // none, as the option says.)
    if constexpr (config::kGuardSlabs) {
      if (m->kind == ChunkKind::kLarge && options::get(options::kLargeGuards) == 0)
        chunks::lift_end_guard(m);
    }
    m->guarded = place_guard(m->base + m->large_size);
  }
  set_canary(m, size);
}

// ---- the hardened build's quarantine of freed large objects ----
//
// A FIFO of freed region objects (config::kQuarantineLarge), each made
// inaccessible at its free; its record keeps its kind kFreedLarge (the
// pagemap maps its first granule to g_freed_record, as any freed large
// object's), its large_size, large_slack and guard, until it leaves.
struct Quarantine {
  SpinLock lock;
  ChunkMeta* ring[config::kLargeQuarantineObjects] = {};
  unsigned head = 0;   // the oldest
  unsigned count = 0;  // objects waiting
  size_t bytes = 0;    // their large_size together
};
constinit Quarantine g_quarantine;

// `m`, out of the quarantine: accessible again (with its guard page, in
// one call, unless the guard is its chunk's: that stays) and back to the
// backend.  Lost to roost should the OS refuse.
ROOST_SLOW void leave_quarantine(ChunkMeta* m) {
  bool own_guard = m->guarded && !guard_is_chunks_of_freed(m);
  size_t bytes = m->large_size + (own_guard ? os::page_size() : 0);
  if (!os::make_accessible(reinterpret_cast<void*>(m->base), bytes)) return;
  if (own_guard) {
    guard_gone(m);
  } else {
    m->guarded = false;
  }
  set_kind(m, ChunkKind::kUnused);
  chunks::release(m, dirty_extent(m));
}

// Puts the freed region object `m` (its pagemap entry already the freed
// record) in the quarantine; the objects it pushes out leave.  False,
// doing nothing, when the OS refuses to make it inaccessible.
[[maybe_unused]] ROOST_SLOW bool enter_quarantine(ChunkMeta* m) {
  if (!os::make_inaccessible(reinterpret_cast<void*>(m->base), m->large_size)) return false;
  ChunkMeta* out[config::kLargeQuarantineObjects];
  unsigned n = 0;
  {
    LockGuard guard(g_quarantine.lock);
    Quarantine& q = g_quarantine;
    set_kind(m, ChunkKind::kFreedLarge);
    while (q.count == config::kLargeQuarantineObjects ||
           (q.count != 0 && q.bytes + m->large_size > config::kLargeQuarantineBytes)) {
      ChunkMeta* oldest = q.ring[q.head];
      q.head = (q.head + 1) % config::kLargeQuarantineObjects;
      q.count--;
      q.bytes -= oldest->large_size;
      out[n++] = oldest;
    }
    q.ring[(q.head + q.count) % config::kLargeQuarantineObjects] = m;
    q.count++;
    q.bytes += m->large_size;
  }
  for (unsigned i = 0; i < n; i++) leave_quarantine(out[i]);
  return true;
}

}  // namespace

ROOST_COMMON_TEXT void* alloc(size_t size, size_t align, size_t* dirty) {
  const size_t page = os::page_size();
  size_t usable = usable_for(size, page);
  size_t span = span_for(usable, guard_for(page), align);
  ChunkMeta* m;
  if (span > address_space::huge_above()) {
    *dirty = 0;  // fresh from mmap
    m = alloc_huge(usable, align);
  } else {
    m = alloc_in_region(usable, span, dirty);
    if (m != nullptr) account(static_cast<ptrdiff_t>(usable), 1, 0);
  }
  if (m == nullptr) return nullptr;
  if constexpr (config::kGuardLarge) arm_guard(m, size);
  return reinterpret_cast<void*>(m->base);
}

void* alloc_apart(size_t size) {
  const size_t page = os::page_size();
  size_t usable = usable_for(size, page);
  size_t dirty;  // (its caller's objects are small: calloc zeroes them whatever the source)
  ChunkMeta* m = alloc_in_region(usable, span_for(usable, guard_for(page), 1), &dirty);
  if (m == nullptr) return nullptr;
  if constexpr (config::kGuardLarge) arm_guard(m, size);
  return reinterpret_cast<void*>(m->base);
}

bool is_freed(const ChunkMeta* m) { return m == &g_freed_record || m == &g_freed_huge_record; }

const ChunkMeta* guarded_by(uintptr_t addr) {
  if constexpr (!config::kGuardLarge) return nullptr;
  // An object maps its first granule only: the nearest record at or below
  // `addr` is its own when `addr` is in its guard page.  Huge objects reach
  // further than regions; the walk stops after 64 GiB of granules.  The
  // freed objects' records are passed over: a freed object's first granule
  // keeps mapping to one until the granule is used again, which may be
  // inside a bigger object that took the chunk around it since.
  constexpr uintptr_t kMostGranules = uintptr_t{1} << 20;
  uintptr_t index = addr >> config::kGranuleBits;
  if (index >= pagemap::g_limit) return nullptr;
  for (uintptr_t i = 0; i <= index && i < kMostGranules; i++) {
    uintptr_t entry = pagemap::g_entries[index - i].load(std::memory_order_relaxed);
    if (entry == 0) continue;
    const ChunkMeta* m = pagemap::decode(entry);
    if (is_freed(m)) continue;
    ChunkKind kind = kind_of(m);
    if ((kind != ChunkKind::kLarge && kind != ChunkKind::kHuge) || !m->guarded) return nullptr;
    uintptr_t guard = m->base + m->large_size;
    return addr >= guard && addr - guard < os::page_size() ? m : nullptr;
  }
  return nullptr;
}

size_t freed_size(const ChunkMeta* m, const void* p) {
  auto base = reinterpret_cast<uintptr_t>(p);
  if (m == &g_freed_record) return usable(chunks::meta_of(base));
  LockGuard guard(g_lock);
  for (const ChunkMeta* spare = g_spare_huge_meta; spare != nullptr; spare = spare->next)
    if (spare->base == base) return usable(spare);
  return 0;
}

unsigned chunk_order(size_t size) {
  const size_t page = os::page_size();
  return order_for(span_for(usable_for(size, page), guard_for(page), 1));
}

void* place(ChunkMeta* m, size_t size) {
  const size_t page = os::page_size();
  size_t usable = usable_for(size, page);
  if (span_for(usable, guard_for(page), 1) > (size_t{1} << m->order)) return nullptr;
  become_object(m, usable);
  if constexpr (config::kGuardLarge) arm_guard(m, size);
  return reinterpret_cast<void*>(m->base);
}

bool retire(ChunkMeta* m) {
  pagemap::set_range(m->base, 1, &g_freed_record);
  // A chunk whose guard page stays inaccessible cannot be handed out again:
  // should the OS refuse to lift it, the chunk is lost to roost.
  if (config::kGuardLarge && m->guarded) {
    if (guard_is_chunks(m)) {
      m->guarded = false;  // (it stays with the chunk)
    } else {
      if (!large_guard::lift(m->base + m->large_size)) return false;
      guard_gone(m);
    }
  }
  set_kind(m, ChunkKind::kUnused);
  return true;
}

ROOST_COMMON_TEXT void free(ChunkMeta* m) {
  if (m->kind == ChunkKind::kHuge) {
    pagemap::set_range(m->base, 1, &g_freed_huge_record);
    size_t usable = m->large_size;
    account(-static_cast<ptrdiff_t>(usable), 0, 1);
    account_huge(-static_cast<ptrdiff_t>(usable), -1);
    // Should the OS refuse to unmap it, the range stays reserved: lost to
    // roost, but nothing else breaks.
    address_space::release_huge(reinterpret_cast<void*>(m->base), usable + guard_bytes());
    if constexpr (config::kGuardLarge) guard_gone(m);
    LockGuard guard(g_lock);
    m->next = g_spare_huge_meta;
    g_spare_huge_meta = m;
    return;
  }
  account(-static_cast<ptrdiff_t>(m->large_size), 0, 1);
  if constexpr (config::kQuarantineLarge) {
    pagemap::set_range(m->base, 1, &g_freed_record);
    if (enter_quarantine(m)) return;
  }
  // dirty_pages bounds what the backend's purge must cover.
  if (retire(m)) chunks::release(m, dirty_extent(m));
}

bool drain_quarantine() {
  if constexpr (!config::kQuarantineLarge) return false;
  bool any = false;
  for (;;) {
    ChunkMeta* out[config::kLargeQuarantineObjects];
    unsigned n = 0;
    {
      LockGuard guard(g_quarantine.lock);
      Quarantine& q = g_quarantine;
      while (q.count != 0) {
        out[n++] = q.ring[q.head];
        q.bytes -= q.ring[q.head]->large_size;
        q.head = (q.head + 1) % config::kLargeQuarantineObjects;
        q.count--;
      }
    }
    if (n == 0) return any;
    any = true;
    for (unsigned i = 0; i < n; i++) leave_quarantine(out[i]);
  }
}

size_t quarantined() {
  LockGuard guard(g_quarantine.lock);
  return g_quarantine.count;
}

const ChunkMeta* quarantined_at(uintptr_t addr) {
  if constexpr (!config::kQuarantineLarge) return nullptr;
  // As guarded_by(): the nearest record at or below `addr`; a quarantined
  // object's first granule maps to the freed record, its own record is in
  // its region's table, of kind kFreedLarge while it waits.
  constexpr uintptr_t kMostGranules = config::kRegion >> config::kGranuleBits;
  uintptr_t index = addr >> config::kGranuleBits;
  if (index >= pagemap::g_limit) return nullptr;
  for (uintptr_t i = 0; i <= index && i < kMostGranules; i++) {
    uintptr_t entry = pagemap::g_entries[index - i].load(std::memory_order_relaxed);
    if (entry == 0) continue;
    if (pagemap::decode(entry) != &g_freed_record) return nullptr;
    // (A granule of a bigger object that took the chunk around a freed one
    // since keeps mapping to the freed record: its own record says which,
    // and the walk goes on past it.)
    uintptr_t granule = (index - i) << config::kGranuleBits;
    const ChunkMeta* m = chunks::meta_of(granule);
    if (kind_of(m) != ChunkKind::kFreedLarge || m->base != granule) continue;
    return addr - m->base < m->large_size ? m : nullptr;
  }
  return nullptr;
}

bool resize_in_place(ChunkMeta* m, size_t new_size) {
  const size_t page = os::page_size();
  const size_t guard = guard_for(page);
  size_t usable = usable_for(new_size, page);
  size_t old = m->large_size;
  // Where the guard page is (secure build), and whether it must move.
  bool move_guard = config::kGuardLarge && usable != old;
  if (m->kind == ChunkKind::kHuge) {
    if (usable > old || usable < old / 2) return false;
    // The old guard page goes with the tail.
    if (usable < old &&
        !address_space::shrink_huge(reinterpret_cast<void*>(m->base), old + guard, usable + guard))
      return false;
    if (move_guard) guard_gone(m);
    if (usable < old) huge_pages::fit_mapped(m->base, usable, true);
    account_huge(static_cast<ptrdiff_t>(usable) - static_cast<ptrdiff_t>(old), 0);
  } else {
    if (!stays_in_chunk(usable, guard, size_t{1} << m->order)) return false;
    if (move_guard && m->guarded) {
      if (guard_is_chunks(m)) {
        m->guarded = false;  // (it stays with the chunk)
      } else {
        if (!large_guard::lift(m->base + old)) return false;
        guard_gone(m);
      }
    }
    note_dirty(m, usable);
    // A shrink by a megabyte or more gives the tail's pages back now (from
    // base + usable: page-aligned).  (Should the OS refuse, the tail keeps
    // its bytes and stays dirty.)
    if (dirty_extent(m) >= usable + (size_t{1} << 20)) {
      // (A huge page the tail shares with the object is split by the purge.)
      huge_pages::before_purge(m->base + usable, dirty_extent(m) - usable);
      if (os::purge(reinterpret_cast<void*>(m->base + usable), dirty_extent(m) - usable,
                    options::get(options::kPurgeZero) != 0))
        m->dirty_pages = static_cast<uint32_t>(usable / config::kMinPageSize);
    }
  }
  m->large_size = usable;
  account(static_cast<ptrdiff_t>(usable) - static_cast<ptrdiff_t>(old), 0, 0);
  if constexpr (config::kGuardLarge) {
    if (move_guard)
      arm_guard(m, new_size);
    else
      set_canary(m, new_size);
  }
  return true;
}

Moved move_into(const ChunkMeta* from, ChunkMeta* to, size_t bytes) {
  if (options::get(options::kMovePages) == 0 || huge_pages::active()) return Moved{0, false};
  os::Moved last;
  size_t whole = bytes & ~((size_t{1} << config::kMoveBits) - 1);
  size_t moved = chunks::move(from->base, to->base, whole, &last);
  if (to->kind == ChunkKind::kLarge) note_dirty(to, moved);
  return Moved{moved, last == os::Moved::kLost};
}

void lose(ChunkMeta* m) {
  account(-static_cast<ptrdiff_t>(m->large_size), 0, 1);
  if (m->kind == ChunkKind::kHuge) {
    account_huge(-static_cast<ptrdiff_t>(m->large_size), -1);
    pagemap::set_range(m->base, 1, &g_freed_huge_record);
  } else {
    pagemap::set_range(m->base, 1, &g_freed_record);
    set_kind(m, ChunkKind::kUnused);  // (a live object to no scan of the records)
  }
}

uintptr_t overwritten(const ChunkMeta* m) {
  if constexpr (!config::kGuardLarge) return 0;
  return large_guard::first_overwritten(m->base, usable(m), m->large_size, canary_key(m));
}

Counters counters() {
  return Counters{g_in_use.load(std::memory_order_relaxed),
                  g_allocs.load(std::memory_order_relaxed),
                  g_frees.load(std::memory_order_relaxed),
                  g_huge_bytes.load(std::memory_order_relaxed),
                  g_huge_objects.load(std::memory_order_relaxed),
                  g_huge_peak_bytes.load(std::memory_order_relaxed),
                  g_huge_peak_objects.load(std::memory_order_relaxed)};
}

void lock_for_fork() {
  g_lock.lock();
  g_quarantine.lock.lock();
}
void unlock_after_fork(bool child) {
  g_quarantine.lock.unlock_after_fork(child);
  g_lock.unlock_after_fork(child);
}

}  // namespace roost::large
