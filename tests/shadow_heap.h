// Randomised stress of an allocator against a shadow model, used for both
// the malloc family (stress_test.cc) and the roost_* prefixed API
// (prefixed_test.cc).
//
// run_shadow_stress: one thread, random malloc/calloc/realloc/aligned/free of
// random sizes (mostly small, some medium, a few large); every live object
// holds a pattern derived from its id.  The model, an ordered map keyed by
// address, checks on every allocation that the new object [p, p+usable)
// overlaps no live one, and on free/realloc that the content is intact.
//
// run_cross_thread_stress: producer/consumer rings of threads in waves; each
// object is allocated by one thread and checked, sometimes reallocated, and
// freed by another, often after its owner has exited.
#pragma once

#include <malloc.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support.h"

namespace roost_test {

struct HeapOps {
  const char* name;
  void* (*malloc)(size_t);
  void* (*calloc)(size_t, size_t);
  void* (*realloc)(void*, size_t);
  void* (*aligned_alloc)(size_t, size_t);
  void (*free)(void*);
  size_t (*usable_size)(void*);
};

// The process's malloc family (roost's when it overrides them).
inline const HeapOps kMallocFamily = {"malloc family",
                                      [](size_t n) { return malloc(n); },
                                      [](size_t c, size_t n) { return calloc(c, n); },
                                      [](void* p, size_t n) { return realloc(p, n); },
                                      [](size_t a, size_t n) { return aligned_alloc(a, n); },
                                      [](void* p) { free(p); },
                                      [](void* p) { return malloc_usable_size(p); }};

using Clock = std::chrono::steady_clock;

struct StressResult {
  std::string error;  // empty when every check passed
  uint64_t operations = 0;
  size_t peak_live = 0;
};

class ShadowHeap {
 public:
  ShadowHeap(const HeapOps& ops, uint64_t seed) : ops_(ops), rng_(seed), seed_(seed) {}

  // Runs until `deadline` but at least kMinOperations steps (a sanitizer
  // tree on a loaded runner must still do real work), at most `max_ops`.
  static constexpr uint64_t kMinOperations = 4096;

  StressResult run(uint64_t max_ops, Clock::time_point deadline) {
    StressResult result;
    for (uint64_t op = 0; op < max_ops && error_.empty(); op++) {
      if (op >= kMinOperations && op % 128 == 0 && Clock::now() > deadline) break;
      step();
      result.operations++;
      if (live_.size() > result.peak_live) result.peak_live = live_.size();
    }
    // Check and free everything that is left.
    while (error_.empty() && !slots_.empty()) free_object(slots_.back());
    result.error = error_;
    return result;
  }

 private:
  struct Object {
    size_t size;
    size_t usable;
    uint64_t id;
    size_t slot;  // index in slots_
  };

  static constexpr size_t kMaxLive = 4000;
  static constexpr size_t kMaxLargeLive = 6;

  size_t random_size() {
    uint64_t r = rng_() % 1000;
    if (r < 450) return 1 + rng_() % 128;
    if (r < 880) return 1 + rng_() % 2048;
    if (r < 995 || large_live_ >= kMaxLargeLive) return 2049 + rng_() % (256 * 1024 - 2048);
    return 256 * 1024 + rng_() % (8 * 1024 * 1024 - 256 * 1024);
  }

  static bool is_large(size_t n) { return n > 256 * 1024; }

  void fail(const std::string& what, const void* p) {
    if (!error_.empty()) return;
    std::ostringstream s;
    s << ops_.name << " seed " << seed_ << " op " << ops_done_ << ": " << what << " (ptr " << p
      << ")";
    error_ = s.str();
  }

  void step() {
    ops_done_++;
    uint64_t r = rng_() % 100;
    bool must_free = live_.size() >= kMaxLive;
    if (!must_free && (live_.empty() || r < 45)) {
      allocate();
    } else if (r < 82 || must_free) {
      free_object(slots_[rng_() % slots_.size()]);
    } else if (r < 97) {
      reallocate(slots_[rng_() % slots_.size()]);
    } else {
      uintptr_t key = slots_[rng_() % slots_.size()];
      const Object& o = live_.at(key);
      verify(key, o, "spot check");
    }
  }

  void allocate() {
    size_t n = random_size();
    uint64_t kind = rng_() % 100;
    void* p;
    size_t align = 16;
    bool zeroed = false;
    if (kind < 75) {
      p = ops_.malloc(n);
    } else if (kind < 88) {
      size_t count = 1 + rng_() % 8;
      n = (n + count - 1) / count;
      p = ops_.calloc(count, n);
      n *= count;
      zeroed = true;
    } else {
      align = rng_() % 50 == 0 ? size_t{1} << (16 + rng_() % 5) : size_t{1} << (rng_() % 13);
      p = ops_.aligned_alloc(align, n);
    }
    if (p == nullptr) return fail("allocation of " + std::to_string(n) + " returned NULL", p);
    if (!is_aligned(p, align < 16 ? 16 : align))
      return fail("misaligned result for alignment " + std::to_string(align), p);
    if (zeroed && find_nonzero(p, n) != SIZE_MAX)
      return fail("calloc memory of " + std::to_string(n) + " not zero", p);
    insert(p, n, next_id_++);
  }

  // Records a new object after checking it overlaps no live one.
  void insert(void* p, size_t n, uint64_t id) {
    size_t usable = ops_.usable_size(p);
    if (usable < n)
      return fail("usable size " + std::to_string(usable) + " < " + std::to_string(n), p);
    uintptr_t a = reinterpret_cast<uintptr_t>(p);
    auto next = live_.lower_bound(a);
    if (next != live_.end() && next->first < a + usable)
      return fail("new object of " + std::to_string(usable) +
                      " usable bytes overlaps a live object at " + std::to_string(next->first - a) +
                      " bytes past it",
                  p);
    if (next != live_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second.usable > a)
        return fail("new object starts inside a live object of " +
                        std::to_string(prev->second.usable) + " usable bytes",
                    p);
    }
    fill_pattern(p, n, id);
    live_[a] = Object{n, usable, id, slots_.size()};
    slots_.push_back(a);
    if (is_large(n)) large_live_++;
  }

  void verify(uintptr_t key, const Object& o, const char* when) {
    size_t bad = find_pattern_mismatch(reinterpret_cast<void*>(key), o.size, o.id);
    if (bad != SIZE_MAX)
      fail(std::string(when) + ": object of " + std::to_string(o.size) +
               " bytes damaged at offset " + std::to_string(bad),
           reinterpret_cast<void*>(key));
  }

  void forget(uintptr_t key) {
    Object o = live_.at(key);
    uintptr_t moved = slots_.back();
    slots_[o.slot] = moved;
    live_.at(moved).slot = o.slot;
    slots_.pop_back();
    live_.erase(key);
    if (is_large(o.size)) large_live_--;
  }

  void free_object(uintptr_t key) {
    Object o = live_.at(key);
    verify(key, o, "before free");
    forget(key);
    ops_.free(reinterpret_cast<void*>(key));
  }

  void reallocate(uintptr_t key) {
    Object o = live_.at(key);
    verify(key, o, "before realloc");
    size_t n = rng_() % 4 == 0 ? o.size + rng_() % 64 : random_size();
    if (rng_() % 8 == 0 && o.size > 1) n = o.size - 1 - rng_() % (o.size - 1) / 2;  // shrink
    forget(key);
    void* q = ops_.realloc(reinterpret_cast<void*>(key), n);
    if (q == nullptr) return fail("realloc to " + std::to_string(n) + " returned NULL", nullptr);
    if (!is_aligned(q, 16)) return fail("realloc result misaligned", q);
    size_t kept = n < o.size ? n : o.size;
    size_t bad = find_pattern_mismatch(q, kept, o.id);
    if (bad != SIZE_MAX)
      return fail("realloc " + std::to_string(o.size) + " -> " + std::to_string(n) +
                      " lost content at offset " + std::to_string(bad),
                  q);
    insert(q, n, next_id_++);
  }

  const HeapOps& ops_;
  std::mt19937_64 rng_;
  uint64_t seed_;
  uint64_t next_id_ = 1;
  uint64_t ops_done_ = 0;
  size_t large_live_ = 0;
  std::map<uintptr_t, Object> live_;
  std::vector<uintptr_t> slots_;
  std::string error_;
};

// The seeds to run: fixed ones, plus ROOSTTEST_STRESS_SEED from the environment.
inline std::vector<uint64_t> stress_seeds() {
  std::vector<uint64_t> seeds = {1, 0xdecafbad, 20240229};
  if (const char* s = getenv("ROOSTTEST_STRESS_SEED")) seeds.push_back(strtoull(s, nullptr, 0));
  return seeds;
}

inline StressResult run_shadow_stress(const HeapOps& ops, uint64_t seed, uint64_t max_ops,
                                      std::chrono::milliseconds budget) {
  ShadowHeap heap(ops, seed);
  return heap.run(max_ops, Clock::now() + budget);
}

// ---------------------------------------------------------------------------

// Threads in a ring: thread i allocates and sends to thread i+1, which checks,
// sometimes reallocates, and frees.  `waves` generations of threads; objects
// still queued when a wave ends are freed by the next wave (their owners have
// exited).  Returns the first error, or "".
inline std::string run_cross_thread_stress(const HeapOps& ops, int threads, int waves,
                                           uint64_t max_ops_per_thread,
                                           std::chrono::milliseconds budget) {
  struct Msg {
    void* p;
    size_t size;
    uint64_t id;
  };
  struct Queue {
    std::mutex m;
    std::deque<Msg> q;
  };
  std::vector<Queue> queues(static_cast<size_t>(threads));
  std::mutex error_mutex;
  std::string error;
  std::atomic<bool> failed{false};
  auto report = [&](const std::string& e) {
    std::lock_guard<std::mutex> lock(error_mutex);
    if (error.empty()) error = e;
    failed = true;
  };
  auto consume = [&](const Msg& m, std::mt19937_64& rng) {
    if (!check_pattern(m.p, m.size, m.id)) {
      report(std::string(ops.name) + ": object of " + std::to_string(m.size) +
             " bytes damaged before its remote free");
      return;
    }
    void* p = m.p;
    if (rng() % 8 == 0) {  // realloc an object owned by another thread
      size_t n = 1 + rng() % (2 * m.size + 16);
      p = ops.realloc(p, n);
      if (p == nullptr) return report(std::string(ops.name) + ": remote realloc returned NULL");
      if (!check_pattern(p, n < m.size ? n : m.size, m.id))
        return report(std::string(ops.name) + ": remote realloc lost content");
    }
    ops.free(p);
  };
  const auto deadline = Clock::now() + budget;
  std::atomic<uint64_t> next_id{1};
  for (int wave = 0; wave < waves && !failed; wave++) {
    const auto wave_deadline = Clock::now() + (deadline - Clock::now()) / (waves - wave);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; t++) {
      pool.emplace_back([&, t, wave] {
        std::mt19937_64 rng(static_cast<uint64_t>(wave * 1000 + t));
        Queue& out = queues[static_cast<size_t>((t + 1) % threads)];
        Queue& in = queues[static_cast<size_t>(t)];
        std::vector<Msg> batch, received;
        for (uint64_t op = 0; op < max_ops_per_thread && !failed; op++) {
          if (op % 64 == 0 && Clock::now() > wave_deadline) break;
          size_t n =
              rng() % 100 == 0 ? 300000 + rng() % 700000 : 1 + rng() % (rng() % 4 ? 256 : 4096);
          void* p = ops.malloc(n);
          if (p == nullptr) return report(std::string(ops.name) + ": malloc returned NULL");
          uint64_t id = next_id++;
          fill_pattern(p, n, id);
          batch.push_back({p, n, id});
          if (batch.size() >= 32) {
            std::lock_guard<std::mutex> lock(out.m);
            out.q.insert(out.q.end(), batch.begin(), batch.end());
            batch.clear();
          }
          if (op % 16 == 0) {
            {
              std::lock_guard<std::mutex> lock(in.m);
              // Leave some behind for the next wave.
              size_t take = in.q.size() > 64 ? in.q.size() - 64 : 0;
              received.assign(in.q.begin(), in.q.begin() + static_cast<long>(take));
              in.q.erase(in.q.begin(), in.q.begin() + static_cast<long>(take));
            }
            for (const Msg& m : received) consume(m, rng);
            received.clear();
          }
        }
        std::lock_guard<std::mutex> lock(out.m);
        out.q.insert(out.q.end(), batch.begin(), batch.end());
      });
    }
    for (auto& th : pool) th.join();
  }
  std::mt19937_64 rng(99);
  for (Queue& q : queues)
    for (const Msg& m : q.q) consume(m, rng);
  return error;
}

// ---------------------------------------------------------------------------

// Large objects only (256 KiB .. 8 MiB) in 16 slots: malloc and realloc
// results are dirtied with 0xAA, calloc results must be zero.  Exercises the
// reuse of freed large blocks and chunks by calloc.  Returns the first
// error, or "".
inline std::string run_large_calloc_history(const HeapOps& ops, uint64_t seed, int steps) {
  std::mt19937_64 rng(seed);
  void* slot[16] = {};
  std::string error;
  for (int i = 0; i < steps && error.empty(); i++) {
    int s = static_cast<int>(rng() % 16);
    uint64_t kind = rng() % 10;
    size_t n = 256 * 1024 + rng() % (8 * 1024 * 1024);
    if (kind >= 7 && kind < 9) {
      ops.free(slot[s]);
      slot[s] = nullptr;
    } else if (kind == 9) {
      slot[s] = ops.realloc(slot[s], n);
      if (slot[s] == nullptr)
        error = "realloc returned NULL";
      else
        memset(slot[s], 0xAA, n);
    } else {
      ops.free(slot[s]);
      slot[s] = kind < 4 ? ops.malloc(n) : ops.calloc(1, n);
      if (slot[s] == nullptr) {
        error = "allocation returned NULL";
      } else if (kind < 4) {
        memset(slot[s], 0xAA, n);
      } else {
        size_t at = find_nonzero(slot[s], n);
        if (at != SIZE_MAX) {
          std::ostringstream m;
          m << ops.name << " seed " << seed << " step " << i << ": calloc(1, " << n
            << ") = " << slot[s] << " has byte " << at << " = 0x" << std::hex
            << static_cast<int>(static_cast<unsigned char*>(slot[s])[at]) << ", not zero";
          error = m.str();
        }
      }
    }
  }
  for (void* p : slot) ops.free(p);
  return error;
}

}  // namespace roost_test
