// frontend/allocator_pool.cc — implementation of frontend/allocator_pool.h.
#include "frontend/allocator_pool.h"

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <new>

#include "backend/address_space.h"
#include "backend/chunk_allocator.h"
#include "backend/large.h"
#include "backend/meta_arena.h"
#include "backend/pagemap.h"
#include "backend/zero_size.h"
#include "ds/secret.h"
#include "ds/slack_canary.h"
#include "ds/spinlock.h"
#include "frontend/adoption.h"
#include "frontend/checks.h"
#include "frontend/offload.h"
#include "frontend/ownership.h"
#include "frontend/profile.h"
#include "frontend/service.h"
#include "options.h"
#include "platform/access_fault.h"
#include "platform/error.h"
#include "platform/memcheck.h"
#include "platform/os.h"
#include "platform/text_section.h"

namespace roost::pool {

constinit Allocator g_unbound{0, alloc_unbound};
__thread Allocator* t_alloc __attribute__((tls_model("initial-exec"))) = &g_unbound;

namespace {

// An allocator as the pool keeps it: with its links.
struct Entry {
  explicit Entry(uint32_t id) : allocator(id) {}
  Allocator allocator;
  std::atomic<Entry*> next_all{nullptr};  // every entry ever made (read unlocked: see g_all)
  Entry* next_pooled = nullptr;           // pooled entries (under g_lock)
};

// Set once the thread-exit hook ran: later allocations in this thread borrow
// an allocator per call instead of binding one that nobody would release.
__thread bool t_exited __attribute__((tls_model("initial-exec"))) = false;

SpinLock g_lock;  // guards the pooled list, appends to the list of all and g_created
Entry* g_pooled = nullptr;
// The newest entry, stored with release once it is made and linked, and
// read with acquire: a reader sees every entry it reaches, made (each older
// one published under g_lock before this one).  Entries are never freed.
std::atomic<Entry*> g_all{nullptr};
uint32_t g_created = 0;

SpinLock g_init_lock;
// Double-checked start-up: release once everything is set up, acquire to
// find it so (relaxed under g_init_lock, which orders it).
std::atomic<bool> g_ready{false};
// Only who installs them: relaxed would do, acq_rel costs nothing here.
std::atomic<bool> g_hooks_installed{false};

ROOST_COMMON_TEXT Entry* acquire() {
  {
    LockGuard guard(g_lock);
    Entry* e = g_pooled;
    if (e != nullptr) {
      g_pooled = e->next_pooled;
      e->next_pooled = nullptr;
      e->allocator.set_parked(false);
      return e;
    }
  }
  void* mem = meta_arena::alloc(sizeof(Entry), alignof(Entry));
  if (mem == nullptr) return nullptr;
  LockGuard guard(g_lock);
  auto* e = new (mem) Entry(g_created++);
  // Relaxed: under g_lock, and published by the release below.
  e->next_all.store(g_all.load(std::memory_order_relaxed), std::memory_order_relaxed);
  // release: pairs with the acquire of g_all in visit_all and look_at_bound_mail.
  g_all.store(e, std::memory_order_release);
  return e;
}

// Set at start-up (ROOST_ADOPT), before any thread allocates.
bool g_adoption = false;

// The classes of which the parked allocator `e` could give a slab become
// offered (adoption.h).  Under g_lock.
void offer_slabs(Entry* e) {
  if (g_adoption) adoption::offer(adoption::offered_classes(e->allocator.slabs_for_adoption()));
}

// `e` waits in the pool (its caller let go of everything not in use: it
// holds no object off its slabs).
ROOST_COMMON_TEXT void release(Entry* e) {
  LockGuard guard(g_lock);
  e->next_pooled = g_pooled;
  g_pooled = e;
  e->allocator.set_parked(true);
  offer_slabs(e);
}

// adoption::Source: the first slab of class `sc` a parked allocator gives
// up.  Under the pool lock, which holds each parked allocator as its owner
// for the moment, so the slab's owner changes while nobody else can reach
// its record through that allocator; skipped when the pool is busy.
ChunkMeta* give_offered_slab(unsigned sc, const void* adopter) {
  if (!g_lock.try_lock()) return nullptr;
  ChunkMeta* m = nullptr;
  for (Entry* e = g_pooled; e != nullptr && m == nullptr; e = e->next_pooled)
    m = adoption::give_up(e->allocator.slabs_for_adoption(), sc, adopter);
  if (m != nullptr)
    adoption::count_adopted();
  else
    adoption::withdraw(sc);
  g_lock.unlock();
  return m;
}

// adoption::Source: slab `m` given up by its owner if that is parked in the
// pool (not the service's allocator, parked too but never pooled).  The
// owner read under the lock is the slab's (parked slabs change owner only
// under it), and the slab is the owner's still: the caller holds one of its
// objects, so it was not released.
bool give_this_slab(ChunkMeta* m, const void* adopter) {
  if (!g_lock.try_lock()) return false;
  const void* owner = ownership::owner(m);
  Entry* e = g_pooled;
  while (e != nullptr && &e->allocator != owner) e = e->next_pooled;
  if (e != nullptr) {
    adoption::give_up(e->allocator.slabs_for_adoption(), m, adopter);
    adoption::count_adopted();
  }
  g_lock.unlock();
  return e != nullptr;
}

ROOST_COMMON_TEXT void on_thread_exit(void* arg) {
  memcheck::Quiet quiet;  // (settling writes messages into freed objects)
  auto* e = static_cast<Entry*>(arg);
  // What its quarantine holds goes back while the allocator is its own.
  e->allocator.drain_quarantine("thread exit");
  t_alloc = &g_unbound;
  t_exited = true;
  // Its rings first: what they hold goes back, and their frees are carried
  // out, before it settles.
  offload::detach(e->allocator.port());
  e->allocator.set_port(nullptr);
  e->allocator.settle();
  // What it does not use goes back to the backend, where any thread reuses
  // it (resident for a purge delay): a pooled allocator holds only slabs
  // with objects still out.
  e->allocator.release_unused();
  bool may_get_mail = e->allocator.slab_count() != 0;
  release(e);
  // Mail posted to it from now on calls the service (the parked-mail hook);
  // mail posted since it settled is the service's to find.
  if (may_get_mail) service::want();
  service::at_safe_point();
  if (os::is_main_thread()) service::main_thread_gone();  // pthread_exit in main
}

// Objects freed after their owner's thread exited wait in its inbox until a
// new thread takes the allocator.  A thread about to take fresh memory calls
// this first (the chunk caches' shortage hook): it delivers one pooled
// allocator's messages (bounded work) and lets that allocator release what
// it then does not use, so the memory serves everyone.  Skipped when the
// pool is busy: helping is never worth a wait.
ROOST_COMMON_TEXT void help_pooled() {
  if (!g_lock.try_lock()) return;
  for (Entry* e = g_pooled; e != nullptr; e = e->next_pooled) {
    // Under the pool lock no thread can take `e`: this thread is its owner
    // for the moment.
    if (e->allocator.visit_inbox()) {
      e->allocator.release_unused();
      offer_slabs(e);
      break;
    }
  }
  g_lock.unlock();
}

void prefork() {
  memcheck::Quiet quiet;  // (roost's own records: the rings' locks)
  offload::lock_for_fork();
  g_lock.lock();
  zero_size::lock_for_fork();
  large::lock_for_fork();
  chunks::lock_for_fork();
  profile::lock_for_fork();
  meta_arena::lock_for_fork();
}

void postfork(bool child) {
  memcheck::Quiet quiet;  // (as prefork)
  meta_arena::unlock_after_fork(child);
  profile::unlock_after_fork(child);
  chunks::unlock_after_fork(child);
  large::unlock_after_fork(child);
  zero_size::unlock_after_fork(child);
  g_lock.unlock_after_fork(child);
  offload::unlock_after_fork(child);
  if (child) Backpressure::after_fork_in_child();
}

// Full offload's allocator (offload::Backing): the pool's detached
// allocator, which only the offload lock's holder uses.
void* offload_acquire() { return acquire_detached(); }
void* offload_make(void* a, unsigned sc) {
  auto* s = static_cast<Allocator*>(a);
  void* p = s->alloc(sc);
  if (p == nullptr) return nullptr;
  // Until a thread takes it, it is kept as a free object (marked; the
  // secure build checks it then).
  if constexpr (config::kMarkFreed) checks::note_parked(pagemap::lookup(p), p);
  return p;
}
unsigned offload_unmake(void* a, void* p) {
  auto* s = static_cast<Allocator*>(a);
  ChunkMeta* m = pagemap::lookup(p);
  unsigned sc = m->sizeclass;
  if (s->owns(m)) checks::not_free_list_head(m, p);
  // (Marked when the thread gave it to its ring, having checked it there.)
  s->free_marked(m, p);
  return sc;
}
uint64_t offload_settle(void* a) { return static_cast<Allocator*>(a)->settle(); }
void offload_visit_inbox(void* a) { static_cast<Allocator*>(a)->visit_inbox(); }
bool offload_has_mail(void* a) { return static_cast<Allocator*>(a)->has_mail(); }
void offload_release_unused(void* a) { static_cast<Allocator*>(a)->release_unused(); }

void postfork_parent() { postfork(false); }
void postfork_child() { postfork(true); }

// A kernel whose page size roost was not built for (config.h): said once,
// and every allocation fails with ENOMEM.
void report_unsupported_page() {
  static std::atomic<bool> reported{false};  // relaxed: once, ordering nothing
  if (reported.exchange(true, std::memory_order_relaxed)) return;  // relaxed: as declared
  err::Line line;
  line.str("roost: cannot start: the OS's page size is ")
      .dec(os::page_size())
      .str(" bytes; roost supports ")
      .dec(config::kMinPageSize / 1024)
      .str(" to ")
      .dec(config::kMaxPageSize / 1024)
      .str(" KiB pages: allocations fail with ENOMEM\n");
  line.emit();
}

}  // namespace

ROOST_COMMON_TEXT Allocator* bind() {
  if (t_exited || !global_init()) return nullptr;
  Entry* e = acquire();
  if (e == nullptr) return nullptr;
  e->allocator.attach();
  e->allocator.sample_refills(profile::wanted());
  e->allocator.set_port(offload::attach());
  t_alloc = &e->allocator;
  os::arm_thread_exit_hook(e);
  return &e->allocator;
}

ROOST_COMMON_TEXT bool global_init() {
  // acquire: pairs with the release below, so the set-up it publishes is seen.
  if (g_ready.load(std::memory_order_acquire)) return true;
  {
    LockGuard guard(g_init_lock);
    if (!g_ready.load(std::memory_order_relaxed)) {  // relaxed: g_init_lock orders it
      options::load();
      // Before any object is handed out (ds/secret.h).
      secret::set(os::entropy());
      if constexpr (config::kSlackCanaries) slack_canary::set_key(os::entropy());
      if constexpr (config::kEncodeLinks) {
        freelist::set_key(os::entropy());
        queue_link::set_key(os::entropy());
      }
      if (!config::page_size_supported(os::page_size())) {
        report_unsupported_page();
        return false;
      }
      if (!pagemap::init()) {
        address_space::report_cannot_start("the page map", pagemap::wanted_bytes());
        return false;
      }
      if (!os::install_thread_exit_hook(on_thread_exit)) return false;
      // Where roost makes ranges that fault (guard pages, zero-size
      // allocations), a fault in one is named (armed by the first).
      if constexpr (config::kZeroSizeFaults || config::kMaxLargeGuards > 0)
        access_fault::set_namer(checks::name_access_fault);
      ChunkCache::set_shortage_hook(help_pooled);
      uint64_t adopt = options::get(options::kAdopt);  // 1: at refills; 2: at frees too
      g_adoption = adopt != 0;
      if (g_adoption)
        adoption::set_source({give_offered_slab, adopt >= 2 ? give_this_slab : nullptr});
      service::Work work = {parked_mail, drain_parked, look_at_bound_mail,
                            nullptr,     nullptr,      nullptr};
      if (offload::enabled()) {
        offload::install({offload_acquire, offload_make, offload_unmake, offload_settle,
                          offload_visit_inbox, offload_has_mail, offload_release_unused});
        work.serve_offload = offload::serve;
        work.offload_pending = offload::pending;
        work.offload_held_here = offload::held_here;
      }
      service::install(work);
      // release: publishes the set-up above to the unlocked acquire at the top.
      g_ready.store(true, std::memory_order_release);
    }
  }
  // pthread_atfork may allocate, and so does the heap profiler's start
  // (it loads the unwinder): outside the lock, after roost is ready to serve
  // those allocations.
  // acq_rel, though relaxed would do: it only elects the installer; the others wait for nothing.
  if (!g_hooks_installed.exchange(true, std::memory_order_acq_rel)) {
    os::install_fork_hooks(prefork, postfork_parent, postfork_child);
    if (profile::wanted()) profile::start();
  }
  return true;
}

Allocator* acquire_detached() {
  if (!global_init()) return nullptr;
  Entry* e = acquire();
  if (e == nullptr) return nullptr;
  e->allocator.attach(false);          // the service waits for nobody's objects
  e->allocator.sample_refills(false);  // the service's, not the program's
  // Mail posted to it calls the service (the parked-mail hook), which
  // receives it.
  e->allocator.set_parked(true);
  return &e->allocator;
}

ROOST_COMMON_TEXT void* alloc_unbound(Allocator*, unsigned sc, const void*) {
  if (!t_exited) {
    Allocator* a = bind();
    if (a == nullptr) {
      errno = ENOMEM;
      return nullptr;
    }
    return a->alloc(sc);
  }
  Entry* e = acquire();
  if (e == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  void* p = e->allocator.alloc(sc);
  // A pooled allocator holds no object off its slabs (its fast lists
  // given back), so any slab it gives up in adoption is whole.
  e->allocator.release_unused();
  release(e);
  return p;
}

void visit_all(void (*fn)(const Allocator&, void*), void* context) {
  // g_all: acquire, pairing with acquire()'s release (older entries were made under g_lock
  // before it); next_all: acquire, more than it needs (stored once, before that release).
  for (Entry* e = g_all.load(std::memory_order_acquire); e != nullptr;
       e = e->next_all.load(std::memory_order_acquire))
    fn(e->allocator, context);
}

ROOST_COMMON_TEXT uint64_t drain_parked(bool* more) {
  uint64_t drained = 0;
  LockGuard guard(g_lock);
  for (Entry* e = g_pooled; e != nullptr; e = e->next_pooled) {
    // Under the pool lock no thread can take `e`: the caller is its owner
    // for the moment.
    if (!e->allocator.visit_inbox()) continue;
    drained++;
    e->allocator.release_unused();
    offer_slabs(e);
    if (e->allocator.has_mail()) *more = true;
  }
  return drained;
}

ROOST_COMMON_TEXT Messenger::Look look_at_bound_mail(uint64_t now, uint64_t delay_ns) {
  // The list of all is read unlocked (entries are never freed); parked
  // allocators are skipped by the look itself.
  Messenger::Look total;
  // acquire, both: as in visit_all (pairs with acquire()'s release of g_all).
  for (Entry* e = g_all.load(std::memory_order_acquire); e != nullptr;
       e = e->next_all.load(std::memory_order_acquire)) {
    Messenger::Look look = e->allocator.look_for_neglected_mail(now, delay_ns);
    total.pending |= look.pending;
    total.whole_slabs += look.whole_slabs;
    total.bytes_purged += look.bytes_purged;
  }
  return total;
}

ROOST_COMMON_TEXT bool parked_mail() {
  LockGuard guard(g_lock);
  for (Entry* e = g_pooled; e != nullptr; e = e->next_pooled)
    if (e->allocator.has_mail()) return true;
  return false;
}

Still::Still() { g_lock.lock(); }
Still::~Still() { g_lock.unlock(); }

uint64_t allocators_created() {
  LockGuard guard(g_lock);
  return g_created;
}

namespace {

// Settles `self` (or nullptr) and the pooled allocators.  Settling one can
// forward messages to another already settled: repeats until a whole pass
// moves nothing (every pass delivers at least one hop of every message, and
// a message needs at most 32 / kBucketBits).
void settle_pool(Allocator* self) {
  LockGuard guard(g_lock);
  for (unsigned pass = 0; pass < 64; pass++) {
    uint64_t moved = self != nullptr ? self->settle() : 0;
    for (Entry* e = g_pooled; e != nullptr; e = e->next_pooled) moved += e->allocator.settle();
    if (moved == 0) break;
  }
}

}  // namespace

bool trim_all() {
  bool released = false;
  Allocator* self = t_alloc;
  bool bound = !is_unbound(self);
  // Before the pool lock (the offload lock comes first): what the
  // service's allocator sends home is then delivered below.
  offload::trim(bound ? self->port() : nullptr);
  // The service's allocator (offload) settles between rounds of the pool's,
  // outside the pool lock, until it receives nothing more.
  for (unsigned round = 0; round < 64; round++) {
    settle_pool(bound ? self : nullptr);
    if (offload::settle_service() == 0) break;
  }
  LockGuard guard(g_lock);
  if (bound) released |= self->release_unused();
  for (Entry* e = g_pooled; e != nullptr; e = e->next_pooled) {
    released |= e->allocator.release_unused();
    offer_slabs(e);
  }
  released |= Allocator::release_sampled_spares();
  return released;
}

}  // namespace roost::pool
