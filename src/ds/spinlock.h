// ds/spinlock.h — a small test-and-test-and-set lock for slow paths.
//
// Owns: mutual exclusion for backend and pool structures.  Must never: be
// taken on a fast path.  Yields the CPU after a short spin so that more
// threads than cores make progress.
#pragma once

#include <atomic>

#include "platform/cpu.h"
#include "platform/os.h"

namespace roost {

class SpinLock {
 public:
  void lock() {
    for (;;) {
      // acquire: what the last holder wrote before its release is seen.
      if (!flag_.exchange(true, std::memory_order_acquire)) return;
      // relaxed: only a hint of when to try again (the exchange decides).
      for (int spins = 0; flag_.load(std::memory_order_relaxed); spins++) {
        if (spins < 64)
          cpu::relax();
        else
          os::yield();
      }
    }
  }
  // acquire: as lock().
  bool try_lock() { return !flag_.exchange(true, std::memory_order_acquire); }
  // release: publishes everything written while holding it to the next holder.
  void unlock() { flag_.store(false, std::memory_order_release); }
  // After fork, for a lock taken by the prepare handler: the parent unlocks;
  // the child resets it (the thread that held it does not exist there).
  void unlock_after_fork(bool child) {
    if (child)
      flag_.store(false, std::memory_order_relaxed);  // relaxed: the child has one thread
    else
      unlock();
  }

 private:
  std::atomic<bool> flag_{false};
};

class LockGuard {
 public:
  explicit LockGuard(SpinLock& l) : lock_(l) { lock_.lock(); }
  ~LockGuard() { lock_.unlock(); }
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;

 private:
  SpinLock& lock_;
};

}  // namespace roost
