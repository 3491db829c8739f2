// frontend/allocator_pool.h — binding allocators to threads.
//
// Owns: the thread's current allocator (initial-exec TLS), the pool of
// allocators not bound to a thread (recycled with their slabs and dense
// ids), the list of every allocator (for statistics), process start-up,
// the thread-exit hook and the fork hooks.  Must never: run on a fast path
// beyond reading t_alloc; allocate through malloc.
#pragma once

#include <type_traits>

#include "frontend/allocator.h"

namespace roost::pool {

// A placeholder (owns nothing, has no free objects): a thread without an
// allocator points here, so its first malloc falls into the slow path, where
// the placeholder's stand-in, alloc_unbound(), binds one.
extern Allocator g_unbound ROOST_HIDDEN;

extern __thread Allocator* t_alloc __attribute__((tls_model("initial-exec"))) ROOST_HIDDEN;

ROOST_INLINE Allocator* current() { return t_alloc; }

// Is `a` the placeholder of a thread without an allocator?
ROOST_INLINE bool is_unbound(const Allocator* a) { return a == &g_unbound; }

// Process-wide start-up (pagemap, options, hooks); true when ready.
bool global_init();

// Binds an allocator to the calling thread (t_alloc); nullptr in a thread
// past its exit hook or when memory runs out.
Allocator* bind();

// An allocator bound to no thread and never pooled, for a party that is
// not a thread of the program (full offload's service side, which uses it
// under its own lock); nullptr when memory runs out.
Allocator* acquire_detached();

// Allocation for a thread whose t_alloc is g_unbound: binds an allocator
// (or, in a thread past its exit hook, borrows one for this call).
void* alloc_unbound(Allocator* placeholder, unsigned sc, const void* caller);

// Calls fn(const Allocator&) for every allocator ever created (statistics).
template <typename Fn>
void for_each(Fn&& fn);
uint64_t allocators_created();

// Holds the allocators parked in the pool still (the pool lock) while
// statistics are read: the service thread and trims deliver their mail and
// release their slabs under it, and a parked allocator's counts and slabs
// add up only between such steps.  Threads that take or park an allocator
// meanwhile wait.  Never held while allocators_created() is called.
class Still {
 public:
  Still();
  ~Still();
  Still(const Still&) = delete;
  Still& operator=(const Still&) = delete;
};

// Delivers every message in flight, then lets the caller's allocator and
// the pooled ones release what they do not use (fast lists, empty slabs,
// cached chunks); true if any memory went back.
bool trim_all();

// For the service thread: delivers the mail of allocators parked in the
// pool (a bounded amount each) and lets each release what it then does not
// use.  Returns how many had mail; *more: some still have.
uint64_t drain_parked(bool* more);
// Could a parked allocator have mail?
bool parked_mail();

// For the service thread: looks at the mail of every allocator bound to a
// thread (Allocator::look_for_neglected_mail), summed.
Messenger::Look look_at_bound_mail(uint64_t now, uint64_t delay_ns);

// for_each() without the template: fn(allocator, context).
void visit_all(void (*fn)(const Allocator&, void*), void* context);

template <typename Fn>
void for_each(Fn&& fn) {
  using F = std::remove_reference_t<Fn>;
  visit_all([](const Allocator& a, void* f) { (*static_cast<F*>(f))(a); }, &fn);
}

}  // namespace roost::pool
