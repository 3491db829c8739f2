// frontend/service.cc — implementation of frontend/service.h.
//
// The state word is also the futex the thread sleeps on:
//   kOff       not started (start() may start it)
//   kStarting  start() is creating it
//   kBusy      working, or sleeping until the next purge is due
//   kIdle      sleeping without a time limit: want() must wake it
//   kStopping  asked to stop (it ends, or parks, at its next look)
//   kStopped   stopped (or parked for good), failed to start, or
//              ROOST_SERVICE=0: never again
// Going idle is a Dekker handshake with want(): the thread stores kIdle,
// fences, and looks for work once more; want()'s caller made its work
// visible, fences, and reads the word.  One of the two sees the other.
// With a timeline (ROOST_STATS_INTERVAL) the kIdle sleep has a time limit,
// the next line's: the handshake is the same.
#include "frontend/service.h"

#include <cstdlib>

#include "backend/chunk_allocator.h"
#include "backend/huge_pages.h"
#include "ds/fence.h"
#include "ds/spinlock.h"
#include "frontend/messenger.h"
#include "frontend/profile.h"
#include "options.h"
#include "platform/asan.h"
#include "platform/error.h"
#include "platform/memcheck.h"
#include "platform/os.h"
#include "platform/text_section.h"

namespace roost::service {

std::atomic<bool> g_start_wanted{false};

namespace {

enum State : uint32_t { kOff, kStarting, kBusy, kIdle, kStopping, kStopped };

// The futex word (os::wait_on takes a plain uint32_t*: the kernel reads it).
// Its changes are CAS acq_rel and loads acquire where a thread acts on what
// the changer did (start, stop); kIdle is entered and left behind a full
// fence (sleep_until, want): the store-buffering handshake.
std::atomic<uint32_t> g_state{kOff};
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
const uint32_t* state_word() { return reinterpret_cast<const uint32_t*>(&g_state); }

// Held by the thread while it works, by start() while it creates the
// thread, and across fork (so a child never inherits half a step or a
// start half made).
SpinLock g_work_lock;
os::Thread g_thread;
std::atomic<bool> g_fork_hooks{false};  // only who installs them (acq_rel costs nothing here)
// Set by a start-up constructor (end_with_process).  Relaxed: a thread that
// runs stop() at exit was created after it (its creation orders it), and
// the service thread reads it only after stop()'s acq_rel kStopping.
std::atomic<bool> g_park_at_stop{false};

// The main thread ended (main_thread_gone).  Relaxed: work the service
// looks for, announced with want()'s handshake.
std::atomic<bool> g_main_gone{false};
// Set on the service thread: stop() called there (by its exit(0)) has no
// thread to wait for.
thread_local bool t_is_service = false;

// The timeline (set_line_writer): the writer api/ registers, and the
// interval between lines (0: none in this process), set by install() before
// the thread can start and by the fork child's hook.  Relaxed: the writer
// is a plain function whose code is always there; the interval is set
// before the start that publishes it (g_state), or in a one-thread child.
std::atomic<LineWriter> g_line_writer{nullptr};
std::atomic<uint64_t> g_line_interval_ns{0};
// When the next line is due (os::now_ns; 0: at once).  The thread's own.
uint64_t g_line_due = 0;
// request()'s count, and the count the service answered (its own).
// Relaxed: work announced with want()'s handshake, whose fences order it.
std::atomic<uint64_t> g_requests{0};
uint64_t g_answered = 0;
// The request hook: set once at start-up, before the thread starts
// (start()'s release of kBusy publishes it; relaxed).  Its requests end
// a sleep until a purge is due too (request() wakes the futex).
std::atomic<void (*)()> g_request_hook{nullptr};

// The work of the layers above (install()): written once at start-up,
// before roost is ready (global_init's release publishes it to every
// thread, and the service thread is created later).
Work g_work{};
bool offload_on() { return g_work.serve_offload != nullptr; }

// Statistics, written by the service thread alone, read by anyone: relaxed.
std::atomic<uint64_t> g_wakeups{0};
std::atomic<uint64_t> g_bytes_purged{0};
std::atomic<uint64_t> g_drained{0};
std::atomic<uint64_t> g_bytes_collected{0};

// When to look at bound allocators' mail next (os::now_ns; 0: not until
// mail is posted).  The thread's own.
uint64_t g_next_look = 0;
// The service has seen g_main_gone (and looks for being the last thread
// from then on).  The thread's own.
bool g_main_gone_seen = false;

void count(std::atomic<uint64_t>& c, uint64_t n) {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);  // relaxed: one writer
}

// Work want() announces: anything but a purge that is not yet due.
ROOST_COMMON_TEXT bool announced_work_pending() {
  // Relaxed: see g_requests.
  return g_requests.load(std::memory_order_relaxed) != g_answered || g_work.parked_mail() ||
         (offload_on() && g_work.offload_pending()) || Messenger::live_mail_flag() ||
         huge_pages::look_pending() ||
         (!g_main_gone_seen &&
          g_main_gone.load(std::memory_order_relaxed));  // relaxed: see g_main_gone
}

bool work_pending() { return chunks::dirty_bytes() != 0 || announced_work_pending(); }

// Looks at bound allocators' mail one purge delay after mail was posted,
// and again a delay later while some of it waits: mail that waits a whole
// delay with its thread not receiving is sorted into whole slabs
// (frontend/mail_sorter.h), handed back resident; those the thread has not
// taken a purge delay later (the delay in force, stretched while the
// program faults back in what was purged) are purged: a thread blocked for
// a moment gets them back as they were, one that sleeps gives them up.
// Returns when the next look is due, or UINT64_MAX.
uint64_t look_at_mail(uint64_t now) {
  uint64_t period = options::get(options::kPurgeDelayMs) * 1000000u;
  if (period < 1000000u) period = 1000000u;
  if (Messenger::take_live_mail_flag() && g_next_look == 0) g_next_look = now + period;
  if (g_next_look != 0 && now >= g_next_look) {
    Messenger::Look look = g_work.look_at_bound_mail(now, chunks::purge_delay_now_ns());
    count(g_bytes_collected, look.bytes_purged);
    g_next_look = look.pending ? now + period : 0;
  }
  return g_next_look != 0 ? g_next_look : UINT64_MAX;
}

// One round of work; returns when the next is due (os::now_ns: 0 for at
// once), UINT64_MAX for none.  *moved: objects it moved through offload
// rings.
uint64_t work(uint64_t* moved) {
  LockGuard guard(g_work_lock);
  *moved = offload_on() ? g_work.serve_offload() : 0;
  bool more_mail = false;
  count(g_drained, g_work.drain_parked(&more_mail));
  uint64_t next = UINT64_MAX;
  uint64_t now = os::now_ns();
  count(g_bytes_purged, chunks::purge_due(now, &next));
  uint64_t look = look_at_mail(now);
  if (look < next) next = look;
  // Dense blocks collapsed into huge pages (slow: milliseconds a block).
  uint64_t huge = huge_pages::look(now);
  if (huge < next) next = huge;
  return more_mail || *moved != 0 ? 0 : next;
}

// Writes the timeline's line when it is due (under g_work_lock, which a
// fork waits for: a child never inherits half a line).  Returns when the
// next is due, UINT64_MAX without a timeline.
uint64_t write_line_if_due() {
  uint64_t interval =
      g_line_interval_ns.load(std::memory_order_relaxed);  // relaxed: see g_line_writer
  if (interval == 0) return UINT64_MAX;
  uint64_t now = os::now_ns();
  if (now >= g_line_due) {
    // A writer not registered yet (its constructor has not run): the next
    // interval's line.
    if (LineWriter writer = g_line_writer.load(std::memory_order_relaxed)) {  // relaxed: see above
      LockGuard guard(g_work_lock);
      memcheck::Quiet quiet;  // (roost's own records)
      writer();
    }
    g_line_due = now + interval;
  }
  return g_line_due;
}

// Sleeps until `next` (UINT64_MAX: until woken), and at most until
// `line_due`, the timeline's next line.  A sleep for no purge (`next`
// UINT64_MAX), and any sleep while threads have offload ports (whose rings
// must not wait for a purge to be due), is the kIdle handshake with want();
// a sleep until a purge is due is not woken by want().
void sleep_until(uint64_t next, uint64_t line_due) {
  uint64_t now = os::now_ns();
  uint64_t until = next < line_due ? next : line_due;
  if (until != UINT64_MAX && until <= now) return;
  uint64_t timeout = until == UINT64_MAX ? UINT64_MAX : until - now;
  if (next != UINT64_MAX && !offload_on()) {
    os::wait_on(state_word(), kBusy, timeout);
    return;
  }
  uint32_t busy = kBusy;
  // acq_rel as g_state's rule says; the fence below, not this, does the handshake with want().
  if (!g_state.compare_exchange_strong(busy, kIdle, std::memory_order_acq_rel)) return;
  full_fence();  // kIdle, then the look for work: pairs with want()'s fence
  bool pending = next == UINT64_MAX ? work_pending() : announced_work_pending();
  if (!pending) os::wait_on(state_word(), kIdle, timeout);
  uint32_t idle = kIdle;
  // acq_rel as g_state's rule says; fails, harmlessly, where want() woke it (kBusy) or stop() ran.
  g_state.compare_exchange_strong(idle, kBusy, std::memory_order_acq_rel);
}

// Runs the request hook once for the requests made since it last ran.
void answer_requests() {
  uint64_t requests = g_requests.load(std::memory_order_relaxed);  // relaxed: see g_requests
  if (requests == g_answered) return;
  g_answered = requests;
  LockGuard guard(g_work_lock);
  memcheck::Quiet quiet;  // (the statistics read roost's own records)
  if (auto hook = g_request_hook.load(std::memory_order_relaxed)) hook();  // relaxed: see above
}

// Stopped at exit where the process ends the thread: says so to stop()
// and sleeps until then, holding nothing and touching nothing more.
[[noreturn]] ROOST_COMMON_TEXT void park() {
  // release as g_state's rule says (stop() waits for it, acquire).
  g_state.store(kStopped, std::memory_order_release);
  os::wake_one(state_word());
  for (;;) os::wait_on(state_word(), kStopped, UINT64_MAX);
}

ROOST_COMMON_TEXT void* run(void*) {
  // What the service allocates (full offload's rings) is no program stack's.
  profile::exclude_this_thread();
  // Waits for start()'s store of kBusy, which would otherwise overwrite
  // this thread's first change of state (acquire, though nothing start()
  // wrote is read here; below it sees stop()'s kStopping).
  while (g_state.load(std::memory_order_acquire) == kStarting) os::yield();
  t_is_service = true;
  count(g_wakeups, 1);
  unsigned idle_passes = 0;
  for (;;) {
    if (g_state.load(std::memory_order_acquire) == kStopping) {
      if (!g_park_at_stop.load(std::memory_order_relaxed)) return nullptr;
      park();
    }
    uint64_t moved;
    uint64_t next;
    {
      memcheck::Quiet quiet;  // (roost's own records, and mail and rings: freed objects)
      next = work(&moved);
    }
    uint64_t line_due = write_line_if_due();
    answer_requests();
    if (moved != 0) {
      idle_passes = 0;
      continue;
    }
    // Offload: while threads allocate, it stays awake a while between
    // passes that found nothing, giving way to them.
    if (offload_on() && idle_passes < config::kOffloadIdlePasses) {
      idle_passes++;
      os::yield();
      continue;
    }
    if (next == 0) continue;
    if (g_main_gone.load(std::memory_order_relaxed)) {  // relaxed: see g_main_gone
      g_main_gone_seen = true;
      // The process's last thread ends it, with the status glibc gives.
      if (!os::other_threads_run()) exit(0);
      uint64_t look = os::now_ns() + config::kAloneCheckNs;
      if (next > look) next = look;
    }
    {
      memcheck::Quiet quiet;  // (it looks for work: roost's own records)
      sleep_until(next, line_due);
    }
    idle_passes = 0;
    count(g_wakeups, 1);
  }
}

void prefork() { g_work_lock.lock(); }
void postfork_parent() { g_work_lock.unlock_after_fork(false); }
// The child has no service thread: it starts again when there is work.
void postfork_child() {
  g_work_lock.unlock_after_fork(true);
  // Relaxed: the child has one thread.
  uint32_t s = g_state.load(std::memory_order_relaxed);
  if (s == kBusy || s == kIdle) {
    g_state.store(kOff, std::memory_order_relaxed);
    g_start_wanted.store(true, std::memory_order_relaxed);
  }
  g_next_look = 0;
  g_line_due = 0;
  // Relaxed: the child has one thread.  A child that does not report
  // (ROOST_STATS_PID) writes no lines.
  if (g_line_interval_ns.load(std::memory_order_relaxed) != 0 && !options::reports_here())
    g_line_interval_ns.store(0, std::memory_order_relaxed);
  // The parent's requests are not the child's to answer (relaxed: one thread).
  g_answered = g_requests.load(std::memory_order_relaxed);
}

// Runs when roost's code goes away (exit, or dlclose of a plugin embedding
// roost): the thread must not outlive the code it runs.  After this only the
// program's own calls purge, and mail for parked allocators waits.
ROOST_COMMON_TEXT __attribute__((destructor)) void stop() {
  if (t_is_service) {  // its own exit(0): it stops by ending the process
    // release as g_state's rule says (start() only compares it).
    g_state.store(kStopped, std::memory_order_release);
    return;
  }
  for (;;) {
    // acquire: pairs with start()'s release of kBusy, so the join below sees g_thread.
    uint32_t s = g_state.load(std::memory_order_acquire);
    if (s == kStarting) {
      os::yield();
      continue;
    }
    // Both CASes acq_rel: acquire as above (g_thread); release by the word's
    // rule (run() and start() only compare the value).
    if (s == kBusy || s == kIdle) {
      if (!g_state.compare_exchange_strong(s, kStopping, std::memory_order_acq_rel)) continue;
      os::wake_one(state_word());
      if (g_park_at_stop.load(std::memory_order_relaxed)) {
        // acquire: pairs with park()'s release.
        while (g_state.load(std::memory_order_acquire) != kStopped)
          os::wait_on(state_word(), kStopping, UINT64_MAX);
      } else {
        os::join_thread(g_thread);
      }
    } else if (!g_state.compare_exchange_strong(s, kStopped, std::memory_order_acq_rel)) {
      continue;
    }
    break;
  }
  // release as g_state's rule says (start() only compares it): stopped for good.
  g_state.store(kStopped, std::memory_order_release);
}

}  // namespace

// Relaxed: see g_park_at_stop.
ROOST_COMMON_TEXT void end_with_process() { g_park_at_stop.store(true, std::memory_order_relaxed); }

void main_thread_gone() {
  g_main_gone.store(true, std::memory_order_relaxed);  // relaxed: see g_main_gone
  // Relaxed: a service starting now sees the flag in its loop.
  uint32_t s = g_state.load(std::memory_order_relaxed);
  if (s == kBusy || s == kIdle) want();
}

ROOST_COMMON_TEXT void want() {
  // The caller made its work visible; the fence orders that before the
  // state's load (relaxed behind it): store buffering with sleep_until().
  full_fence();
  uint32_t s = g_state.load(std::memory_order_relaxed);
  if (s == kIdle) {
    // acq_rel as g_state's rule says; only atomicity matters: one CAS leaves kIdle and wakes it.
    if (g_state.compare_exchange_strong(s, kBusy, std::memory_order_acq_rel))
      os::wake_one(state_word());
  } else if (s == kOff) {
    // Relaxed: a hint (service.h); start() decides with g_state's CAS.
    g_start_wanted.store(true, std::memory_order_relaxed);
  }
}

ROOST_COMMON_TEXT void start() {
  // Not under the offload lock (its holder may be mid-operation on the
  // service's allocator): a later safe point starts it.
  if (offload_on() && g_work.offload_held_here()) return;
  // Nor while AddressSanitizer starts up (a ROOST_ASAN build serves ld.so's
  // allocations then), whose pthread_create is not ready yet.
  if (asan::starting()) return;
  // Relaxed: a hint (service.h); a want() after this sets it again.
  g_start_wanted.store(false, std::memory_order_relaxed);
  // A start already under way (this thread's pthread_create allocating
  // included) or over.  Acquire as g_state's rule says; only compared (the CAS
  // below decides).
  if (g_state.load(std::memory_order_acquire) != kOff) return;
  // What pthread_create and pthread_atfork allocate is roost's, not the
  // program's: the heap profiler samples none of it.
  profile::Inside inside;
  // pthread_atfork allocates, and takes glibc's fork lock, which a fork in
  // progress holds while prefork() waits for g_work_lock: before the lock.
  // acq_rel, though relaxed would do: it only elects the installer (see g_fork_hooks).
  if (!g_fork_hooks.exchange(true, std::memory_order_acq_rel))
    os::install_fork_hooks(prefork, postfork_parent, postfork_child);
  LockGuard guard(g_work_lock);
  uint32_t off = kOff;
  // acq_rel as g_state's rule says; the CAS decides against stop()'s kOff -> kStopped.
  if (!g_state.compare_exchange_strong(off, kStarting, std::memory_order_acq_rel)) return;
  bool started = false;
  if (options::get(options::kService) != 0)
    started = os::start_thread(&g_thread, run, nullptr, "roost-service");
  // release: pairs with stop()'s acquire, which then sees g_thread (and ends run()'s wait).
  g_state.store(started ? kBusy : kStopped, std::memory_order_release);
}

ROOST_COMMON_TEXT void start_before_release() {
  // Relaxed: a hint, as in want(); start() decides with g_state's CAS.
  if (g_state.load(std::memory_order_relaxed) != kOff) return;
  g_start_wanted.store(true, std::memory_order_relaxed);
  start();
}

ROOST_COMMON_TEXT void install(const Work& work) {
  g_work = work;
  chunks::set_release_hook(want);
  Messenger::set_mail_hook(want);
  uint64_t interval_ms = options::get(options::kStatsInterval);
  if (interval_ms == 0 || !options::reports_here()) return;
  // A timeline: the service runs from the first safe point.
  if (options::get(options::kService) == 0) {
    err::Line line;
    line.str(
        "roost: ROOST_STATS_INTERVAL needs the service thread, which ROOST_SERVICE=0 keeps "
        "off: the timeline gets its last line only, at exit\n");
    line.emit();
    return;
  }
  // Relaxed, both: before the start that publishes them (see g_line_writer).
  g_line_interval_ns.store(interval_ms * 1000000u, std::memory_order_relaxed);
  g_start_wanted.store(true, std::memory_order_relaxed);
}

ROOST_COMMON_TEXT void set_line_writer(LineWriter writer) {
  g_line_writer.store(writer, std::memory_order_relaxed);  // relaxed: see g_line_writer
}

void set_request_hook(void (*hook)()) {
  g_request_hook.store(hook, std::memory_order_relaxed);  // relaxed: see g_request_hook
}

void request() {
  // Relaxed: want()'s fence orders it before its look at the state.
  g_requests.fetch_add(1, std::memory_order_relaxed);
  want();
  // A sleep until a purge is due (kBusy) is not want()'s to end: wake it
  // too.  A wake that comes just before that sleep starts is lost, and the
  // request waits for the purge (one purge delay at most), never longer.
  // Relaxed: only the futex's own check matters.
  if (g_state.load(std::memory_order_relaxed) == kBusy) os::wake_one(state_word());
}

Counters counters() {
  // Relaxed, all: statistics (the counters' one writer is the service thread).
  uint32_t s = g_state.load(std::memory_order_relaxed);
  return {g_wakeups.load(std::memory_order_relaxed), g_bytes_purged.load(std::memory_order_relaxed),
          g_drained.load(std::memory_order_relaxed),
          g_bytes_collected.load(std::memory_order_relaxed), s == kBusy || s == kIdle};
}

}  // namespace roost::service
