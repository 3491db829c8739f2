// frontend/offload.h — full offload (ROOST_OFFLOAD=1, experimental): the
// service thread does the program's threads' allocator work for them.
//
// Each thread that binds an allocator gets a Port: per size class, a ring
// of objects the service allocated ahead (the thread pops them where its
// fast list ran dry), and one ring of the thread's frees of objects it does
// not own (the service frees them).  Each ring has one producer and one
// consumer, so both ends are a load, a store and release/acquire ordering.
// The service's objects come from an allocator of its own, not bound to any
// thread, used only under the offload lock.  When a ring is empty (or the
// free ring full) the thread does the work itself, inline, as without
// offload.
//
// The allocators count what their threads do as usual, and the service's
// allocator counts what it does for the rings; offload keeps, per class,
// what turns those counts into the program's (ClassCorrection): the
// service's allocations and frees for the rings, which are not the
// program's, and the frees threads left on their free rings, which no
// allocator has counted yet.  A thread's allocator holds its port as an
// opaque pointer (Allocator::port()), and nothing else of offload.
//
// Owns: the ports, the service's allocator, the offload lock, its
// statistics and the counts' corrections.  Must never: be reached from a fast path (the thread's
// refill and remote-free slow paths call in), or, on the thread's side of
// a ring, lock or wait.
#pragma once

#include <atomic>
#include <cstdint>

#include "ds/bits.h"
#include "ds/sizeclass.h"

namespace roost {

namespace offload {

struct Port;

// Is offload on (options, read at start-up)?
bool enabled();

// The service side's own allocator, bound to no thread, which allocates
// what the rings hand out and frees what they bring back: the pool, which
// knows allocators, hands down what the offload side does with it, at
// start-up (install(), before any port exists).  `a` is what acquire()
// returned.
struct Backing {
  // An allocator bound to no thread (nullptr when memory runs out).
  void* (*acquire)();
  // An object of class `sc` for a ring, kept marked as free meanwhile;
  // nullptr when memory runs out.  (Its allocator counts the allocation,
  // which the corrections take back: the program's is counted where a
  // thread takes it.)
  void* (*make)(void* a, unsigned sc);
  // `p`, off a ring (marked as free), freed; returns its class.  (Its
  // allocator counts the free, which the corrections take back.)
  unsigned (*unmake)(void* a, void* p);
  // Its outbox goes home, its mail is taken (returns the objects
  // received); visit_inbox takes its mail only.
  uint64_t (*settle)(void* a);
  void (*visit_inbox)(void* a);
  bool (*has_mail)(void* a);
  // Lets go of what it does not use.
  void (*release_unused)(void* a);
};
void install(const Backing& backing);
// Does the calling thread hold the offload lock?  (service::start() must
// not create the thread there: see service.h's safe points.)
bool held_here();

// A port for the allocator the calling thread has just bound (nullptr when
// offload is off or memory runs out); detach() gives it back, with what
// its rings hold, when the thread lets go of the allocator.
Port* attach();
void detach(Port* port);

// The thread's side.  take(): an object of class `sc` from the port's ring,
// checked as it waited there, or nullptr (the ring is empty or the class
// not offloaded: allocate inline); the thread's allocator counts the
// allocation, as a refill's.  give(): `p`, an object of class `sc` of a
// slab another allocator owns, onto the free ring, its free counted here
// (ClassCorrection::given); false when the ring is full (free it inline).
void* take(Port* port, unsigned sc);
bool give(Port* port, void* p, unsigned sc);

// The service's side, under the offload lock.  serve(): one pass over every
// port (frees carried out, rings topped up); returns the objects moved.
// pending(): could a pass find work?
uint64_t serve();
bool pending();

// malloc_trim: the caller's port hands back what its rings hold, every free
// ring is emptied, and the service's allocator settles (its outbox goes
// home).  `self` is the caller's port, or nullptr.
void trim(Port* self);
// malloc_trim, after the pool's allocators settled (which can forward mail
// to the service's allocator): it takes its mail, sends what it must, and
// lets go of what it does not use.  Returns the objects it received.
uint64_t settle_service();

struct Counters {
  uint64_t ring_allocs;  // objects threads took from their rings
  uint64_t ring_frees;   // frees threads left on their free rings
  uint64_t ring_misses;  // times a thread found its ring empty or full
  uint64_t ports;        // threads with a port now
};

// What the allocators' counts of one class miss or count too many for
// ring objects (read under Still): the program's allocations are the
// allocators' less `made`; its frees the allocators' plus `given` less
// `unmade`.
struct ClassCorrection {
  uint64_t made;    // the service's allocations for the alloc rings
  uint64_t unmade;  // the service's frees of ring objects
  uint64_t given;   // frees threads left on their free rings
};

// Holds the service side still (the offload lock) while statistics are
// read: its allocator's counts are corrected for ring objects under the
// lock, so only there do they add up.  Nothing when no thread has a port.
class Still {
 public:
  Still();
  ~Still();
  Still(const Still&) = delete;
  Still& operator=(const Still&) = delete;
  // The rings' statistics, and class `sc`'s correction (zero when
  // nothing is held: no port ever).
  Counters counters() const;
  ClassCorrection correction(unsigned sc) const;

 private:
  bool held_;
};

// Fork: the offload lock is held across it (see allocator_pool.cc).
void lock_for_fork();
void unlock_after_fork(bool child);

}  // namespace offload
}  // namespace roost
