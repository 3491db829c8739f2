// frontend/slab.h — one slab: the frontend's use of a chunk record that
// holds small objects of one size class.
//
// Owns: what a slab record's fields mean and the constant-time operations
// on one slab: is an address an object start, an object or a batch
// returned to its free list, its free objects taken, its bump tail carved a
// step at a time, its wake count.  A slab is in one of three states:
//   active   its class's active slab, which refills take from first (its
//            free list directly, and its bump tail): `needed` is the hold
//            plus the objects out, so frees into it never bring it to a
//            state change;
//   asleep   no longer active, its free objects out on a fast list: on no
//            list of its class, `needed` counts the frees that wake it;
//   awake    on its class's available list: `needed` counts the frees
//            until it is empty.
// Must never: know which lists a slab is on or which allocator holds it
// (frontend/size_class_slabs.h), or touch pages beyond the objects a carve
// hands out.
#pragma once

#include <atomic>

#include "backend/chunk_meta.h"
#include "backend/pagemap.h"
#include "config.h"
#include "ds/bits.h"
#include "ds/freelist.h"
#include "ds/secret.h"
#include "ds/sizeclass.h"
#include "ds/slab_batch.h"
#include "frontend/checks.h"

namespace roost::slab {

// Is `p`, a 16-byte-aligned address in the slab `m`, the start of an
// object of it?  Its offset a multiple of the object size: a shift, a
// multiply and a compare.
ROOST_INLINE bool is_aligned_object_start(const ChunkMeta* m, const void* p) {
  // (Low 32 bits: a slab is 4 MiB at most.)
  auto offset = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(p) - m->base);
  return sizeclass::is_multiple(offset >> config::kMinAllocBits, m->inverse);
}
// The same for any address in the slab.
ROOST_INLINE bool is_object_start(const ChunkMeta* m, const void* p) {
  return reinterpret_cast<uintptr_t>(p) % config::kMinAlloc == 0 && is_aligned_object_start(m, p);
}

// Is `p`, an address in the slab `m`, within the objects it has carved so
// far?  A free of an object start beyond them is of memory roost never
// handed out.  One compare of the addresses' low 32 bits with the record's
// `carve_last` (a slab is 4 MiB at most and aligned to its size, so those
// bits order the addresses within it).  A slab that has carved nothing
// (after it started over) and starts at a multiple of 4 GiB passes every
// address: that misuse goes unseen there.  Any thread may ask (a remote
// free), while the owner carves: it reads the bound its own object was
// carved within, or a later one (a slab starts over only when every object
// is home).  A plain load, which the compiler folds into the compare; an
// atomic one where ThreadSanitizer checks it.
ROOST_INLINE bool is_carved(const ChunkMeta* m, const void* p) {
#if defined(__SANITIZE_THREAD__)
  // Relaxed: the bound only grows while the caller's object is out, and
  // the caller's own hold of it ordered the carve that made it before.
  uint32_t last =
      std::atomic_ref(const_cast<ChunkMeta*>(m)->carve_last).load(std::memory_order_relaxed);
#else
  uint32_t last = m->carve_last;
#endif
  return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(p)) <= last;
}
// Is `m` a slab's record and `p`, a 16-byte-aligned address it maps, an
// object start it has carved?  What a fast path that found `m` by the
// aligned lookup (pagemap::aligned_index) takes as an object of the slab
// (the hardened build's free, malloc_usable_size); the rest goes to
// frontend/pointer.h, which names the fault.
ROOST_INLINE bool is_carved_object(const ChunkMeta* m, const void* p) {
  return m->kind == ChunkKind::kSlab && is_aligned_object_start(m, p) && is_carved(m, p);
}
// Sets `carve_last` from the objects carved (see is_carved).
inline void note_carve_end(ChunkMeta* m) {
  uintptr_t end = m->base + size_t{m->carved} * m->obj_size;
  // Relaxed: other threads' reads (is_carved) need no order beyond what
  // handing an object out gives them.
  std::atomic_ref(m->carve_last).store(static_cast<uint32_t>(end - 1), std::memory_order_relaxed);
}

// Does an object of slab `m` resized to `size` bytes stay where it is?  A
// shrink that leaves at least half of it in use does (moving it down a class
// or more would save at most half of it, for a copy).  So the last size a
// program asked for an object may be any of these, which a sized free's
// check must accept.
ROOST_INLINE bool stays_in_place(const ChunkMeta* m, size_t size) {
  return size <= m->obj_size && size >= m->obj_size / 2;
}

// The active slab's `needed` above the objects it has out: more frees than
// a slab could take before its next refill, so none brings it to zero.
inline constexpr int32_t kActiveHold = int32_t{1} << 30;

// Frees that wake a sleeping slab: the class's wake threshold, or every
// object carved so far when fewer are out (a slab carved a few big objects
// at a time must still wake, and go back when they all return).
ROOST_INLINE constexpr uint32_t wake_count(unsigned sc, uint32_t carved) {
  uint32_t wake = sizeclass::kInfo.info[sc].wake;
  return carved < wake ? carved : wake;
}
ROOST_INLINE uint32_t wake_count(const ChunkMeta* m) { return wake_count(m->sizeclass, m->carved); }

// Puts `p` back on its slab's free list; true when the slab reached its
// next state change (woken, or empty), which the caller must then handle.
// `needed` is positive whenever an object of the slab is out, so one free
// brings it at most to zero.
ROOST_INLINE bool return_object(ChunkMeta* m, void* p) {
  freelist::push(m->free_head, p);
  return --m->needed == 0;
}

// Splices a batch of the slab's objects into its free list in constant time
// whatever the batch holds; `needed` may overshoot below zero.  True when
// the slab reached its next state change.  The default build's tail gets
// its free mark back (a 16-byte one carried the batch word there).
ROOST_INLINE bool return_batch(ChunkMeta* m, const slab_batch::Batch& b) {
  if constexpr (config::kMarkUnchecked) free_mark::set(b.tail, m);
  m->free_head = slab_batch::splice(b, m->free_head, m->obj_size);
  m->needed -= static_cast<int32_t>(b.count);
  return m->needed <= 0;
}

// Objects that came back to an active slab with these counts since its
// free objects were last taken (its `needed` is the hold plus the objects
// out).
constexpr int64_t returned_to_active(int32_t needed, uint32_t carved) {
  return int64_t{kActiveHold} + carved - needed;
}

// Objects on the free list of a slab of class `sc` in `state` with these
// counts, which say it in each state: what came back since the objects
// were last taken.  Exact for the slab's owner (a double free aside).
constexpr int64_t owners_free_objects(SlabState state, int32_t needed, uint32_t carved,
                                      unsigned sc) {
  if (state == SlabState::kActive) return returned_to_active(needed, carved);
  if (state == SlabState::kSleeping)
    return int64_t{wake_count(sc, carved)} - needed;  // `needed`: to its wake count
  return int64_t{carved} - needed;                    // awake, `needed`: out
}

// The same clamped to what the slab carved, for statistics, which compute
// it from fields read while the owner may be changing them.
constexpr uint32_t free_objects(SlabState state, int32_t needed, uint32_t carved, unsigned sc) {
  int64_t n = owners_free_objects(state, needed, carved, sc);
  return n < 0 ? 0 : n > carved ? carved : static_cast<uint32_t>(n);
}

inline bool is_active(const ChunkMeta* m) { return m->state == SlabState::kActive; }
inline bool is_asleep(const ChunkMeta* m) { return m->state == SlabState::kSleeping; }

inline uint32_t free_objects(const ChunkMeta* m) {
  return free_objects(m->state, m->needed, m->carved, m->sizeclass);
}

// Makes the chunk `m` an empty slab of class `sc` owned by `owner`, its
// granules mapped to it: its class's new active slab.  Of the resident
// pages an earlier use left, those past the first `keep_resident` bytes go
// back to the OS when they are config::kMinResidentExcess or more
// (kKeepResident: none go).
inline constexpr size_t kKeepResident = ~size_t{0};
void start(ChunkMeta* m, unsigned sc, const void* owner, size_t keep_resident);

// Hands out every free object of `m` (returns the list): every carved
// object is then out, and `m` is (or stays) its class's active slab.  The
// list's head is checked for the double free it can show without a scan;
// the secure build moves it (the most recently freed object) back one
// place.
inline FreeObject* take_free(ChunkMeta* m) {
  FreeObject* list = m->free_head;
  checks::free_list_head(m, list);
  if (config::kShuffle && list != nullptr) {
    checks::head_intact(m, m->sizeclass, list);
    if (FreeObject* second = checks::next_checked(m->sizeclass, list)) {
      freelist::set_next(list, checks::next_checked(m->sizeclass, second));
      freelist::set_next(second, list);
      list = second;
    }
  }
  m->free_head = nullptr;
  m->state = SlabState::kActive;
  m->needed = kActiveHold + static_cast<int32_t>(m->carved);
  return list;
}

// The active slab `m` is active no longer: it sleeps until its wake count
// of frees have come back since its free objects were last taken.  True
// when that many have already (it must then wake: a state change).
inline bool leave_active(ChunkMeta* m) {
  auto returned = static_cast<int32_t>(returned_to_active(m->needed, m->carved));
  m->state = SlabState::kSleeping;
  m->needed = static_cast<int32_t>(wake_count(m)) - returned;
  return m->needed <= 0;
}

// A carve's objects at most: the class's batch (ClassInfo::carve), or
// fewer while its allocator ramps up (SizeClassSlabs).
inline constexpr uint32_t kClassBatch = UINT32_MAX;

// Objects the next carve of `m` takes from its tail, `batch` at most.
inline uint32_t carve_count(const ChunkMeta* m, uint32_t batch = kClassBatch) {
  const sizeclass::ClassInfo& info = sizeclass::kInfo.info[m->sizeclass];
  uint32_t count = batch < info.carve ? batch : info.carve;
  uint32_t left = info.capacity - m->carved;
  return count < left ? count : left;
}

// Would the next carve of `m` (of `batch` at most) reach pages never
// touched (or purged)?
inline bool carve_touches_fresh(const ChunkMeta* m, uint32_t batch = kClassBatch) {
  size_t end = size_t{m->carved + carve_count(m, batch)} * m->obj_size;
  return end > size_t{m->touched_pages} << config::kMinPageBits;
}

inline bool fully_carved(const ChunkMeta* m) {
  return m->carved == sizeclass::kInfo.info[m->sizeclass].capacity;
}

// Carves the next objects of the active slab's tail (`batch` at most) onto
// `list` (returned): they count as out.
inline FreeObject* carve(ChunkMeta* m, FreeObject* list, uint32_t batch = kClassBatch) {
  uint32_t count = carve_count(m, batch);
  uint32_t size = m->obj_size;
  uintptr_t first = m->base + static_cast<uintptr_t>(m->carved) * size;
  if constexpr (config::kZeroOnFree) {
    // The hardened build's carved objects read zero, as freed ones do
    // (ds/freed_zero.h): pages past `touched_pages` do already (never
    // touched, or purged), the others may hold an earlier use's bytes.
    uintptr_t end = first + size_t{count} * size;
    uintptr_t stale = m->base + (size_t{m->touched_pages} << config::kMinPageBits);
    if (stale > end) stale = end;
    if (stale > first) __builtin_memset(reinterpret_cast<void*>(first), 0, stale - first);
  }
  // Each carved object is kept as a freed one would be (checks::note_unused:
  // marked, so a free of it before it is handed out is caught), as the list
  // is linked.
  auto keep = [&](FreeObject* o) {
    if constexpr (config::kMarkFreed) checks::note_unused(m, o);
  };
  if constexpr (config::kShuffle)
    list = freelist::build_shuffled(first, size, count, list, secret::g_value ^ first, keep);
  else
    list = freelist::build(first, size, count, list, keep);
  m->carved = static_cast<uint16_t>(m->carved + count);
  note_carve_end(m);
  m->needed += static_cast<int32_t>(count);
  uint32_t end =
      static_cast<uint32_t>(bits::align_up(size_t{m->carved} * m->obj_size, config::kMinPageSize) >>
                            config::kMinPageBits);
  if (end > m->touched_pages) m->touched_pages = static_cast<uint16_t>(end);
  return list;
}

// A sleeping slab wakes: it got its wake count back (a batch may bring
// more: `needed` is then below zero by the surplus), or its allocator lets
// go of it with fewer free objects (SizeClassSlabs::release_unused:
// `needed` is then the frees still short of the count).  `needed` now
// counts the frees until it is empty.  Returns the objects still out.
inline uint32_t wake(ChunkMeta* m) {
  uint32_t returned = wake_count(m) + static_cast<uint32_t>(-m->needed);
  uint32_t in_use = m->carved - returned;
  m->state = SlabState::kAvailable;
  m->needed = static_cast<int32_t>(in_use);
  return in_use;
}

// Every object of the slab `m` (active, or asleep) came home at once, none
// onto its free list: the service found them whole in its owner's mail and
// purged its pages (frontend/mail_sorter.h).  It starts over in the same
// state with nothing carved; its pages count as never touched only when
// the purge `zeroed` them.
inline void start_over(ChunkMeta* m, bool zeroed) {
  m->free_head = nullptr;
  m->needed = is_active(m) ? kActiveHold : 0;
  m->carved = 0;
  note_carve_end(m);
  if (zeroed) m->touched_pages = 0;
}

// Prepares an empty slab's chunk to go back to the chunk cache: unmapped,
// ownerless, its resident extent recorded.
void retire(ChunkMeta* m);

}  // namespace roost::slab
