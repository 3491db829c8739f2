// frontend/size_class_slabs.cc — implementation of
// frontend/size_class_slabs.h.
#include "frontend/size_class_slabs.h"

#include "backend/pagemap.h"
#include "frontend/ownership.h"
#include "platform/text_section.h"

namespace roost {

ROOST_COMMON_TEXT void SizeClassSlabs::start(ChunkMeta* m, unsigned sc, ChunkCache& cache,
                                             size_t keep_resident) {
  slab::start(m, sc, owner_, keep_resident);
  bump_counter(slabs_[sc]);
  bytes_held_ += sizeclass::slab_size(sc);
  make_active(m, cache);
}

ROOST_COMMON_TEXT void SizeClassSlabs::make_active(ChunkMeta* m, ChunkCache& cache) {
  unsigned sc = m->sizeclass;
  ChunkMeta* old = active_[sc];
  active_[sc] = m;
  if (old != nullptr && slab::leave_active(old)) on_state_change(old, cache);
}

ROOST_COMMON_TEXT FreeObject* SizeClassSlabs::ramp_up(ChunkMeta* m, FreeObject* list) {
  if (slab::fully_carved(m)) return list;
  uint32_t taken = last_list_length_;
  // The head first, as its hand-out checks it (a write to it is one to a
  // freed object, not a broken link).
  checks::head_intact(m, m->sizeclass, list);
  FreeObject* tail = list;
  while (FreeObject* next = checks::next_checked(m->sizeclass, tail)) tail = next;
  freelist::set_next(tail, carve(m));
  last_list_length_ += taken;
  return list;
}

ROOST_COMMON_TEXT FreeObject* SizeClassSlabs::carve_fresh(unsigned sc, ChunkCache& cache) {
  // Carve the active slab's tail, unless that would touch pages never
  // written (or purged) while a cached chunk still has resident pages: a
  // slab on that chunk serves first, so the footprint does not grow while
  // released memory sits idle.  The old slab keeps its untouched tail
  // (address space only) and carves it when it is active again and nothing
  // resident is cached.  Chunks released to the backend are left there:
  // the cache takes them only when it needs a chunk, so the dirty blocks
  // that large objects reuse whole are not broken up for slabs.
  unsigned order = sizeclass::kInfo.info[sc].slab_bits;
  ChunkMeta* m = active_[sc];
  if (m == nullptr || slab::fully_carved(m)) {
    // A class of small objects starting over (no active slab: new to this
    // allocator, or it let go of everything) keeps resident what it is
    // likely to carve (config::kResidentCarves); one that carved its active
    // slab to the end uses the next one whole, and so does a class of big
    // objects, whose every object takes pages of its own.
    size_t keep = slab::kKeepResident;
    if (m == nullptr && order == config::kTargetSlabBits) {
      const sizeclass::ClassInfo& info = sizeclass::kInfo.info[sc];
      keep = config::kResidentCarves * info.carve * size_t{info.size};
      if (keep < last_carved_[sc]) keep = last_carved_[sc];
    }
    m = cache.take(order);
    if (m == nullptr) return nullptr;
    start(m, sc, cache, keep);
  } else if (slab::carve_touches_fresh(m, batch(sc))) {
    if (ChunkMeta* resident = cache.take_resident(order)) {
      start(resident, sc, cache, slab::kKeepResident);
      m = resident;
    }
  }
  return carve(m);
}

ROOST_COMMON_TEXT void SizeClassSlabs::on_empty(ChunkMeta* m, ChunkCache& cache) {
  unsigned sc = m->sizeclass;
  // Each class may keep one emptied slab, within the reserve: it stays on
  // the available list and is refilled before the active slab's untouched
  // tail is carved, so a class that empties and refills slabs (a FIFO
  // producer) reuses resident memory instead of touching fresh pages while
  // its released slabs wait in the backend.
  if (spare_[sc] == nullptr && cache.try_charge(sizeclass::slab_size(sc))) {
    spare_[sc] = m;
    return;
  }
  available_[sc].remove(m);
  release(m, cache);
}

ROOST_COMMON_TEXT void SizeClassSlabs::forget_spare(unsigned sc, ChunkCache& cache) {
  spare_[sc] = nullptr;
  cache.uncharge(sizeclass::slab_size(sc));
}

ROOST_COMMON_TEXT void SizeClassSlabs::release(ChunkMeta* m, ChunkCache& cache) {
  unsigned sc = m->sizeclass;
  if (active_[sc] == m) active_[sc] = nullptr;
  bump_counter(list_balance_[sc], slab::free_objects(m));
  last_carved_[sc] = m->carved * m->obj_size;  // before retire() overlays `carved`
  slab::retire(m);
  bump_counter(slabs_[sc], ~uint64_t{0});  // minus one
  bytes_held_ -= sizeclass::slab_size(sc);
  cache.keep(m);
}

namespace {

// Could a refill take objects from the active slab `m`?
bool can_refill_from(const ChunkMeta* m) {
  return m->free_head != nullptr || !slab::fully_carved(m);
}

}  // namespace

ROOST_COMMON_TEXT uint64_t SizeClassSlabs::offered_classes() const {
  uint64_t classes = 0;
  for (unsigned sc = 0; sc < sizeclass::kCount; sc++) {
    bool available = !available_[sc].empty();
    if (available || (active_[sc] != nullptr && can_refill_from(active_[sc])))
      classes |= uint64_t{1} << sc;
  }
  return classes;
}

ChunkMeta* SizeClassSlabs::give_up(unsigned sc, const void* adopter, ChunkCache& cache) {
  ChunkMeta* m = available_[sc].head;
  if (m == nullptr) {
    m = active_[sc];
    if (m == nullptr || !can_refill_from(m)) return nullptr;
  }
  give_up(m, adopter, cache);
  return m;
}

void SizeClassSlabs::give_up(ChunkMeta* m, const void* adopter, ChunkCache& cache) {
  unsigned sc = m->sizeclass;
  // Active, awake (on the available list), or asleep (on no list).
  if (m == active_[sc]) {
    active_[sc] = nullptr;
  } else if (m->state == SlabState::kAvailable) {
    available_[sc].remove(m);
    if (m == spare_[sc]) forget_spare(sc, cache);
  }
  bump_counter(slabs_[sc], ~uint64_t{0});  // minus one
  bytes_held_ -= sizeclass::slab_size(sc);
  ownership::set(m, adopter);
}

void SizeClassSlabs::count_adopted(unsigned sc) {
  bump_counter(slabs_[sc]);
  bytes_held_ += sizeclass::slab_size(sc);
}

void SizeClassSlabs::adopt_as_is(ChunkMeta* m, ChunkCache& cache) {
  count_adopted(m->sizeclass);
  if (slab::is_active(m)) {
    // Sleeps, or wakes at once (joins the available list, or goes empty).
    if (slab::leave_active(m)) on_state_change(m, cache);
  } else if (!slab::is_asleep(m)) {
    available_[m->sizeclass].push_front(m);
  }
}

FreeObject* SizeClassSlabs::adopt(ChunkMeta* m, ChunkCache& cache) {
  unsigned sc = m->sizeclass;
  count_adopted(sc);
  // Available (awake) or active, as its giver held it.
  FreeObject* list = take_free(m, m->state);
  make_active(m, cache);
  if (list == nullptr) list = carve(m);  // an active slab's tail
  return list;
}

ROOST_COMMON_TEXT bool SizeClassSlabs::release_unused(FreeObject** fast_lists, ChunkCache& cache) {
  uint64_t slabs_before = slab_count();
  for (unsigned sc = 0; sc < sizeclass::kCount; sc++) {
    // The objects on the fast list go back to their slabs (not counted as
    // frees: they were never handed out), which releases every slab but
    // the active one that has nothing else out...
    FreeObject* list = fast_lists[sc];
    fast_lists[sc] = nullptr;
    uint64_t returned = 0;
    while (list != nullptr) {
      FreeObject* next = checks::next_checked(sc, list);
      ChunkMeta* m = pagemap::lookup(list);
      returned++;
      if (slab::return_object(m, list)) on_state_change(m, cache);
      list = next;
    }
    bump_counter(list_balance_[sc], -returned);
    // ...then the active slab.  One whose carved objects are all out, with
    // a tail left to carve, stays active for the allocator's next thread to
    // carve on (a later call looks at it again).  Any other is active no
    // longer: empty, it goes (the spare or the cache); with free objects it
    // joins the available list at once, where the next thread takes it
    // before it starts a new slab (asleep, it would be on no list until its
    // wake count came back, which objects a program keeps may never bring:
    // threads that each leave an object behind would leave a slab each);
    // with nothing free and nothing to carve it sleeps until objects come
    // back...
    if (ChunkMeta* active = active_[sc]) {
      bool has_free = active->free_head != nullptr;
      bool carves_on = !has_free && active->carved != 0 && !slab::fully_carved(active);
      if (!carves_on) {
        active_[sc] = nullptr;
        // leave_active() first: the slab sleeps, and wakes below if it has
        // its wake count back or any free object.
        if (slab::leave_active(active) || has_free) on_state_change(active, cache);
      }
    }
    // ...and the class's spare (perhaps just emptied by the above) too.
    if (ChunkMeta* spare = spare_[sc]) {
      forget_spare(sc, cache);
      available_[sc].remove(spare);
      release(spare, cache);
    }
  }
  return slab_count() < slabs_before;
}

}  // namespace roost
