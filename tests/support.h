// Helpers shared by the black-box tests of the malloc API: is roost serving
// this process (linked, preloaded, or not at all), byte patterns, compiler
// barriers, /proc/self/status readers, and running a body in a forked child
// whose exit status and stderr the parent inspects.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "pattern.h"
#include "roost.h"

namespace roost_test {

// Built under ThreadSanitizer, or under either sanitizer.  Under a sanitizer
// the process's RSS is mostly the sanitizer's (shadow memory for every
// address touched, ASan's quarantine of the harness's own system-malloc
// allocations, TSan's per-thread and sync-object state), and its slowdown
// of each thread differs: memory bounds are checked on roost's own
// bytes_committed, and timing-dependent figures only without one.
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kTsan = true;
#else
inline constexpr bool kTsan = false;
#endif
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// ---------------------------------------------------------------------------
// Keeping the compiler from reasoning about allocations.

// Makes `p` escape: the compiler must assume the pointee is read and written.
inline void escape(const void* p) { asm volatile("" : : "g"(p) : "memory"); }

// Returns `v` unchanged, but hides its value from the optimiser (so huge
// constant sizes are not folded into warnings or assumptions).
template <class T>
inline T opaque(T v) {
  asm volatile("" : "+r"(v));
  return v;
}

// ---------------------------------------------------------------------------
// Is roost active?

using StatsFn = int (*)(struct roost_stats*);

// The roost_stats entry point serving this process, or nullptr when the
// process runs on another allocator.  Binaries linked to roost define
// ROOST_TEST_LINKED and call it directly; the others look it up, which finds
// it when libroost.so is preloaded.
inline StatsFn stats_fn() {
#ifdef ROOST_TEST_LINKED
  return &roost_stats;
#else
  static StatsFn fn = reinterpret_cast<StatsFn>(dlsym(RTLD_DEFAULT, "roost_stats"));
  return fn;
#endif
}

inline bool roost_active() { return stats_fn() != nullptr; }

// roost_class_count and roost_class_stats, found as stats_fn() finds
// roost_stats (nullptr when roost is not serving this process).
using ClassCountFn = unsigned (*)();
using ClassStatsFn = int (*)(unsigned, struct roost_class_stats*);
inline ClassCountFn class_count_fn() {
#ifdef ROOST_TEST_LINKED
  return &roost_class_count;
#else
  static ClassCountFn fn = reinterpret_cast<ClassCountFn>(dlsym(RTLD_DEFAULT, "roost_class_count"));
  return fn;
#endif
}
inline ClassStatsFn class_stats_fn() {
#ifdef ROOST_TEST_LINKED
  return &roost_class_stats;
#else
  static ClassStatsFn fn = reinterpret_cast<ClassStatsFn>(dlsym(RTLD_DEFAULT, "roost_class_stats"));
  return fn;
#endif
}

// ROOSTTEST_EXPECT=1 in the environment: roost must be serving this process.
inline bool roost_expected() {
  const char* e = getenv("ROOSTTEST_EXPECT");
  return e != nullptr && strcmp(e, "1") == 0;
}

inline struct roost_stats stats_snapshot() {
  struct roost_stats s {};
  StatsFn fn = stats_fn();
  if (fn != nullptr) fn(&s);
  return s;
}

// Does the environment switch boolean option `name` on (`dflt` when unset)?
inline bool env_option_on(const char* name, bool dflt) {
  const char* e = getenv(name);
  if (e == nullptr) return dflt;
  for (const char* off : {"0", "off", "false", "no"})
    if (strcasecmp(e, off) == 0) return false;
  return true;
}

// ROOST_ADOPT's level: 0 no adoption, 1 (the default) a refill adopts an
// exited thread's slab, 2 a free of its object does too.
inline unsigned adopt_level() {
  const char* e = getenv("ROOST_ADOPT");
  return e == nullptr ? 1 : static_cast<unsigned>(strtoul(e, nullptr, 10));
}

// Does the kernel move pages as roost's ROOST_MOVE_PAGES needs (mremap
// with MREMAP_DONTUNMAP, Linux 5.7 and later), leaving the range they left
// mapped?  (qemu-user moves them but takes that range for unmapped.)  The
// same scratch move roost tries before its first.
inline bool kernel_moves_pages() {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* m = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return false;
  auto* first = static_cast<volatile char*>(m);
  volatile char* second = first + page;
  first[0] = 1;
  unsigned char in = 0;
  bool ok = mremap(m, page, page, MREMAP_MAYMOVE | MREMAP_FIXED | 4 /* MREMAP_DONTUNMAP */,
                   const_cast<char*>(second)) == second &&
            mincore(m, page, &in) == 0 && second[0] == 1 && first[0] == 0;
  munmap(m, 2 * page);
  return ok;
}

// Is full offload (ROOST_OFFLOAD=1, which needs the service) in force?  Its
// threads allocate from rings the service thread fills and leave frees of
// others' objects on a ring it empties: tests of the inline path's own
// mechanism (which slab an object comes from, which frees travel as
// messages) do not apply to it.
inline bool offload_on() {
  return env_option_on("ROOST_OFFLOAD", false) && env_option_on("ROOST_SERVICE", true);
}

// ROOSTTEST_EXPECT_KEPT=1 (the *.foreign_reuse tests): objects must have been
// kept for reuse (foreign_kept), except under full offload, which keeps none
// (remote frees go to the service's rings).
inline bool kept_expected() {
  return env_option_on("ROOSTTEST_EXPECT_KEPT", false) && !offload_on();
}

// Under full offload the service thread allocates for this thread's rings
// while it works: waits (at most 2 s) until it sleeps, its wake-ups and
// roost's committed bytes unchanged over 50 ms, so that two readings taken
// back to back agree.  Nothing to wait for otherwise.
inline void wait_for_offload_rest() {
  if (!offload_on()) return;
  struct roost_stats before = stats_snapshot();
  for (int i = 0; i < 40; i++) {
    usleep(50 * 1000);
    struct roost_stats now = stats_snapshot();
    if (now.service_wakeups == before.service_wakeups &&
        now.bytes_committed == before.bytes_committed)
      return;
    before = now;
  }
}

#define SKIP_UNDER_OFFLOAD()                                                           \
  do {                                                                                 \
    if (::roost_test::offload_on())                                                    \
      GTEST_SKIP() << "tests the inline path's mechanism; under ROOST_OFFLOAD=1 this " \
                      "thread's objects come from the service thread's rings";         \
  } while (0)

// For tests of roost's own documented behaviour (diagnostics, C17
// aligned_alloc, free_sized...): skipped on another allocator, unless
// ROOSTTEST_EXPECT=1 says roost must be there, in which case that is a failure.
#define REQUIRE_ROOST()                                                        \
  do {                                                                         \
    if (!::roost_test::roost_active()) {                                       \
      if (::roost_test::roost_expected())                                      \
        FAIL() << "ROOSTTEST_EXPECT=1 but roost is not serving this process";  \
      GTEST_SKIP() << "roost is not active (run with LD_PRELOAD=libroost.so)"; \
    }                                                                          \
  } while (0)

// ---------------------------------------------------------------------------
// Byte patterns (pattern.h) over whole objects.

inline void fill_pattern(void* p, size_t n, uint64_t id) {
  unsigned char* b = static_cast<unsigned char*>(p);
  size_t words = n / 8;
  for (size_t i = 0; i < words; i++) {
    uint64_t w = pattern_word(id, i);
    memcpy(b + i * 8, &w, 8);
  }
  uint64_t last = pattern_word(id, words);
  memcpy(b + words * 8, &last, n % 8);
}

// Offset of the first byte that does not hold the pattern, or SIZE_MAX.
inline size_t find_pattern_mismatch(const void* p, size_t n, uint64_t id) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  size_t words = n / 8;
  for (size_t i = 0; i < words; i++) {
    uint64_t w = pattern_word(id, i), got;
    memcpy(&got, b + i * 8, 8);
    if (got != w) {
      for (size_t k = 0; k < 8; k++)
        if (reinterpret_cast<unsigned char*>(&w)[k] != b[i * 8 + k]) return i * 8 + k;
    }
  }
  uint64_t last = pattern_word(id, words);
  for (size_t k = 0; k < n % 8; k++)
    if (reinterpret_cast<unsigned char*>(&last)[k] != b[words * 8 + k]) return words * 8 + k;
  return SIZE_MAX;
}

inline bool check_pattern(const void* p, size_t n, uint64_t id) {
  return find_pattern_mismatch(p, n, id) == SIZE_MAX;
}

// Offset of the first non-zero byte, or SIZE_MAX.
inline size_t find_nonzero(const void* p, size_t n) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, b + i, 8);
    if (w != 0) break;
  }
  for (; i < n; i++)
    if (b[i] != 0) return i;
  return SIZE_MAX;
}

inline bool is_aligned(const void* p, size_t a) {
  return (reinterpret_cast<uintptr_t>(p) & (a - 1)) == 0;
}

// ---------------------------------------------------------------------------
// /proc/self/status.

// The value in kB of a field such as "VmRSS" or "VmSize"; -1 if absent.
inline long status_kb(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  std::string key = std::string(field) + ":";
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) == 0)
      return strtol(line.c_str() + key.size(), nullptr, 10);
  }
  return -1;
}

// ---------------------------------------------------------------------------
// Forked children.

struct ChildResult {
  bool exited = false;  // exited normally (then see exit_code)
  int exit_code = -1;
  int signal = 0;   // the terminating signal, when killed by one
  std::string err;  // everything the child wrote on stderr

  std::string describe() const {
    std::string s =
        exited ? "exited with " + std::to_string(exit_code)
               : "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
    return s + "; stderr:\n" + err;
  }
};

// In a child: a check that gtest cannot see.  Writes the message on stderr
// and exits with code 3 when `cond` is false.
inline void child_check(bool cond, const char* what) {
  if (cond) return;
  const char prefix[] = "child check failed: ";
  (void)!write(2, prefix, sizeof(prefix) - 1);
  (void)!write(2, what, strlen(what));
  (void)!write(2, "\n", 1);
  _exit(3);
}

// Reads `fd` to its end into *out, closes it, and reaps the child `pid`;
// returns its wait status.
inline int collect_child(int fd, pid_t pid, std::string* out) {
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0) {
      out->append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  close(fd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// Runs this program's gtest case `test` in a fresh process (the binary
// again, through /proc/self/exe) with `env` (VAR=VALUE each) added, its
// stdout and stderr into *out, ended by SIGALRM after 240 s.  Returns its
// wait status, or -1 when it could not be started.  passed() says whether
// a status and output are the case's pass.
inline int run_case_in_fresh_process(const std::string& test, const std::vector<std::string>& env,
                                     std::string* out) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    for (const std::string& kv : env) putenv(strdup(kv.c_str()));
    alarm(240);  // survives exec: a hang ends the child
    std::string filter = "--gtest_filter=" + test;
    char exe[] = "/proc/self/exe";
    char* argv[] = {exe, filter.data(), nullptr};
    execv(exe, argv);
    _exit(127);
  }
  close(fds[1]);
  return collect_child(fds[0], pid, out);
}

inline bool passed(int status, const std::string& out) {
  return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
         out.find("[  PASSED  ] 1 test") != std::string::npos;
}

// Runs `body` in a forked child with stderr captured, killed by SIGALRM
// after `timeout_s`.  The child exits 0 when `body` returns, 4 when it throws.
inline ChildResult run_in_child(const std::function<void()>& body, unsigned timeout_s = 60) {
  ChildResult r;
  int fds[2];
  if (pipe(fds) != 0) {
    r.err = "pipe failed";
    return r;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    r.err = "fork failed";
    return r;
  }
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], 2);
    close(fds[1]);
    alarm(timeout_s);
    try {
      body();
    } catch (...) {
      child_check(false, "body threw an exception");
      _exit(4);
    }
    _exit(0);
  }
  close(fds[1]);
  int status = collect_child(fds[0], pid, &r.err);
  if (WIFEXITED(status)) {
    r.exited = true;
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.signal = WTERMSIG(status);
  }
  return r;
}

}  // namespace roost_test
