// frontend/allocator.cc — the allocator's slow paths: refilling a size
// class (slabs, inbox and chunk cache in turn), slab state changes, posting
// and receiving, settling at thread exit and trim.
#include "frontend/allocator.h"

#include <cerrno>
#include <cstddef>
#include <type_traits>

#include "backend/chunk_allocator.h"
#include "backend/large.h"
#include "backend/pagemap.h"
#include "backend/zero_size.h"
#include "frontend/profile.h"
#include "frontend/service.h"
#include "options.h"
#include "platform/cpu.h"
#include "platform/os.h"
#include "platform/text_section.h"

namespace roost {

// The allocator's layout, for the components below it that find one of
// its parts from its address (frontend/ownership.h).
struct AllocatorLayout {
  static_assert(std::is_standard_layout_v<Allocator>, "offsetof must be defined for it");
  static constexpr size_t kMessengerOffset = offsetof(Allocator, messenger_);
};
const size_t ownership::kMessengerOffset = AllocatorLayout::kMessengerOffset;

// The slow paths the fast paths call reach a service safe point after any
// step that may have released memory (service::at_safe_point): the thread
// holds no lock there, and the allocator's state is whole, with no step
// left that assumes what a nested allocation may change (pthread_create
// allocates).

ROOST_COMMON_TEXT void* Allocator::refill_at(FreeObject** slot, Allocator* a) {
  unsigned sc = a->class_of(slot);
  if (config::kZeroSizeFaults && ROOST_UNLIKELY(sc == kZeroSizeSlot)) return a->alloc_zero_size();
  void* p;
  if (ROOST_UNLIKELY(a->stand_in_ != nullptr))
    p = a->stand_in_(a, sc, __builtin_return_address(0));
  else
    p = a->refill_unsampled(sc);
  if (p != nullptr) checks::note_handed_out(p);
  return p;
}

void* Allocator::alloc_zero_size() {
  // A placeholder's stand-in binds the thread an allocator, whose refill
  // comes back here.
  if (stand_in_ != nullptr && stand_in_ != &sampling_stand_in)
    return stand_in_(this, kZeroSizeSlot, __builtin_return_address(0));
  if (void* p = zero_size::alloc(config::kMinAlloc)) return p;
  return alloc(sizeclass::from_size(1));
}

void* Allocator::take_last(FreeObject** slot, Allocator* a) {
  unsigned sc = a->class_of(slot);
  FreeObject* p = *slot;
  // Null, or damage, which next_checked() reports.
  *slot = checks::next_checked(sc, p);
  a->counters_.allocs.count(sc);
  checks::note_handed_out(p);
  return p;
}

void* Allocator::sampling_stand_in(Allocator* a, unsigned sc, const void* caller) {
  // The common refill: no list it hands out reaches the class's next point.
  if (ROOST_LIKELY(a->sampler_.beyond_reach(sc, a->counters_.allocs.read(sc))))
    return a->refill_unsampled(sc);
  return a->refill_sampled(sc, caller);
}

void* Allocator::refill_sampled(unsigned sc, const void* caller) {
  // Not yet sampling (start-up), or a thread inside the profiler (the
  // unwinder allocating) that samples nothing.
  if (!profile::on() || !profile::may_sample()) {
    if (FreeObject* held = sampler_.take_held(sc).head) return hand_out(sc, held);
    return refill_unsampled(sc);
  }
  if (ROOST_UNLIKELY(!sampler_.started()))
    sampler_.start([this](unsigned c) { return counters_.allocs.read(c); },
                   [](unsigned) { return profile::next_interval(); });
  uint64_t allocs = counters_.allocs.read(sc);
  if (sampler_.ahead(sc, allocs) <= 0) {
    // This object holds the sample point.  (Served apart, it is not counted
    // here: the next point's objects start from this count.)
    sampler_.restart(sc, allocs, profile::next_interval());
    if (void* p = alloc_sampled(sc, caller)) {
      // Objects a cut held are next, up to the new point; this refill's
      // list ran dry to bring it here.
      if (Sampler::Held held = sampler_.take_held(sc); held.head != nullptr) {
        fast_[sc] = held.head;
        cut_fast_list(sc, sampler_.ahead(sc, allocs), held.length);
      }
      return p;
    }
    // No memory for it: served as usual, the point lost.
  }
  void* p;
  uint32_t listed;  // the objects on the fast list after `p`
  if (Sampler::Held held = sampler_.take_held(sc); held.head != nullptr) {
    p = hand_out(sc, held.head);
    listed = held.length - 1;
  } else {
    p = refill_unsampled(sc);
    if (p == nullptr) return nullptr;
    // A list came from a slab, or the object alone (offload's ring, a
    // class served as large).
    listed = fast_[sc] != nullptr ? slabs_.last_list_length() - 1 : 0;
  }
  // `p` was the count's object `allocs`; the fast list keeps those before
  // the point's.
  cut_fast_list(sc, sampler_.ahead(sc, allocs) - 1, listed);
  return p;
}

void Allocator::cut_fast_list(unsigned sc, int64_t keep, uint32_t length) {
  // A list that ends before the point is not walked.
  if (keep >= static_cast<int64_t>(length)) return;
  if (keep < 0) keep = 0;
  FreeObject* last = nullptr;
  FreeObject* o = fast_[sc];
  for (int64_t k = 0; o != nullptr && k < keep; k++) {
    last = o;
    o = checks::next_checked(sc, o);
  }
  if (o == nullptr) return;
  if (last == nullptr)
    fast_[sc] = nullptr;
  else
    freelist::set_next(last, nullptr);
  sampler_.hold(sc, o, length - static_cast<uint32_t>(keep));
}

void* Allocator::alloc_sampled(unsigned sc, const void* caller) {
  size_t size = sizeclass::kInfo.info[sc].size;
  void* p = nullptr;
  if (large::chunk_order(size) == chunks::kMinOrder) {
    if (ChunkMeta* m = Sampler::take_spare()) p = large::place(m, size);
  }
  if (p == nullptr) p = large::alloc_apart(size);
  if (p == nullptr) return nullptr;
  ChunkMeta* m = pagemap::lookup(p);
  if (!profile::note_sampled(m, sc, caller)) {
    // No metadata memory for the sample: the object is not served apart.
    free_sampled_chunk(m);
    return nullptr;
  }
  sampler_.count_sampled(sc);
  return p;
}

void Allocator::free_sampled(ChunkMeta* m, unsigned sc) {
  count_event(counters_.frees[sc]);
  free_sampled_chunk(m);
}

void Allocator::free_sampled_chunk(ChunkMeta* m) {
  if (!large::retire(m)) return;
  if (m->order == chunks::kMinOrder && Sampler::keep_spare(m)) return;
  // (As large::free's callers: a service started now does not take it.)
  service::start_before_release();
  chunks::release(m, dirty_extent(m));
}

void* Allocator::alloc_class_as_large(unsigned sc) {
  size_t dirty = 0;  // (calloc zeroes what it asked for whatever the source)
  void* p = large::alloc(sizeclass::to_size(sc), 1, &dirty);
  if (p == nullptr) errno = ENOMEM;
  return p;
}

void* Allocator::refill_with_mail(unsigned sc) {
  receive(false);
  void* p = refill_from_slabs(sc);
  // Only now: a thread the service start creates allocates, and a refill
  // must not find this class's fast list refilled under it.
  service::at_safe_point();
  return p;
}

ROOST_COMMON_TEXT void* Allocator::refill_from_other_slab(unsigned sc) {
  void* p = take_other_slab(sc);
  service::at_safe_point();
  return p;
}

ROOST_COMMON_TEXT void* Allocator::take_other_slab(unsigned sc) {
  if (FreeObject* list = slabs_.carve_resident_tail(sc)) return hand_out(sc, list);
  for (unsigned round = 0;; round++) {
    if (FreeObject* list = slabs_.take_available(sc, chunks_)) return hand_out(sc, list);
    // Objects freed elsewhere may still wait in the inbox: fresh memory
    // (which grows the footprint) only once it reads empty, or after a
    // bounded number of further visits.
    if (round == config::kInboxVisitsBeforeFreshMemory || !messenger_.has_mail()) break;
    receive(false);
    if (FreeObject* list = slabs_.take_from_active(sc)) return hand_out(sc, list);
  }
  // Before memory no slab uses (a cached chunk, or fresh): a slab an
  // exited thread's allocator holds half used, if one is offered.
  if (ROOST_UNLIKELY(adoption::may_give(sc))) {
    if (FreeObject* list = adoption::adopt(slabs_for_adoption(), sc)) return hand_out(sc, list);
  }
  if (ROOST_UNLIKELY(backpressure_.should_wait(
          slabs_.bytes_held(), read_counter(messenger_.counters().messages_received)))) {
    if (FreeObject* list = wait_for_mail(sc)) return hand_out(sc, list);
  }
  if (FreeObject* list = slabs_.carve_fresh(sc, chunks_)) return hand_out(sc, list);
  errno = ENOMEM;
  return nullptr;
}

FreeObject* Allocator::wait_for_mail(unsigned sc) {
  Backpressure::Hungry hungry;
  uint64_t until = os::now_ns() + backpressure_.wait_ns();
  for (unsigned round = 1;; round++) {
    if (messenger_.has_mail()) {
      receive(false);
      FreeObject* list = slabs_.take_from_active(sc);
      if (list == nullptr) list = slabs_.take_available(sc, chunks_);
      if (list != nullptr) {
        backpressure_.waited(true);
        messenger_.count_wait(true);
        return list;
      }
      Backpressure::Hungry::call();  // nothing of its class came: ask again
    }
    if (os::now_ns() > until) break;
    if (round % config::kBackpressureSpinsPerYield == 0)
      os::yield();  // the threads it waits for may need this core
    else
      cpu::relax();
  }
  backpressure_.waited(false);
  messenger_.count_wait(false);
  return nullptr;
}

ROOST_COMMON_TEXT void Allocator::attach(bool waits) {
  messenger_.load_options();
  // Not the service thread's own allocator (offload's), which frees for
  // every thread.
  foreign_reuse_.set_on(config::kForeignReuse && waits &&
                        options::get(options::kForeignReuse) != 0);
  backpressure_.load_options(waits && options::get(options::kBackpressure) != 0,
                             options::get(options::kBackpressureBytes),
                             options::get(options::kBackpressureWaitUs) * 1000,
                             read_counter(messenger_.counters().messages_received));
}

ROOST_COMMON_TEXT void Allocator::slab_event(ChunkMeta* m) {
  if (slabs_.on_state_change(m, chunks_)) service::at_safe_point();  // emptied
  // A local free lands here once per wake count of frees into a slab other
  // than its class's active one, so a thread that only frees its own
  // objects still visits its inbox now and then.
  if (visit_inbox()) service::at_safe_point();
}

void Allocator::free_found_marked(ChunkMeta* m, void* p, const char* where) {
  checks::marked_twice(m, p, where);
  checks::mark_freed(m, p, where);  // (wiped: marked now)
  free_marked(m, p);
}

ROOST_COMMON_TEXT void Allocator::send_remote(ChunkMeta* m, void* p) {
  // An exited thread's slab: adopted, the object is freed as one of our own
  // (and so are the slab's next ones, without a message).
  if (ROOST_UNLIKELY(adoption::at_frees()) && port_ == nullptr &&
      adoption::owner_parked<Allocator>(m) && adoption::adopt(slabs_for_adoption(), m)) {
    if (slab::return_object(m, p)) slab_event(m);
    return;
  }
  if (messenger_.send_other(m, p, port_ == nullptr)) after_stretch();
}

ROOST_COMMON_TEXT void Allocator::after_stretch() {
  if (messenger_.stretch_ended() || backpressure_.answer_call()) post_and_visit();
}

ROOST_COMMON_TEXT void Allocator::post_and_visit() {
  if constexpr (config::kForeignReuse) {
    // No keeping with an offload port (its frees go to the ring) or a
    // stand-in (the heap profiler cuts fast lists by their length; a
    // placeholder owns nothing).
    if (foreign_reuse_.on())
      foreign_reuse_.at_post(fast_, counters_.allocs, counters_.frees, messenger_, this,
                             port_ == nullptr && stand_in_ == nullptr);
  }
  messenger_.post();
  visit_inbox();
  service::at_safe_point();
}

ROOST_COMMON_TEXT uint64_t Allocator::receive(bool all) {
  // Delivery changes slab states directly, not through slab_event: a
  // receive never starts another.
  return messenger_.receive(
      all,
      [this](ChunkMeta* m, const slab_batch::Batch& b) {
        slabs_.note_delivered(m->sizeclass, b.count);
        if (slab::return_batch(m, b)) slabs_.on_state_change(m, chunks_);
      },
      [this](ChunkMeta* m, bool zeroed) {
        slab::start_over(m, zeroed);
        slabs_.on_whole_return(m, chunks_);
      });
}

ROOST_COMMON_TEXT uint64_t Allocator::settle() {
  messenger_.post(false);
  uint64_t received = 0;
  // Each round under the inbox (receive(true) waits for it), not after a
  // has_mail() hint: while the service sorts the mail it is in none of the
  // places the hint looks.
  for (;;) {
    uint64_t got = receive(true);
    if (got == 0) break;  // nothing, or a producer is mid-enqueue
    received += got;
  }
  return received;
}

ROOST_COMMON_TEXT bool Allocator::release_unused() {
  sampler_.release_held(fast_,
                        [](unsigned sc, FreeObject* o) { return checks::next_checked(sc, o); });
  if constexpr (config::kForeignReuse) {
    if (foreign_reuse_.send_all_home(fast_, messenger_, this)) messenger_.post();
  }
  bool released = slabs_.release_unused(fast_, chunks_);
  return chunks_.trim(0) || released;
}

bool Allocator::release_sampled_spares() {
  return Sampler::release_spares([](ChunkMeta* m) { chunks::release(m, dirty_extent(m)); });
}

ROOST_COMMON_TEXT void Allocator::drain_quarantine(const char* where) {
  quarantine_.drain([this, where](void* p) {
    ChunkMeta* m = pagemap::record_at(pagemap::aligned_index(p));
    left_quarantine(m, p, where);
    free_marked(m, p);
  });
}

}  // namespace roost
