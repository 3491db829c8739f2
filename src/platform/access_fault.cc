// platform/access_fault.cc — implementation of platform/access_fault.h.
#include "platform/access_fault.h"

#include <errno.h>
#include <signal.h>

#include <atomic>

namespace roost::access_fault {

namespace {

std::atomic<Namer> g_namer{nullptr};
// 0: not tried; 1: roost's handler in place; 2: left to the program.
std::atomic<int> g_state{0};

void on_fault(int sig, siginfo_t* info, void*) {
  int saved = errno;
  // Only a fault the kernel raised has an address (not a kill(2) or
  // raise(3), whose si_code is not positive).
  if (info != nullptr && info->si_code > 0) {
    // Relaxed: set before any range was armed (the arming call's
    // sigaction orders it).
    Namer namer = g_namer.load(std::memory_order_relaxed);
    if (namer != nullptr) namer(reinterpret_cast<uintptr_t>(info->si_addr));
  }
  // Not roost's: the default action, taken when the access faults again.
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  errno = saved;
}

}  // namespace

void set_namer(Namer namer) {
  // Relaxed: read only after arm(), which a later call makes.
  g_namer.store(namer, std::memory_order_relaxed);
}

bool arm() {
  // Acquire/release: the one that arms publishes the state the others read.
  int state = g_state.load(std::memory_order_acquire);
  if (state != 0) return state == 1;
  if (g_namer.load(std::memory_order_relaxed) == nullptr) return false;
  struct sigaction old = {};
  bool ours = false;
  if (sigaction(SIGSEGV, nullptr, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
      old.sa_handler == SIG_DFL) {
    struct sigaction act = {};
    act.sa_sigaction = on_fault;
    sigemptyset(&act.sa_mask);
    // SA_ONSTACK: on the thread's alternate stack where the program gave it
    // one (a stack overflow then reaches the handler too).
    act.sa_flags = SA_SIGINFO | SA_ONSTACK;
    ours = sigaction(SIGSEGV, &act, nullptr) == 0;
  }
  int expected = 0;
  g_state.compare_exchange_strong(expected, ours ? 1 : 2, std::memory_order_acq_rel);
  return ours;
}

}  // namespace roost::access_fault
