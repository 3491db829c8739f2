// fork() while other threads allocate and free (cross-thread frees
// included): roost's fork hooks must leave the child an allocator it can
// use.  Each child allocates and frees small and large objects, frees an
// object a parent thread allocated from the child's main thread and from a
// new thread, and exits; a deadlock in the child (a lock held across fork)
// ends it with SIGALRM, and the parent gives up on it after a timeout, so a
// hang fails the test instead of hanging ctest.  200 forks, or
// ROOSTTEST_FORKS (the emulated AArch64 run, where a fork costs about 0.1 s
// of emulation).  With foreign reuse on (fork.static.foreign_reuse), the
// children start with other threads' objects on the workers' fast lists.
// Override builds only (linked to libroost.a, or unlinked
// and run with LD_PRELOAD=libroost.so); not built under sanitizers.
#include <malloc.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support.h"

using namespace roost_test;
using Clock = std::chrono::steady_clock;

namespace {

struct Obj {
  void* p = nullptr;
  size_t size = 0;
  uint64_t id = 0;
};

// Objects in transit between the parent's threads.
struct Mailbox {
  std::mutex m;
  std::deque<Obj> q;
};

size_t pick_size(std::mt19937_64& rng) {
  if (rng() % 64 == 0) return 300 * 1024 + rng() % (700 * 1024);  // large
  return 1 + rng() % (rng() % 4 == 0 ? 4096 : 256);
}

// Waits up to `timeout_s` for `pid`; kills it past that.  "" when it exited
// with 0, otherwise what happened.
std::string wait_child(pid_t pid, int timeout_s) {
  const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  int status = 0;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) return "waitpid failed: " + std::string(strerror(errno));
    if (Clock::now() > deadline) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return "child did not exit within " + std::to_string(timeout_s) + " s (killed)";
    }
    usleep(200);
  }
  if (WIFEXITED(status)) {
    if (WEXITSTATUS(status) == 0) return "";
    return "child exited with " + std::to_string(WEXITSTATUS(status));
  }
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return "child killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")" +
           (sig == SIGALRM ? ": it hung (deadlock after fork?)" : "");
  }
  return "child status " + std::to_string(status);
}

// The child's work.  Only async-signal-safe reporting (child_check) and the
// allocator: no locks of the parent's harness are touched.
[[noreturn]] void child_main(Obj victim, Obj victim2, unsigned round) {
  alarm(15);
  child_check(check_pattern(victim.p, victim.size, victim.id),
              "parent's object damaged in the child");
  child_check(check_pattern(victim2.p, victim2.size, victim2.id),
              "parent's second object damaged in the child");
  // The child's main thread: small, large, calloc, realloc.
  std::vector<void*> ptrs;
  for (unsigned i = 0; i < 200; i++) {
    size_t n = 1 + (i * 37 + round) % 2048;
    void* p = malloc(n);
    child_check(p != nullptr, "malloc in the child failed");
    memset(p, static_cast<int>(i), n);
    ptrs.push_back(p);
  }
  void* big = malloc(2 << 20);
  child_check(big != nullptr, "large malloc in the child failed");
  memset(big, 0x5a, 2 << 20);
  void* z = calloc(1000, 16);
  child_check(z != nullptr && find_nonzero(z, 16000) == SIZE_MAX, "calloc in the child");
  void* r = realloc(ptrs.back(), 100000);
  child_check(r != nullptr, "realloc in the child failed");
  ptrs.back() = r;
  // A parent thread's object freed by the child's main thread: its owner's
  // thread does not exist in the child.
  free(victim2.p);
  // A new thread: frees a parent thread's object and an object of this
  // thread, and leaves one for the main thread to free.
  void* from_thread = nullptr;
  std::thread t([&] {
    child_check(check_pattern(victim.p, victim.size, victim.id), "victim damaged");
    free(victim.p);
    for (unsigned i = 0; i < 100; i++) {
      void* p = malloc(16 + i * 8);
      child_check(p != nullptr, "malloc in a child thread failed");
      free(p);
    }
    free(ptrs[0]);  // the child main thread's object
    ptrs[0] = nullptr;
    from_thread = malloc(300);
    child_check(from_thread != nullptr, "malloc in a child thread failed");
    memset(from_thread, 1, 300);
  });
  t.join();
  free(from_thread);
  for (void* p : ptrs) free(p);
  free(big);
  free(z);
  malloc_trim(0);
  _exit(0);
}

}  // namespace

TEST(Fork, ChildrenOfABusyMultithreadedParentAllocateFreeAndExit) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "fork test: override builds only, not under sanitizers";
#endif
  REQUIRE_ROOST();
  constexpr unsigned kWorkers = 3;
  const char* forks_env = getenv("ROOSTTEST_FORKS");
  const unsigned kForks = forks_env != nullptr ? static_cast<unsigned>(atoi(forks_env)) : 200;
  ASSERT_GT(kForks, 0u);
  Mailbox mailbox;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> next_id{1};
  std::atomic<bool> worker_error{false};
  std::vector<std::thread> workers;
  for (unsigned w = 0; w < kWorkers; w++) {
    workers.emplace_back([&, w] {
      std::mt19937_64 rng(w + 11);
      std::vector<Obj> own, taken;
      while (!stop.load(std::memory_order_relaxed)) {
        for (int i = 0; i < 8; i++) {
          Obj o;
          o.size = pick_size(rng);
          o.p = malloc(o.size);
          if (o.p == nullptr) {
            worker_error = true;
            return;
          }
          o.id = next_id++;
          fill_pattern(o.p, o.size, o.id);
          own.push_back(o);
        }
        {
          std::lock_guard<std::mutex> lock(mailbox.m);
          // Half goes to the others; take theirs in exchange.
          for (size_t i = 0; i < own.size(); i += 2) mailbox.q.push_back(own[i]);
          for (int i = 0; i < 6 && mailbox.q.size() > 64; i++) {
            taken.push_back(mailbox.q.front());
            mailbox.q.pop_front();
          }
        }
        for (size_t i = 1; i < own.size(); i += 2) {
          if (!check_pattern(own[i].p, own[i].size, own[i].id)) worker_error = true;
          free(own[i].p);
        }
        own.clear();
        for (const Obj& o : taken) {
          if (!check_pattern(o.p, o.size, o.id)) worker_error = true;
          free(o.p);  // cross-thread (or own, now and then)
        }
        taken.clear();
      }
    });
  }

  auto take_victim = [&]() -> Obj {
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mailbox.m);
        if (!mailbox.q.empty()) {
          Obj o = mailbox.q.back();
          mailbox.q.pop_back();
          return o;
        }
      }
      std::this_thread::yield();
    }
  };

  std::vector<std::string> failures;
  const auto start = Clock::now();
  for (unsigned round = 0; round < kForks; round++) {
    Obj victim = take_victim(), victim2 = take_victim();
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) child_main(victim, victim2, round);
    if (pid < 0) {
      failures.push_back("fork failed: " + std::string(strerror(errno)));
      break;
    }
    // The parent frees its copies.
    EXPECT_TRUE(check_pattern(victim.p, victim.size, victim.id));
    EXPECT_TRUE(check_pattern(victim2.p, victim2.size, victim2.id));
    free(victim.p);
    free(victim2.p);
    std::string what = wait_child(pid, 30);
    if (!what.empty()) failures.push_back("fork " + std::to_string(round) + ": " + what);
    if (!failures.empty()) break;  // one is enough; a hang costs the child's alarm
  }
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (kept_expected()) {
    // fork.static.foreign_reuse: the workers kept each other's objects on
    // their fast lists (ROOST_FOREIGN_REUSE) while the children were forked.
    EXPECT_GT(stats_snapshot().foreign_kept, 0u) << "no object was kept for reuse";
  }
  stop = true;
  for (auto& t : workers) t.join();
  for (const Obj& o : mailbox.q) {
    EXPECT_TRUE(check_pattern(o.p, o.size, o.id));
    free(o.p);
  }
  EXPECT_FALSE(worker_error.load()) << "a parent thread found a damaged object or failed";
  RecordProperty("seconds", std::to_string(seconds));
  std::string all;
  for (const auto& f : failures) all += f + "\n";
  EXPECT_TRUE(failures.empty()) << all;
}
