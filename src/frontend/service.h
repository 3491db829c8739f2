// frontend/service.h — the service thread: roost's own thread, which does
// the work the program's threads leave behind while they sleep.
//
// It purges released memory when its delay has passed (as the program's own
// backend calls do when they come then, but also while it sleeps),
// delivers the mail of allocators parked in the pool (their threads
// exited), whose emptied slabs then go back to the backend, and sorts the
// mail of threads that have not received theirs for a purge delay into
// whole slabs, handed back resident and purged only if they wait a further
// purge delay unclaimed (frontend/mail_sorter.h): a thread blocked for a
// moment takes them back without faulting them in.  It starts the
// first time there is such work (never in a program that releases nothing),
// sleeps on a futex without a time limit when there is none, and is stopped
// when roost's code goes away (exit, or dlclose of a plugin that embeds
// roost): joined, or, where roost is the process's malloc, parked for good
// (end_with_process()).  ROOST_SERVICE=0 keeps it from starting: purges then
// happen on the program's own calls, as the backend did before.  With
// ROOST_STATS_INTERVAL it also writes the timeline's lines (the writer
// api/timeline.cc registers), one per interval, and runs from the first
// safe point on.  It also answers the requests a signal handler makes
// (request(): the dumps of ROOST_DUMP_SIGNAL, which api/dump.cc writes
// through the request hook).
//
// Owns: the thread, its state word, its statistics, its fork hooks, the
// count of requests made and answered.  Must never: start the thread where
// the caller may hold a lock or be inside an allocator's operation (only
// at_safe_point() starts it), allocate in want() or request(), or keep
// working after stop.
#pragma once

#include <atomic>
#include <cstdint>

#include "ds/bits.h"
#include "frontend/messenger.h"

namespace roost::service {

// There is deferred work (memory released, mail for a parked allocator):
// wakes the service, or asks for it to be started at the next safe point.
// Lock-free, allocates nothing: callable anywhere.
void want();

// A point where the calling thread holds no lock of roost's and no
// allocator is mid-operation: starts the service if it was asked for.
// Relaxed: a hint read at safe points (start() decides under g_state); a
// stale false only defers the start to a later one.
extern std::atomic<bool> g_start_wanted ROOST_HIDDEN;
ROOST_SLOW void start();
ROOST_INLINE void at_safe_point() {
  if (ROOST_UNLIKELY(g_start_wanted.load(std::memory_order_relaxed))) start();
}

// At a safe point, before a free that releases memory (a large object's):
// starts the service now if it has not started, so that what its start
// allocates (pthread_create) does not reuse the memory about to be
// released, where a second free of the object must still find it freed.
ROOST_SLOW void start_before_release();

// The work the service does on its thread for the layers above it, which
// hand it down here rather than the service reaching up for it.
struct Work {
  // The allocator pool's (frontend/allocator_pool.h).  Could an allocator
  // parked in the pool have mail?
  bool (*parked_mail)();
  // Delivers the parked allocators' mail (a bounded amount each); returns
  // how many had mail; *more: some still have.
  uint64_t (*drain_parked)(bool* more);
  // Looks at the mail of every allocator bound to a thread at `now`
  // (os::now_ns), with the purge delay in force, summed
  // (Messenger::look_for_neglected_mail).
  Messenger::Look (*look_at_bound_mail)(uint64_t now, uint64_t delay_ns);
  // Full offload's (frontend/offload.h), null when it is off: a pass over
  // every port (returns the objects moved), whether a pass could find
  // work, and whether the calling thread holds the offload lock (the
  // thread is not started there: see the safe points above).
  uint64_t (*serve_offload)();
  bool (*offload_pending)();
  bool (*offload_held_here)();
};

// Hooks the service into the backend and takes the work above (at roost's
// start-up, after the options are read, before roost is ready: its
// readiness publishes `work`); with ROOST_STATS_INTERVAL set (in the
// process that reports), asks for the service at the first safe point.
void install(const Work& work);

// The timeline's writer: called on the service thread, under its work
// lock, once per ROOST_STATS_INTERVAL (the first at its start).  Set once,
// at start-up (a constructor of api/timeline.cc); it must allocate nothing.
using LineWriter = void (*)();
void set_line_writer(LineWriter writer);

// Roost is the process's malloc (its overrides are linked), so its code
// stays mapped until the process ends: when stopped at exit, the thread
// parks for good instead of ending, and the process ends it.  Ending a
// thread runs libc's thread-exit work (its stack, TLS and resources freed,
// its join), which a small program pays in libc pages it never touched
// otherwise (docs/DESIGN.md, "The service thread").  A prefixed build,
// which a plugin may embed and unload, still joins the thread.
void end_with_process();

// The main thread ended (pthread_exit) while the service runs.  A process
// whose last thread ends ends too (exit(0)), but the service thread would
// keep it alive: from now on the service looks every 100 ms whether
// it is the last thread left, and then calls exit(0) as that thread would.
void main_thread_gone();

// Work a signal handler asks for (ROOST_DUMP_SIGNAL: api/dump.cc writes
// the dumps).  Once the hook is set, the service runs it on its thread,
// under its work lock, after a round of work that follows one or more
// request() calls: requests that come before it runs are answered by one
// call.  request() wakes the service from either sleep (the kIdle
// handshake; a sleep until a purge is due, which a wake sent just before
// it starts can miss: the request then waits until the purge, one purge
// delay at most).  A fork child drops the requests its parent had not
// answered.  Set once, at start-up.
void set_request_hook(void (*hook)());
// Async-signal-safe (a signal handler calls it): an atomic increment,
// want() (which allocates nothing and takes no lock) and at most a futex
// wake.  It may change errno (its caller keeps it).
void request();

// Its own work, for statistics.
struct Counters {
  uint64_t wakeups;             // times it woke up and looked for work
  uint64_t bytes_purged;        // released memory it purged
  uint64_t allocators_drained;  // parked allocators whose mail it delivered
  uint64_t bytes_collected;     // whole slabs of sleeping threads' mail it purged
  bool running;                 // the thread is at work (not stopped)
};
Counters counters();

}  // namespace roost::service
