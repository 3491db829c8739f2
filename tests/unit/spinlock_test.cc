// SpinLock and LockGuard (ds/spinlock.h): mutual exclusion among more
// threads than cores (a plain counter incremented under the lock ends
// exact, and no two threads are ever inside at once; under ThreadSanitizer
// this also checks that unlock's release pairs with lock's acquire), a
// waiter blocked until the holder unlocks, try_lock, the guard's scope, and
// unlock_after_fork for the parent and for a forked child.
#include "ds/spinlock.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

using namespace roost;

namespace {

constexpr int kRounds = 200000;  // the same in every tree: a second or two under TSan
constexpr int kThreads = 8;

}  // namespace

TEST(SpinLock, TryLockFailsWhileHeldAndSucceedsAfterUnlock) {
  SpinLock lock;
  EXPECT_TRUE(lock.try_lock());
  EXPECT_FALSE(lock.try_lock());
  bool other_got_it = true;
  std::thread([&] { other_got_it = lock.try_lock(); }).join();
  EXPECT_FALSE(other_got_it);
  lock.unlock();
  std::thread([&] { other_got_it = lock.try_lock(); }).join();
  EXPECT_TRUE(other_got_it);  // and now the other thread's lock holds it
  EXPECT_FALSE(lock.try_lock());
  lock.unlock();
  lock.lock();
  EXPECT_FALSE(lock.try_lock());
  lock.unlock();
  EXPECT_TRUE(lock.try_lock());
  lock.unlock();
}

TEST(SpinLock, LockGuardHoldsTheLockForItsScope) {
  SpinLock lock;
  {
    LockGuard guard(lock);
    EXPECT_FALSE(lock.try_lock());
  }
  EXPECT_TRUE(lock.try_lock());
  lock.unlock();
}

// A thread calling lock() while another holds it does not get in until the
// holder unlocks, however long it spins and yields; then it does.
TEST(SpinLock, AWaiterGetsInOnlyAfterTheHolderUnlocks) {
  SpinLock lock;
  lock.lock();
  std::atomic<bool> started{false}, acquired{false};
  std::thread waiter([&] {
    started.store(true);
    lock.lock();
    acquired.store(true);
    lock.unlock();
  });
  while (!started.load()) std::this_thread::yield();
  // Long enough for the waiter to pass its spins and start yielding.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(acquired.load());
  lock.unlock();
  waiter.join();
  EXPECT_TRUE(acquired.load());
  EXPECT_TRUE(lock.try_lock());
  lock.unlock();
}

TEST(SpinLock, UnlockAfterForkReleasesAHeldLock) {
  SpinLock parent;
  parent.lock();
  parent.unlock_after_fork(false);
  EXPECT_TRUE(parent.try_lock());
  parent.unlock();
  SpinLock child;
  child.lock();
  child.unlock_after_fork(true);
  EXPECT_TRUE(child.try_lock());
  child.unlock();
}

// The fork protocol for real: the prepare step takes the lock, and both
// sides of the fork get a usable lock back (the child's holder does not
// exist there).
TEST(SpinLock, UnlockAfterForkInBothProcesses) {
  SpinLock lock;
  lock.lock();  // the prepare handler
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    lock.unlock_after_fork(true);
    bool ok = lock.try_lock();
    ok = ok && !lock.try_lock();
    lock.unlock();
    _exit(ok ? 0 : 1);
  }
  lock.unlock_after_fork(false);
  EXPECT_TRUE(lock.try_lock());
  lock.unlock();
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child could not take the lock";
}

TEST(SpinLock, CountsExactlyUnderTheLockWithMoreThreadsThanCores) {
  SpinLock lock;
  uint64_t counter = 0;            // plain: only the lock protects it
  std::atomic<int> inside{0};      // threads between lock and unlock
  std::atomic<int> max_inside{0};  // most ever seen there at once
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (int i = 0; i < kRounds; i++) {
        // Half the threads through the guard, half by hand.
        auto body = [&] {
          int now = inside.fetch_add(1, std::memory_order_relaxed) + 1;
          int seen = max_inside.load(std::memory_order_relaxed);
          while (now > seen && !max_inside.compare_exchange_weak(seen, now)) {
          }
          // Read, pause, write: a lost update needs only one thread to get
          // in between, which the pause makes likely if the lock lets it.
          uint64_t v = counter;
          cpu::relax();
          counter = v + 1;
          inside.fetch_sub(1, std::memory_order_relaxed);
        };
        if (t % 2 == 0) {
          LockGuard guard(lock);
          body();
        } else {
          lock.lock();
          body();
          lock.unlock();
        }
      }
    });
  }
  go.store(true, std::memory_order_release);
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(counter, uint64_t{kThreads} * kRounds);
  EXPECT_EQ(max_inside.load(), 1);
  EXPECT_TRUE(lock.try_lock()) << "left locked";
}
