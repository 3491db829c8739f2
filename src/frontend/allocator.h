// frontend/allocator.h — the per-thread allocator: its components and its
// fast paths.
//
// An Allocator holds its hot state itself (per class: the fast list of
// objects ready to hand out, and the counts of objects allocated and freed;
// and a copy of the size-to-class table) and is composed of:
//   SizeClassSlabs  per class: the slabs the fast list is fed from
//   Messenger       frees of other allocators' objects out, its own back in
//   ChunkCache      empty chunks kept for new slabs, within the reserve
//   Backpressure    when a refill waits for its objects to come home
//   Sampler         with the heap profiler on: where each class's next
//                   sample falls, and objects held back from its fast list
//   Quarantine      (hardened build) freed objects waiting to go back
//   ForeignReuse    (ROOST_FOREIGN_REUSE) which of its remote frees it keeps
//                   on its fast lists at a post, and sending them home
// Two features reach it through one seam each, and keep their state and
// counting themselves: adoption (ROOST_ADOPT, frontend/adoption.h) through
// adoption::Slabs, its slabs and chunk cache, which both giving up and
// adopting a slab go through; full offload (ROOST_OFFLOAD=1, experimental,
// frontend/offload.h) through the thread's port, one pointer that its
// refill and remote-free slow paths test.
// The fast paths (an object off a class's fast list; an object back into a
// slab this allocator owns; another allocator's object into the BatchIt
// cache) are inline here; refilling a class and the other slow paths,
// which coordinate the components, are noinline in allocator.cc.
//
// Owns: the fast lists, the class counters, its components, and the rules
// between them (when the inbox is visited, where slabs come from and go).
// Must never: take a lock, make a syscall or do an atomic read-modify-write
// on a fast path; touch another allocator's slabs (a slab given up to it is
// its own by then); know which thread holds it (frontend/allocator_pool.h).
#pragma once

#include <cstdint>

#include "backend/chunk_meta.h"
#include "backend/large.h"
#include "ds/bits.h"
#include "ds/counter.h"
#include "ds/freelist.h"
#include "ds/sizeclass.h"
#include "frontend/adoption.h"
#include "frontend/backpressure.h"
#include "frontend/checks.h"
#include "frontend/chunk_cache.h"
#include "frontend/foreign_reuse.h"
#include "frontend/messenger.h"
#include "frontend/offload.h"
#include "frontend/ownership.h"
#include "frontend/quarantine.h"
#include "frontend/sampler.h"
#include "frontend/size_class_slabs.h"
#include "frontend/slab.h"

namespace roost {

// Small objects allocated by one allocator's thread (hot: every malloc
// counts, in a word that refills fold into 64 bits: EventCounts), and its
// frees that no component below counts (sampled objects, the hardened
// build's quarantine), per class.  Its other frees are counted elsewhere:
// into its own slabs from the slabs (SizeClassSlabs::list_balance), into
// other allocators' slabs as they are sent (Messenger::sent_by_class), onto
// a full offload's ring by offload (offload::ClassCorrection).  Statistics
// read them from other threads, approximately.
struct ClassCounters {
  // Refills count at most two lists apart, each of at most a slab's
  // capacity (under 2^16: fits_slab_record): the list a refill hands out,
  // and the held objects a sampled refill installs uncounted.
  EventCounts<sizeclass::kCount, std::conditional_t<config::kNarrowAllocCounts, uint32_t, uint64_t>,
              17>
      allocs;
  uint64_t frees[sizeclass::kCount] = {};
};

class Allocator {
 public:
  // What refill_at() hands the class to instead of refill(), given the
  // allocator, the class and refill_at()'s return address: the pool's, for
  // a placeholder (it owns nothing; the stand-in binds the thread an
  // allocator), or the heap profiler's (sample_refills()), so that the
  // common refill tests nothing more.
  using StandIn = void* (*)(Allocator* a, unsigned sc, const void* caller);

  // `id`: a small dense integer, unique among live allocators (outbox
  // buckets are picked by its bits); `stand_in`: see StandIn, or nullptr.
  constexpr explicit Allocator(uint32_t id, StandIn stand_in = nullptr)
      : slabs_(this), messenger_(id, this), stand_in_(stand_in) {}
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  // A thread is taking this allocator: it reads the options it caches.
  // `waits`: back-pressure may make it wait for its objects (not the
  // service thread's own allocator).
  void attach(bool waits = true);
  // With the heap profiler on, every refill of this (bound) allocator goes
  // through refill_sampled(); the pool says so when a thread takes it.
  void sample_refills(bool on) { stand_in_ = on ? &sampling_stand_in : nullptr; }

  // ---- allocation ----

  // An object of class `sc`: the fast path takes it off the class's fast
  // list; an empty list is refilled (refill_at).  nullptr with errno ENOMEM
  // when memory runs out.
  ROOST_INLINE void* alloc(unsigned sc) {
    FreeObject* p = fast_[sc];
    if (ROOST_LIKELY(p != nullptr)) {
      if constexpr (config::kEncodeLinks) {
        // The secure build checks the link it follows; the list's last
        // object fails the check too, and take_last() tells which it is
        // (a tail call: the fast path keeps no stack frame).
        checks::freed_intact(sc, p);
        FreeObject* n = checks::fast_next(p, slab_size_.bytes[sc]);
        if (ROOST_UNLIKELY(n == nullptr)) return take_last(&fast_[sc], this);
        fast_[sc] = n;
      } else {
        fast_[sc] = checks::take(sc, p);
      }
      counters_.allocs.count(sc);
      checks::note_handed_out(p);
      return p;
    }
    return refill_at(&fast_[sc], this);
  }
  // alloc()'s branch for a link that failed its check (secure build): the
  // last object of the fast list at `slot` of allocator `a`, handed out, or
  // a damaged list, reported.  (The slot, as refill_at's: no register copy
  // of the class on the fast path.)
  ROOST_NOINLINE static void* take_last(FreeObject** slot, Allocator* a);

  // An object of `size` <= config::kTableClassified bytes, classed by the
  // allocator's own copy of the size table, which its address reaches (no
  // second base address).  Size 0 maps to kZeroSizeSlot where zero-size
  // allocations fault: its fast list stays empty, so refill_at() serves it
  // (alloc_zero_size) at no cost to the fast path.
  ROOST_INLINE void* alloc_small(size_t size) { return alloc(class_of_size_.cls[size]); }
  static constexpr unsigned kZeroSizeSlot = sizeclass::kCount;
  // A zero-size allocation: an address that faults on access, or (when the
  // range cannot be had) an object as for one byte.
  ROOST_NOINLINE void* alloc_zero_size();

  // alloc()'s slow path: the fast list at `slot` of `a` ran dry.  refill()
  // or the stand-in; the object is handed out (mark or tag wiped) here.  The
  // slot, not the class: the fast path has it in the first argument's
  // register already (the class would cost it register copies).
  ROOST_NOINLINE static void* refill_at(FreeObject** slot, Allocator* a);
  // An object of class `sc` as a large object (large::serves_class).
  ROOST_NOINLINE static void* alloc_class_as_large(unsigned sc);
  // Class `sc`'s fast list ran dry: refills it and returns an object;
  // nullptr with errno ENOMEM when memory runs out.
  void* refill(unsigned sc) {
    // Objects freed elsewhere may be waiting.
    if (ROOST_UNLIKELY(messenger_.has_mail())) return refill_with_mail(sc);
    return refill_from_slabs(sc);
  }
  // Class `sc`'s fast list head (what refill_at() is given; what a test
  // empties to make the next allocation refill), and back from it to the
  // class.
  FreeObject** fast_slot(unsigned sc) { return &fast_[sc]; }
  unsigned class_of(FreeObject* const* slot) const { return static_cast<unsigned>(slot - fast_); }

  // ---- free ----

  // Does this allocator own slab `m`?  (Large objects have no owner.)
  ROOST_INLINE bool owns(const ChunkMeta* m) const { return ownership::is(m, this); }
  // A sampled small object of class `sc` (refill_sampled()) of any
  // allocator, its sample forgotten, freed by this allocator's thread, which
  // counts the free; free_sampled_chunk(), by a thread without an
  // allocator, which counts it itself.  Its chunk waits among the Sampler's
  // spares for the next sampled object of any thread, or (enough there)
  // goes back to the backend.
  void free_sampled(ChunkMeta* m, unsigned sc);
  static void free_sampled_chunk(ChunkMeta* m);

  // The free fast path: frees `p` (16-byte aligned, in chunk `m`) and
  // returns true when it is an object of a slab this allocator owns; false
  // leaves it to the caller's next level (another allocator's object, a
  // large one, misuse).  An object start beyond what the slab has carved
  // (memory roost never handed out) goes on too: one compare.  The exact
  // object-start test costs a multiply chain, so only the checked and
  // secure builds make it here (every slow path makes it).  The free mark's
  // check is this level's (checks::mark_freed); `where` names the call in a
  // diagnostic.
  [[nodiscard]] ROOST_INLINE bool try_free_local(ChunkMeta* m, void* p,
                                                 const char* where = "free") {
    constexpr bool kExactStart = config::kCheckedFree || config::kDetectDoubleFree;
    if (ROOST_UNLIKELY(!ownership::is(m, this))) return false;
    if (kExactStart && ROOST_UNLIKELY(!slab::is_aligned_object_start(m, p))) return false;
    if (ROOST_UNLIKELY(!slab::is_carved(m, p))) return false;
    if (ROOST_UNLIKELY(!checks::mark_freed(m, p, where))) {
      free_found_marked(m, p, where);
      return true;
    }
    free_owned(m, p);
    return true;
  }
  // `p`, an object start of slab `m` that this allocator owns, checked,
  // goes back to its slab.  Not counted here: statistics count local frees
  // from the slabs (SizeClassSlabs::list_balance).
  ROOST_INLINE void free_owned(ChunkMeta* m, void* p) {
    if (ROOST_UNLIKELY(slab::return_object(m, p))) slab_event(m);
  }

  // The remote-free fast path: `p` (16-byte aligned, in chunk `m`) joins
  // its class's lane's batch when that batch is of slab `m`, and the outbox
  // is charged (Messenger's sending; DESIGN.md, "Following malloc and
  // free").  Only an object start the slab has carved joins: the one right
  // after the batch's tail is an object start by construction.  The free
  // mark's check as try_free_local()'s.  False: the caller's slow path.
  [[nodiscard]] ROOST_INLINE bool try_free_remote(ChunkMeta* m, void* p,
                                                  const char* where = "free") {
    RemoteCache::Entry* e = messenger_.lane(m->sizeclass);
    if (ROOST_UNLIKELY(e->slab != m)) return false;
    bool follows_tail =
        reinterpret_cast<uintptr_t>(e->tail) + m->obj_size == reinterpret_cast<uintptr_t>(p);
    if (ROOST_UNLIKELY(!follows_tail) && !slab::is_aligned_object_start(m, p)) return false;
    if (ROOST_UNLIKELY(!slab::is_carved(m, p))) return false;
    if (ROOST_UNLIKELY(!checks::mark_freed(m, p, where))) {
      free_found_marked(m, p, where);
      return true;
    }
    join_lane(e, m, p);
    return true;
  }

  // `p`, an object start of slab `m` whose free was checked and marked
  // already (it left the quarantine, or an offload ring), goes home: to its
  // slab if this allocator owns it, else as try_free_remote() or
  // send_remote() would send it.
  ROOST_INLINE void free_marked(ChunkMeta* m, void* p) {
    if (ownership::is(m, this)) {
      free_owned(m, p);
      return;
    }
    RemoteCache::Entry* e = messenger_.lane(m->sizeclass);
    if (ROOST_LIKELY(e->slab == m)) {
      join_lane(e, m, p);
      return;
    }
    send_remote(m, p);
  }

  // The remote free's slow path: `p`, an object start of slab `m` that
  // another allocator owns, checked and marked, into the BatchIt cache
  // (alone, with an offload port: its ring came first) and the outbox.
  ROOST_NOINLINE void send_remote(ChunkMeta* m, void* p);
  // A free found `p` marked (checks::mark_freed): a double free, or (the
  // program wrote the mark) a live object, freed here.
  ROOST_NOINLINE void free_found_marked(ChunkMeta* m, void* p, const char* where);

  // ---- quarantine (hardened build) ----

  // `p`, a freed object start of slab `m`, marked: it waits in the
  // quarantine if it is small enough.  Returns the object to free now
  // (another that left the quarantine, or `p` itself), or nullptr.  The
  // statistics count a free when the program makes it: a quarantined
  // object as it comes in, and not again when it goes back to its slab
  // (left_quarantine()).
  ROOST_INLINE void* quarantine(const ChunkMeta* m, void* p) {
    if (m->obj_size > config::kQuarantineMaxBytes) return p;
    count_event(counters_.frees[m->sizeclass]);
    return quarantine_.admit(p);
  }
  // `p`, an object of slab `m`, left the quarantine: it is checked as its
  // free left it, and its free, counted already, is not counted again.
  ROOST_INLINE void left_quarantine(const ChunkMeta* m, const void* p, const char* where) {
    checks::left_quarantine(m, p, where);
    count_free(m->sizeclass, -1);
  }
  // Every quarantined object goes back (malloc_trim, the thread's exit,
  // which `where` names in a diagnostic).
  void drain_quarantine(const char* where);

  // ---- housekeeping ----

  // Takes a bounded number of messages from the inbox if any may wait
  // (returns whether it looked).
  bool visit_inbox() {
    if (!messenger_.has_mail()) return false;
    receive(false);
    return true;
  }
  // Posts the outbox now, as a full one is (foreign reuse keeps what it
  // keeps first), and visits the inbox.
  void post() { post_and_visit(); }
  // Everything pending, out and in (thread exit, trim).  Returns the
  // objects received.
  uint64_t settle();
  // Lets go of everything not in use: fast lists (other allocators' objects
  // on them go home by message, posted: ForeignReuse::send_all_home), spare
  // and empty slabs, cached chunks (thread exit, trim; see
  // SizeClassSlabs::release_unused for the active slabs).  True if any
  // memory went back to the backend.
  bool release_unused();
  // The heap profiler's spare chunks, every thread's (trim): true if any.
  static bool release_sampled_spares();

  // ---- the experimental features' seams ----

  // Adoption's (frontend/adoption.h): this allocator's slabs, for giving
  // one up (it is parked, and its caller holds it: the pool lock).
  adoption::Slabs slabs_for_adoption() { return {slabs_, chunks_}; }
  // Full offload's: the thread's port, when offload is on (the refill and
  // remote-free slow paths go there first), or nullptr.
  offload::Port* port() const { return port_; }
  void set_port(offload::Port* port) { port_ = port; }

  // Could the inbox hold messages?  (The owner's view: one load.)
  bool has_mail() const { return messenger_.has_mail(); }
  // See Messenger::set_parked (the pool parks allocators of exited threads).
  void set_parked(bool parked) { messenger_.set_parked(parked); }
  bool parked() const { return messenger_.parked(); }
  // The service thread's look at this allocator's mail (see
  // Messenger::look_for_neglected_mail).
  Messenger::Look look_for_neglected_mail(uint64_t now, uint64_t delay_ns) {
    return messenger_.look_for_neglected_mail(now, delay_ns);
  }

  // For statistics (read from other threads, approximately).
  const ClassCounters& class_counters() const { return counters_; }
  const MessageCounters& message_counters() const { return messenger_.counters(); }
  uint64_t list_balance(unsigned sc) const { return slabs_.list_balance(sc); }
  uint64_t remote_frees_sent(unsigned sc) const { return messenger_.sent_by_class(sc); }
  // Allocations of class `sc` served apart as sampled objects, which
  // class_counters() leaves out.
  uint64_t sampled_allocs(unsigned sc) const { return sampler_.sampled(sc); }
  template <typename Fn>
  void for_each_cached_free(Fn&& fn) const {
    messenger_.for_each_cached(fn);
  }
  uint64_t slab_count() const { return slabs_.slab_count(); }
  uint64_t slab_count(unsigned sc) const { return slabs_.slab_count(sc); }

 private:
  // refill_at() for a bound allocator: a class served as a large object
  // under an address-space limit (large::serves_class), else full
  // offload's ring first.
  ROOST_INLINE void* refill_unsampled(unsigned sc) {
    if (ROOST_UNLIKELY(large::serves_class(sc))) return alloc_class_as_large(sc);
    if (ROOST_UNLIKELY(port_ != nullptr)) {
      if (void* p = offload::take(port_, sc)) {
        counters_.allocs.count_and_fold(sc);  // a refill (EventCounts)
        return p;
      }
    }
    return refill(sc);
  }
  // refill_at() with the heap profiler on: the object at the class's sample
  // point is sampled (frontend/profile.h); the fast list gets no more objects
  // than fit before the next point.  `caller`: refill_at()'s return address.
  // sampling_stand_in() is it as a StandIn.
  ROOST_NOINLINE static void* sampling_stand_in(Allocator* a, unsigned sc, const void* caller);
  ROOST_NOINLINE void* refill_sampled(unsigned sc, const void* caller);
  // Class `sc`'s fast list, of `length` objects, keeps its first `keep`
  // (none if not positive); the rest wait in the sampler for the point's
  // refill.
  void cut_fast_list(unsigned sc, int64_t keep, uint32_t length);
  // The object of class `sc` at a sample point: an object apart (large.h)
  // in a spare chunk, else a fresh one, recorded and counted; nullptr when
  // memory runs out.
  void* alloc_sampled(unsigned sc, const void* caller);
  ROOST_INLINE void* refill_from_slabs(unsigned sc) {
    // The common case: the class's active slab got objects back.
    if (FreeObject* list = slabs_.take_from_active(sc); ROOST_LIKELY(list != nullptr))
      return hand_out(sc, list);
    return refill_from_other_slab(sc);
  }
  // refill() when mail is waiting: receives it first.
  ROOST_NOINLINE void* refill_with_mail(unsigned sc);
  ROOST_NOINLINE void* refill_from_other_slab(unsigned sc);
  void* take_other_slab(unsigned sc);
  // `list` (not empty) becomes class `sc`'s fast list; returns its first
  // object, counted.
  void* hand_out(unsigned sc, FreeObject* list) {
    fast_[sc] = checks::take_first(sc, list);
    // The list is all the fast path counts until the next refill
    // (EventCounts).
    counters_.allocs.count_and_fold(sc);
    return list;
  }
  // `n` frees of class `sc` counted (negative: taken back).
  void count_free(unsigned sc, int64_t n) {
    bump_counter(counters_.frees[sc], static_cast<uint64_t>(n));
  }
  // A free brought slab `m` to its state change.
  ROOST_NOINLINE void slab_event(ChunkMeta* m);
  // `p`, an object of slab `m` whose free was checked and marked, joins the
  // batch of the lane `e` (of slab `m`), and the outbox is charged.
  ROOST_INLINE void join_lane(RemoteCache::Entry* e, const ChunkMeta* m, void* p) {
    messenger_.append(e, p);
    if (ROOST_UNLIKELY(messenger_.charge(m->obj_size))) after_stretch();
  }
  // A stretch of the outbox's room ended: posts it when full, or when
  // another allocator waits for its objects (Backpressure).
  ROOST_NOINLINE void after_stretch();
  // Posts the outbox, and visits the inbox (so a thread that only frees
  // others' objects still takes its own back).
  ROOST_NOINLINE void post_and_visit();
  // Back-pressure: class `sc` would take fresh memory; waits (bounded) for
  // objects of it to come home in the mail.  Returns a list for the fast
  // list, or nullptr.
  ROOST_NOINLINE FreeObject* wait_for_mail(unsigned sc);
  // Takes messages from the inbox (see Messenger::receive); returns the
  // objects received.  One copy, not one per constant `all`: it holds
  // Messenger::receive's body.
  ROOST_NOINLINE ROOST_NOCLONE uint64_t receive(bool all);

  // The fast lists first: the malloc fast path's slot address is then the
  // allocator's plus the class's offset alone.
  FreeObject* fast_[kZeroSizeSlot + 1] = {};
  ClassCounters counters_;
  sizeclass::SmallTable class_of_size_{config::kZeroSizeFaults ? kZeroSizeSlot : 0};
  // Each class's slab size, for the secure build's fast path, beside the
  // size table (the allocator's address reaches both).
  sizeclass::SlabSizeTable slab_size_ = sizeclass::SlabSizeTable{};
  SizeClassSlabs slabs_;
  Messenger messenger_;
  ChunkCache chunks_;
  Backpressure backpressure_;
  StandIn stand_in_;
  offload::Port* port_ = nullptr;
  Sampler sampler_;
  [[no_unique_address]] Quarantine<config::kQuarantine ? config::kQuarantineSlots : 0> quarantine_;
  // Last: nothing a fast path reads moves.
  ForeignReuse foreign_reuse_;

  friend struct AllocatorLayout;  // frontend/allocator.cc: ownership::kMessengerOffset
};

}  // namespace roost
