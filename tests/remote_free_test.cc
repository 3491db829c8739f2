// Remote frees: objects allocated by one thread and freed by another travel
// home as messages (outbox -> inbox), with forwarding when destinations
// share a bucket.  One source, built several ways (tests/CMakeLists.txt;
// the prefixed programs share one compile of it and differ in the library
// they link and in remote_free_library.cc's constants):
//
//   remote_free.prefixed     roost_malloc/roost_free, roost::prefixed; every
//                            tree, AddressSanitizer and ThreadSanitizer too
//   remote_free.prefixed_k1  the same against roost::prefixed_k1 (2 outbox
//                            buckets): messages take several hops home
//   remote_free.static       malloc/free, linked to libroost.a
//   remote_free.preload      malloc/free, unlinked, LD_PRELOAD=libroost.so
//
// The tests: a producer-consumer stress whose objects carry a checksum of
// their contents; the same run repeated ten times in a fresh process (peak
// RSS must level off); 48 threads handing objects to each other (multi-hop
// forwarding with 2 buckets); 20000 short-lived threads freeing each
// other's objects (allocators and memory reused); an owner that sleeps
// while another thread frees its objects (the service thread purges the
// slabs it finds whole in the owner's mail), and owners that nap between
// bursts while freers check their objects.  After each, the message
// counters of roost_stats must balance once every inbox has been drained.
#include <malloc.h>
#include <strings.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support.h"

using namespace roost_test;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// ---------------------------------------------------------------------------
// The allocator under test.

namespace {

#if defined(ROOST_TEST_PREFIXED)
constexpr bool kPrefixed = true;
void* t_malloc(size_t n) { return roost_malloc(n); }
void t_free(void* p) { roost_free(p); }
#else
constexpr bool kPrefixed = false;
void* t_malloc(size_t n) { return malloc(n); }
void t_free(void* p) { free(p); }
#endif

}  // namespace

// The library's outbox buckets (2^kRemoteFreeBucketBits) and whether it has
// BatchIt compiled in: remote_free_library.cc, compiled for each program
// with what its library was built with.
namespace roost_test {
extern const unsigned kRemoteFreeBucketBits;
extern const bool kRemoteFreeBatchitCompiled;
}  // namespace roost_test

namespace {

const unsigned kBucketBits = kRemoteFreeBucketBits;

// BatchIt: on unless compiled out (the library was built with
// -DROOST_BATCHIT=0) or switched off with ROOST_BATCHIT=0 (or off, false,
// no in any case).
bool batchit_on() {
  if (!kRemoteFreeBatchitCompiled) return false;
  const char* e = getenv("ROOST_BATCHIT");
  if (e == nullptr) return true;
  for (const char* off : {"0", "off", "false", "no"})
    if (strcasecmp(e, off) == 0) return false;
  return true;
}

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * 1024;
constexpr size_t kMaxSmall = 256 * kKiB;  // roost's small/large boundary (src/config.h)

// ---------------------------------------------------------------------------
// Message counters of struct roost_stats.

std::string describe_messages(const struct roost_stats& s) {
  return "remote_frees " + std::to_string(s.remote_frees) + ", messages_sent " +
         std::to_string(s.messages_sent) + ", batches_sent " + std::to_string(s.batches_sent) +
         ", messages_received " + std::to_string(s.messages_received) + ", messages_forwarded " +
         std::to_string(s.messages_forwarded) + ", inbox_drains " + std::to_string(s.inbox_drains) +
         ", slab_batches_sent " + std::to_string(s.slab_batches_sent) + ", slab_batches_received " +
         std::to_string(s.slab_batches_received) + ", batchit_evictions " +
         std::to_string(s.batchit_evictions) + ", foreign_kept " + std::to_string(s.foreign_kept) +
         ", foreign_sent_home " + std::to_string(s.foreign_sent_home);
}

// ---------------------------------------------------------------------------
// Objects with a checksum.  Layout of an object of `size` bytes (>= 16):
//   [0, 8)            tag: producer << 48 | sequence number
//   [8, size - 8)     pattern bytes derived from the tag and the offset
//   [size - 8, size)  checksum of size, tag and the pattern bytes
// Objects above kFullCheck carry the pattern on their first and last 4 KiB
// and on the first word of every page in between (so a 4 MiB object costs
// a few thousand words, not half a million); the checksum covers the same
// bytes.

constexpr size_t kFullCheck = 64 * kKiB;

uint64_t make_tag(uint64_t producer, uint64_t seq) {
  return producer << 48 | (seq & ((uint64_t{1} << 48) - 1));
}

template <class F>
void for_each_covered(size_t size, F&& f) {
  size_t end = size - 8;
  if (size <= kFullCheck) {
    f(size_t{8}, end);
    return;
  }
  f(size_t{8}, size_t{4096});
  for (size_t o = 4096; o + 8 <= end - 4096; o += 4096) f(o, o + 8);
  f(end - 4096, end);
}

uint64_t checksum(const unsigned char* b, size_t size) {
  uint64_t tag;
  memcpy(&tag, b, 8);
  uint64_t h = (size * 0x9E3779B97F4A7C15ull) ^ tag;
  auto fold = [&h](uint64_t w) {
    h = (h << 23 | h >> 41) ^ w;
    h *= 0xFF51AFD7ED558CCDull;
  };
  for_each_covered(size, [&](size_t from, size_t to) {
    size_t o = from;
    for (; o + 8 <= to; o += 8) {
      uint64_t w;
      memcpy(&w, b + o, 8);
      fold(w);
    }
    for (; o < to; o++) fold(b[o]);
  });
  return h ^ (h >> 29);
}

void write_object(void* p, size_t size, uint64_t tag) {
  auto* b = static_cast<unsigned char*>(p);
  memcpy(b, &tag, 8);
  for_each_covered(size, [&](size_t from, size_t to) { fill_range(b, from, to, tag); });
  uint64_t sum = checksum(b, size);
  memcpy(b + size - 8, &sum, 8);
}

// "" when the object is intact; otherwise what is wrong.
std::string verify_object(const void* p, size_t size, uint64_t expected_tag) {
  const auto* b = static_cast<const unsigned char*>(p);
  uint64_t tag;
  memcpy(&tag, b, 8);
  auto where = [&] {
    char buf[96];
    snprintf(buf, sizeof(buf), "object %p of %zu bytes (tag %#llx): ", p, size,
             static_cast<unsigned long long>(expected_tag));
    return std::string(buf);
  };
  if (tag != expected_tag) return where() + "tag overwritten";
  size_t bad = SIZE_MAX;
  for_each_covered(size, [&](size_t from, size_t to) {
    if (bad == SIZE_MAX) bad = check_range(b, from, to, tag);
  });
  if (bad != SIZE_MAX) return where() + "pattern damaged at offset " + std::to_string(bad);
  uint64_t sum;
  memcpy(&sum, b + size - 8, 8);
  if (sum != checksum(b, size)) return where() + "checksum mismatch";
  return "";
}

// Sizes: mostly small, some medium, and ~1% large (256 KiB + 1 .. 4 MiB).
size_t pick_size(std::mt19937_64& rng, bool allow_large = true) {
  unsigned r = static_cast<unsigned>(rng() % 1000);
  if (allow_large && r < 10) return kMaxSmall + 1 + rng() % (4 * kMiB - kMaxSmall);
  if (r < 700) return 16 + rng() % (256 - 16 + 1);
  if (r < 900) return 257 + rng() % (4096 - 257 + 1);
  return 4097 + rng() % (64 * kKiB - 4097 + 1);
}

// ---------------------------------------------------------------------------
// Harness.

struct Entry {
  void* p = nullptr;  // nullptr: the producer has finished
  uint32_t size = 0;
  uint64_t tag = 0;
};

// A thread's mailbox of objects other threads allocated for it to free.
struct Mailbox {
  std::mutex m;
  std::vector<Entry> entries;
};

// A bounded FIFO between producers and one consumer.
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity) : ring_(capacity) {}

  void push(const Entry& e) {
    std::unique_lock<std::mutex> lock(m_);
    not_full_.wait(lock, [&] { return count_ < ring_.size(); });
    ring_[(head_ + count_) % ring_.size()] = e;
    count_++;
    not_empty_.notify_one();
  }

  Entry pop() {
    std::unique_lock<std::mutex> lock(m_);
    not_empty_.wait(lock, [&] { return count_ > 0; });
    Entry e = ring_[head_];
    head_ = (head_ + 1) % ring_.size();
    count_--;
    not_full_.notify_one();
    return e;
  }

 private:
  std::mutex m_;
  std::condition_variable not_full_, not_empty_;
  std::vector<Entry> ring_;
  size_t head_ = 0, count_ = 0;
};

// The first error any thread reports.
class Errors {
 public:
  void report(const std::string& e) {
    std::lock_guard<std::mutex> lock(m_);
    if (first_.empty()) first_ = e;
    failed_.store(true, std::memory_order_relaxed);
  }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  std::string first() {
    std::lock_guard<std::mutex> lock(m_);
    return first_;
  }

 private:
  std::mutex m_;
  std::string first_;
  std::atomic<bool> failed_{false};
};

struct roost_stats snap() {
  return stats_snapshot();
}

// Runs `fn` on a new thread and waits for it (prefixed builds keep roost
// calls off the main thread).
template <class F>
void on_worker(F&& fn) {
  std::thread t(std::forward<F>(fn));
  t.join();
}

// Brings every message home: malloc_trim(0), or roost_trim() in the
// prefixed builds, settles the caller's allocator and every pooled one
// (posts their outboxes, drains their inboxes), repeating while forwarded
// messages still move.
void drain_all_messages() {
#if defined(ROOST_TEST_PREFIXED)
  roost_trim();
#else
  malloc_trim(0);
#endif
}

// A slab holds at most this many objects (64 KiB of 16-byte ones).
constexpr uint64_t kMaxObjectsPerSlab = 64 * kKiB / 16;

// After every thread of a test has been joined: the counters balance once
// everything is drained.  At least `min_remote_frees` remote frees (objects
// known to have been freed by a thread whose allocator does not own them)
// happened since `before`, and as many messages have come home; but for
// the objects of slabs adopted meanwhile (a thread that frees an exited
// thread's objects takes over their slab, and frees the slab's objects as
// its own: at most a slab's worth each).
void expect_messages_balance(const struct roost_stats& before, uint64_t min_remote_frees,
                             const char* what) {
  drain_all_messages();
  struct roost_stats after = snap();
  const std::string counters = describe_messages(after);
  ::testing::Test::RecordProperty(std::string(what) + "_counters", counters);
  uint64_t remote = after.remote_frees - before.remote_frees;
  uint64_t sent = after.messages_sent - before.messages_sent;
  uint64_t received = after.messages_received - before.messages_received;
  uint64_t forwarded = after.messages_forwarded - before.messages_forwarded;
  uint64_t batches = after.batches_sent - before.batches_sent;
  // Under full offload a thread leaves such frees on its free ring instead,
  // and the service thread carries them out.
  uint64_t handed = after.offload_ring_frees - before.offload_ring_frees;
  uint64_t adopted = after.slabs_adopted - before.slabs_adopted;
  ::testing::Test::RecordProperty(std::string(what) + "_slabs_adopted", std::to_string(adopted));
  // Objects of adopted slabs freed as local frees.
  uint64_t local = std::min(min_remote_frees, adopted * kMaxObjectsPerSlab);
  // Foreign reuse (ROOST_FOREIGN_REUSE): an object a thread kept and
  // handed out again may be freed next by its owner's thread (a local free
  // the program made across threads): at most one per object reused.
  uint64_t kept = after.foreign_kept - before.foreign_kept;
  uint64_t kept_sent_home = after.foreign_sent_home - before.foreign_sent_home;
  uint64_t reused = kept - kept_sent_home;
  EXPECT_GE(remote + handed + local + reused, min_remote_frees) << what << ": " << counters;
  // Every message sent was received: nothing is left in flight once every
  // inbox has been drained (cumulative counters, since process start), in
  // objects and in batch messages.
  EXPECT_EQ(after.messages_sent, after.messages_received)
      << what << ", after draining: " << counters;
  EXPECT_EQ(after.slab_batches_sent, after.slab_batches_received)
      << what << ", after draining: " << counters;
  uint64_t slab_batches = after.slab_batches_sent - before.slab_batches_sent;
  // A batch holds one object or more; without BatchIt exactly one.
  EXPECT_LE(slab_batches, sent) << what << ": " << counters;
  if (!batchit_on()) {
    EXPECT_EQ(slab_batches, sent) << what << ": " << counters;
    EXPECT_EQ(after.batchit_evictions, before.batchit_evictions) << what << ": " << counters;
  }
  // Each remote free is a message, each hop of a forwarded message another;
  // but for those kept for reuse, which went in no message unless they went
  // home unused.
  EXPECT_EQ(sent, remote - kept + kept_sent_home + forwarded) << what << ": " << counters;
  // An object reused is a remote free no message carried, and its next
  // free may be its owner's own (above): two per object reused at most.
  EXPECT_GE(received + handed + local + 2 * reused, min_remote_frees) << what << ": " << counters;
  if (min_remote_frees > local && handed == 0) {
    EXPECT_GE(batches, 1u) << what;
    EXPECT_LE(batches, sent) << what << ": " << counters;
    EXPECT_GE(after.inbox_drains - before.inbox_drains, 1u) << what;
  }
}

// ---------------------------------------------------------------------------
// Producer-consumer.

struct PcResult {
  uint64_t produced = 0;
  uint64_t consumed = 0;
  uint64_t consumed_small = 0;  // freed by consumers, small (slab) objects
  uint64_t consumed_large = 0;
  std::string error;
};

constexpr unsigned kProducers = 4;
constexpr unsigned kConsumers = 4;

// kProducers threads allocate objects (for `duration`, but at least
// `min_per_producer` and at most `max_per_producer` each) and push them to
// random consumers' bounded queues; kConsumers threads check and free them.
//
// Which pooled allocator each thread gets is made deterministic, so that
// repeated runs behave alike: the producers bind first, one after the other,
// then the consumers; the producers exit (and release their allocators)
// before the consumers.  The pool hands out the most recently released
// allocator first, so each run's producers get the previous run's consumers'
// allocators and its consumers the previous producers' ones (whose inboxes
// still hold the frees that arrived after their threads exited).
PcResult run_producer_consumer(milliseconds duration, uint64_t seed,
                               uint64_t max_per_producer = UINT64_MAX, size_t queue_capacity = 256,
                               uint64_t min_per_producer = 0) {
  std::vector<std::unique_ptr<BoundedQueue>> queues;
  for (unsigned c = 0; c < kConsumers; c++)
    queues.push_back(std::make_unique<BoundedQueue>(queue_capacity));
  Errors errors;
  std::atomic<uint64_t> produced{0}, consumed{0}, consumed_small{0}, consumed_large{0};
  std::atomic<unsigned> bind_turn{0};
  std::atomic<bool> producers_gone{false};
  auto bind_in_turn = [&](unsigned turn) {
    while (bind_turn.load(std::memory_order_acquire) != turn) std::this_thread::yield();
    void* p = t_malloc(16);  // binds this thread's allocator
    escape(p);
    t_free(p);
    bind_turn.store(turn + 1, std::memory_order_release);
  };
  const auto deadline = Clock::now() + duration;
  std::vector<std::thread> threads;
  threads.reserve(kProducers + kConsumers);
  for (unsigned p = 0; p < kProducers; p++) {
    threads.emplace_back([&, p] {
      bind_in_turn(p);
      std::mt19937_64 rng(seed * 1000003 + p);
      uint64_t seq = 0;
      while (!errors.failed() && (seq < min_per_producer || Clock::now() < deadline) &&
             seq < max_per_producer) {
        for (int i = 0; i < 64 && seq < max_per_producer; i++) {
          size_t size = pick_size(rng);
          void* obj = t_malloc(size);
          if (obj == nullptr) {
            errors.report("producer: allocation of " + std::to_string(size) + " bytes failed");
            break;
          }
          uint64_t tag = make_tag(p, seq++);
          write_object(obj, size, tag);
          queues[rng() % kConsumers]->push(Entry{obj, static_cast<uint32_t>(size), tag});
        }
      }
      produced += seq;
      for (auto& q : queues) q->push(Entry{});
    });
  }
  for (unsigned c = 0; c < kConsumers; c++) {
    threads.emplace_back([&, c] {
      bind_in_turn(kProducers + c);
      uint64_t last_seq[kProducers];
      for (auto& s : last_seq) s = UINT64_MAX;
      uint64_t n = 0, small = 0, large = 0;
      for (unsigned stops = 0; stops < kProducers;) {
        Entry e = queues[c]->pop();
        if (e.p == nullptr) {
          stops++;
          continue;
        }
        if (!errors.failed()) {
          std::string err = verify_object(e.p, e.size, e.tag);
          unsigned producer = static_cast<unsigned>(e.tag >> 48);
          uint64_t seq = e.tag & ((uint64_t{1} << 48) - 1);
          if (err.empty() && last_seq[producer] != UINT64_MAX && seq <= last_seq[producer])
            err = "consumer saw producer " + std::to_string(producer) + "'s seq " +
                  std::to_string(seq) + " after " + std::to_string(last_seq[producer]);
          last_seq[producer] = seq;
          if (!err.empty()) {
            errors.report("consumer " + std::to_string(c) + ": " + err);
            continue;  // leaked: the object is not trustworthy
          }
        }
        t_free(e.p);
        n++;
        (e.size <= kMaxSmall ? small : large)++;
      }
      consumed += n;
      consumed_small += small;
      consumed_large += large;
      while (!producers_gone.load(std::memory_order_acquire)) std::this_thread::yield();
    });
  }
  for (unsigned p = 0; p < kProducers; p++) threads[p].join();
  producers_gone.store(true, std::memory_order_release);
  for (unsigned c = 0; c < kConsumers; c++) threads[kProducers + c].join();
  PcResult r;
  r.produced = produced;
  r.consumed = consumed;
  r.consumed_small = consumed_small;
  r.consumed_large = consumed_large;
  r.error = errors.first();
  return r;
}

milliseconds stress_duration() { return milliseconds(kSanitized ? 1000 : 1500); }

void expect_bytes_in_use_back(const struct roost_stats& before, const struct roost_stats& after,
                              const char* what) {
  // The prefixed build has no other users: exact.  The override builds
  // also serve the test harness (gtest, libstdc++, glibc's thread
  // bookkeeping) between the two snapshots: a few KiB.
  int64_t diff =
      static_cast<int64_t>(after.bytes_in_use) - static_cast<int64_t>(before.bytes_in_use);
  if (kPrefixed)
    EXPECT_EQ(diff, 0) << what << ": bytes_in_use " << before.bytes_in_use << " -> "
                       << after.bytes_in_use;
  else
    EXPECT_LE(std::abs(diff), static_cast<int64_t>(16 * kKiB))
        << what << ": bytes_in_use " << before.bytes_in_use << " -> " << after.bytes_in_use;
}

bool in_repeat_child() {
  const char* e = getenv("ROOSTTEST_REPEAT_CHILD");
  return e != nullptr && strcmp(e, "1") == 0;
}

}  // namespace

// ---------------------------------------------------------------------------

TEST(RemoteFree, ProducerConsumerChecksumsAndCountersBalance) {
  REQUIRE_ROOST();
  if (in_repeat_child()) GTEST_SKIP() << "not in the repeat child";
  struct roost_stats before = snap();
  // At least 1024 objects a producer, however slow the machine (a
  // sanitizer tree on a loaded CI runner made under 1000 in the second):
  // the first 4096 sizes are fixed by the seed, about 99% of them small.
  PcResult r = run_producer_consumer(stress_duration(), 1, UINT64_MAX, 256, 1024);
  struct roost_stats after = snap();
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.consumed, r.produced);
  EXPECT_GT(r.consumed_small, 1000u);
  EXPECT_GT(r.consumed_large, 0u);
  RecordProperty("objects", std::to_string(r.consumed));
  RecordProperty("large_objects", std::to_string(r.consumed_large));
  expect_bytes_in_use_back(before, after, "producer-consumer");
  // Every small object a consumer freed was a remote free: the consumer
  // threads never allocated them.  (Large objects are freed directly.)
  expect_messages_balance(before, r.consumed_small, "producer-consumer");
  // With BatchIt the consumers' frees of one slab travel together: fewer
  // batch messages than objects (a producer's consecutive objects of a
  // class share a slab; with sizes spread over dozens of classes and four
  // consumers, batches are small here: msgpass shows them at their best).
  if (batchit_on()) {
    struct roost_stats drained = snap();
    uint64_t objects = drained.messages_sent - before.messages_sent;
    uint64_t batches = drained.slab_batches_sent - before.slab_batches_sent;
    RecordProperty("objects_per_batch",
                   std::to_string(static_cast<double>(objects) / static_cast<double>(batches)));
    EXPECT_LT(batches, objects) << describe_messages(drained);
  }
}

// Resets this process's peak RSS (VmHWM) to its current RSS, so that each
// run's peak is measured on its own (Linux: "5" to /proc/self/clear_refs).
// False where the kernel does not offer it.
bool reset_peak_rss() {
  FILE* f = fopen("/proc/self/clear_refs", "w");
  if (f == nullptr) return false;
  bool ok = fputs("5", f) >= 0;
  ok = fclose(f) == 0 && ok;
  return ok;
}

// The child of the next test: ten producer-consumer runs in a fresh
// process, each making the same number of objects.  Memory must not grow
// from run to run:
//   - each run's own peak RSS (VmHWM reset before it): the highest of the
//     last five runs is within 1.3x of the highest of the first five (two
//     maxima over the same number of runs, so a chaotic workload's spread
//     alone does not fail it; a leak or creeping fragmentation does);
//   - the RSS at rest after each run, once every message is delivered and
//     released memory purged (malloc_trim): the last is within 1.3x of the
//     highest of runs 2 to 5.
// Under a sanitizer roost's own figures stand in for RSS: during each run
// the peak of the bytes it holds unpurged less those released and waiting
// for their purge (bytes_committed - bytes_dirty, sampled every 2 ms by a
// watcher thread: when the purge comes, the program's next call or the
// service thread, is a matter of timing, not of growth), and at rest
// bytes_committed.
TEST(RemoteFreeRepeatChild, TenRunsPeakRssLevelsOff) {
  if (!in_repeat_child())
    GTEST_SKIP() << "runs in the child of RemoteFree.RepeatedRunsDoNotGrowPeakRss";
  int runs = 10;  // ROOSTTEST_REPEAT_RUNS: more, to watch the trend
  if (const char* e = getenv("ROOSTTEST_REPEAT_RUNS")) runs = std::max(10, atoi(e));
  printf("before: VmRSS %ld kB\n", status_kb("VmRSS"));
  bool per_run = !kSanitized && reset_peak_rss();
  std::vector<long> peak, rest;
  for (int run = 0; run < runs; run++) {
    if (per_run) reset_peak_rss();
    std::atomic<bool> done{false};
    long held_peak = 0;
    std::thread watcher;
    if (kSanitized) {
      watcher = std::thread([&] {
        while (!done.load()) {
          struct roost_stats s = snap();
          held_peak =
              std::max(held_peak, static_cast<long>((s.bytes_committed - s.bytes_dirty) >> 10));
          std::this_thread::sleep_for(milliseconds(2));
        }
      });
    }
    // The same amount of work in every run, whatever the machine's load.
    PcResult r = run_producer_consumer(milliseconds(5000), 100 + run, kSanitized ? 1500 : 6000);
    done.store(true);
    if (watcher.joinable()) watcher.join();
    ASSERT_EQ(r.error, "") << "run " << run;
    ASSERT_EQ(r.consumed, r.produced) << "run " << run;
    struct roost_stats st = snap();
    long hwm = status_kb("VmHWM");
    drain_all_messages();
    struct roost_stats trimmed = snap();
    long rss = status_kb("VmRSS");
    peak.push_back(kSanitized ? held_peak : hwm);
    rest.push_back(kSanitized ? static_cast<long>(trimmed.bytes_committed >> 10) : rss);
    printf(
        "run %d: %llu objects, VmHWM %ld kB; roost: held at most %ld kB, then committed %llu kB "
        "(dirty %llu kB), in use %llu kB, slabs %llu; after malloc_trim: VmRSS %ld kB, committed "
        "%llu kB, slabs %llu\n",
        run + 1, static_cast<unsigned long long>(r.consumed), hwm, held_peak,
        static_cast<unsigned long long>(st.bytes_committed >> 10),
        static_cast<unsigned long long>(st.bytes_dirty >> 10),
        static_cast<unsigned long long>(st.bytes_in_use >> 10),
        static_cast<unsigned long long>(st.slabs), rss,
        static_cast<unsigned long long>(trimmed.bytes_committed >> 10),
        static_cast<unsigned long long>(trimmed.slabs));
  }
  fflush(stdout);
  const char* what =
      kSanitized ? "peak of roost's bytes_committed - bytes_dirty" : "peak RSS (VmHWM)";
  size_t half = peak.size() / 2;
  // The middle run of each half: one run's peak rises with the schedule (a
  // consumer kept off the CPU while its producers run on, as on a busy
  // machine), where growth raises most runs of the second half.
  auto middle = [](std::vector<long> v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  long first = middle(std::vector<long>(peak.begin(), peak.begin() + half));
  long last = middle(std::vector<long>(peak.begin() + half, peak.end()));
  // The figure measures something.
  ASSERT_GT(std::max(first, last), 0);
  // The watcher's peaks, and VmHWM reset before each run, are one sample per
  // run; only a VmHWM that cannot be reset is cumulative.
  if (kSanitized || per_run) {
    // 1.3x, plus 8 MiB of slack for the small absolute numbers involved.
    EXPECT_LE(last, first * 13 / 10 + 8 * 1024)
        << what << " per run: the middle of runs " << half + 1 << ".." << peak.size() << " is "
        << last << " kB, of runs 1.." << half << " " << first << " kB";
  } else {
    // Cumulative: the peak after all runs against the peak after half.
    EXPECT_LE(peak.back(), peak[half - 1] * 13 / 10 + 8 * 1024)
        << what << " grew from " << peak[half - 1] << " kB after run " << half << " to "
        << peak.back() << " kB after run " << peak.size();
  }
  long rest_early = *std::max_element(rest.begin() + 1, rest.begin() + half);
  EXPECT_LE(rest.back(), rest_early * 13 / 10 + 8 * 1024)
      << "at rest after malloc_trim: " << rest.back() << " kB after run " << rest.size()
      << ", at most " << rest_early << " kB after runs 2.." << half;
}

TEST(RemoteFree, RepeatedRunsDoNotGrowPeakRss) {
  REQUIRE_ROOST();
  if (in_repeat_child()) GTEST_SKIP() << "not in the repeat child";
  if (kTsan)
    GTEST_SKIP() << "not under ThreadSanitizer: its shadow and sync-object memory grow with "
                    "every address and thread touched, so neither RSS nor the run time "
                    "(ten runs) fits; ProducerConsumer gives the race coverage";
  std::string out;
  int status = run_case_in_fresh_process("RemoteFreeRepeatChild.TenRunsPeakRssLevelsOff",
                                         {"ROOSTTEST_REPEAT_CHILD=1"}, &out);
  ASSERT_NE(status, -1) << "could not start the child";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "child "
      << (WIFEXITED(status) ? "exited with " + std::to_string(WEXITSTATUS(status))
                            : "killed by signal " + std::to_string(WTERMSIG(status)))
      << "; output:\n"
      << out;
  EXPECT_NE(out.find("[  PASSED  ] 1 test"), std::string::npos) << out;
  RecordProperty("child_output", out.substr(0, 2000));
}

// ---------------------------------------------------------------------------
// Forwarding: 48 threads (more allocators than 2^kBucketBits with the k1
// library) exchange objects through per-thread mailboxes in rounds.

TEST(RemoteFree, ManyThreadsExchangeObjectsAndAllComeHome) {
  REQUIRE_ROOST();
  if (in_repeat_child()) GTEST_SKIP() << "not in the repeat child";
  constexpr unsigned kThreads = 48;
  constexpr unsigned kRounds = kTsan ? 6 : 12;
  constexpr unsigned kPerRound = 300;
  std::vector<Mailbox> mailboxes(kThreads);
  for (auto& mb : mailboxes) mb.entries.reserve(kPerRound * 4);
  Errors errors;
  std::atomic<uint64_t> freed_remote{0};
  std::barrier<> sync(kThreads);

  struct roost_stats before = snap();
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (unsigned t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(77 + t);
      std::vector<std::vector<Entry>> outgoing(kThreads);
      std::vector<Entry> incoming;
      uint64_t seq = 0, freed = 0;
      for (unsigned round = 0; round < kRounds; round++) {
        for (unsigned i = 0; i < kPerRound && !errors.failed(); i++) {
          size_t size = pick_size(rng, false);
          if (size > 4096) size = 16 + size % 4096;  // keep it small: many messages
          void* p = t_malloc(size);
          if (p == nullptr) {
            errors.report("allocation failed");
            break;
          }
          uint64_t tag = make_tag(t, seq++);
          write_object(p, size, tag);
          unsigned dest = static_cast<unsigned>(rng() % (kThreads - 1));
          if (dest >= t) dest++;
          outgoing[dest].push_back(Entry{p, static_cast<uint32_t>(size), tag});
        }
        for (unsigned d = 0; d < kThreads; d++) {
          if (outgoing[d].empty()) continue;
          std::lock_guard<std::mutex> lock(mailboxes[d].m);
          mailboxes[d].entries.insert(mailboxes[d].entries.end(), outgoing[d].begin(),
                                      outgoing[d].end());
          outgoing[d].clear();
        }
        sync.arrive_and_wait();  // every object of this round is posted
        {
          std::lock_guard<std::mutex> lock(mailboxes[t].m);
          incoming.swap(mailboxes[t].entries);
        }
        for (const Entry& e : incoming) {
          std::string err = verify_object(e.p, e.size, e.tag);
          if (!err.empty()) {
            errors.report("thread " + std::to_string(t) + ": " + err);
            continue;
          }
          t_free(e.p);
          freed++;
        }
        incoming.clear();
        sync.arrive_and_wait();  // every mailbox is empty
      }
      freed_remote += freed;
    });
  }
  for (auto& th : threads) th.join();
  struct roost_stats after = snap();
  ASSERT_EQ(errors.first(), "");
  EXPECT_EQ(freed_remote.load(), uint64_t{kThreads} * kRounds * kPerRound);
  expect_bytes_in_use_back(before, after, "exchange");
  if (kBucketBits == 1) {
    // 48 allocators, 2 buckets: most batches reach an allocator that is not
    // the owner of all their objects, which forwards them.
    EXPECT_GT(after.messages_forwarded - before.messages_forwarded, 0u) << describe_messages(after);
  }
  expect_messages_balance(before, freed_remote.load(), "exchange");
}

// More threads than cores exchange objects of one class in rounds, each
// freeing what it got in the last round between its own allocations (so
// that, with foreign reuse on, it keeps other threads' objects and hands
// them out again), and leave one group after another while the others go
// on: a thread may hand out, keep or send home objects whose owner is
// receiving, parked or gone (the remote_free.prefixed.foreign_reuse run
// switches reuse on; under ThreadSanitizer too).  Whatever the schedule,
// every object comes home and the counters balance.
TEST(RemoteFree, ThreadsLeaveInGroupsWhileOthersMayHoldTheirObjects) {
  REQUIRE_ROOST();
  if (in_repeat_child()) GTEST_SKIP() << "not in the repeat child";
  const unsigned threads_n = std::max(8u, 3 * std::thread::hardware_concurrency());
  constexpr unsigned kRounds = 5;  // thread t's last round: t % kRounds
  constexpr unsigned kPerRound = kTsan ? 300 : 1500;
  constexpr size_t kSize = 256;
  std::vector<Mailbox> mailboxes(threads_n);
  Errors errors;
  std::atomic<uint64_t> freed_remote{0};
  std::barrier<> sync(threads_n);
  auto last_round = [](unsigned t) { return t % kRounds; };

  struct roost_stats before = snap();
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < threads_n; t++) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(991 + t);
      uint64_t seq = 0, freed = 0;
      std::vector<Entry> incoming;
      auto free_one = [&](const Entry& e) {
        std::string err = verify_object(e.p, e.size, e.tag);
        if (!err.empty()) errors.report("thread " + std::to_string(t) + ": " + err);
        t_free(e.p);
        freed++;
      };
      // Every thread holds an allocator of its own before any leaves: a
      // thread that started later could take a leaver's from the pool, and
      // free its objects as local ones.
      t_free(t_malloc(kSize));
      sync.arrive_and_wait();
      for (unsigned round = 0; round <= last_round(t); round++) {
        {
          // What the last round sent here (the barrier below ended it).
          std::lock_guard<std::mutex> lock(mailboxes[t].m);
          incoming.swap(mailboxes[t].entries);
        }
        // Receivers: threads that go on to the next round, but this one.
        std::vector<unsigned> next_round;
        for (unsigned d = 0; d < threads_n; d++) {
          if (d != t && last_round(d) > round) next_round.push_back(d);
        }
        size_t taken = 0;
        for (unsigned i = 0; i < kPerRound && !next_round.empty() && !errors.failed(); i++) {
          void* p = t_malloc(kSize);
          if (p == nullptr) {
            errors.report("allocation failed");
            break;
          }
          uint64_t tag = make_tag(t, seq++);
          write_object(p, kSize, tag);
          unsigned d = next_round[rng() % next_round.size()];
          {
            std::lock_guard<std::mutex> lock(mailboxes[d].m);
            mailboxes[d].entries.push_back(Entry{p, static_cast<uint32_t>(kSize), tag});
          }
          if (taken < incoming.size()) free_one(incoming[taken++]);
        }
        while (taken < incoming.size()) free_one(incoming[taken++]);
        incoming.clear();
        if (round == last_round(t))
          sync.arrive_and_drop();  // leaves: the others go on without it
        else
          sync.arrive_and_wait();  // this round's objects are all sent and freed
      }
      freed_remote += freed;
    });
  }
  for (auto& th : threads) th.join();
  for (auto& mb : mailboxes) std::vector<Entry>().swap(mb.entries);  // (their buffers)
  struct roost_stats after = snap();
  ASSERT_EQ(errors.first(), "");
  expect_bytes_in_use_back(before, after, "leave in groups");
  expect_messages_balance(before, freed_remote.load(), "leave in groups");
}

// ---------------------------------------------------------------------------
// Thread churn: 20000 short-lived threads (4000 under TSan), at most 4
// alive at a time, each allocating a few objects and freeing objects earlier
// threads left behind (whose owners have exited: their allocators sit in the
// pool or serve a later thread).

TEST(RemoteFree, ThreadChurnReusesAllocatorsAndMemory) {
  REQUIRE_ROOST();
  if (in_repeat_child()) GTEST_SKIP() << "not in the repeat child";
  // ThreadSanitizer makes a thread cost over a millisecond: fewer there.
  unsigned total = kTsan ? 4000 : 20000;
  if (const char* e = getenv("ROOSTTEST_CHURN_THREADS")) total = static_cast<unsigned>(atoi(e));
  constexpr unsigned kAlive = 4;
  constexpr unsigned kSlots = 256;
  std::mutex slots_m;
  std::vector<Entry> slots(kSlots);
  Errors errors;
  std::atomic<uint64_t> freed_elsewhere{0};

  const long rss_before = status_kb("VmRSS");
  struct roost_stats before = snap();
  const long committed_before = static_cast<long>(before.bytes_committed >> 10);
  const auto start = Clock::now();
  auto thread_main = [&](unsigned index) {
    std::mt19937_64 rng(index * 0x9E3779B97F4A7C15ull + 5);
    Entry mine[4];
    for (unsigned k = 0; k < 4; k++) {
      size_t size = rng() % 16 == 0 ? 16 * kKiB + rng() % (48 * kKiB) : 16 + rng() % 2048;
      void* p = t_malloc(size);
      if (p == nullptr) return errors.report("allocation failed");
      uint64_t tag = make_tag(k, index);
      write_object(p, size, tag);
      mine[k] = Entry{p, static_cast<uint32_t>(size), tag};
    }
    t_free(mine[0].p);
    uint64_t freed = 0;
    for (unsigned k = 1; k < 4; k++) {
      Entry old;
      {
        std::lock_guard<std::mutex> lock(slots_m);
        Entry& slot = slots[rng() % kSlots];
        old = slot;
        slot = mine[k];
      }
      if (old.p == nullptr) continue;
      std::string err = verify_object(old.p, old.size, old.tag);
      if (!err.empty()) {
        errors.report("thread " + std::to_string(index) + ": " + err);
        continue;
      }
      t_free(old.p);  // an earlier thread allocated it
      freed++;
    }
    freed_elsewhere += freed;
  };

  std::deque<std::thread> alive;
  for (unsigned i = 0; i < total && !errors.failed(); i++) {
    if (alive.size() == kAlive) {
      alive.front().join();
      alive.pop_front();
    }
    alive.emplace_back(thread_main, i);
  }
  for (auto& t : alive) t.join();
  alive.clear();
  // The leftovers, freed by one more thread.
  on_worker([&] {
    for (Entry& e : slots) {
      if (e.p == nullptr) continue;
      std::string err = verify_object(e.p, e.size, e.tag);
      if (!err.empty()) {
        errors.report("last thread: " + err);
        continue;
      }
      t_free(e.p);
      freed_elsewhere++;
      e = Entry{};
    }
  });
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  struct roost_stats after = snap();
  const long rss_after = status_kb("VmRSS");
  const long committed_after = static_cast<long>(after.bytes_committed >> 10);
  RecordProperty("threads", std::to_string(total));
  RecordProperty("seconds", std::to_string(seconds));
  RecordProperty("rss_kb_before", std::to_string(rss_before));
  RecordProperty("rss_kb_after", std::to_string(rss_after));
  RecordProperty("committed_kb_before", std::to_string(committed_before));
  RecordProperty("committed_kb_after", std::to_string(committed_after));
  RecordProperty("allocators", std::to_string(after.allocators));
  RecordProperty("objects_freed_by_another_thread", std::to_string(freed_elsewhere.load()));
  ASSERT_EQ(errors.first(), "");
  expect_bytes_in_use_back(before, after, "churn");
  // Allocators of exited threads are reused: a handful exist however many
  // threads ran.
  EXPECT_LT(after.allocators - before.allocators, 16u)
      << "allocators " << before.allocators << " -> " << after.allocators;
  if (before.allocators < 48) {
    EXPECT_LT(after.allocators, 64u);
  }
  if (!kSanitized) {
    EXPECT_LT(rss_after, rss_before + 64 * 1024)
        << "VmRSS " << rss_before << " kB -> " << rss_after << " kB after " << total << " threads";
  } else {
    EXPECT_LT(committed_after, committed_before + 64 * 1024)
        << "bytes_committed " << committed_before << " kB -> " << committed_after << " kB after "
        << total << " threads (VmRSS " << rss_before << " kB -> " << rss_after << " kB)";
  }
  // A later thread may have been given the allocator of the thread that
  // allocated what it frees (then the free is local): no lower bound on the
  // remote frees but one.
  EXPECT_GT(after.remote_frees - before.remote_frees, 0u) << describe_messages(after);
  expect_messages_balance(before, 0, "churn");
}

// An owner thread allocates `count` objects of `size` bytes and stays alive
// (an exited owner's allocator would be recycled by the freer, making its
// frees local) while a second thread frees them all and then, before it
// exits, calls check(before, during): the counters from just before the
// frees and from just after them.  Returns `before`.
template <typename Check>
struct roost_stats free_all_from_a_second_thread(size_t count, size_t size, Check check) {
  std::vector<void*> objects(count);
  std::atomic<int> stage{0};  // 1: objects allocated; 2: freer done
  std::thread owner([&] {
    for (void*& p : objects) p = t_malloc(size);
    stage.store(1);
    while (stage.load() != 2) std::this_thread::yield();
  });
  while (stage.load() != 1) std::this_thread::yield();
  struct roost_stats before = snap();
  std::thread freer([&] {
    for (void* p : objects) t_free(p);
    check(before, snap());
  });
  freer.join();
  stage.store(2);
  owner.join();
  return before;
}

// ROOST_OUTBOX_BYTES=0: no room at all, so every remote free is posted at
// once, BatchIt's cached object included (its bytes count against the
// room).  Runs as remote_free.prefixed_outbox_zero (and .batchit_off);
// skipped elsewhere.
TEST(RemoteFree, AZeroOutboxPostsEveryFreeAtOnce) {
  SKIP_UNDER_OFFLOAD();  // the outbox's own mechanism
  const char* e = getenv("ROOST_OUTBOX_BYTES");
  if (e == nullptr || strcmp(e, "0") != 0) GTEST_SKIP() << "needs ROOST_OUTBOX_BYTES=0";
  constexpr size_t kObjects = 2000, kSize = 48;
  struct roost_stats before = free_all_from_a_second_thread(
      kObjects, kSize, [&](const struct roost_stats& before, const struct roost_stats& during) {
        // Posted while the freer lives, not at its exit.
        EXPECT_GE(during.batches_sent - before.batches_sent, kObjects) << describe_messages(during);
        EXPECT_GE(during.slab_batches_sent - before.slab_batches_sent, kObjects)
            << describe_messages(during);
      });
  expect_messages_balance(before, kObjects, "zero outbox");
}

// ROOST_OUTBOX_BYTES at 2^63 or more (a signed room would read it as negative):
// the outbox never fills, so a thread's remote frees are posted only when it
// settles (at exit here), not one by one.  Runs as
// remote_free.prefixed_outbox_unbounded; skipped elsewhere.
TEST(RemoteFree, AnOutboxLimitBeyond2To63NeverFills) {
  SKIP_UNDER_OFFLOAD();  // the outbox's own mechanism
  const char* e = getenv("ROOST_OUTBOX_BYTES");
  if (e == nullptr || strtoull(e, nullptr, 10) < (uint64_t{1} << 63))
    GTEST_SKIP() << "needs ROOST_OUTBOX_BYTES >= 2^63";
  constexpr size_t kObjects = 20000, kSize = 64;  // 1.25 MiB: twenty default outboxes
  struct roost_stats before = free_all_from_a_second_thread(
      kObjects, kSize, [&](const struct roost_stats& before, const struct roost_stats& during) {
        EXPECT_GE(during.remote_frees - before.remote_frees, kObjects) << describe_messages(during);
        EXPECT_EQ(during.batches_sent, before.batches_sent) << describe_messages(during);
      });
  struct roost_stats after = snap();
  EXPECT_GT(after.batches_sent, before.batches_sent) << describe_messages(after);  // at exit
}

// ---------------------------------------------------------------------------
// A sleeping owner's mail: the service sorts mail that waited a purge delay
// in the inbox of a thread that did not receive it, purges the slabs it
// finds whole there, and hands them back to start over.

namespace {

// Is the service thread allowed to run (ROOST_SERVICE, default on)?
bool service_on() { return env_option_on("ROOST_SERVICE", true); }

struct Tagged {
  void* p;
  uint32_t size;
  uint64_t tag;
};

std::vector<Tagged> allocate_tagged(size_t count, uint64_t producer, std::mt19937_64& rng) {
  std::vector<Tagged> v(count);
  for (size_t i = 0; i < count; i++) {
    size_t size = 16 + rng() % (1024 - 16 + 1);
    void* p = t_malloc(size);
    if (p == nullptr) {
      v.resize(i);
      break;
    }
    uint64_t tag = make_tag(producer, i);
    write_object(p, size, tag);
    v[i] = Tagged{p, static_cast<uint32_t>(size), tag};
  }
  return v;
}

}  // namespace

// The owner allocates, keeps one object in 64 (their slabs are not whole),
// and sleeps while a second thread frees the rest: the service purges the
// whole slabs (service_bytes_collected) without disturbing a kept object,
// and the owner, waking, allocates from the slabs it gets back.
TEST(RemoteFree, ASleepingOwnersWholeSlabsGoBackWhileItSleeps) {
  REQUIRE_ROOST();
  SKIP_UNDER_OFFLOAD();  // its objects would be the service allocator's
  if (in_repeat_child()) GTEST_SKIP() << "not in the repeat child";
  const size_t kObjects = kSanitized ? 20000 : 60000;
  struct roost_stats before = snap();
  std::string error;
  uint64_t collected = 0;
  size_t freed_count = 0;
  on_worker([&] {
    std::mt19937_64 rng(14);
    std::vector<Tagged> objects = allocate_tagged(kObjects, 1, rng);
    ASSERT_EQ(objects.size(), kObjects);
    std::vector<Tagged> kept, freed;
    for (size_t i = 0; i < objects.size(); i++) (i % 64 == 0 ? kept : freed).push_back(objects[i]);
    freed_count = freed.size();
    uint64_t collected_before = snap().service_bytes_collected;
    std::thread freer([&] {
      for (const Tagged& o : freed) t_free(o.p);
    });
    freer.join();
    // Sleep without calling the allocator until the service has collected
    // most of it (it looks a purge delay after the post, sorts a delay later,
    // and counts each slab as it purges it, so the first change is only a
    // start).
    const uint64_t enough = kObjects * 16;
    for (int i = 0; i < 2000 && service_on(); i++) {
      std::this_thread::sleep_for(milliseconds(5));
      if (snap().service_bytes_collected - collected_before > enough) break;
    }
    collected = snap().service_bytes_collected - collected_before;
    for (const Tagged& o : kept) {
      std::string e = verify_object(o.p, o.size, o.tag);
      if (!e.empty() && error.empty()) error = "kept " + e;
    }
    // Awake: the whole slabs restart under the allocations that follow.
    std::vector<Tagged> again = allocate_tagged(kObjects, 2, rng);
    EXPECT_EQ(again.size(), kObjects);
    for (const Tagged& o : again) {
      std::string e = verify_object(o.p, o.size, o.tag);
      if (!e.empty() && error.empty()) error = "reallocated " + e;
      t_free(o.p);
    }
    for (const Tagged& o : kept) t_free(o.p);
  });
  ASSERT_EQ(error, "");
  RecordProperty("bytes_collected", std::to_string(collected));
  if (service_on())
    // Most of the 30 MiB freed lies in slabs with no kept object.
    EXPECT_GT(collected, uint64_t{kObjects} * 16) << describe_messages(snap());
  else
    EXPECT_EQ(collected, 0u);
  expect_bytes_in_use_back(before, snap(), "sleeping owner");
  expect_messages_balance(before, freed_count, "sleeping owner");
}

// Owners that allocate in bursts and nap between them (some naps longer
// than two purge delays, so the service sorts their mail while they sleep,
// others short, so it meets them receiving), while freer threads check and
// free their objects: every object arrives intact and all mail comes home.
TEST(RemoteFree, OwnersThatNapWhileOthersFreeLoseNothing) {
  REQUIRE_ROOST();
  if (in_repeat_child()) GTEST_SKIP() << "not in the repeat child";
  constexpr int kOwners = 2, kFreers = 3;
  struct roost_stats before = snap();
  BoundedQueue queue(4096);
  Errors errors;
  std::atomic<uint64_t> produced{0}, consumed{0};
  auto deadline = Clock::now() + stress_duration() * 2;
  std::vector<std::thread> threads;
  for (int f = 0; f < kFreers; f++)
    threads.emplace_back([&] {
      for (;;) {
        Entry e = queue.pop();
        if (e.p == nullptr) return;
        std::string err = verify_object(e.p, e.size, e.tag);
        if (!err.empty()) errors.report(err);
        t_free(e.p);
        consumed.fetch_add(1, std::memory_order_relaxed);
      }
    });
  std::vector<std::thread> owners;
  for (int o = 0; o < kOwners; o++)
    owners.emplace_back([&, o] {
      std::mt19937_64 rng(100 + o);
      std::deque<Tagged> own;  // objects this owner frees itself, later
      uint64_t seq = 0;
      for (unsigned burst = 0; Clock::now() < deadline && !errors.failed(); burst++) {
        std::vector<Tagged> objects =
            allocate_tagged(512, static_cast<uint64_t>(o + 1) << 8 | (burst & 0xff), rng);
        for (Tagged& t : objects) {
          seq++;
          if (seq % 16 == 0) {
            own.push_back(t);
            continue;
          }
          queue.push(Entry{t.p, t.size, t.tag});
          produced.fetch_add(1, std::memory_order_relaxed);
        }
        while (own.size() > 2048) {
          const Tagged& t = own.front();
          std::string err = verify_object(t.p, t.size, t.tag);
          if (!err.empty()) errors.report("own " + err);
          t_free(t.p);
          own.pop_front();
        }
        std::this_thread::sleep_for(milliseconds(burst % 4 == 3 ? 35 : rng() % 3));
      }
      for (const Tagged& t : own) {
        std::string err = verify_object(t.p, t.size, t.tag);
        if (!err.empty()) errors.report("own " + err);
        t_free(t.p);
      }
    });
  for (std::thread& t : owners) t.join();
  for (int f = 0; f < kFreers; f++) queue.push(Entry{});
  for (std::thread& t : threads) t.join();
  ASSERT_EQ(errors.first(), "");
  EXPECT_EQ(consumed.load(), produced.load());
  RecordProperty("objects", std::to_string(produced.load()));
  RecordProperty("bytes_collected",
                 std::to_string(snap().service_bytes_collected - before.service_bytes_collected));
  expect_messages_balance(before, offload_on() ? 0 : produced.load(), "napping owners");
}

// A thread blocked for a moment against one that stays blocked.  The owner
// allocates, a second thread frees all of it (the owner's mail then holds
// whole slabs), and the owner blocks on a mutex the test holds.  The test
// lets it go as soon as the service has sorted the owner's mail (the whole
// slabs' batches count as received, while the owner, blocked, receives
// nothing): the slabs were handed back resident, and the owner takes them
// back with nothing purged (service_bytes_collected has not moved).  Then
// the same again with the test holding the mutex until the service purges:
// a thread that stays blocked a purge delay after the sort gives its slabs
// up.  Needs ROOST_PURGE_DELAY >= 200 (ctest's remote_free.*.blocked_owner):
// what it asserts holds on every schedule in which the test's thread, and
// then the owner, run within a purge delay of the sort.
TEST(RemoteFree, AnOwnerBlockedForAMomentKeepsItsWholeSlabsOneThatStaysBlockedGivesThemUp) {
  REQUIRE_ROOST();
  SKIP_UNDER_OFFLOAD();  // its objects would be the service allocator's
  if (!service_on()) GTEST_SKIP() << "needs the service thread";
  const char* delay = getenv("ROOST_PURGE_DELAY");
  if (delay == nullptr || strtoull(delay, nullptr, 10) < 200)
    GTEST_SKIP() << "needs ROOST_PURGE_DELAY >= 200 (ms)";
  if (in_repeat_child()) GTEST_SKIP() << "not in the repeat child";
  const size_t kObjects = kSanitized ? 10000 : 20000;
  std::mutex gate[2];
  std::atomic<int> blocked{-1}, awake{-1};
  std::string error;
  struct roost_stats at_block[2], at_sort{}, after_wake{}, at_purge{};
  bool sorted = false, purged = false;
  on_worker([&] {
    gate[0].lock();
    gate[1].lock();
    std::thread owner([&] {
      std::mt19937_64 rng(57);
      for (int phase = 0; phase < 2; phase++) {
        std::vector<Tagged> objects = allocate_tagged(kObjects, 30 + phase, rng);
        if (objects.size() != kObjects && error.empty()) error = "allocation failed";
        std::thread freer([&] {
          for (const Tagged& o : objects) t_free(o.p);
        });
        freer.join();  // its exit posts every batch to this thread's inbox
        blocked.store(phase);
        gate[phase].lock();  // blocked: the test holds it
        gate[phase].unlock();
        // Awake: the allocations take the whole slabs back.
        std::vector<Tagged> again = allocate_tagged(kObjects, 40 + phase, rng);
        for (const Tagged& o : again) {
          std::string e = verify_object(o.p, o.size, o.tag);
          if (!e.empty() && error.empty()) error = "reallocated " + e;
          t_free(o.p);
        }
        awake.store(phase);
      }
    });
    auto wait_for = [](const std::atomic<int>& flag, int phase) {
      while (flag.load() < phase) std::this_thread::sleep_for(milliseconds(1));
    };
    // Phase 0: let the owner go as soon as its mail is sorted.
    wait_for(blocked, 0);
    at_block[0] = snap();
    for (int i = 0; i < 30000 && !sorted; i++) {
      std::this_thread::sleep_for(milliseconds(1));
      at_sort = snap();
      sorted = at_sort.slab_batches_received > at_block[0].slab_batches_received;
    }
    gate[0].unlock();
    wait_for(awake, 0);
    after_wake = snap();
    // Phase 1: keep it blocked until the service purges.
    wait_for(blocked, 1);
    at_block[1] = snap();
    for (int i = 0; i < 30000 && !purged; i++) {
      std::this_thread::sleep_for(milliseconds(1));
      at_purge = snap();
      purged = at_purge.service_bytes_collected > at_block[1].service_bytes_collected;
    }
    gate[1].unlock();
    owner.join();
  });
  ASSERT_EQ(error, "");
  ASSERT_TRUE(sorted) << "the service never sorted the blocked owner's mail: "
                      << describe_messages(at_sort);
  EXPECT_EQ(at_sort.service_bytes_collected, at_block[0].service_bytes_collected)
      << "the sort purged the slabs of a thread blocked for a moment";
  EXPECT_EQ(after_wake.service_bytes_collected, at_block[0].service_bytes_collected)
      << "the owner, back within a purge delay, found its slabs purged";
  EXPECT_TRUE(purged) << "a thread blocked for good kept its whole slabs";
  RecordProperty("bytes_collected", std::to_string(at_purge.service_bytes_collected -
                                                   at_block[1].service_bytes_collected));
}
