// The soak (`make soak`, not part of `make test`): for a set duration, four
// kinds of traffic run at once against one allocator:
//
//   producer-consumer  producers allocate objects carrying a tag, a pattern
//                      and a checksum; consumers on other threads check and
//                      free them
//   thread churn       waves of short-lived threads allocate, hand objects to
//                      a shared mailbox, free objects that threads of earlier
//                      waves (now exited) left there, and exit
//   fork               a thread forks a child every ~150 ms; the child checks
//                      an object of the parent, allocates and frees (from a
//                      new thread too, outside sanitizer builds) and exits 0
//   realloc            threads grow and shrink shared buffers from 1 byte to
//                      4 MiB, checking the kept prefix each time
//
// A sampler reads the resident set (/proc/self/statm) and roost's committed
// bytes every 100 ms.  At the end every check must have passed: no damaged
// content, as many objects freed as allocated, every child exited 0, and
// memory bounded: the peak of the second half of the run at most 1.5 times
// the first half's plus 8 MiB, for roost's committed bytes and for the
// resident set (not under a sanitizer, whose shadow memory and quarantine
// are most of it).
// It prints a summary and exits 1 on failure, 2 on bad arguments.
//
// Built twice (tests/soak/CMakeLists.txt): linked to roost::prefixed with
// ROOST_TEST_PREFIXED (roost_malloc & co.; the AddressSanitizer tree) and
// linked to roost::roost, through malloc & co. (the Release tree).
//
//   roost_soak [--seconds N] [--seed S]      (default: 60 s)
#include <malloc.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../pattern.h"
#include "roost.h"

namespace {

using roost_test::check_range;
using roost_test::fill_range;
using roost_test::pattern_word;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// ---------------------------------------------------------------------------
// The allocator under test.

#if defined(ROOST_TEST_PREFIXED)
constexpr const char* kBuild = "roost_* API (roost::prefixed)";
void* t_malloc(size_t n) { return roost_malloc(n); }
void* t_realloc(void* p, size_t n) { return roost_realloc(p, n); }
void t_free(void* p) { roost_free(p); }
void t_trim() { roost_trim(); }
#else
constexpr const char* kBuild = "malloc family (libroost.a)";
void* t_malloc(size_t n) { return malloc(n); }
void* t_realloc(void* p, size_t n) { return realloc(p, n); }
void t_free(void* p) { free(p); }
void t_trim() { malloc_trim(0); }
#endif

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * kKiB;

// ---------------------------------------------------------------------------
// Content: byte `offset` of an object with tag `tag` is derived from both,
// so a shifted copy or another object's bytes are seen.  Objects above
// kFullCheck hold the pattern on their first and last 4 KiB and on the first
// word of each page in between.

constexpr size_t kFullCheck = 64 * kKiB;

// Calls f(from, to) for the covered ranges of [begin, end).
template <class F>
void for_each_covered(size_t begin, size_t end, F&& f) {
  if (end <= begin) return;
  if (end - begin <= kFullCheck) {
    f(begin, end);
    return;
  }
  f(begin, begin + 4096);
  for (size_t o = (begin + 4096 + 4095) & ~size_t{4095}; o + 8 <= end - 4096; o += 4096)
    f(o, o + 8);
  f(end - 4096, end);
}

void fill_pattern(void* p, size_t begin, size_t end, uint64_t tag) {
  auto* b = static_cast<unsigned char*>(p);
  for_each_covered(begin, end, [&](size_t from, size_t to) { fill_range(b, from, to, tag); });
}

size_t find_damage(const void* p, size_t begin, size_t end, uint64_t tag) {
  const auto* b = static_cast<const unsigned char*>(p);
  size_t bad = SIZE_MAX;
  for_each_covered(begin, end, [&](size_t from, size_t to) {
    if (bad == SIZE_MAX) bad = check_range(b, from, to, tag);
  });
  return bad;
}

// find_damage over the covered ranges of [0, size) that lie below `kept`:
// what a realloc from `size` bytes down to (or up from) `kept` must keep.
size_t find_damage_prefix(const void* p, size_t size, size_t kept, uint64_t tag) {
  const auto* b = static_cast<const unsigned char*>(p);
  size_t bad = SIZE_MAX;
  for_each_covered(0, size, [&](size_t from, size_t to) {
    if (bad == SIZE_MAX && from < kept) bad = check_range(b, from, std::min(to, kept), tag);
  });
  return bad;
}

// A handed-over object (>= 16 bytes): [0, 8) its tag, [8, size - 8) the
// pattern, [size - 8, size) a checksum of the size, the tag and the pattern.
uint64_t checksum(const unsigned char* b, size_t size) {
  uint64_t tag;
  memcpy(&tag, b, 8);
  uint64_t h = (size * 0x9E3779B97F4A7C15ull) ^ tag;
  for_each_covered(8, size - 8, [&](size_t from, size_t to) {
    for (size_t o = from; o < to; o++) {
      h = (h << 23 | h >> 41) ^ b[o];
      h *= 0xFF51AFD7ED558CCDull;
    }
  });
  return h ^ (h >> 29);
}

void write_object(void* p, size_t size, uint64_t tag) {
  auto* b = static_cast<unsigned char*>(p);
  memcpy(b, &tag, 8);
  fill_pattern(b, 8, size - 8, tag);
  uint64_t sum = checksum(b, size);
  memcpy(b + size - 8, &sum, 8);
}

// "" when intact; otherwise what is wrong.
std::string verify_object(const void* p, size_t size, uint64_t tag) {
  const auto* b = static_cast<const unsigned char*>(p);
  char where[112];
  snprintf(where, sizeof(where), "object %p of %zu bytes (tag %#llx): ", p, size,
           static_cast<unsigned long long>(tag));
  uint64_t got;
  memcpy(&got, b, 8);
  if (got != tag) return std::string(where) + "tag overwritten";
  size_t bad = find_damage(b, 8, size - 8, tag);
  if (bad != SIZE_MAX)
    return std::string(where) + "pattern damaged at offset " + std::to_string(bad);
  memcpy(&got, b + size - 8, 8);
  if (got != checksum(b, size)) return std::string(where) + "checksum mismatch";
  return "";
}

// Mostly small, some medium, 1% large (256 KiB + 1 .. 2 MiB).
size_t pick_size(std::mt19937_64& rng) {
  unsigned r = static_cast<unsigned>(rng() % 1000);
  if (r < 10) return 256 * kKiB + 1 + rng() % (2 * kMiB - 256 * kKiB);
  if (r < 700) return 16 + rng() % (256 - 16 + 1);
  if (r < 900) return 257 + rng() % (4096 - 257 + 1);
  return 4097 + rng() % (64 * kKiB - 4097 + 1);
}

// Tags: the top 8 bits say which part of the soak made the object.
enum Source : uint64_t { kProducer = 1, kChurn = 2, kFork = 3, kRealloc = 4 };
std::atomic<uint64_t> g_next_seq{1};
uint64_t new_tag(Source s) { return s << 56 | g_next_seq.fetch_add(1, std::memory_order_relaxed); }

// ---------------------------------------------------------------------------
// Bookkeeping.

struct Obj {
  void* p = nullptr;  // nullptr: end of a producer's stream
  size_t size = 0;
  uint64_t tag = 0;
};

// verify_object without building a message (nothing allocated).
bool intact(const Obj& o) {
  const auto* b = static_cast<const unsigned char*>(o.p);
  uint64_t got;
  memcpy(&got, b, 8);
  if (got != o.tag || find_damage(b, 8, o.size - 8, o.tag) != SIZE_MAX) return false;
  memcpy(&got, b + o.size - 8, 8);
  return got == checksum(b, o.size);
}

class Errors {
 public:
  void report(const std::string& e) {
    std::lock_guard<std::mutex> lock(m_);
    if (all_.size() < 20) all_.push_back(e);
    count_++;
    failed_.store(true, std::memory_order_relaxed);
  }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  std::vector<std::string> all() {
    std::lock_guard<std::mutex> lock(m_);
    return all_;
  }
  uint64_t count() {
    std::lock_guard<std::mutex> lock(m_);
    return count_;
  }

 private:
  std::mutex m_;
  std::vector<std::string> all_;
  uint64_t count_ = 0;
  std::atomic<bool> failed_{false};
};

Errors g_errors;
// Objects of the parent process allocated and freed (successful calls of
// t_malloc or t_realloc(nullptr, n); t_free of non-null pointers).
std::atomic<uint64_t> g_allocated{0}, g_freed{0};

void* soak_alloc(size_t n, const char* who) {
  void* p = t_malloc(n);
  if (p == nullptr) {
    g_errors.report(std::string(who) + ": allocation of " + std::to_string(n) + " bytes failed");
    return nullptr;
  }
  g_allocated.fetch_add(1, std::memory_order_relaxed);
  return p;
}

void check_and_free(const Obj& o, const char* who) {
  std::string e = verify_object(o.p, o.size, o.tag);
  if (!e.empty()) g_errors.report(std::string(who) + ": " + e);
  t_free(o.p);
  g_freed.fetch_add(1, std::memory_order_relaxed);
}

// A bounded FIFO.
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity) : capacity_(capacity) {}
  void push(const Obj& o) {
    std::unique_lock<std::mutex> lock(m_);
    not_full_.wait(lock, [&] { return q_.size() < capacity_; });
    q_.push_back(o);
    not_empty_.notify_one();
  }
  Obj pop() {
    std::unique_lock<std::mutex> lock(m_);
    not_empty_.wait(lock, [&] { return !q_.empty(); });
    Obj o = q_.front();
    q_.pop_front();
    not_full_.notify_one();
    return o;
  }

 private:
  std::mutex m_;
  std::condition_variable not_full_, not_empty_;
  std::deque<Obj> q_;
  size_t capacity_;
};

struct Counts {
  std::atomic<uint64_t> produced{0}, consumed{0};
  std::atomic<uint64_t> churn_threads{0}, churn_objects{0}, churn_handed{0};
  std::atomic<uint64_t> forks{0};
  std::atomic<uint64_t> reallocs{0}, realloc_moves{0}, realloc_cross_thread{0};
};
Counts g_counts;

// ---------------------------------------------------------------------------
// Producer-consumer.

constexpr unsigned kProducers = 2, kConsumers = 2;

void producer(unsigned id, std::vector<std::unique_ptr<BoundedQueue>>& queues,
              Clock::time_point deadline, uint64_t seed) {
  std::mt19937_64 rng(seed * 1000003 + id);
  uint64_t n = 0;
  while (!g_errors.failed() && Clock::now() < deadline) {
    for (int i = 0; i < 64; i++) {
      size_t size = pick_size(rng);
      void* p = soak_alloc(size, "producer");
      if (p == nullptr) break;
      uint64_t tag = new_tag(kProducer);
      write_object(p, size, tag);
      queues[rng() % queues.size()]->push(Obj{p, size, tag});
      n++;
    }
  }
  g_counts.produced += n;
  for (auto& q : queues) q->push(Obj{});
}

void consumer(BoundedQueue& queue) {
  unsigned ends = 0;
  uint64_t n = 0;
  while (ends < kProducers) {
    Obj o = queue.pop();
    if (o.p == nullptr) {
      ends++;
      continue;
    }
    check_and_free(o, "consumer");
    n++;
  }
  g_counts.consumed += n;
}

// ---------------------------------------------------------------------------
// Thread churn: objects outlive the threads that made them.

struct Mailbox {
  std::mutex m;
  std::deque<Obj> q;
};

void churn_thread(Mailbox& box, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Obj> own;
  unsigned count = 50 + static_cast<unsigned>(rng() % 200);
  for (unsigned i = 0; i < count; i++) {
    size_t size = pick_size(rng);
    void* p = soak_alloc(size, "churn");
    if (p == nullptr) return;
    Obj o{p, size, new_tag(kChurn)};
    write_object(o.p, o.size, o.tag);
    own.push_back(o);
  }
  g_counts.churn_objects += count;
  std::vector<Obj> taken;
  size_t handed = 0;
  {
    std::lock_guard<std::mutex> lock(box.m);
    for (size_t i = 0; i < own.size(); i += 2, handed++) box.q.push_back(own[i]);
    // Keep a few hundred in the mailbox: the rest is freed here.
    while (box.q.size() > 400) {
      taken.push_back(box.q.front());
      box.q.pop_front();
    }
  }
  g_counts.churn_handed += handed;
  for (size_t i = 1; i < own.size(); i += 2) check_and_free(own[i], "churn (own)");
  for (const Obj& o : taken) check_and_free(o, "churn (an exited thread's)");
}

void churn(Mailbox& box, Clock::time_point deadline, uint64_t seed) {
  uint64_t wave = 0;
  while (!g_errors.failed() && Clock::now() < deadline) {
    std::vector<std::thread> threads;
    for (unsigned i = 0; i < 4; i++)
      threads.emplace_back(churn_thread, std::ref(box), seed * 7919 + wave * 4 + i);
    for (auto& t : threads) t.join();
    g_counts.churn_threads += threads.size();
    wave++;
  }
}

// ---------------------------------------------------------------------------
// fork() while the other threads run.

// In the child: a failed check writes its message on stderr and exits 3.
void child_check(bool ok, const char* what) {
  if (ok) return;
  const char prefix[] = "soak child: ";
  (void)!write(2, prefix, sizeof(prefix) - 1);
  (void)!write(2, what, strlen(what));
  (void)!write(2, "\n", 1);
  _exit(3);
}

// The child's work: only the allocator under test and async-signal-safe
// reporting; SIGALRM ends a child that hangs (a lock held across fork).
// Under a sanitizer the system allocator is the sanitizer's, whose locks
// GCC 12's runtime does not hold across fork() (a child can find them taken
// by a parent thread for good), so the child then neither uses the system
// allocator nor starts a thread: the main thread does the new thread's part.
[[noreturn]] void child_main(const Obj& parents, uint64_t seed) {
  alarm(30);
  child_check(intact(parents), "the parent's object is damaged in the child");
  std::mt19937_64 rng(seed);
  constexpr unsigned kObjects = 300;
  Obj objs[kObjects];
  for (unsigned i = 0; i < kObjects; i++) {
    size_t size = pick_size(rng);
    void* p = t_malloc(size);
    child_check(p != nullptr, "allocation failed");
    objs[i] = Obj{p, size, (uint64_t{kFork} << 56) | i};
    write_object(p, size, objs[i].tag);
  }
  void* grown = t_realloc(nullptr, 100);
  child_check(grown != nullptr, "realloc(nullptr, 100) failed");
  fill_pattern(grown, 0, 100, 7);
  grown = t_realloc(grown, 3 * kMiB);
  child_check(grown != nullptr && find_damage(grown, 0, 100, 7) == SIZE_MAX,
              "realloc to 3 MiB lost the content");
  // Half of the main thread's objects and the parent's, freed by a new
  // thread; then allocations of its own.
  bool ok = true;
  auto other_thread = [&] {
    for (unsigned i = 0; i < kObjects; i += 2) {
      ok = ok && intact(objs[i]);
      t_free(objs[i].p);
    }
    ok = ok && intact(parents);
    t_free(parents.p);
    for (unsigned i = 0; i < 200; i++) {
      void* p = t_malloc(16 + i * 8);
      if (p == nullptr) {
        ok = false;
        break;
      }
      memset(p, 0x5a, 16 + i * 8);
      t_free(p);
    }
  };
  if constexpr (kSanitized) {
    other_thread();
  } else {
    std::thread t(other_thread);
    t.join();
  }
  child_check(ok, "the child's second thread found damaged content or failed to allocate");
  for (unsigned i = 1; i < kObjects; i += 2) {
    child_check(intact(objs[i]), "the child's own object is damaged");
    t_free(objs[i].p);
  }
  t_free(grown);
  t_trim();
  _exit(0);
}

// "" when the child exited 0; otherwise what happened.  A child still
// running after `timeout_s` is killed.
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
      return "did not exit within " + std::to_string(timeout_s) + " s (killed)";
    }
    usleep(1000);
  }
  if (WIFEXITED(status))
    return WEXITSTATUS(status) == 0 ? "" : "exited with " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  return "status " + std::to_string(status);
}

void forker(Clock::time_point deadline, uint64_t seed) {
  uint64_t n = 0;
  while (!g_errors.failed() && Clock::now() < deadline) {
    // An object of the parent that the child checks and frees (and the
    // parent frees too: each process has its own copy).
    size_t size = 1000 + (n * 4099) % (600 * kKiB);
    void* p = soak_alloc(size, "forker");
    if (p == nullptr) return;
    Obj o{p, size, new_tag(kFork)};
    write_object(o.p, o.size, o.tag);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
      g_errors.report("fork failed: " + std::string(strerror(errno)));
      t_free(p);
      g_freed++;
      return;
    }
    if (pid == 0) child_main(o, seed + n);
    std::string e = wait_child(pid, 60);
    if (!e.empty()) g_errors.report("fork child " + std::to_string(n) + ": " + e);
    check_and_free(o, "forker (after the child)");
    n++;
    g_counts.forks++;
    std::this_thread::sleep_for(milliseconds(150));
  }
}

// ---------------------------------------------------------------------------
// realloc: buffers shared by the realloc threads, so a buffer is often
// resized by a thread whose allocator did not make it.  A buffer's byte at
// offset i holds pattern_byte(its tag, i) up to its size.

struct Buffer {
  std::mutex m;
  void* p = nullptr;
  size_t size = 0;
  uint64_t tag = 0;
  unsigned last_thread = 0;
};

constexpr unsigned kReallocThreads = 2;
constexpr unsigned kBuffers = 24;

size_t pick_realloc_size(std::mt19937_64& rng) {
  // Log-uniform from 1 byte to 1 MiB; 2% up to 4 MiB.
  if (rng() % 50 == 0) return 1 * kMiB + rng() % (3 * kMiB);
  unsigned bits = static_cast<unsigned>(rng() % 21);
  size_t lo = size_t{1} << bits;
  return lo + rng() % lo;
}

void realloc_thread(unsigned id, std::vector<Buffer>& bufs, Clock::time_point deadline,
                    uint64_t seed) {
  std::mt19937_64 rng(seed * 31 + id);
  uint64_t n = 0, moves = 0, cross = 0;
  while (!g_errors.failed() && Clock::now() < deadline) {
    Buffer& b = bufs[rng() % bufs.size()];
    std::unique_lock<std::mutex> lock(b.m, std::try_to_lock);
    if (!lock.owns_lock()) continue;
    if (b.p != nullptr && rng() % 16 == 0) {  // free it; the next visit starts anew
      size_t bad = find_damage(b.p, 0, b.size, b.tag);
      if (bad != SIZE_MAX)
        g_errors.report("realloc buffer of " + std::to_string(b.size) +
                        " bytes damaged at offset " + std::to_string(bad) + " before its free");
      t_free(b.p);
      g_freed++;
      b.p = nullptr;
      continue;
    }
    size_t size = pick_realloc_size(rng);
    bool fresh = b.p == nullptr;
    if (!fresh && b.last_thread != id) cross++;
    void* q = t_realloc(b.p, size);
    if (q == nullptr) {
      g_errors.report("realloc to " + std::to_string(size) + " bytes failed");
      continue;
    }
    n++;
    if (fresh) {
      g_allocated++;
      b.tag = new_tag(kRealloc);
      b.size = 0;
    } else if (q != b.p) {
      moves++;
    }
    size_t kept = std::min(b.size, size);
    size_t bad = find_damage_prefix(q, b.size, kept, b.tag);
    if (bad != SIZE_MAX)
      g_errors.report("realloc from " + std::to_string(b.size) + " to " + std::to_string(size) +
                      " bytes: kept content damaged at offset " + std::to_string(bad));
    // A large buffer has only its covered ranges patterned, and they move
    // with its end: pattern the new size's covered ranges whole.
    if (size > kFullCheck || b.size > kFullCheck)
      fill_pattern(q, 0, size, b.tag);
    else if (size > kept)
      fill_pattern(q, kept, size, b.tag);
    b.p = q;
    b.size = size;
    b.last_thread = id;
  }
  g_counts.reallocs += n;
  g_counts.realloc_moves += moves;
  g_counts.realloc_cross_thread += cross;
}

// ---------------------------------------------------------------------------
// Memory samples.

struct Sample {
  double t;              // seconds since the start
  double rss_mib;        // resident set
  double committed_mib;  // roost's bytes_committed
};

double rss_mib() {
  FILE* f = fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  long size = 0, resident = 0;
  int got = fscanf(f, "%ld %ld", &size, &resident);
  fclose(f);
  if (got != 2) return -1;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / kMiB;
}

double committed_mib() {
  struct roost_stats s {};
  roost_stats(&s);
  return static_cast<double>(s.bytes_committed) / kMiB;
}

// Least-squares slope of y over t, in MiB per minute.
double slope_per_minute(const std::vector<Sample>& s, size_t from, double Sample::*y) {
  double n = 0, st = 0, sy = 0, stt = 0, sty = 0;
  for (size_t i = from; i < s.size(); i++) {
    n++;
    st += s[i].t;
    sy += s[i].*y;
    stt += s[i].t * s[i].t;
    sty += s[i].t * (s[i].*y);
  }
  double d = n * stt - st * st;
  return d > 0 ? (n * sty - st * sy) / d * 60 : 0;
}

struct Bound {
  double first = 0, second = 0, limit = 0, slope = 0;
  bool ok = true;
};

// The second half's peak against the first half's.
Bound check_growth(const std::vector<Sample>& s, double duration, double Sample::*y) {
  Bound b;
  size_t half = 0;
  while (half < s.size() && s[half].t < duration / 2) half++;
  for (size_t i = 0; i < s.size(); i++)
    (i < half ? b.first : b.second) = std::max(i < half ? b.first : b.second, s[i].*y);
  b.limit = 1.5 * b.first + 8;
  b.ok = b.second <= b.limit;
  b.slope = slope_per_minute(s, half, y);
  return b;
}

int usage() {
  fprintf(stderr, "usage: roost_soak [--seconds N] [--seed S]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 60;
  uint64_t seed = 1;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    char* end = nullptr;
    if (a == "--seconds") {
      seconds = strtod(argv[++i], &end);
      if (*end != '\0' || !(seconds >= 2)) return usage();
    } else if (a == "--seed") {
      seed = strtoull(argv[++i], &end, 10);
      if (*end != '\0') return usage();
    } else {
      return usage();
    }
  }
  printf("soak: %s%s, %.0f s, seed %llu\n", kBuild, kSanitized ? " under a sanitizer" : "", seconds,
         static_cast<unsigned long long>(seed));
  fflush(stdout);

  const auto start = Clock::now();
  const auto deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  auto since_start = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };

  std::vector<Sample> samples;
  std::atomic<bool> stop_sampler{false};
  std::thread sampler([&] {
    while (!stop_sampler.load(std::memory_order_relaxed)) {
      samples.push_back(Sample{since_start(), rss_mib(), committed_mib()});
      std::this_thread::sleep_for(milliseconds(100));
    }
  });

  std::vector<std::unique_ptr<BoundedQueue>> queues;
  for (unsigned c = 0; c < kConsumers; c++) queues.push_back(std::make_unique<BoundedQueue>(256));
  Mailbox mailbox;
  std::vector<Buffer> buffers(kBuffers);

  std::vector<std::thread> threads;
  for (unsigned c = 0; c < kConsumers; c++) threads.emplace_back(consumer, std::ref(*queues[c]));
  for (unsigned p = 0; p < kProducers; p++)
    threads.emplace_back(producer, p, std::ref(queues), deadline, seed);
  threads.emplace_back(churn, std::ref(mailbox), deadline, seed);
  threads.emplace_back(forker, deadline, seed);
  for (unsigned r = 0; r < kReallocThreads; r++)
    threads.emplace_back(realloc_thread, r, std::ref(buffers), deadline, seed);
  for (auto& t : threads) t.join();

  // What is left: the mailbox and the realloc buffers, freed on a worker
  // thread (the prefixed build keeps roost calls off the main thread).
  std::thread([&] {
    for (const Obj& o : mailbox.q) check_and_free(o, "churn (left at the end)");
    mailbox.q.clear();
    for (Buffer& b : buffers) {
      if (b.p == nullptr) continue;
      size_t bad = find_damage(b.p, 0, b.size, b.tag);
      if (bad != SIZE_MAX)
        g_errors.report("realloc buffer of " + std::to_string(b.size) +
                        " bytes damaged at offset " + std::to_string(bad) + " at the end");
      t_free(b.p);
      g_freed++;
      b.p = nullptr;
    }
    t_trim();
  }).join();
  const double elapsed = since_start();
  stop_sampler = true;
  sampler.join();

  std::vector<std::string> failures;
  const uint64_t allocated = g_allocated.load(), freed = g_freed.load();
  if (allocated != freed)
    failures.push_back("objects allocated " + std::to_string(allocated) + " but freed " +
                       std::to_string(freed));
  if (g_counts.produced.load() != g_counts.consumed.load())
    failures.push_back("produced " + std::to_string(g_counts.produced.load()) +
                       " objects but consumed " + std::to_string(g_counts.consumed.load()));
  struct roost_stats st {};
  roost_stats(&st);
#if defined(ROOST_TEST_PREFIXED)
  // Only the soak calls roost_*: roost's own counters must balance too.
  if (st.allocations != st.frees || st.bytes_in_use != 0)
    failures.push_back("roost_stats: allocations " + std::to_string(st.allocations) + ", frees " +
                       std::to_string(st.frees) + ", bytes_in_use " +
                       std::to_string(st.bytes_in_use));
#endif
  if (samples.size() < 10) failures.push_back("fewer than 10 memory samples");
  Bound rss = check_growth(samples, elapsed, &Sample::rss_mib);
  Bound committed = check_growth(samples, elapsed, &Sample::committed_mib);
  if (!kSanitized && !rss.ok)
    failures.push_back("RSS grew: second half's peak " + std::to_string(rss.second) +
                       " MiB > 1.5 x first half's " + std::to_string(rss.first) + " + 8 MiB");
  if (!committed.ok)
    failures.push_back("committed bytes grew: second half's peak " +
                       std::to_string(committed.second) + " MiB > 1.5 x first half's " +
                       std::to_string(committed.first) + " + 8 MiB");
  if (g_counts.forks.load() == 0) failures.push_back("no child was forked");
  for (const std::string& e : g_errors.all()) failures.push_back(e);
  if (g_errors.count() > g_errors.all().size())
    failures.push_back(std::to_string(g_errors.count() - g_errors.all().size()) +
                       " more errors not shown");

  double peak_rss = 0;
  for (const Sample& s : samples) peak_rss = std::max(peak_rss, s.rss_mib);
  printf("soak: ran %.1f s; %llu objects allocated, %llu freed\n", elapsed,
         static_cast<unsigned long long>(allocated), static_cast<unsigned long long>(freed));
  printf("  producer-consumer  %llu objects produced, %llu consumed\n",
         static_cast<unsigned long long>(g_counts.produced.load()),
         static_cast<unsigned long long>(g_counts.consumed.load()));
  printf("  thread churn       %llu threads, %llu objects, %llu handed to later threads\n",
         static_cast<unsigned long long>(g_counts.churn_threads.load()),
         static_cast<unsigned long long>(g_counts.churn_objects.load()),
         static_cast<unsigned long long>(g_counts.churn_handed.load()));
  printf("  fork               %llu children\n",
         static_cast<unsigned long long>(g_counts.forks.load()));
  printf("  realloc            %llu reallocs, %llu moved, %llu by another thread than the last\n",
         static_cast<unsigned long long>(g_counts.reallocs.load()),
         static_cast<unsigned long long>(g_counts.realloc_moves.load()),
         static_cast<unsigned long long>(g_counts.realloc_cross_thread.load()));
  printf(
      "  RSS                peak %.1f MiB; first half's peak %.1f, second half's %.1f "
      "(bound %.1f%s); second half's trend %+.1f MiB/min\n",
      peak_rss, rss.first, rss.second, rss.limit,
      kSanitized ? ", not enforced under a sanitizer" : "", rss.slope);
  printf(
      "  roost committed    first half's peak %.1f MiB, second half's %.1f (bound %.1f); "
      "second half's trend %+.1f MiB/min\n",
      committed.first, committed.second, committed.limit, committed.slope);
  printf("  samples            %zu, every 100 ms\n", samples.size());
  if (failures.empty()) {
    printf("soak: PASS\n");
    return 0;
  }
  for (const std::string& f : failures) printf("soak: FAIL: %s\n", f.c_str());
  return 1;
}
