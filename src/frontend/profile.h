// frontend/profile.h — the heap profiler (ROOST_PROFILE): sampled objects,
// the call stacks that allocated them, and the estimates they give.
//
// Sampling (ds/sampling.h) falls on paths that are already slow: a size
// class's refill (frontend/sampler.h says how the sampled allocation gets
// there) and large allocations.  A sampled small object is served as a
// large object (a page-granular chunk: frontend/sampler.h keeps a few
// spare) whose record points to its sample, so its free, by whichever
// thread, takes the large-object path, which forgets the sample; the free
// fast path checks nothing.  Each sample
// keeps its stack (up to 64 frames from the unwind tables, roost's own
// frames left out), its size, its time and its weight (what it stands
// for); each stack the sums of its samples' weights, allocated since start
// and still live.
//
// Owns: the samples and stacks (in roost's metadata arena, recycled, never
// through malloc), the per-thread state of sampling (the large objects'
// countdown, the random source, and the guard that keeps a thread inside
// the profiler, or roost's own service thread, from sampling), and the
// trigger of the periodic profiles (ROOST_PROFILE_INTERVAL).
// Must never: be reached from a fast path; take its lock while it
// captures a stack or names addresses (both may take the loader's lock,
// and a thread in dlopen may be allocating); allocate through malloc.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "backend/chunk_meta.h"
#include "ds/bits.h"

namespace roost::profile {

// Is the profiler sampling?  Set once at start-up (start()), by whichever
// thread started roost, while others may already allocate: acquire, so a
// thread that sees it set sees the rate and interval start() wrote before
// (read on slow paths only: a refill through the sampling stand-in, a
// large allocation).
extern std::atomic<bool> g_on ROOST_HIDDEN;
ROOST_INLINE bool on() { return g_on.load(std::memory_order_acquire); }

// Is ROOST_PROFILE set, for this process (ROOST_STATS_PID names it or is
// 0: options::reports_here())?  (Options read.)  The profiler then starts,
// and the allocators the pool binds sample their refills
// (Allocator::sample_refills); in the other processes it never samples.
bool wanted();

// Start-up with ROOST_PROFILE set, once roost serves allocations (the
// unwinder it primes allocates): reads the profile's options, finds
// roost's own code, then turns sampling on.
void start();

// May the calling thread take a sample?  Not while it is inside the
// profiler (the unwinder's allocations, the reports), nor ever on a thread
// excluded for good (roost's service thread).
bool may_sample();
void exclude_this_thread();

// The bytes to the next sample point, drawn for the calling thread.
uint64_t next_interval();

// The object of class `sc` at a sample point, served apart as the large
// object of record `m`, is recorded.  `caller` is the return address of the
// allocator's slow-path entry: the stack kept starts at that frame.  False
// when metadata memory runs out: it is not recorded.
bool note_sampled(ChunkMeta* m, unsigned sc, const void* caller);

// A large object (record `m`) was allocated: sampled by the calling
// thread's countdown.
void note_large(ChunkMeta* m, const void* caller);
// A large object was resized in place: a new allocation, as far as the
// profile goes (its old sample, if any, is forgotten).
void note_resized(ChunkMeta* m, const void* caller);

// The object of record `m` (m->sample set) is being freed, by any thread.
void forget(ChunkMeta* m);

// The size class a sampled object of record `m` (large or huge) was
// allocated for; sizeclass::kCount for a large object, sampled or not.
unsigned sampled_class(const ChunkMeta* m);

// ---- reading (the reports: frontend/profile_report.h) ----

// One stack's figures.  Weights are estimates: bytes, and objects in
// units of 2^-sampling::kObjectFractionBits.
struct StackFigures {
  const uintptr_t* pcs;  // return addresses, innermost first (stay valid)
  uint32_t depth;
  uint64_t alloc_bytes, alloc_objects_fp;  // sampled since start
  uint64_t live_bytes, live_objects_fp;    // of those, not freed yet
  uint64_t samples, live_samples;
  uint64_t oldest_ns;  // when its oldest live sample was taken (os::now_ns)
};

// What the profile is at, now.
struct Summary {
  uint64_t rate;     // ROOST_PROFILE_RATE
  uint64_t stacks;   // distinct stacks sampled
  uint64_t samples;  // taken since start
  uint64_t live_samples;
};
Summary summary();

// Copies the figures of every stack (at most `max`) into `out`, in one
// snapshot; the count copied.
size_t snapshot(StackFigures* out, size_t max);

// Runs `fn` with the calling thread inside the profiler (it samples
// nothing meanwhile).
class Inside {
 public:
  Inside();
  ~Inside();
  Inside(const Inside&) = delete;
  Inside& operator=(const Inside&) = delete;

 private:
  bool was_;
};

void lock_for_fork();
void unlock_after_fork(bool child);

}  // namespace roost::profile
