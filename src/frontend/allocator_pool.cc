// frontend/allocator_pool.cc — implementation of frontend/allocator_pool.h.
#include "frontend/allocator_pool.h"

#include <cerrno>
#include <cstdint>
#include <new>

#include "backend/chunk_allocator.h"
#include "backend/large.h"
#include "backend/meta_arena.h"
#include "backend/pagemap.h"
#include "ds/spinlock.h"
#include "options.h"
#include "platform/os.h"

namespace roost::pool {

constinit Allocator g_unbound{};
__thread Allocator* t_alloc __attribute__((tls_model("initial-exec"))) = &g_unbound;

namespace {

// Set once the thread-exit hook ran: later allocations in this thread borrow
// an allocator per call instead of binding one that nobody would release.
__thread bool t_exited __attribute__((tls_model("initial-exec"))) = false;

SpinLock g_lock;  // guards the pooled list and the list of all allocators
Allocator* g_pooled = nullptr;
Allocator* g_all = nullptr;
uint32_t g_created = 0;

SpinLock g_init_lock;
bool g_ready = false;
bool g_hooks_installed = false;

Allocator* acquire() {
  {
    LockGuard guard(g_lock);
    Allocator* a = g_pooled;
    if (a != nullptr) {
      g_pooled = a->next_pooled_;
      a->next_pooled_ = nullptr;
      return a;
    }
  }
  void* mem = meta_arena::alloc(sizeof(Allocator), 64);
  if (mem == nullptr) return nullptr;
  auto* a = new (mem) Allocator();
  LockGuard guard(g_lock);
  a->id_ = g_created++;
  a->next_all_ = g_all;
  __atomic_store_n(&g_all, a, __ATOMIC_RELEASE);
  return a;
}

void release(Allocator* a) {
  LockGuard guard(g_lock);
  a->next_pooled_ = g_pooled;
  g_pooled = a;
}

void on_thread_exit(void* arg) {
  auto* a = static_cast<Allocator*>(arg);
  t_alloc = &g_unbound;
  t_exited = true;
  a->settle();
  // What it does not use goes back to the backend, where any thread reuses
  // it (resident for a purge delay): a pooled allocator holds only slabs
  // with objects still out.
  a->release_unused();
  release(a);
}

void prefork() {
  g_lock.lock();
  large::lock_for_fork();
  chunks::lock_for_fork();
  meta_arena::lock_for_fork();
}

void postfork(bool child) {
  meta_arena::unlock_after_fork(child);
  chunks::unlock_after_fork(child);
  large::unlock_after_fork(child);
  g_lock.unlock_after_fork(child);
}

void postfork_parent() { postfork(false); }
void postfork_child() { postfork(true); }

}  // namespace

Allocator* bind() {
  if (t_exited || !global_init()) return nullptr;
  Allocator* a = acquire();
  if (a == nullptr) return nullptr;
  a->outbox_limit_ = options::get(options::kOutboxBytes);
  a->outbox_.room = a->outbox_limit_;
  a->batchit_ = options::get(options::kBatchIt) != 0;
  t_alloc = a;
  os::arm_thread_exit_hook(a);
  return a;
}

bool global_init() {
  if (__atomic_load_n(&g_ready, __ATOMIC_ACQUIRE)) return true;
  {
    LockGuard guard(g_init_lock);
    if (!g_ready) {
      options::load();
      if (os::page_size() != config::kPageSize) return false;
      if (!pagemap::init()) return false;
      if (!os::install_thread_exit_hook(on_thread_exit)) return false;
      __atomic_store_n(&g_ready, true, __ATOMIC_RELEASE);
    }
  }
  // pthread_atfork may allocate: register it outside the lock, after roost
  // is ready to serve that allocation.
  if (!__atomic_exchange_n(&g_hooks_installed, true, __ATOMIC_ACQ_REL))
    os::install_fork_hooks(prefork, postfork_parent, postfork_child);
  return true;
}

void* alloc_unbound(unsigned sc) {
  if (!t_exited) {
    Allocator* a = bind();
    if (a == nullptr) {
      errno = ENOMEM;
      return nullptr;
    }
    return a->alloc_small(sc);
  }
  Allocator* a = acquire();
  if (a == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  void* p = a->alloc_borrowed(sc);
  release(a);
  return p;
}

void help_pooled() {
  // Skipped when the pool is busy: helping is never worth a wait.
  if (!g_lock.try_lock()) return;
  for (Allocator* a = g_pooled; a != nullptr; a = a->next_pooled_) {
    if (!a->inbox_.maybe_nonempty()) continue;
    // Under the pool lock no thread can take `a`: this thread is its owner
    // for the moment.
    a->drain_inbox(false);
    a->release_unused();
    break;
  }
  g_lock.unlock();
}

Allocator* first_allocator() { return __atomic_load_n(&g_all, __ATOMIC_ACQUIRE); }

uint64_t allocators_created() {
  LockGuard guard(g_lock);
  return g_created;
}

bool trim_all() {
  bool released = false;
  Allocator* self = t_alloc;
  LockGuard guard(g_lock);
  // Settling one allocator can forward messages to another already settled:
  // repeat until a whole pass moves nothing (every pass delivers at least
  // one hop of every message, and a message needs at most 32 / kBucketBits).
  for (unsigned pass = 0; pass < 64; pass++) {
    uint64_t moved = 0;
    auto settle = [&](Allocator* a) {
      uint64_t before = a->messages_received_ + a->messages_forwarded_;
      a->settle();
      moved += a->messages_received_ + a->messages_forwarded_ - before;
    };
    if (self != &g_unbound) settle(self);
    for (Allocator* a = g_pooled; a != nullptr; a = a->next_pooled_) settle(a);
    if (moved == 0) break;
  }
  if (self != &g_unbound) released |= self->release_unused();
  for (Allocator* a = g_pooled; a != nullptr; a = a->next_pooled_) released |= a->release_unused();
  return released;
}

}  // namespace roost::pool
