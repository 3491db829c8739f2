// The heap profiler (ROOST_PROFILE) seen from a program: sampled objects
// behave as any other (realloc, usable size, alignment, sized frees, frees
// by other threads, fork); the profile roost_profile_dump() writes holds
// what was allocated, exactly at ROOST_PROFILE_RATE=1 (where every
// allocation is sampled and counts once); objects a refill held back from
// a fast list go back with their thread; roost_profile_dump() with the
// profiler off says so.  One source, three builds: through malloc
// (libroost.a), through roost.h (libroost-prefixed.a, also under the
// sanitizers) and the secure build (libroost-secure.a, whose sized frees
// check sampled objects too).  CMakeLists.txt runs the groups with the
// environment each needs (ROOSTTEST_PROFILE says which).
#include <gtest/gtest.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "roost.h"
#include "support.h"

namespace {

using roost_test::escape;

#ifdef ROOST_TEST_PREFIXED
void* t_malloc(size_t n) { return roost_malloc(n); }
void* t_calloc(size_t c, size_t n) { return roost_calloc(c, n); }
void* t_realloc(void* p, size_t n) { return roost_realloc(p, n); }
void* t_aligned(size_t a, size_t n) { return roost_aligned_alloc(a, n); }
size_t t_usable(void* p) { return roost_usable_size(p); }
void t_free(void* p) { roost_free(p); }
#else
extern "C" void t_free_sized(void*, size_t) __asm__("free_sized");
extern "C" void t_free_aligned_sized(void*, size_t, size_t) __asm__("free_aligned_sized");
void* t_malloc(size_t n) { return malloc(n); }
void* t_calloc(size_t c, size_t n) { return calloc(c, n); }
void* t_realloc(void* p, size_t n) { return realloc(p, n); }
void* t_aligned(size_t a, size_t n) { return aligned_alloc(a, n); }
size_t t_usable(void* p) { return malloc_usable_size(p); }
void t_free(void* p) { free(p); }
#endif

// What the test run asks of these tests: "1" (ROOST_PROFILE=1 at rate 1),
// "held" (a rate that cuts fast lists), "off".
std::string mode() {
  const char* m = getenv("ROOSTTEST_PROFILE");
  return m != nullptr ? m : "";
}

std::string temp_profile(const char* name) {
  return testing::TempDir() + "roost-profile-test." + std::to_string(getpid()) + "." + name;
}

struct Line {
  uint64_t inuse_objects, inuse_bytes, alloc_objects, alloc_bytes;
  std::vector<uintptr_t> pcs;
};

// The stack lines of a heap profile (the format of frontend/profile_report.h).
std::vector<Line> read_profile(const std::string& path) {
  std::ifstream in(path);
  std::vector<Line> lines;
  std::string text;
  std::getline(in, text);
  EXPECT_TRUE(text.rfind("heap profile: ", 0) == 0) << path << ": " << text;
  std::regex row(R"(^\s*(\d+): (\d+) \[(\d+): (\d+)\] @( 0x[0-9a-f]+)*$)");
  bool maps = false;
  while (std::getline(in, text)) {
    if (text == "MAPPED_LIBRARIES:") {
      maps = true;
      break;
    }
    std::smatch m;
    if (!std::regex_match(text, m, row)) continue;
    Line l{std::stoull(m[1]), std::stoull(m[2]), std::stoull(m[3]), std::stoull(m[4]), {}};
    for (size_t at = text.find(" 0x"); at != std::string::npos; at = text.find(" 0x", at + 1))
      l.pcs.push_back(std::stoull(text.substr(at + 1), nullptr, 16));
    lines.push_back(l);
  }
  EXPECT_TRUE(maps) << path << " has no MAPPED_LIBRARIES section";
  return lines;
}

// Does a frame of `l` return into the function at `fn` (its code: the
// few hundred bytes after its address)?
bool called_from(const Line& l, const void* fn) {
  auto start = reinterpret_cast<uintptr_t>(fn);
  for (uintptr_t pc : l.pcs)
    if (pc > start && pc - start < 1024) return true;
  return false;
}

// The sum of the lines of stacks through the function at `fn` whose
// objects are all of `size` bytes.
Line lines_of(const std::vector<Line>& lines, const void* fn, uint64_t size) {
  Line sum{};
  for (const Line& l : lines) {
    if (!called_from(l, fn) || l.alloc_objects == 0 || l.alloc_bytes != l.alloc_objects * size)
      continue;
    sum.inuse_objects += l.inuse_objects;
    sum.inuse_bytes += l.inuse_bytes;
    sum.alloc_objects += l.alloc_objects;
    sum.alloc_bytes += l.alloc_bytes;
  }
  return sum;
}

Line dump_and_read(const char* name, const void* fn, uint64_t size) {
  std::string path = temp_profile(name);
  EXPECT_EQ(roost_profile_dump(path.c_str()), 0) << strerror(errno);
  Line l = lines_of(read_profile(path), fn, size);
  unlink(path.c_str());
  return l;
}

// Where the tests allocate the objects they look for in the profiles.
#define NOIPA __attribute__((noipa))
NOIPA std::vector<void*> allocate_distinctive(int n, size_t size) {
  std::vector<void*> v;
  v.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; i++) v.push_back(t_malloc(size));
  return v;
}
NOIPA void* worker_alloc(size_t size) {
  void* p = t_malloc(size);
  escape(p);  // (not a jump to t_malloc: this frame stays on the stack)
  return p;
}
const void* const kDistinctive = reinterpret_cast<const void*>(&allocate_distinctive);
const void* const kWorker = reinterpret_cast<const void*>(&worker_alloc);

#define REQUIRE_MODE(m) \
  ASSERT_EQ(mode(), m) << "run by CMakeLists.txt with ROOSTTEST_PROFILE=" m " and its options"

TEST(Profile, DumpHoldsWhatWasAllocatedExactly) {
  REQUIRE_MODE("1");
  constexpr size_t kSmall = 1536, kLarge = 1 << 20;
  std::vector<void*> small = allocate_distinctive(100, kSmall);
  std::vector<void*> large = allocate_distinctive(3, kLarge);
  Line s = dump_and_read("exact1", kDistinctive, kSmall);
  EXPECT_EQ(s.inuse_objects, 100u);
  EXPECT_EQ(s.inuse_bytes, 100 * kSmall);
  EXPECT_EQ(s.alloc_objects, 100u);
  Line l = dump_and_read("exact2", kDistinctive, kLarge);
  EXPECT_EQ(l.inuse_objects, 3u);
  EXPECT_EQ(l.inuse_bytes, 3 * kLarge);
  // Half of the small ones and one large one freed by another thread.
  std::thread([&] {
    for (size_t i = 0; i < small.size(); i += 2) t_free(small[i]);
    t_free(large[0]);
  }).join();
  s = dump_and_read("exact3", kDistinctive, kSmall);
  EXPECT_EQ(s.inuse_objects, 50u);
  EXPECT_EQ(s.inuse_bytes, 50 * kSmall);
  EXPECT_EQ(s.alloc_objects, 100u);
  EXPECT_EQ(s.alloc_bytes, 100 * kSmall);
  l = dump_and_read("exact4", kDistinctive, kLarge);
  EXPECT_EQ(l.inuse_objects, 2u);
  EXPECT_EQ(l.alloc_objects, 3u);
  for (size_t i = 1; i < small.size(); i += 2) t_free(small[i]);
  t_free(large[1]);
  t_free(large[2]);
  s = dump_and_read("exact5", kDistinctive, kSmall);
  EXPECT_EQ(s.inuse_objects, 0u);
  EXPECT_EQ(s.inuse_bytes, 0u);
}

TEST(Profile, SampledObjectsBehaveAsAnyOther) {
  REQUIRE_MODE("1");
  uint64_t id = 1;
  for (size_t n : {size_t{1}, size_t{16}, size_t{100}, size_t{1000}, size_t{5000}, size_t{70000},
                   size_t{250000}, size_t{300000}, size_t{3} << 20}) {
    void* p = t_malloc(n);
    ASSERT_NE(p, nullptr) << n;
    // Every object is sampled: a small one is served page-aligned.
    EXPECT_TRUE(roost_test::is_aligned(p, 4096)) << n << " " << p;
    EXPECT_GE(t_usable(p), n);
    roost_test::fill_pattern(p, n, id);
    // Grown and shrunk: the contents move with it.
    void* q = t_realloc(p, 2 * n);
    ASSERT_NE(q, nullptr);
    EXPECT_TRUE(roost_test::check_pattern(q, n, id)) << n;
    void* r = t_realloc(q, n / 2 + 1);
    ASSERT_NE(r, nullptr);
    EXPECT_TRUE(roost_test::check_pattern(r, n / 2 + 1, id)) << n;
    t_free(r);
    // Zeroed even where a freed object's bytes were.
    void* dirty = t_malloc(n);
    memset(dirty, 0xa5, n);
    t_free(dirty);
    void* z = t_calloc(1, n);
    ASSERT_NE(z, nullptr);
    EXPECT_EQ(roost_test::find_nonzero(z, n), SIZE_MAX) << n;
    t_free(z);
    for (size_t align : {size_t{32}, size_t{256}, size_t{4096}, size_t{65536}}) {
      void* a = t_aligned(align, n);
      ASSERT_NE(a, nullptr);
      EXPECT_TRUE(roost_test::is_aligned(a, align)) << n << " " << align;
      memset(a, 1, n);
#ifdef ROOST_TEST_PREFIXED
      t_free(a);
#else
      t_free_aligned_sized(a, align, n);
#endif
    }
#ifndef ROOST_TEST_PREFIXED
    void* s = t_malloc(n);
    t_free_sized(s, n);
    char* c = new char[n];
    delete[] c;
    auto* big = static_cast<char*>(::operator new(n));
    ::operator delete(big, n);
#endif
    id++;
  }
}

#ifdef ROOSTTEST_SECURE
// The secure build checks sized frees of sampled objects against their
// class, as it does for slab objects.
TEST(Profile, SecureSizedFreeOfASampledObjectChecksItsClass) {
  REQUIRE_MODE("1");
  roost_test::ChildResult r = roost_test::run_in_child([] {
    void* p = t_malloc(100);
    t_free_sized(p, 4000);
  });
  EXPECT_EQ(r.signal, SIGABRT) << r.err;
  EXPECT_NE(r.err.find("size mismatch"), std::string::npos) << r.err;
}
#endif

TEST(Profile, FreesByOtherThreadsWhileProfilesAreWritten) {
  REQUIRE_MODE("1");
  constexpr size_t kSize = 2560;
  constexpr int kThreads = 4, kEach = 2000;
  Line before = dump_and_read("threads0", kWorker, kSize);
  std::vector<std::atomic<void*>> slots(kThreads * kEach);
  for (auto& s : slots) s.store(nullptr);
  std::atomic<bool> stop{false};
  std::thread dumper([&] {
    std::string path = temp_profile("threads-dumper");
    while (!stop.load()) EXPECT_EQ(roost_profile_dump(path.c_str()), 0);
    unlink(path.c_str());
  });
  std::vector<std::thread> producers, consumers;
  for (int t = 0; t < kThreads; t++) {
    producers.emplace_back([&, t] {
      for (int i = 0; i < kEach; i++) slots[t * kEach + i].store(worker_alloc(kSize));
    });
    // Each consumer frees a producer's objects, as they come.
    consumers.emplace_back([&, t] {
      for (int i = 0; i < kEach; i++) {
        void* p;
        while ((p = slots[t * kEach + i].exchange(nullptr)) == nullptr) std::this_thread::yield();
        t_free(p);
      }
    });
  }
  for (auto& th : producers) th.join();
  for (auto& th : consumers) th.join();
  stop.store(true);
  dumper.join();
  Line after = dump_and_read("threads1", kWorker, kSize);
  EXPECT_EQ(after.alloc_objects - before.alloc_objects, uint64_t{kThreads * kEach});
  EXPECT_EQ(after.inuse_objects, before.inuse_objects);
  EXPECT_EQ(after.inuse_bytes, before.inuse_bytes);
}

TEST(Profile, AForkedChildProfilesItsOwnObjects) {
  REQUIRE_MODE("1");
#if defined(__SANITIZE_THREAD__)
  // The parent has threads (roost's service among them) and the child's
  // first safe point with work starts a service of its own: ThreadSanitizer
  // ends a child that starts a thread after a multi-threaded fork.  The
  // plain and AddressSanitizer trees run it.
  GTEST_SKIP() << "not under ThreadSanitizer: a thread started after a multi-threaded fork";
#endif
  constexpr size_t kSize = 3584;
  std::string path = temp_profile("child");
  std::vector<void*> parents = allocate_distinctive(7, kSize);
  roost_test::ChildResult r = roost_test::run_in_child([&] {
    std::vector<void*> mine = allocate_distinctive(10, kSize);
    roost_test::child_check(roost_profile_dump(path.c_str()) == 0, "dump in the child");
    for (void* p : mine) t_free(p);
  });
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r.err;
  Line child = lines_of(read_profile(path), kDistinctive, kSize);
  unlink(path.c_str());
  EXPECT_EQ(child.inuse_objects, 17u);  // the parent's 7 came with the fork
  Line parent = dump_and_read("parent", kDistinctive, kSize);
  EXPECT_EQ(parent.inuse_objects, 7u);
  for (void* p : parents) t_free(p);
}

// Every object sampled: the chunks of the small ones, once freed, wait (a
// few for the whole process) for the next sampled objects of any thread
// (frontend/sampler.h); threads that come and go do not add to them, and
// trim gives them back with the rest.  Eight threads at a time, each
// allocating and freeing sampled objects in rounds, three generations of
// them.
TEST(Profile, SampledObjectsChunksGoBackOnTrim) {
  REQUIRE_MODE("1");
  roost_trim();
  struct roost_stats before = roost_test::stats_snapshot();
  for (int generation = 0; generation < 3; generation++) {
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; t++) {
      threads.emplace_back([] {
        void* objects[40];
        for (int round = 0; round < 20; round++) {
          for (void*& p : objects) {
            p = t_malloc(1000);
            memset(p, 0x3c, 1000);
          }
          for (void* p : objects) t_free(p);
        }
      });
    }
    for (auto& th : threads) th.join();
  }
  roost_trim();
  struct roost_stats after = roost_test::stats_snapshot();
  // Spares kept past trim, or one set a thread, would hold 64 KiB each.
  EXPECT_LE(after.bytes_committed - after.bytes_dirty,
            before.bytes_committed - before.bytes_dirty + (512u << 10))
      << "committed " << before.bytes_committed << " -> " << after.bytes_committed << ", dirty "
      << before.bytes_dirty << " -> " << after.bytes_dirty;
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
}

// A sampled small object is served apart, in a chunk of its own, but the
// statistics count it as an object of its class, not as a large one,
// whichever thread frees it: the class's allocations and objects in use
// move with it, large_allocations does not, and bytes in use come back.
TEST(Profile, SampledSmallObjectsCountAsObjectsOfTheirClass) {
  REQUIRE_MODE("1");
  roost_test::ClassCountFn count = roost_test::class_count_fn();
  roost_test::ClassStatsFn class_stats = roost_test::class_stats_fn();
  ASSERT_NE(count, nullptr);
  ASSERT_NE(class_stats, nullptr);
  // A size nothing else here allocates: the class's figures are ours.
  const size_t kSize = 2900;
  unsigned cls = 0;
  struct roost_class_stats c {};
  for (; cls < count(); cls++) {
    ASSERT_EQ(class_stats(cls, &c), 0);
    if (c.size >= kSize) break;
  }
  ASSERT_LT(cls, count());
  struct roost_class_stats before_class = c;
  struct roost_stats before = roost_test::stats_snapshot();
  constexpr int kObjects = 64;
  void* objects[kObjects];
  for (void*& p : objects) {
    p = t_malloc(kSize);
    ASSERT_NE(p, nullptr);
    memset(p, 0x6b, kSize);
  }
  ASSERT_EQ(class_stats(cls, &c), 0);
  EXPECT_EQ(c.allocations, before_class.allocations + kObjects);
  EXPECT_EQ(c.objects_in_use, before_class.objects_in_use + kObjects);
  EXPECT_EQ(roost_test::stats_snapshot().large_allocations, before.large_allocations);
  // Half freed here, half by another thread.
  for (int i = 0; i < kObjects / 2; i++) t_free(objects[i]);
  std::thread([&] {
    for (int i = kObjects / 2; i < kObjects; i++) t_free(objects[i]);
  }).join();
  ASSERT_EQ(class_stats(cls, &c), 0);
  EXPECT_EQ(c.allocations, before_class.allocations + kObjects);
  EXPECT_EQ(c.objects_in_use, before_class.objects_in_use);
  struct roost_stats after = roost_test::stats_snapshot();
  EXPECT_EQ(after.large_allocations, before.large_allocations);
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
}

// With a rate that puts sample points inside fast lists, refills hold the
// objects past a point back (frontend/sampler.h); a thread that exits must
// give them back with the rest, or their slabs could never be released.
TEST(Profile, ObjectsHeldBackGoBackWithTheirThread) {
  REQUIRE_MODE("held");
  constexpr size_t kSize = 224;
  unsigned cls = 0;
  struct roost_class_stats c {};
  for (; cls < roost_class_count(); cls++) {
    ASSERT_EQ(roost_class_stats(cls, &c), 0);
    if (c.size == kSize) break;
  }
  ASSERT_LT(cls, roost_class_count());
  uint64_t slabs_before = c.slabs;
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; t++) {
    threads.emplace_back([] {
      void* held[300];
      for (int round = 0; round < 60; round++) {
        for (void*& p : held) escape(p = t_malloc(kSize));
        for (void* p : held) t_free(p);
      }
    });
  }
  for (auto& th : threads) th.join();
  roost_trim();
  ASSERT_EQ(roost_class_stats(cls, &c), 0);
  EXPECT_EQ(c.slabs, slabs_before);
}

TEST(Profile, DumpSaysWhenProfilingIsOff) {
  REQUIRE_MODE("off");
  errno = 0;
  EXPECT_EQ(roost_profile_dump(temp_profile("off").c_str()), -1);
  EXPECT_EQ(errno, ENOTSUP);
}

TEST(Profile, DumpSaysWhyAFileCannotBeWritten) {
  REQUIRE_MODE("1");
  errno = 0;
  EXPECT_EQ(roost_profile_dump("/no/such/dir/roost.heap"), -1);
  EXPECT_EQ(errno, ENOENT);
}

}  // namespace
