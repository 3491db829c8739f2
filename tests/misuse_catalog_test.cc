// The misuse catalog: heap bugs as a program makes them, each in a forked
// child, against the build under test (ROOSTTEST_BUILD=default, secure or
// hardened; the linked binaries name theirs in misuse_catalog_build.cc).  Each case states which
// builds must catch it; a build that must catch it has to stop the child
// with SIGABRT after one line on stderr, "roost: <where>: <fault> 0x<addr>
// ...", naming the fault the case expects and the address it is about.  A
// case the build under test is not meant to catch is skipped, saying so
// (docs/SECURITY.md's table of faults lists the same cases).
//
// With ROOSTTEST_BUILD=observe the cases only record what happened (for
// comparing other allocators; see observe()).
//
// Also here: the hardened build's reuse order (no address handed out again
// at once, new slabs in random order), which are not faults.
#include <alloca.h>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <new>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support.h"

extern "C" void free_sized(void*, size_t) __attribute__((weak));
extern "C" void free_aligned_sized(void*, size_t, size_t) __attribute__((weak));

using namespace roost_test;

// The build this program is linked to, when ROOSTTEST_BUILD does not say
// ("" when it links none): misuse_catalog_build.cc, compiled for each
// program, so that the three linked programs share this file's objects.
namespace roost_test {
extern const char kCatalogLinkedBuild[];
}  // namespace roost_test

namespace {

// "default", "secure", "hardened", "observe", or "" (not roost: every case
// is skipped).
std::string build_under_test() {
  const char* e = getenv("ROOSTTEST_BUILD");
  return e != nullptr ? e : kCatalogLinkedBuild;
}

// The hardened build is the secure build and more: the secure build's
// behaviour is checked in both.
bool is_hardened() { return build_under_test() == "hardened"; }
bool is_secure() { return build_under_test() == "secure" || is_hardened(); }

// Which builds catch a case: every one, the secure build (and the
// hardened), or the hardened build only.
enum class Caught { kAll, kSecure, kHardened };

// Through volatile pointers: the compiler neither warns about nor reasons
// about the misuse.
void (*volatile g_free)(void*) = free;
void* (*volatile g_malloc)(size_t) = malloc;
size_t (*volatile g_usable_size)(void*) = malloc_usable_size;
// A zero the compiler cannot see as one.
volatile size_t g_zero = 0;

char g_global[4096] __attribute__((aligned(64)));

std::string hex(const void* p) {
  char buf[32];
  snprintf(buf, sizeof(buf), "0x%" PRIxPTR, reinterpret_cast<uintptr_t>(p));
  return buf;
}

// roost's smallest size class of at least `bytes` (up to its largest small
// class, 256 KiB): 16, 32, 48, 64, then four classes per doubling.
constexpr size_t kMaxSmallClass = 256 * 1024;
// The largest small class of the build under test: the hardened build's
// is 64 KiB (bigger objects are large, each ending at a guard page).
size_t small_limit() { return is_hardened() ? 64 * 1024 : kMaxSmallClass; }
size_t roost_class(size_t bytes) {
  if (bytes <= 64) return (bytes + 15) / 16 * 16;
  size_t step = (size_t{1} << (63 - __builtin_clzl(bytes - 1))) / 4;
  return (bytes + step - 1) / step * step;
}

// The slot an object of `asked` bytes takes: the hardened build's small
// objects take the class of their size and a canary word.
// 0 when another allocator (or a build the test does not know) is observed.
size_t slot_of(size_t asked) {
  if (build_under_test() == "observe") return 0;
  if (is_hardened() && asked + 8 > small_limit()) return asked;  // a large object
  return is_hardened() ? roost_class(asked + 8) : roost_class(asked);
}

// The size class a diagnostic names for the live object `p`: its usable
// size (the hardened build's small objects: the size asked for, so their
// class is that of their size and the canary word; a zero-size one: 0).
size_t class_size(void* p) {
  size_t usable = malloc_usable_size(p);
  bool canary = is_hardened() && usable != 0 && usable + 8 <= small_limit();
  return canary ? roost_class(usable + 8) : usable;
}

// ROOSTTEST_BUILD=observe: another allocator (preloaded) meets the same
// misuse; each case records what became of the child as the test's
// property "outcome" and skips (bench/misuse_compare.py reads them).
void observe(const std::function<void()>& misuse) {
  ChildResult r = run_in_child(misuse, 30);
  std::string outcome =
      r.exited ? "exited " + std::to_string(r.exit_code) : "signal " + std::to_string(r.signal);
  std::string first_line = r.err.substr(0, r.err.find('\n'));
  ::testing::Test::RecordProperty("outcome", outcome);
  ::testing::Test::RecordProperty("stderr", first_line);
  GTEST_SKIP() << outcome << ": " << first_line;
}

// A child's exit code: allocate_until_handed_out() under offload, the
// object not back.
constexpr int kNotHandedOutUnderOffload = 77;

// What every case shares: the child's result, or nothing when the case
// does not run here (skipped, saying why, or only observed).

// Which builds each case that ran says must catch it (run_case records
// it), for the README's table (ReadmeSecurityTable, the last case).
std::map<std::string, Caught>& caught_levels() {
  static std::map<std::string, Caught> levels;
  return levels;
}

std::string current_case() {
  const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
  return t == nullptr ? "" : std::string(t->test_suite_name()) + "." + t->name();
}

std::optional<ChildResult> run_case(Caught caught, const std::function<void()>& misuse) {
  caught_levels()[current_case()] = caught;
  std::string build = build_under_test();
  if (build == "observe") {
    observe(misuse);
    return std::nullopt;
  }
  if (build != "default" && build != "secure" && build != "hardened") {
    [] { GTEST_SKIP() << "ROOSTTEST_BUILD is not default, secure or hardened"; }();
    return std::nullopt;
  }
  if (!roost_active()) {
    ADD_FAILURE() << "roost is not serving this process";
    return std::nullopt;
  }
  if (caught == Caught::kSecure && build == "default") {
    [] { GTEST_SKIP() << "the default build is not meant to catch this (libroost-secure is)"; }();
    return std::nullopt;
  }
  if (caught == Caught::kHardened && build != "hardened") {
    [] { GTEST_SKIP() << "only the hardened build is meant to catch this (libroost-hardened)"; }();
    return std::nullopt;
  }
  ChildResult r = run_in_child(misuse, 30);
  if (offload_on() && r.exited && r.exit_code == kNotHandedOutUnderOffload) {
    [] {
      GTEST_SKIP() << "under ROOST_OFFLOAD=1 the freed object went to a slab the service's "
                      "allocator lets sleep, and did not come back (allocate_until_handed_out)";
    }();
    return std::nullopt;
  }
  return r;
}

// Runs `misuse` in a child and checks that the build under test stops it
// as `caught` says, with `fault` (a regular expression) naming `addr`, and,
// when `size` is given, the object's size class (the usable size the
// parent read): "(size class <size> bytes)".
void expect_caught_line(Caught caught, const std::string& fault, const void* addr,
                        std::optional<size_t> size, const std::function<void()>& misuse) {
  std::optional<ChildResult> r = run_case(caught, misuse);
  if (!r) return;
  ASSERT_FALSE(r->exited) << "not caught: " << r->describe();
  EXPECT_EQ(r->signal, SIGABRT) << r->describe();
  std::string tail = size ? " \\(size class " + std::to_string(*size) + " bytes\\)" : "( [^\n]*)?";
  std::regex line("roost: [^\n]*: " + fault + " " + hex(addr) + tail + "\n");
  EXPECT_TRUE(std::regex_match(r->err, line))
      << "wanted one line \"roost: <where>: " << fault << " " << hex(addr)
      << (size ? " (size class " + std::to_string(*size) + " bytes)" : "") << "\", got:\n"
      << r->err;
}
void expect_caught(Caught caught, const std::string& fault, const void* addr,
                   const std::function<void()>& misuse) {
  expect_caught_line(caught, fault, addr, std::nullopt, misuse);
}
// The misuse of a live or freed object of `size` usable bytes: the line
// names its size class.
void expect_caught_object(Caught caught, const std::string& fault, const void* addr, size_t size,
                          const std::function<void()>& misuse) {
  expect_caught_line(caught, fault, addr, size, misuse);
}

// expect_caught_object() for an object only the child knows: the child
// writes its address first, alone on a line ("0x..."), then misuses it.
void expect_caught_child_object(Caught caught, const std::string& fault, size_t size,
                                const std::function<void()>& misuse) {
  std::optional<ChildResult> r = run_case(caught, misuse);
  if (!r) return;
  ASSERT_FALSE(r->exited) << "not caught: " << r->describe();
  EXPECT_EQ(r->signal, SIGABRT) << r->describe();
  size_t eol = r->err.find('\n');
  ASSERT_NE(eol, std::string::npos) << r->err;
  std::string addr = r->err.substr(0, eol);
  std::string rest = r->err.substr(eol + 1);
  std::regex line("roost: [^\n]*: " + fault + " " + addr + " \\(size class " +
                  std::to_string(size) + " bytes\\)\n");
  EXPECT_TRUE(std::regex_match(rest, line))
      << "wanted one line \"roost: <where>: " << fault << " " << addr << " (size class " << size
      << " bytes)\", got:\n"
      << rest;
}

// The child's line for expect_caught_child_object().
void say_address(const void* p) {
  fprintf(stderr, "0x%" PRIxPTR "\n", reinterpret_cast<uintptr_t>(p));
}

// Allocates `size`-byte objects (`by_calloc`: with calloc) until `p`
// comes back (the child aborts first when the build catches what was done
// to it).  Under
// ROOST_OFFLOAD=1 an object freed here comes back only once the service
// has carried out the free and put it on a ring again, so the loop pauses
// every thousand allocations for the service to run (on a loaded machine
// it may not have run at all during 200 000 allocations).  An object this
// thread's own allocator made (its rings ran dry) goes from the service's
// outbox to this thread's inbox, which it reads only when it allocates for
// itself: every 20 000 allocations malloc_trim() sends the service's
// outbox home, takes this thread's mail and empties its rings, so that the
// next allocations are its own.  An object the service's allocator made
// (for an alloc ring) goes back to the service's slab, and comes back only
// through the service's refills: never, if that slab has gone to sleep
// meanwhile (every other object of it handed out, too few free since to
// wake it: a refill carves a fresh slab instead, by design).  Then the
// child exits with kNotHandedOutUnderOffload, and the case is skipped
// (run_case): it tested nothing.  (Without offload the object goes back to
// this thread's active slab, which the next refill takes.)
void allocate_until_handed_out(const void* p, size_t size, bool by_calloc = false) {
  // The hardened build's quarantine holds a freed object for 128 frees on
  // average (kQuarantineSlots random slots): 4096 frees of objects of
  // another class (200 bytes: no case's) push it out but for a chance of
  // (127/128)^4096, 1e-14.  (malloc_trim() would too, but it may release
  // the object's slab, and the next carve of it rewrite the object.)
  // (Observing another allocator, the same: its quarantine may work alike.)
  if (is_hardened() || build_under_test() == "observe") {
    for (int i = 0; i < 4096; i++) g_free(g_malloc(200));
  }
  bool wait_for_service = offload_on();
  for (int i = 1; i <= 200000; i++) {
    if ((by_calloc ? calloc(1, size) : g_malloc(size)) == p) return;
    if (wait_for_service && i % 1000 == 0) usleep(1000);
    if (wait_for_service && i % 20000 == 0) malloc_trim(0);
  }
  if (wait_for_service) _exit(kNotHandedOutUnderOffload);
  child_check(false, "the freed object never came back");
}

// What a freed object's overwritten link is caught as: a corrupted free
// list when the link is followed; in the hardened build, whose freed
// objects wait in the quarantine with zero where the link goes, a
// write to a freed object when it leaves.
std::string link_overwritten_fault() {
  return is_hardened() ? "write to a freed object" : "corrupted free list";
}

// An object freed on another thread, joined before returning.
void free_on_another_thread(void* p) {
  std::thread([p] { g_free(p); }).join();
}

}  // namespace

// ---- double free -------------------------------------------------------

// A new user's first try: glibc says "double free detected" here, and so
// does every build of roost, at the second free (the free mark, in the
// default build's first word and the secure build's second; under
// ROOST_OFFLOAD=1 set before the free waits on the thread's free ring).
TEST(DoubleFree, AtOnceThenAllocationsOfTheSameSize) {
  void* p = g_malloc(48);
  expect_caught_object(Caught::kAll, "double free", p, class_size(p), [p] {
    g_free(p);
    g_free(p);
    for (int i = 0; i < 5000; i++) {
      void* q = g_malloc(48);
      memset(q, 0x5a, 48);
    }
  });
}

TEST(DoubleFree, AfterOtherAllocations) {
  void* p = g_malloc(64);
  expect_caught_object(Caught::kAll, "double free", p, class_size(p), [p] {
    g_free(p);
    for (int i = 0; i < 100; i++) escape(g_malloc(200));
    g_free(p);
  });
}

TEST(DoubleFree, InterleavedWithAnotherObjectsFree) {
  void* p = g_malloc(64);
  void* q = g_malloc(64);
  expect_caught_object(Caught::kAll, "double free", p, class_size(p), [p, q] {
    g_free(p);
    g_free(q);
    g_free(p);
  });
}

TEST(DoubleFree, AfterTheAddressWasReused) {
  void* p = g_malloc(48);
  expect_caught_object(Caught::kAll, "double free", p, class_size(p), [p] {
    g_free(p);
    allocate_until_handed_out(p, 48);
    g_free(p);  // the reused object's own free
    g_free(p);  // the stale pointer's
  });
}

TEST(DoubleFree, RemoteSecondFreeOnAnotherThread) {
  void* p = g_malloc(48);
  expect_caught_object(Caught::kAll, "double free", p, class_size(p), [p] {
    free_on_another_thread(p);
    free_on_another_thread(p);
  });
}

TEST(DoubleFree, RemoteThenByTheOwner) {
  void* p = g_malloc(96);
  expect_caught_object(Caught::kAll, "double free", p, class_size(p), [p] {
    free_on_another_thread(p);
    for (int i = 0; i < 1000; i++) g_free(g_malloc(96));  // the owner takes its mail
    g_free(p);
  });
}

// The second free while the first sits in the freeing thread's BatchIt
// cache, beside another object of the slab.
TEST(DoubleFree, WhileInABatchItCache) {
  void* p = g_malloc(80);
  void* q = g_malloc(80);
  expect_caught_object(Caught::kAll, "double free", p, class_size(p), [p, q] {
    std::thread([p, q] {
      g_free(p);
      g_free(q);
      g_free(p);
    }).join();
  });
}

// A 16-byte object has no word to spare beside its mark: in the
// secure build it travels home alone, and the second free is caught while
// the message is in flight; in the default build the message's tail
// carries its batch word where its mark was, and the owner finds the mark
// back there when it receives the message (its next allocations).
TEST(DoubleFree, SixteenByteObjectSentHome) {
  if (offload_on() && build_under_test() == "default")
    GTEST_SKIP() << "under ROOST_OFFLOAD=1 the service may carry the second free out, overwriting "
                    "the message's queue link, before it receives the message";
  void* p = g_malloc(16);
  expect_caught_object(Caught::kAll, "double free", p, class_size(p), [p] {
    free_on_another_thread(p);  // the thread's exit posts it
    g_free(p);
    for (int i = 0; i < 100000; i++) g_free(g_malloc(16));
  });
}

TEST(DoubleFree, ZeroSizeAllocation) {
  void* p = g_malloc(g_zero);
  expect_caught_object(Caught::kAll, "double free", p, class_size(p), [p] {
    g_free(p);
    g_free(p);
  });
}

TEST(DoubleFree, LargeObject) {
  void* p = g_malloc(1 << 20);
  expect_caught_object(Caught::kAll, "double free", p, class_size(p), [p] {
    g_free(p);
    g_free(p);
  });
}

TEST(DoubleFree, LargeObjectAfterOtherLargeAllocations) {
  if (offload_on())
    GTEST_SKIP() << "under ROOST_OFFLOAD=1 the service, filling this thread's rings, may carve a "
                    "slab out of the released chunk before the second free, which then frees "
                    "one of its objects";
  void* p = g_malloc(300000);
  expect_caught_object(Caught::kAll, "double free", p, class_size(p), [p] {
    g_free(p);
    for (int i = 0; i < 8; i++) escape(g_malloc(700000));
    g_free(p);
  });
}

TEST(DoubleFree, HugeObject) {
  void* p = g_malloc(size_t{3} << 29);  // 1.5 GiB: mapped alone
  ASSERT_NE(p, nullptr);
  expect_caught_object(Caught::kAll, "double free", p, class_size(p), [p] {
    g_free(p);
    g_free(p);
  });
  free(p);
}

// ---- invalid free --------------------------------------------------------

TEST(InvalidFree, StackAddress) {
  alignas(64) char on_stack[256];
  memset(on_stack, 1, sizeof(on_stack));
  void* p = on_stack + 64;
  expect_caught(Caught::kAll, "invalid pointer \\(not allocated by roost\\)", p,
                [p] { g_free(p); });
}

TEST(InvalidFree, GlobalAddress) {
  void* p = g_global + 256;
  expect_caught(Caught::kAll, "invalid pointer \\(not allocated by roost\\)", p,
                [p] { g_free(p); });
}

TEST(InvalidFree, AllocaAddress) {
  // The child runs inside this frame: the alloca'd bytes are there.
  void* p = alloca(128);
  memset(p, 1, 128);
  escape(p);
  expect_caught(Caught::kAll, "invalid pointer \\(not allocated by roost\\)", p,
                [p] { g_free(p); });
}

TEST(InvalidFree, NearButOutsideALargeObject) {
  // 75 pages at the start of a 512 KiB chunk: past them, still in the chunk.
  char* p = static_cast<char*>(g_malloc(300000));
  void* past = p + 310000 - 310000 % 16;
  expect_caught(Caught::kAll, "invalid pointer \\([a-z ]*\\)", past, [past] { g_free(past); });
}

TEST(InvalidFree, FarOutsideTheHeap) {
  void* p = reinterpret_cast<void*>(uintptr_t{0x10000});
  expect_caught(Caught::kAll, "invalid pointer \\(not allocated by roost\\)", p,
                [p] { g_free(p); });
}

TEST(InvalidFree, Unaligned) {
  char* p = static_cast<char*>(g_malloc(64));
  void* q = p + 1;
  expect_caught_object(Caught::kAll, "invalid pointer \\(interior of an object\\)", q,
                       class_size(p), [q] { g_free(q); });
}

// The default build's free fast path checks alignment, not the exact
// object start (a multiply chain); every other path checks both.
TEST(InvalidFree, InteriorAligned) {
  char* p = static_cast<char*>(g_malloc(64));
  void* q = p + 16;
  expect_caught_object(Caught::kSecure, "invalid pointer \\(interior of an object\\)", q,
                       class_size(p), [q] { g_free(q); });
}

// The same pointer into another thread's object takes the remote free's
// path, which tests the exact object start in every build.
TEST(InvalidFree, InteriorAlignedOfAnotherThreadsObject) {
  char* p = nullptr;
  std::thread([&p] { p = static_cast<char*>(g_malloc(64)); }).join();
  void* q = p + 16;
  expect_caught_object(Caught::kAll, "invalid pointer \\(interior of an object\\)", q,
                       class_size(p), [q] { g_free(q); });
  g_free(p);
}

// Object starts roost never handed out, in a new slab: the child allocates
// objects of kFreshClassSize bytes (the class of 160 bytes, with the
// hardened build's canary word too) until one starts a new slab (roost's
// count of the class's slabs goes up).  A new slab's first carve is a page:
// the other objects of that page are carved and wait to be handed out
// (marked as freed objects are); those past it were never carved.
namespace {

// Slabs held of the size class whose objects are `size` bytes, or 0.
uint64_t class_slabs(size_t size) {
  ClassCountFn count = class_count_fn();
  ClassStatsFn stats = class_stats_fn();
  if (count == nullptr || stats == nullptr) return 0;
  for (unsigned c = 0; c < count(); c++) {
    struct roost_class_stats s {};
    if (stats(c, &s) == 0 && s.size == size) return s.slabs;
  }
  return 0;
}

constexpr size_t kFreshClassSize = 150;
constexpr size_t kFreshClassSlot = 160;
// Slabs of classes up to 4 KiB: 64 KiB, aligned to their size.
constexpr uintptr_t kSmallSlabBytes = 64 * 1024;

struct NewSlab {
  char* base;   // its first byte
  char* taken;  // the one object handed out of it
};

// In a child: a new slab of the class, and its object handed out.
NewSlab start_new_slab() {
  ClassCountFn count = class_count_fn();
  ClassStatsFn stats = class_stats_fn();
  unsigned c = 0;
  struct roost_class_stats now {};
  while (c < count() && (stats(c, &now) != 0 || now.size != kFreshClassSlot)) c++;
  for (int i = 0; i < 100000; i++) {
    uint64_t before = stats(c, &now) == 0 ? now.slabs : 0;
    auto* p = static_cast<char*>(g_malloc(kFreshClassSize));
    if (stats(c, &now) == 0 && now.slabs > before) {
      auto base = reinterpret_cast<uintptr_t>(p) & ~(kSmallSlabBytes - 1);
      return {reinterpret_cast<char*>(base), p};
    }
  }
  child_check(false, "no new slab of the class");
  return {};
}

// The objects below: another allocator (observed) has no slabs to count.
bool new_slabs_seen() { return build_under_test() != "observe"; }

}  // namespace

// An object of the new slab's first carve other than the one handed out.
TEST(InvalidFree, ObjectStartCarvedButNeverHandedOut) {
  if (offload_on()) GTEST_SKIP() << "under ROOST_OFFLOAD=1 the service's allocator carves";
  expect_caught_child_object(Caught::kAll, "double free", kFreshClassSlot, [] {
    char* q;
    if (new_slabs_seen()) {
      NewSlab s = start_new_slab();
      q = s.taken == s.base ? s.base + kFreshClassSlot : s.base;
    } else {
      q = static_cast<char*>(g_malloc(kFreshClassSize)) + kFreshClassSlot;
    }
    say_address(q);
    g_free(q);
  });
}

// An object start past what the slab has carved (its 40th object, past the
// first carve's page): memory roost never handed out, which every free
// compares with the slab's carved extent.
TEST(InvalidFree, ObjectStartNeverCarved) {
  if (offload_on()) GTEST_SKIP() << "under ROOST_OFFLOAD=1 the service's allocator carves";
  expect_caught_child_object(
      Caught::kAll, "invalid pointer \\(never allocated\\)", kFreshClassSlot, [] {
        char* q;
        if (new_slabs_seen()) {
          q = start_new_slab().base + 40 * kFreshClassSlot;
        } else {
          q = static_cast<char*>(g_malloc(kFreshClassSize)) + 40 * kFreshClassSlot;
        }
        say_address(q);
        g_free(q);
      });
}

// ---- frees of pointers never handed out: every size class, large objects ----
//
// For each of roost's size classes, in a child each: a new slab of the
// class and the one object it handed out, `p`; then a free of an object
// start of that slab other than `p` (the next ones, the last one, and the
// start of the slab's tail past its last object where its size leaves
// one), which roost either carved and has not handed out ("double free")
// or never carved ("never allocated"); of `p + 8` (unaligned: every build)
// and `p + 16` (16-byte aligned inside a live object: the secure builds;
// the default's free fast path checks the alignment only).  For large and
// huge objects, frees at offsets inside them and just past their end.
// Every one must be stopped, naming the address.
namespace {

// In a child: a new slab of the class of index `c`, whose objects are
// `size` bytes, its size and the object it handed out (allocations of the
// class until the class's slab count goes up).
struct ClassSlab {
  char* base;
  size_t bytes;
  char* taken;
};
// The class's statistics (a snapshot of every allocator) are asked only
// when an allocation lies outside the slab the one before it came from: the
// objects of one slab share its slab-aligned base, and a slab that holds an
// object is never another slab's, so the allocations between two asks
// started no slab.
ClassSlab start_new_slab_of(unsigned c, size_t size) {
  ClassStatsFn stats = class_stats_fn();
  struct roost_class_stats now {};
  size_t asked = is_hardened() ? size - 8 : size;  // (its canary word)
  uint64_t before = stats(c, &now) == 0 ? now.slabs : 0;
  const uintptr_t slab_bytes = now.slabs != 0 ? now.slab_bytes / now.slabs : 0;
  uintptr_t last_base = 0;
  for (int i = 0; i < 100000; i++) {
    auto* p = static_cast<char*>(g_malloc(asked));
    if (slab_bytes != 0) {
      uintptr_t base = reinterpret_cast<uintptr_t>(p) & ~(slab_bytes - 1);
      if (i > 0 && base == last_base) continue;  // the slab of the allocation before
      last_base = base;
    }
    if (stats(c, &now) != 0) continue;
    if (now.slabs <= before) {
      before = now.slabs;
    } else {
      size_t bytes = now.slab_bytes / now.slabs;
      auto base = reinterpret_cast<uintptr_t>(p) & ~(uintptr_t{bytes} - 1);
      return {reinterpret_cast<char*>(base), bytes, p};
    }
  }
  child_check(false, "no new slab of the class");
  return {};
}

// What became of a child that freed (or passed to `call`) the address it
// named first (see say_address): empty when roost stopped it with one line
// naming that address as `fault` (a regular expression), else what
// happened.
std::string stopped_naming(const ChildResult& r, const std::string& fault,
                           const std::string& call = "free") {
  if (r.exited || r.signal != SIGABRT) return r.describe();
  size_t eol = r.err.find('\n');
  if (eol == std::string::npos) return r.describe();
  std::string addr = r.err.substr(0, eol);
  std::regex line("roost: " + call + ": (" + fault + ") " + addr + "( [^\n]*)?\n");
  if (!std::regex_match(r.err.substr(eol + 1), line)) return "wanted " + fault + ": " + r.err;
  return "";
}

// A case on roost's own size classes and slabs, which every build must
// catch: why it cannot run here, or nothing.
std::string why_not_on_own_slabs() {
  caught_levels()[current_case()] = Caught::kAll;
  std::string build = build_under_test();
  if (build != "default" && build != "secure" && build != "hardened")
    return "roost's own size classes and slabs (ROOSTTEST_BUILD is " + build + ")";
  if (offload_on()) return "under ROOST_OFFLOAD=1 the service's allocator carves";
  return "";
}

}  // namespace

TEST(InvalidFree, NeverHandedOutInEveryClassAndLargeObjects) {
  if (std::string why = why_not_on_own_slabs(); !why.empty()) GTEST_SKIP() << why;
  std::string build = build_under_test();
  ClassCountFn count = class_count_fn();
  ClassStatsFn stats = class_stats_fn();
  ASSERT_NE(count, nullptr);
  int frees = 0;
  for (unsigned c = 0; c < count(); c++) {
    struct roost_class_stats cs {};
    ASSERT_EQ(stats(c, &cs), 0);
    size_t size = cs.size;
    // Which address of the new slab to free: an object start (1, 2: the
    // next ones; 3: the last; 4: the tail past the last object), or inside
    // the object handed out (5: 8 bytes in, 6: 16 bytes in).
    for (int which = 1; which <= 6; which++) {
      if (which == 6 && build == "default") continue;
      ChildResult r = run_in_child(
          [c, size, which] {
            ClassSlab s = start_new_slab_of(c, size);
            size_t objects = s.bytes / size;
            char* q = nullptr;
            if (which <= 3) {
              size_t index = which == 3 ? objects - 1 : which;
              q = s.base + index * size;
              // (The hardened build hands out a new slab's objects in
              // random order: never the object handed out.)
              if (q == s.taken) q = s.base + (index == 0 ? 1 : index - 1) * size;
            } else if (which == 4) {
              if (objects * size == s.bytes) _exit(0);  // no tail
              q = s.base + objects * size;
            } else {
              q = s.taken + (which == 5 ? 8 : 16);
            }
            say_address(q);
            g_free(q);
            _exit(0);
          },
          30);
      if (which == 4 && r.exited && r.exit_code == 0 && r.err.empty()) continue;  // no tail
      // (16 bytes into a 16-byte object is the next object's start.)
      bool start = which <= 4 || (which == 6 && size == 16);
      const char* fault = start ? "double free|invalid pointer \\(never allocated\\)"
                                : "invalid pointer \\(interior of an object\\)";
      EXPECT_EQ(stopped_naming(r, fault), "") << "class of " << size << " bytes, case " << which;
      frees++;
    }
  }
  // Large and huge objects: inside (16 bytes, a page, a granule in) and
  // just past the end.  Each size is a byte over a power of two, so that
  // in every build the object's chunk reaches past its end: the address
  // past it is the chunk's unused tail, never the start of the next chunk,
  // which may hold a live object (whose free is no fault).
  for (size_t size : {size_t{256 * 1024 + 1}, (size_t{1} << 20) + 1, (size_t{64} << 20) + 1}) {
    for (size_t offset : {size_t{16}, size_t{4096}, size_t{64 * 1024}, size_t{0}}) {
      ChildResult r = run_in_child(
          [size, offset] {
            auto* p = static_cast<char*>(g_malloc(size));
            char* q = p + (offset != 0 ? offset : (size + 4095) / 4096 * 4096);
            say_address(q);
            g_free(q);
            _exit(0);
          },
          30);
      EXPECT_EQ(stopped_naming(r, "invalid pointer \\([^)]*\\)"), "")
          << "a large object of " << size << " bytes, " << offset << " bytes in";
      frees++;
    }
  }
  EXPECT_GE(frees, 200);
}

// malloc_usable_size tests a pointer as free does, on its fast path too:
// of an object start that a new slab never carved (its last object) and of
// the inside of the object it handed out (16 bytes in: aligned; 8 bytes
// in), every build names the fault.
TEST(InvalidUsableSize, NeverCarvedOrInsideAnObject) {
  if (std::string why = why_not_on_own_slabs(); !why.empty()) GTEST_SKIP() << why;
  for (int which = 1; which <= 3; which++) {
    ChildResult r = run_in_child(
        [which] {
          NewSlab s = start_new_slab();
          size_t objects = kSmallSlabBytes / kFreshClassSlot;
          char* q = which == 1   ? s.base + (objects - 1) * kFreshClassSlot
                    : which == 2 ? s.taken + 16
                                 : s.taken + 8;
          say_address(q);
          size_t n = g_usable_size(q);
          std::printf("%zu\n", n);
          _exit(0);
        },
        30);
    const char* fault = which == 1 ? "invalid pointer \\(never allocated\\)"
                                   : "invalid pointer \\(interior of an object\\)";
    EXPECT_EQ(stopped_naming(r, fault, "malloc_usable_size"), "") << "case " << which;
  }
}

// ---- writes into freed objects: after free, and overflows ---------------------

namespace {

// Zeros, written over a freed object.
char g_bytes[64] = {};

}  // namespace

// A byte past the link and the mark: only the hardened build's check of
// freed objects covers it.
TEST(WriteAfterFree, OneByteThenMallocOfTheSameSize) {
  char* p = static_cast<char*>(g_malloc(64));
  expect_caught(Caught::kHardened, "write to a freed object", p, [p] {
    g_free(p);
    p[40] = 1;
    allocate_until_handed_out(p, 64);
  });
}

TEST(WriteAfterFree, WholeObjectByMemcpyThenMalloc) {
  char* p = static_cast<char*>(g_malloc(112));
  // Under ROOST_OFFLOAD=1 the object is the service allocator's: the write
  // may come while it is still on its way home (the free ring, then a
  // message), and the link it overwrites is then the message's.
  const char* fault =
      offload_on() ? "(write to a freed object|corrupted message)" : "write to a freed object";
  expect_caught(Caught::kSecure, fault, p, [p] {
    g_free(p);
    memcpy(p, g_bytes, 64);
    allocate_until_handed_out(p, 112);
  });
}

// The link and the mark (the object's first 16 bytes) are the secure
// build's; the rest the hardened build's zero.
//
// The link alone: what a freed object's first word says is not followed.
TEST(CorruptedFreeList, LinkOverwrittenThenMalloc) {
  if (offload_on())
    GTEST_SKIP() << "under ROOST_OFFLOAD=1 the free waits on the free ring, and the service may "
                    "write the link after the overwrite";
  char* p = static_cast<char*>(g_malloc(96));
  expect_caught(Caught::kSecure, link_overwritten_fault(), p, [p] {
    g_free(p);
    uintptr_t forged = reinterpret_cast<uintptr_t>(p) + 4096;
    memcpy(p, &forged, sizeof(forged));
    allocate_until_handed_out(p, 96);
  });
}

// A message's link: an object freed on another thread waits in its owner's
// inbox (posted at that thread's exit) when its first word is overwritten.
TEST(CorruptedMessage, LinkOverwrittenWhileInItsOwnersInbox) {
  if (offload_on())
    GTEST_SKIP() << "under ROOST_OFFLOAD=1 the free waits on the thread's free ring, and the "
                    "service sends it on later";
  char* p = static_cast<char*>(g_malloc(96));
  expect_caught(Caught::kSecure, "corrupted message", p, [p] {
    free_on_another_thread(p);
    uintptr_t forged = reinterpret_cast<uintptr_t>(p) + 8;
    memcpy(p, &forged, sizeof(forged));
    for (int i = 0; i < 100000; i++) escape(g_malloc(96));
  });
}

// The same link overwritten with the address of another freed object of
// its class, which carries its free mark: an object start the check would
// accept, had the link held it plainly.  Encoded (secure build), the
// forged word decodes to nowhere, and the fault names the overwritten
// object, not the one forged in.
TEST(CorruptedMessage, LinkForgedToAnotherFreedObjectWhileInItsOwnersInbox) {
  if (offload_on())
    GTEST_SKIP() << "under ROOST_OFFLOAD=1 the free waits on the thread's free ring, and the "
                    "service sends it on later";
  char* p = static_cast<char*>(g_malloc(96));
  char* q = static_cast<char*>(g_malloc(96));
  expect_caught(Caught::kSecure, "corrupted message", p, [p, q] {
    g_free(q);
    free_on_another_thread(p);
    memcpy(p, &q, sizeof(q));
    for (int i = 0; i < 100000; i++) escape(g_malloc(96));
  });
  g_free(q);
  g_free(p);
}

// Overflows and underflows into a free neighbour, caught when the
// neighbour is handed out; and (the hardened build's canaries) into the
// slack after a live object or on into a live neighbour, caught at the
// free of the object whose canary they reach.  Each names that object.
namespace {

// Two objects `stride` bytes apart, `second` right after `first`.
struct Neighbours {
  char* first;
  char* second;
};

// Allocates objects with `make` into *kept until two lie `stride` bytes
// apart (slot_of() the size made), and returns them ({nullptr} if 4096 do
// not).  Not across a 64 KiB boundary: in roost the two then lie in one
// slab (slabs of these classes are 64 KiB, aligned).  *kept is reserved
// first, in a bigger class, so that nothing else lands among the objects.
Neighbours allocate_neighbours(size_t stride, std::vector<char*>* kept,
                               const std::function<char*()>& make) {
  constexpr size_t kMany = 4096;
  kept->reserve(kMany);
  if (stride == 0) {
    // Observing another allocator: its stride is the smallest gap between
    // two of 256 objects (within 64 KiB), kept too.
    for (size_t i = 0; i < 256; i++) kept->push_back(make());
    std::vector<char*> sorted = *kept;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 1; i < sorted.size(); i++) {
      bool same_64k = (reinterpret_cast<uintptr_t>(sorted[i]) & 0xffff) != 0;
      auto gap = static_cast<size_t>(sorted[i] - sorted[i - 1]);
      if (same_64k && gap != 0 && gap < 65536 && (stride == 0 || gap < stride)) stride = gap;
    }
    if (stride == 0) return Neighbours{nullptr, nullptr};
  }
  for (size_t i = 0; i < kMany; i++) {
    char* p = make();
    for (char* q : *kept) {
      char* second = std::max(p, q);
      bool same_64k = (reinterpret_cast<uintptr_t>(second) & 0xffff) != 0;
      if (std::min(p, q) + stride == second && same_64k) {
        kept->push_back(p);
        return Neighbours{std::min(p, q), second};
      }
    }
    kept->push_back(p);
  }
  return Neighbours{nullptr, nullptr};
}

Neighbours allocate_neighbours(size_t size, std::vector<char*>* kept) {
  return allocate_neighbours(slot_of(size), kept,
                             [size] { return static_cast<char*>(g_malloc(size)); });
}

// `len` bytes, each the complement of the byte it replaces, written at
// `at`: with one byte by a store, else by memcpy.
void overwrite(char* at, size_t len) {
  char bytes[64];
  for (size_t i = 0; i < len; i++) bytes[i] = static_cast<char>(~at[i]);
  if (len == 1)
    at[0] = bytes[0];
  else
    memcpy(at, bytes, len);
}

// Of two `size`-byte neighbours, one is freed, then the other writes `len`
// bytes into it: with `overflow`, the first from the second's start on;
// else the second just before its own start, into the end of the first.
// The builds `caught` names catch it.
void expect_neighbour_caught(Caught caught, const std::string& fault, size_t size, size_t len,
                             bool overflow) {
  // Found in the parent: the child inherits the heap, and with it the pair.
  std::vector<char*> keep;
  Neighbours n = allocate_neighbours(size, &keep);
  ASSERT_NE(n.first, nullptr) << "no two objects next to each other";
  char* victim = overflow ? n.second : n.first;
  char* at = overflow ? n.second : n.second - len;
  // Under ROOST_OFFLOAD=1 the service carries out the free, and a victim
  // of an allocator other than the service's goes home as a message, whose
  // words (the link; the secure build's batch word in its last) the write
  // may reach: caught on receipt as a corrupted message.
  std::string caught_as = offload_on() ? "(" + fault + "|corrupted message)" : fault;
  expect_caught(caught, caught_as, victim, [=] {
    g_free(victim);
    overwrite(at, len);
    allocate_until_handed_out(victim, size);
  });
  for (void* p : keep) g_free(p);
}

// Of two live `size`-byte neighbours, the first writes `len` bytes from its
// end on (`overflow`: into its slack, and past it into the second), or the
// second `len` bytes before its start (into the end of the first).  The
// hardened build catches it at the first's free, naming the first.
void expect_live_neighbour_caught(size_t size, size_t len, bool overflow) {
  std::vector<char*> keep;
  Neighbours n = allocate_neighbours(size, &keep);
  ASSERT_NE(n.first, nullptr) << "no two objects next to each other";
  char* at = overflow ? n.first + size : n.second - len;
  expect_caught_object(Caught::kHardened, "buffer overflow", n.first, slot_of(size), [=] {
    overwrite(at, len);
    g_free(n.first);
  });
  for (void* p : keep) g_free(p);
}

}  // namespace

// Another thread's free of this thread's object: it waits in that
// thread's quarantine and BatchIt cache (under ROOST_OFFLOAD=1, on its free
// ring until the service sends it) and goes home as a message, whose batch
// word lands on the object's last word, zero till then.  A write
// there meanwhile is caught as the message is sent (or, under offload,
// where the service sent it first, as the message arrives): the batch word
// does not hide it, though the receiver zeroes the word again.
TEST(WriteAfterFree, LastByteWhileOnItsWayHome) {
  // The last byte of the object's slot: the one before its neighbour
  // (found, so that an allocator observed, whose slots the test does not
  // know, meets the same write).
  std::vector<char*> keep;
  Neighbours n = allocate_neighbours(64, &keep);
  ASSERT_NE(n.first, nullptr) << "no two objects next to each other";
  char* p = n.first;
  char* last = n.second - 1;
  std::string fault = "write to a freed object";
  if (offload_on()) fault = "(" + fault + "|corrupted message)";
  expect_caught(Caught::kHardened, fault, p, [p, last] {
    // The thread's exit sends what its quarantine and cache hold.
    std::thread([p, last] {
      g_free(p);
      *last = 1;
    }).join();
    allocate_until_handed_out(p, 64);
  });
  for (void* q : keep) g_free(q);
}

// The default build keeps a free object's link in its second word: an
// overflow of 1 to 8 bytes into a free neighbour lands on its free mark,
// which nothing follows and its hand-out wipes, so the program runs on (as
// under glibc, where such bytes are the chunk's own slack) instead of
// following a broken link.  The secure build catches the same overflows
// (the cases below).
TEST(Overflow, UpToEightBytesIntoAFreeNeighbourTheDefaultBuildRunsOn) {
  if (build_under_test() != "default")
    GTEST_SKIP() << "the default build's behaviour (the secure build catches these below)";
  for (size_t len : {size_t{1}, size_t{8}}) {
    std::vector<char*> keep;
    Neighbours n = allocate_neighbours(48, &keep);
    ASSERT_NE(n.first, nullptr) << "no two objects next to each other";
    ChildResult r = run_in_child(
        [n, len] {
          g_free(n.second);
          memset(n.first + 48, 0x5a, len);
          allocate_until_handed_out(n.second, 48);
          for (int i = 0; i < 10000; i++) memset(g_malloc(48), 0x11, 48);
        },
        30);
    if (offload_on() && r.exited && r.exit_code == kNotHandedOutUnderOffload)
      GTEST_SKIP() << "the freed neighbour did not come back (allocate_until_handed_out)";
    EXPECT_TRUE(r.exited && r.exit_code == 0) << len << " bytes: " << r.describe();
    EXPECT_EQ(r.err, "") << len << " bytes";
    for (void* p : keep) g_free(p);
  }
}

// A one-byte overflow reaches only the neighbour's link.  Under
// ROOST_OFFLOAD=1 a freed neighbour waits on the free ring, with no link,
// until the service links it: the overflow may be overwritten unseen.
TEST(Overflow, OneByteByStoreIntoAFreeSmallNeighbour) {
  if (offload_on())
    GTEST_SKIP() << "under ROOST_OFFLOAD=1 the link may be written after the overflow";
  expect_neighbour_caught(Caught::kSecure, link_overwritten_fault(), 48, 1, true);
}

TEST(Overflow, ThirtyTwoBytesByMemcpyIntoAFreeSmallNeighbour) {
  expect_neighbour_caught(Caught::kSecure, "write to a freed object", 48, 32, true);
}

TEST(Overflow, OneByteByStoreIntoAFreeMediumNeighbour) {
  if (offload_on())
    GTEST_SKIP() << "under ROOST_OFFLOAD=1 the link may be written after the overflow";
  expect_neighbour_caught(Caught::kSecure, link_overwritten_fault(), 2048, 1, true);
}

TEST(Overflow, ThirtyTwoBytesByMemcpyIntoAFreeMediumNeighbour) {
  expect_neighbour_caught(Caught::kSecure, "write to a freed object", 2048, 32, true);
}

// An underflow reaches the end of the neighbour before, whose zero only
// the hardened build checks.
TEST(Underflow, OneByteByStoreIntoAFreeSmallNeighbour) {
  expect_neighbour_caught(Caught::kHardened, "write to a freed object", 64, 1, false);
}

TEST(Underflow, ThirtyTwoBytesByMemcpyIntoAFreeSmallNeighbour) {
  expect_neighbour_caught(Caught::kHardened, "write to a freed object", 64, 32, false);
}

TEST(Underflow, OneByteByStoreIntoAFreeMediumNeighbour) {
  expect_neighbour_caught(Caught::kHardened, "write to a freed object", 2048, 1, false);
}

// Into live objects: the hardened build's canaries.  An object of 33
// bytes has 7 bytes of slack before its canary word; one of 48, 8.
TEST(Overflow, OneByteByStoreIntoTheSlackOfASmallObject) {
  expect_live_neighbour_caught(33, 1, true);
}

TEST(Overflow, ThirtyTwoBytesByMemcpyIntoALiveSmallNeighbour) {
  expect_live_neighbour_caught(48, 32, true);
}

TEST(Overflow, OneByteByStoreIntoTheSlackOfAMediumObject) {
  expect_live_neighbour_caught(2000, 1, true);
}

TEST(Underflow, OneByteByStoreIntoALiveSmallNeighbour) {
  expect_live_neighbour_caught(64, 1, false);
}

TEST(Underflow, ThirtyTwoBytesByMemcpyIntoALiveSmallNeighbour) {
  expect_live_neighbour_caught(64, 32, false);
}

// The canary is checked wherever the object's size is read: realloc and
// malloc_usable_size name the overflow too.
TEST(Overflow, OneByteByStorePastASmallObjectThenRealloc) {
  auto* p = static_cast<char*>(g_malloc(100));
  expect_caught_object(Caught::kHardened, "buffer overflow", p, slot_of(100), [p] {
    overwrite(p + 100, 1);
    escape(realloc(p, 1000));
  });
  g_free(p);
}

TEST(Overflow, OneByteByStorePastASmallObjectThenUsableSize) {
  auto* p = static_cast<char*>(g_malloc(100));
  expect_caught_object(Caught::kHardened, "buffer overflow", p, slot_of(100), [p] {
    overwrite(p + 100, 1);
    size_t n = malloc_usable_size(p);
    escape(&n);
  });
  g_free(p);
}

// The byte right before an object, written as the field's test programs
// write it (`p[-1] ^= 'A'`), then the object freed, reallocated or asked
// its size, alone: the hardened build checks that byte (the last of the
// slot before, which roost keeps 0 or its canary key's top byte whatever
// state that slot is in: ds/slack_canary.h) wherever it checks the
// object's own canary, and names the object.  The object is never its
// slab's first (which has no slot before it): it has a neighbour before
// it, live or (`neighbour_freed`) freed just before.
namespace {

void expect_byte_before_caught(size_t size, bool neighbour_freed,
                               const std::function<void(char*)>& then) {
  std::vector<char*> keep;
  Neighbours n = allocate_neighbours(size, &keep);
  ASSERT_NE(n.first, nullptr) << "no two objects next to each other";
  char* p = n.second;
  expect_caught_object(Caught::kHardened, "buffer underflow", p, slot_of(size), [=] {
    if (neighbour_freed) g_free(n.first);
    p[-1] ^= 'A';
    then(p);
  });
  for (void* q : keep) g_free(q);
}

void free_it(char* p) { g_free(p); }

}  // namespace

TEST(Underflow, OneByteBeforeASmallObjectCaughtAtItsFree) {
  expect_byte_before_caught(64, false, free_it);
}

TEST(Underflow, OneByteBeforeASmallObjectAfterAFreeNeighbourCaughtAtItsFree) {
  expect_byte_before_caught(64, true, free_it);
}

// The 16-byte class (8 bytes asked for in the hardened build): the slot
// before holds its canary word, or its free mark, in its last word.
TEST(Underflow, OneByteBeforeASixteenByteObjectCaughtAtItsFree) {
  expect_byte_before_caught(8, false, free_it);
}

TEST(Underflow, OneByteBeforeASixteenByteObjectAfterAFreeNeighbourCaughtAtItsFree) {
  expect_byte_before_caught(8, true, free_it);
}

TEST(Underflow, OneByteBeforeAMediumObjectCaughtAtItsFree) {
  expect_byte_before_caught(2048, false, free_it);
}

TEST(Underflow, OneByteBeforeAMediumObjectAfterAFreeNeighbourCaughtAtItsFree) {
  expect_byte_before_caught(2048, true, free_it);
}

TEST(Underflow, OneByteBeforeASmallObjectCaughtAtItsRealloc) {
  expect_byte_before_caught(64, false, [](char* p) { escape(realloc(p, 1000)); });
}

TEST(Underflow, OneByteBeforeASmallObjectCaughtAtItsUsableSize) {
  expect_byte_before_caught(64, true, [](char* p) {
    size_t n = malloc_usable_size(p);
    escape(&n);
  });
}

// The same test programs' other variant, 32 bytes before (`p[-32] ^=
// 'A'`): in roost that byte is the live object before's own (its 64 bytes
// asked for end at its slot's end, or 16 bytes before it where the
// hardened build's canary word takes them), which no build checks: every
// build runs on past the free.  (Were the object before free, the hardened
// build would catch the write when it is handed out again: the
// Underflow.*IntoAFree*Neighbour cases.)
TEST(Underflow, OneByteThirtyTwoBytesBeforeASmallObjectRunsOnPastItsFree) {
  std::string build = build_under_test();
  if (build != "observe" && build != "default" && build != "secure" && build != "hardened")
    GTEST_SKIP() << "ROOSTTEST_BUILD is not default, secure or hardened";
  std::vector<char*> keep;
  Neighbours n = allocate_neighbours(64, &keep);
  ASSERT_NE(n.first, nullptr) << "no two objects next to each other";
  char* p = n.second;
  auto misuse = [p] {
    p[-32] ^= 'A';
    g_free(p);
  };
  if (build == "observe") {
    observe(misuse);
  } else {
    ChildResult r = run_in_child(misuse, 30);
    EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe();
    EXPECT_EQ(r.err, "");
  }
  for (void* q : keep) g_free(q);
}

// Overflows past a large object: the bytes between the size asked for and
// the page boundary hold a canary that free and realloc check (a size of
// whole pages gets a page of them); the page after those faults, and the
// fault is named.

namespace {

// Large objects (above 256 KiB).  300 000 bytes: 3 104 bytes of slack
// before the page boundary.
constexpr size_t kLargeSize = 300000;
// Exactly 80 pages of 4 KiB: a page of slack (a canary) follows, then the
// guard page.
constexpr size_t kPageExactSize = 80 * 4096;

// Where the guard page after a large object of `size` bytes starts: past
// its slack, at least a byte, up to the OS's page boundary.
size_t guard_offset(size_t size) {
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (size + 1 + page - 1) / page * page;
}

// ROOST_LARGE_GUARDS=0: the hardened build's large objects have their
// canary only, as the secure build's have.
bool large_guards_off() {
  const char* e = getenv("ROOST_LARGE_GUARDS");
  return e != nullptr && strcmp(e, "0") == 0;
}

// Do roost's large objects end at a guard page (the hardened build's)?
bool guard_pages_on() { return is_hardened() && !large_guards_off(); }

}  // namespace

TEST(Overflow, OneByteByStorePastALargeObject) {
  auto* p = static_cast<char*>(g_malloc(kLargeSize));
  expect_caught(Caught::kSecure, "buffer overflow", p, [p] {
    p[kLargeSize] = static_cast<char>(~p[kLargeSize]);
    g_free(p);
  });
  g_free(p);
}

TEST(Overflow, ThirtyTwoBytesByMemcpyPastALargeObject) {
  auto* p = static_cast<char*>(g_malloc(kLargeSize));
  expect_caught(Caught::kSecure, "buffer overflow", p, [p] {
    char bytes[48];
    memset(bytes, 0x5a, sizeof(bytes));
    memcpy(p + kLargeSize - 16, bytes, sizeof(bytes));
    g_free(p);
  });
  g_free(p);
}

TEST(Overflow, OneByteByStorePastALargeObjectThenRealloc) {
  auto* p = static_cast<char*>(g_malloc(kLargeSize));
  expect_caught(Caught::kSecure, "buffer overflow", p, [p] {
    p[kLargeSize + 7] = static_cast<char>(~p[kLargeSize + 7]);
    escape(realloc(p, 2 * kLargeSize));
  });
  g_free(p);
}

TEST(Overflow, OneByteByStorePastAPageExactLargeObject) {
  auto* p = static_cast<char*>(g_malloc(kPageExactSize));
  expect_caught(Caught::kSecure, "buffer overflow", p, [p] {
    p[kPageExactSize] = static_cast<char>(~p[kPageExactSize]);
    g_free(p);
  });
  g_free(p);
}

// A store into the guard page after an object of `size` bytes faults at
// once, and the handler names the object ("roost: access at 0x...: buffer
// overflow 0x<object> (size class <its size> bytes)").
void expect_guard_page_named(size_t size) {
  auto* p = static_cast<char*>(g_malloc(size));
  ASSERT_NE(p, nullptr);
  expect_caught_object(Caught::kHardened, "buffer overflow", p, size, [p, size] {
    static_cast<volatile char*>(p)[guard_offset(size)] = 1;
    g_free(p);
  });
  g_free(p);
}

TEST(Overflow, StoreIntoTheGuardPageAfterALargeObject) {
  if (large_guards_off()) GTEST_SKIP() << "ROOST_LARGE_GUARDS=0: no guard pages";
  expect_guard_page_named(kLargeSize);
  expect_guard_page_named(kPageExactSize);
}

TEST(Overflow, StoreIntoTheGuardPageAfterAHugeObject) {
  if (large_guards_off()) GTEST_SKIP() << "ROOST_LARGE_GUARDS=0: no guard pages";
  expect_guard_page_named(size_t{3} << 29);  // 1.5 GiB: mapped alone
}

// ---- a megabyte written from an object's start -------------------------------

namespace {

constexpr size_t kOneMiB = size_t{1} << 20;

// Sizes asked for of a 64-byte, a 4 KiB and a 256 KiB object.
constexpr size_t kRunSizes[] = {64, 4096, 256 * 1024};

// A megabyte written from the start of an object of `size` bytes, by a
// byte loop or by one memcpy (from a mapping of its own): it runs on past
// the object over whatever follows.  The hardened build stops it at a
// guard page in its way.  The byte loop writes in address order, so it
// stops at the first: a small object's slab ends at one (named by the
// slab's last object, which the run went through: a buffer overflow in the
// object's size class, at or after the object), a large object at its own
// (named by the object).  One memcpy need not write in address order
// (glibc's stores a block's last bytes, and those of each quarter of a
// large block, before the rest), so it may first meet the guard page of a
// slab further on: an object of any class, at or after the object, named.
// Without guard pages nothing stops either within the megabyte.
void expect_megabyte_run_caught(size_t size, bool by_memcpy) {
  if (size + 8 > small_limit() && large_guards_off())
    GTEST_SKIP() << "ROOST_LARGE_GUARDS=0: no guard page after a large object";
  auto* p = static_cast<char*>(g_malloc(size));
  ASSERT_NE(p, nullptr);
  size_t named_size = class_size(p);
  std::optional<ChildResult> r = run_case(Caught::kHardened, [p, by_memcpy] {
    if (by_memcpy) {
      void* from =
          mmap(nullptr, kOneMiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      child_check(from != MAP_FAILED, "mmap");
      memset(from, 0x5a, kOneMiB);
      memcpy(p, from, kOneMiB);
    } else {
      volatile char* v = p;
      for (size_t i = 0; i < kOneMiB; i++) v[i] = 0x5a;
    }
  });
  if (!r) return;
  ASSERT_FALSE(r->exited) << "not caught: " << r->describe();
  EXPECT_EQ(r->signal, SIGABRT) << r->describe();
  std::smatch m;
  std::string named_class = by_memcpy ? "[0-9]+" : std::to_string(named_size);
  std::regex line("roost: access at (0x[0-9a-f]+): buffer overflow (0x[0-9a-f]+) \\(size class " +
                  named_class + " bytes\\)\n");
  ASSERT_TRUE(std::regex_match(r->err, m, line))
      << "wanted one line \"roost: access at 0x...: buffer overflow 0x... (size class "
      << named_class << " bytes)\", got:\n"
      << r->err;
  uintptr_t at = std::stoull(m[1].str(), nullptr, 16);
  uintptr_t named = std::stoull(m[2].str(), nullptr, 16);
  auto start = reinterpret_cast<uintptr_t>(p);
  EXPECT_GE(at, start + size) << "the fault lies past the object's end";
  EXPECT_LT(at, start + kOneMiB) << "within the megabyte";
  if (size + 8 > small_limit() && !by_memcpy) {
    EXPECT_EQ(named, start) << "a large object names itself";
  } else {
    EXPECT_GE(named, start) << "the slab's last object, at or after the object";
    EXPECT_LT(named, at);
  }
  g_free(p);
}

}  // namespace

TEST(Overflow, AMegabyteByLoopFromA64ByteObject) {
  expect_megabyte_run_caught(kRunSizes[0], false);
}

TEST(Overflow, AMegabyteByMemcpyFromA64ByteObject) {
  expect_megabyte_run_caught(kRunSizes[0], true);
}

TEST(Overflow, AMegabyteByLoopFromA4KiBObject) { expect_megabyte_run_caught(kRunSizes[1], false); }

TEST(Overflow, AMegabyteByMemcpyFromA4KiBObject) { expect_megabyte_run_caught(kRunSizes[1], true); }

TEST(Overflow, AMegabyteByLoopFromA256KiBObject) {
  expect_megabyte_run_caught(kRunSizes[2], false);
}

TEST(Overflow, AMegabyteByMemcpyFromA256KiBObject) {
  expect_megabyte_run_caught(kRunSizes[2], true);
}

// ---- large objects after their free --------------------------------------------

namespace {

// A byte written into a freed large object of `size` bytes (`then_malloc`:
// then objects of its size allocated until its address comes back): the
// hardened build's freed large objects wait inaccessible in a quarantine,
// so the write faults at once, named as a write to the freed object.
void expect_large_write_after_free_caught(size_t size, bool then_malloc) {
  auto* p = static_cast<char*>(g_malloc(size));
  ASSERT_NE(p, nullptr);
  expect_caught_object(Caught::kHardened, "write to a freed object", p, class_size(p),
                       [p, size, then_malloc] {
                         g_free(p);
                         static_cast<volatile char*>(p)[size / 2] = 1;
                         if (then_malloc) {
                           for (int i = 0; i < 100; i++) {
                             void* q = g_malloc(size);
                             if (q == p) break;
                             g_free(q);
                           }
                         }
                       });
}

}  // namespace

TEST(WriteAfterFree, IntoAFreed256KiBObject) {
  expect_large_write_after_free_caught(256 * 1024, false);
}

TEST(WriteAfterFree, IntoAFreed256KiBObjectThenMallocOfItsSize) {
  expect_large_write_after_free_caught(256 * 1024, true);
}

TEST(WriteAfterFree, IntoAFreed1MiBObject) { expect_large_write_after_free_caught(kOneMiB, false); }

// A double free of a large object is still one, while the object waits in
// the hardened build's quarantine and after it left it.
TEST(DoubleFree, LargeObjectWhileInTheQuarantineAndAfter) {
  for (int later : {0, 100}) {
    void* p = g_malloc(256 * 1024);
    expect_caught_object(Caught::kAll, "double free", p, class_size(p), [p, later] {
      g_free(p);
      for (int i = 0; i < later; i++) g_free(g_malloc(256 * 1024));
      g_free(p);
    });
  }
}

// ---- zero-size allocations ----------------------------------------------

// The access faults at once, and the handler names the allocation:
// "roost: access at 0x...: access to a zero-size allocation 0x<it> (size
// class 0 bytes)".
constexpr const char* kZeroSizeAccess = "access to a zero-size allocation";

TEST(ZeroSize, ReadOfMallocZero) {
  auto* z = static_cast<volatile char*>(g_malloc(0));
  expect_caught_object(Caught::kSecure, kZeroSizeAccess, const_cast<char*>(z), 0, [z] {
    char c = z[0];
    escape(&c);
  });
  g_free(const_cast<char*>(z));
}

TEST(ZeroSize, WriteIntoMallocZeroByMemcpy) {
  void* z = g_malloc(0);
  expect_caught_object(Caught::kSecure, kZeroSizeAccess, z, 0, [z] {
    memcpy(z, g_bytes, 8);
    escape(z);
  });
  g_free(z);
}

TEST(ZeroSize, ReadOfAnEmptyNewArray) {
  auto* z = new char[g_zero];
  expect_caught_object(Caught::kSecure, kZeroSizeAccess, z, 0, [z] {
    char c = static_cast<volatile char*>(z)[0];
    escape(&c);
  });
  delete[] z;
}

// ---- delete and delete[] mismatched -----------------------------------------
//
// For a type with a destructor, new[] puts the element count before the
// array, so the pointers the two deletes pass on differ from what was
// allocated by 8 bytes: an interior pointer, which both builds name.  (For
// types without one the calls are the same, and nothing is wrong to see.)

namespace {

volatile int g_destroyed = 0;
struct WithDestructor {
  ~WithDestructor() { g_destroyed = g_destroyed + 1; }
  char data[40];
};

}  // namespace

TEST(DeleteMismatch, DeleteOfAnArrayFromNewArray) {
  WithDestructor* volatile array = new WithDestructor[3];
  WithDestructor* p = array;
  // The allocation starts at the count, 8 bytes before the first element.
  size_t size = class_size(reinterpret_cast<char*>(p) - 8);
  expect_caught_object(Caught::kAll, "invalid pointer \\(interior of an object\\)", p, size, [p] {
    WithDestructor* volatile q = p;
    delete q;
  });
  delete[] p;
}

TEST(DeleteMismatch, DeleteArrayOfAnObjectFromNew) {
  // The count delete[] reads lies in the object before: the child makes it
  // one, so the destructor runs once and the free is what is checked.
  std::vector<char*> keep;
  Neighbours n = allocate_neighbours(slot_of(sizeof(WithDestructor)), &keep,
                                     [] { return reinterpret_cast<char*>(new WithDestructor); });
  ASSERT_NE(n.first, nullptr) << "no two objects next to each other";
  auto* object = reinterpret_cast<WithDestructor*>(n.second);
  void* passed = n.second - 8;
  expect_caught_object(Caught::kAll, "invalid pointer \\(interior of an object\\)", passed,
                       class_size(n.first), [n, object] {
                         size_t one = 1;
                         memcpy(n.second - 8, &one,
                                sizeof(one));  // the last 8 bytes of the object before
                         WithDestructor* volatile q = object;
                         delete[] q;
                       });
  for (char* p : keep) delete reinterpret_cast<WithDestructor*>(p);
}

// ---- wrong sizes -----------------------------------------------------------

TEST(SizeMismatch, SizedDeleteWithTheWrongSize) {
  void* p = ::operator new(48);
  expect_caught(Caught::kSecure, "size mismatch", p, [p] { ::operator delete(p, 4096); });
  ::operator delete(p, 48);
}

TEST(SizeMismatch, FreeSizedWithTheWrongSize) {
  ASSERT_NE(&free_sized, nullptr) << "free_sized is not provided";
  void* p = g_malloc(100);
  expect_caught(Caught::kSecure, "size mismatch", p, [p] { free_sized(p, 1000); });
}

TEST(SizeMismatch, FreeSizedOfALargeObjectWithTheWrongSize) {
  ASSERT_NE(&free_sized, nullptr) << "free_sized is not provided";
  void* p = g_malloc(1 << 20);
  expect_caught(Caught::kSecure, "size mismatch", p, [p] { free_sized(p, 100); });
}

TEST(SizeMismatch, FreeAlignedSizedWithTheWrongAlignment) {
  ASSERT_NE(&free_aligned_sized, nullptr) << "free_aligned_sized is not provided";
  void* p = aligned_alloc(256, 256);
  expect_caught(Caught::kSecure, "size mismatch", p, [p] { free_aligned_sized(p, 16, 4096); });
}

// The right sizes pass, whatever the build.
TEST(SizeMismatch, RightSizesAreAccepted) {
  if (build_under_test() != "default" && !is_secure())
    GTEST_SKIP() << "ROOSTTEST_BUILD is not default, secure or hardened";
  ASSERT_NE(&free_sized, nullptr) << "free_sized is not provided";
  ASSERT_NE(&free_aligned_sized, nullptr) << "free_aligned_sized is not provided";
  for (size_t size : {size_t{0}, size_t{1}, size_t{16}, size_t{48}, size_t{100}, size_t{1000},
                      size_t{5000}, size_t{300000}, size_t{1} << 20}) {
    free_sized(g_malloc(size), size);
    ::operator delete(::operator new(size), size);
    ::operator delete[](::operator new[](size), size);
    for (size_t align : {size_t{16}, size_t{64}, size_t{4096}, size_t{1} << 20}) {
      free_aligned_sized(aligned_alloc(align, size), align, size);
      ::operator delete(::operator new(size, std::align_val_t(align)), size,
                        std::align_val_t(align));
    }
    void* r = realloc(g_malloc(size), size + 10);
    free_sized(r, size + 10);
    // An object realloc shrank in place (to two thirds: a smaller size's
    // class for 1000 and 5000) is freed with the size it was shrunk to.
    if (size > 1) {
      size_t shrunk = size - size / 3;
      void* s = realloc(g_malloc(size), shrunk);
      free_sized(s, shrunk);
    }
  }
}

// ---- the secure build's zero-size allocations ----------------------------------

TEST(SecureZeroSize, AreUniqueAlignedFreeableAndEmpty) {
  if (!is_secure()) GTEST_SKIP() << "the secure build's behaviour";
  std::vector<void*> zs;
  for (int i = 0; i < 1000; i++) zs.push_back(g_malloc(0));
  for (size_t align : {size_t{32}, size_t{64}, size_t{4096}}) {
    void* a = aligned_alloc(align, 0);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % align, 0u) << align;
    zs.push_back(a);
  }
  zs.push_back(calloc(0, 8));
  zs.push_back(::operator new(g_zero));
  std::vector<void*> sorted = zs;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end());
  for (void* z : zs) {
    ASSERT_NE(z, nullptr);
    EXPECT_EQ(malloc_usable_size(z), 0u);
  }
  // realloc from one: new memory, nothing to copy.
  auto* grown = static_cast<char*>(realloc(zs[0], 100));
  ASSERT_NE(grown, nullptr);
  memset(grown, 7, 100);
  EXPECT_GE(malloc_usable_size(grown), 100u);
  free(grown);
  ::operator delete (zs.back(), size_t{0});
  zs.pop_back();
  free_sized(zs.back(), 0);
  zs.pop_back();
  for (size_t i = 1; i < zs.size(); i++) g_free(zs[i]);
}

// A thread's first call is malloc(0): it has no allocator yet, and the one
// it is given serves the zero-size allocation (Allocator::alloc_zero_size).
TEST(SecureZeroSize, AThreadsFirstAllocation) {
  if (!is_secure()) GTEST_SKIP() << "the secure build's behaviour";
  void* z = nullptr;
  void* after = nullptr;
  std::thread([&] {
    z = g_malloc(g_zero);
    after = g_malloc(16);
  }).join();
  ASSERT_NE(z, nullptr);
  ASSERT_NE(after, nullptr);
  EXPECT_EQ(malloc_usable_size(z), 0u);
  EXPECT_GE(malloc_usable_size(after), 16u);
  g_free(z);
  g_free(after);
}

// ---- the secure build's large objects ----------------------------------------

namespace {

// In a child: `p` (`size` bytes asked for; its slack, then the guard page)
// is written up to its end; a store into the guard page faults, named as a
// buffer overflow of `p` (without guard pages it does not, and the child
// exits).
void expect_guard_after(char* p, size_t size) {
  size_t end = guard_offset(size);
  ChildResult r = run_in_child(
      [p, size, end] {
        memset(p, 3, size);
        static_cast<volatile char*>(p)[end] = 1;
      },
      30);
  if (!guard_pages_on()) {
    EXPECT_TRUE(r.exited) << r.describe();
    return;
  }
  EXPECT_FALSE(r.exited) << r.describe();
  EXPECT_EQ(r.signal, SIGABRT) << r.describe();
  EXPECT_EQ(r.err, "roost: access at " + hex(p + end) + ": buffer overflow " + hex(p) +
                       " (size class " + std::to_string(size) + " bytes)\n");
}

}  // namespace

TEST(SecureLarge, UsableSizeIsTheSizeAskedForAndTheGuardMovesWithRealloc) {
  if (!is_secure()) GTEST_SKIP() << "the secure build's behaviour";
  auto* p = static_cast<char*>(g_malloc(kLargeSize));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(malloc_usable_size(p), kLargeSize);
  expect_guard_after(p, kLargeSize);
  // Grown, shrunk (in place or not), then zeroed: every byte usable, the
  // contents kept, the guard after the new end, and nothing reported.
  memset(p, 1, kLargeSize);
  for (size_t size : {kLargeSize + 100, 2 * kLargeSize, size_t{270001}, kPageExactSize}) {
    size_t kept = std::min(size, static_cast<size_t>(malloc_usable_size(p)));
    auto* q = static_cast<char*>(realloc(p, size));
    ASSERT_NE(q, nullptr) << size;
    EXPECT_EQ(malloc_usable_size(q), size);
    EXPECT_EQ(std::count(q, q + kept, 1), static_cast<long>(kept)) << size;
    expect_guard_after(q, size);
    memset(q, 1, size);
    p = q;
  }
  g_free(p);
  auto* z = static_cast<char*>(calloc(1, kLargeSize + 1));
  ASSERT_NE(z, nullptr);
  EXPECT_EQ(std::count(z, z + kLargeSize + 1, 0), static_cast<long>(kLargeSize + 1));
  expect_guard_after(z, kLargeSize + 1);
  g_free(z);
}

TEST(SecureLarge, AlignedObjectsAreGuardedToo) {
  if (!is_secure()) GTEST_SKIP() << "the secure build's behaviour";
  for (size_t align : {size_t{4096}, size_t{1} << 16, size_t{1} << 21}) {
    auto* p = static_cast<char*>(aligned_alloc(align, kLargeSize));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u);
    EXPECT_EQ(malloc_usable_size(p), kLargeSize);
    expect_guard_after(p, kLargeSize);
    g_free(p);
  }
}

// More objects than guard pages may exist at once (16 384, config.h's
// kMaxLargeGuards) go through free and an in-place realloc each: were a
// guard miscounted, the next object would have none.  Then the cap: of
// 16 385 live objects the last has no guard (a store past its last page
// lands in its own chunk), and the first still has one.
TEST(SecureLarge, GuardsComeBackAfterFreesAndStopAtTheCap) {
  if (!is_secure()) GTEST_SKIP() << "the secure build's behaviour";
  if (!guard_pages_on()) GTEST_SKIP() << "no guard pages (the secure build, ROOST_LARGE_GUARDS=0)";
  constexpr size_t kCap = 16384;
  for (size_t i = 0; i < kCap + 100; i++) {
    void* p = g_malloc(kLargeSize);
    ASSERT_NE(p, nullptr);
    void* q = realloc(p, kLargeSize + 5000);
    ASSERT_EQ(q, p) << "not grown in place";
    g_free(q);
  }
  std::vector<char*> live;
  for (size_t i = 0; i <= kCap; i++) {
    live.push_back(static_cast<char*>(g_malloc(kLargeSize)));
    ASSERT_NE(live.back(), nullptr);
  }
  expect_guard_after(live.front(), kLargeSize);
  char* last = live.back();
  size_t end = guard_offset(kLargeSize);
  ChildResult r = run_in_child([last, end] { static_cast<volatile char*>(last)[end] = 1; }, 30);
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  for (char* p : live) g_free(p);
}

// ---- reuse order and freed contents: the default and secure builds ----------

namespace {

// Of 200 objects of `size` bytes allocated one after another, how many
// follow the one before by `size` bytes (of 199).
int steps_in_order(size_t size) {
  std::vector<char*> objects;
  for (int i = 0; i < 200; i++) objects.push_back(static_cast<char*>(g_malloc(size)));
  int in_order = 0;
  for (size_t i = 1; i < objects.size(); i++)
    in_order += objects[i] - objects[i - 1] == static_cast<ptrdiff_t>(size);
  for (char* p : objects) g_free(p);
  return in_order;
}

}  // namespace

// New objects follow one another in their slab (a class no other case
// uses, so its first slab is fresh).
TEST(ReuseOrder, NewObjectsFollowOneAnother) {
  std::string build = build_under_test();
  if (build != "default" && build != "secure")
    GTEST_SKIP() << "the default and secure builds' order (the hardened build's is random)";
  if (offload_on()) GTEST_SKIP() << "under ROOST_OFFLOAD=1 objects come from the service's rings";
  // (A step to a new slab, or to a page its carve left for later, breaks
  // the run now and then.)
  EXPECT_GE(steps_in_order(224), 190) << "of 199 steps";
}

// A freed object comes back once the objects already at hand are handed
// out: after the same number of allocations in every run of the same
// program.  Each run is a fresh process (roost's secrets and addresses
// drawn anew); the count is printed for the parent.
TEST(ReuseOrderChild, CountAllocationsUntilAFreedObjectComesBack) {
  if (getenv("ROOSTTEST_REUSE_CHILD") == nullptr) GTEST_SKIP() << "runs in a fresh process";
  std::vector<void*> before;
  for (int i = 0; i < 100; i++) before.push_back(g_malloc(96));
  void* p = before[37];
  g_free(p);
  int count = 1;
  std::vector<void*> after;
  for (; count <= 100000; count++) {
    void* q = g_malloc(96);
    after.push_back(q);
    if (q == p) break;
  }
  printf("comes_back_after=%d\n", count);
  for (void* q : after) g_free(q);
  for (void* q : before)
    if (q != p) g_free(q);
}

TEST(ReuseOrder, AFreedObjectComesBackAfterTheSameNumberOfAllocationsInEveryRun) {
  std::string build = build_under_test();
  if (build != "default" && build != "secure")
    GTEST_SKIP() << "the default and secure builds' order (the hardened build's is random)";
  if (getenv("ROOSTTEST_REUSE_CHILD") != nullptr) GTEST_SKIP() << "not in a child";
  if (offload_on()) GTEST_SKIP() << "under ROOST_OFFLOAD=1 the service's pace decides";
  std::vector<long> counts;
  for (int run = 0; run < 3; run++) {
    std::string out;
    int status =
        run_case_in_fresh_process("ReuseOrderChild.CountAllocationsUntilAFreedObjectComesBack",
                                  {"ROOSTTEST_REUSE_CHILD=1"}, &out);
    ASSERT_TRUE(passed(status, out)) << out;
    size_t at = out.find("comes_back_after=");
    ASSERT_NE(at, std::string::npos) << out;
    counts.push_back(atol(out.c_str() + at + strlen("comes_back_after=")));
  }
  EXPECT_GE(counts[0], 1);
  EXPECT_LE(counts[0], 100000) << "never came back";
  EXPECT_EQ(counts[1], counts[0]);
  EXPECT_EQ(counts[2], counts[0]);
}

// Sizes asked for whose objects take roost's 64-byte, 4 KiB and 256 KiB
// classes in every build (the hardened build's with their canary word: 8
// bytes less than the class).
constexpr size_t kClassSizes[] = {64 - 8, 4096 - 8, kMaxSmallClass - 8};

// Objects of 100, 256, 4000, 100 000 bytes and of kClassSizes, each filled
// with 0xab and freed in a child, which reads it back through a volatile
// pointer: byte i (from 16 on: the link and the mark come first; up
// to `end`, the object's size less its last `tail_left` bytes, or with
// `whole_slot` its slot's end) must hold want(i).
void expect_freed_bytes(unsigned char (*want)(size_t i), size_t tail_left = 0,
                        bool whole_slot = false) {
  for (size_t size : {size_t{100}, size_t{256}, size_t{4000}, size_t{100000}, kClassSizes[0],
                      kClassSizes[1], kClassSizes[2]}) {
    // (The hardened build's freed large objects wait inaccessible: a read
    // faults, as LargeQuarantine's cases check.)
    if (is_hardened() && size + 8 > small_limit()) continue;
    auto* p = static_cast<unsigned char*>(g_malloc(size));
    memset(p, 0xab, size);
    size_t end = whole_slot ? slot_of(size) : size - tail_left;
    ChildResult r = run_in_child(
        [p, end, want] {
          g_free(p);
          const volatile unsigned char* v = p;
          for (size_t i = 16; i < end; i++) child_check(v[i] == want(i), "a byte changed");
        },
        30);
    EXPECT_TRUE(r.exited && r.exit_code == 0) << size << " bytes: " << r.describe();
    g_free(p);
  }
}

// What a freed object held stays there until it is handed out again (past
// its first 16 bytes, its link and mark, and but for its last 8,
// which carry a batch word when another thread's free sends it home as a
// message: under ROOST_OFFLOAD=1 the thread's objects are the service's).
TEST(FreedContents, KeptUntilTheObjectIsReused) {
  std::string build = build_under_test();
  if (build != "default" && build != "secure")
    GTEST_SKIP() << "the default and secure builds' behaviour (the hardened build zeroes them)";
  expect_freed_bytes([](size_t) -> unsigned char { return 0xab; }, 8);
}

// ---- the hardened build's reuse order ---------------------------------------

// Zero on free: what a program stored in a small object does not outlive
// its free.  Every byte of its slot past the first 16 (the link and the
// mark) reads zero, its canary's too.
TEST(HardenedReuse, FreedObjectsReadZeroPastTheirLinkAndMark) {
  if (!is_hardened()) GTEST_SKIP() << "the hardened build's behaviour";
  expect_freed_bytes([](size_t) -> unsigned char { return 0; }, 0, true);
}

// The quarantine: a freed object is not handed out again while it waits,
// however many objects of its size are allocated meanwhile with no free
// between (without it, the hardened build hands it out again within the
// next few allocations of its size).
TEST(HardenedReuse, AFreedObjectWaitsInQuarantine) {
  if (!is_hardened()) GTEST_SKIP() << "the hardened build's behaviour";
  ChildResult r = run_in_child(
      [] {
        void* p = g_malloc(64);
        g_free(p);
        for (int i = 0; i < 20000; i++) child_check(g_malloc(64) != p, "handed out again");
      },
      30);
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe();
}

// A thread's exit empties its quarantine: the objects it freed last go
// back to their slabs, which it then gives back (roost's count of the
// class's slabs drops back; the free counts do not show it, since a
// quarantined object counts as freed).  400 objects of 8000 bytes (10 240
// with the canary: 25 to a slab), 128 or so left in the quarantine, in
// nearly every one of the 16 slabs.
TEST(HardenedReuse, ThreadExitEmptiesTheQuarantine) {
  if (!is_hardened()) GTEST_SKIP() << "the hardened build's behaviour";
  constexpr size_t kObjects = 400;
  constexpr size_t kSize = 8000;
  const size_t slot = slot_of(kSize);
  ChildResult r = run_in_child(
      [slot] {
        std::atomic<bool> freed{false};
        std::atomic<bool> go{false};
        std::thread t([&] {
          std::vector<void*> objects;
          for (size_t i = 0; i < kObjects; i++) objects.push_back(g_malloc(kSize));
          for (void* p : objects) g_free(p);
          freed = true;
          while (!go) usleep(1000);
        });
        while (!freed) usleep(1000);
        uint64_t during = class_slabs(slot);
        go = true;
        t.join();
        // (Under ROOST_OFFLOAD=1 the rings of the class go back through the
        // service, and it may refill this thread's: a few slabs.)
        wait_for_offload_rest();
        uint64_t after = class_slabs(slot);
        fprintf(stderr, "slabs of the class: %llu before the exit, %llu after\n",
                (unsigned long long)during, (unsigned long long)after);
        child_check(during >= 8, "the quarantine held no slab");
        child_check(after <= during / 4, "slabs held after the thread's exit");
      },
      30);
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe();
}

namespace {

// How many of `rounds` rounds of `free(p); q = malloc(size)` returned p.
int times_freed_object_came_back(size_t size, int rounds) {
  int same = 0;
  for (int i = 0; i < rounds; i++) {
    void* p = g_malloc(size);
    g_free(p);
    void* q = g_malloc(size);
    same += q == p;
    g_free(q);
  }
  return same;
}

}  // namespace

TEST(HardenedReuse, FreeThenMallocDoesNotReturnTheSameObject) {
  if (!is_hardened()) GTEST_SKIP() << "the hardened build's behaviour";
  for (size_t size : {16, 48, 256, 4096})
    EXPECT_EQ(times_freed_object_came_back(size, 1000), 0) << size << "-byte objects";
}

// Large objects too: a freed one waits in the quarantine (64 objects or
// 16 MiB), so `free(p); q = malloc(size)` does not return p.
TEST(HardenedReuse, FreeThenMallocOfALargeSizeDoesNotReturnTheSameObject) {
  if (!is_hardened()) GTEST_SKIP() << "the hardened build's behaviour";
  for (size_t size : {size_t{256} << 10, size_t{1} << 20})
    EXPECT_EQ(times_freed_object_came_back(size, 200), 0) << size << "-byte objects";
}

TEST(HardenedReuse, NewSlabsHandOutObjectsOutOfOrder) {
  if (!is_hardened()) GTEST_SKIP() << "the hardened build's behaviour";
  // Fresh objects of an odd class: in the default build each follows the
  // last by the class size.
  EXPECT_LT(steps_in_order(176), 50) << "of 199 steps";
}

// ---- the hardened build's freed objects: zero, checked when handed out ------

namespace {

// A byte of a freed object of `size` bytes asked for (the middle one of
// its slot, or the last), then allocations of its size until it is handed
// out again: the hardened build catches the write there.  (Observing
// another allocator, whose slots the test does not know: the middle or the
// last byte of the size asked for.)
void expect_write_after_free_caught(size_t size, bool last) {
  size_t slot = slot_of(size) != 0 ? slot_of(size) : size;
  char* p = static_cast<char*>(g_malloc(size));
  char* at = last ? p + slot - 1 : p + slot / 2;
  // (The hardened build's large objects, 256 KiB among them, fault at the
  // write: they wait inaccessible in a quarantine.)
  expect_caught_object(Caught::kHardened, "write to a freed object", p, class_size(p),
                       [p, at, size] {
                         g_free(p);
                         *at = 1;
                         allocate_until_handed_out(p, size);
                       });
}

}  // namespace

TEST(WriteAfterFree, MiddleByteOfA64ByteObjectThenMalloc) {
  expect_write_after_free_caught(kClassSizes[0], false);
}

TEST(WriteAfterFree, LastByteOfA64ByteObjectThenMalloc) {
  expect_write_after_free_caught(kClassSizes[0], true);
}

TEST(WriteAfterFree, MiddleByteOfA4KiBObjectThenMalloc) {
  expect_write_after_free_caught(kClassSizes[1], false);
}

TEST(WriteAfterFree, LastByteOfA4KiBObjectThenMalloc) {
  expect_write_after_free_caught(kClassSizes[1], true);
}

TEST(WriteAfterFree, MiddleByteOfA256KiBObjectThenMalloc) {
  expect_write_after_free_caught(kClassSizes[2], false);
}

TEST(WriteAfterFree, LastByteOfA256KiBObjectThenMalloc) {
  expect_write_after_free_caught(kClassSizes[2], true);
}

namespace {

// Frees an object of each of kClassSizes filled with a byte, then (in a
// child) allocates until its address comes back, by malloc or `by_calloc`:
// it must read zero throughout.
void expect_reused_object_reads_zero(bool by_calloc) {
  for (size_t size : kClassSizes) {
    // (A freed large object (the hardened build's 256 KiB) waits in the
    // quarantine while others are allocated: it does not come back so.)
    if (size + 8 > small_limit()) continue;
    auto* p = static_cast<unsigned char*>(g_malloc(size));
    memset(p, 0xab, size);
    ChildResult r = run_in_child(
        [p, size, by_calloc] {
          g_free(p);
          allocate_until_handed_out(p, size, by_calloc);
          const volatile unsigned char* v = p;
          for (size_t i = 0; i < size; i++) child_check(v[i] == 0, "a byte is not zero");
        },
        30);
    if (offload_on() && r.exited && r.exit_code == kNotHandedOutUnderOffload)
      GTEST_SKIP() << "the freed object did not come back (allocate_until_handed_out)";
    EXPECT_TRUE(r.exited && r.exit_code == 0) << size << " bytes: " << r.describe();
    g_free(p);
  }
}

}  // namespace

// An allocation that reuses a freed object (the same address handed out
// again) reads zero throughout: what the object held, its link and its
// mark included, is gone.
TEST(HardenedReuse, AReusedObjectReadsZeroThroughout) {
  if (!is_hardened()) GTEST_SKIP() << "the hardened build's behaviour";
  expect_reused_object_reads_zero(false);
}

// calloc hands out a reused object zero throughout too (the hardened
// build's calloc writes no zeros over a slab's object: it reads zero
// already).
TEST(HardenedReuse, CallocOfAReusedObjectReadsZeroThroughout) {
  if (!is_hardened()) GTEST_SKIP() << "the hardened build's behaviour";
  expect_reused_object_reads_zero(true);
}

// Memory roost used before, for large objects and for small ones of other
// sizes, that a thread's exit gave back with its pages resident: objects
// carved from it later read zero throughout (as fresh ones do), and are
// handed out without a fault.
TEST(HardenedReuse, ObjectsCarvedFromMemoryUsedBeforeReadZero) {
  if (!is_hardened()) GTEST_SKIP() << "the hardened build's behaviour";
  ChildResult r = run_in_child(
      [] {
        std::thread([] {
          std::vector<void*> objects;
          for (int i = 0; i < 16; i++) objects.push_back(g_malloc(300 * 1024));
          for (int i = 0; i < 4000; i++) objects.push_back(g_malloc(1000));
          for (void* p : objects) memset(p, 0xab, malloc_usable_size(p));
          for (void* p : objects) g_free(p);
        }).join();
        for (size_t size : {size_t{700}, size_t{1000}, size_t{5000}}) {
          for (int i = 0; i < 2000; i++) {
            const volatile unsigned char* v = static_cast<unsigned char*>(g_malloc(size));
            for (size_t j = 0; j < size; j++) child_check(v[j] == 0, "a byte is not zero");
          }
        }
      },
      60);
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe();
}

// ---- the README's table -------------------------------------------------------

// Every row of the README's table of what each build catches names, in a
// comment in its first cell, the cases above that check it
// ("<!-- cases: Suite.Name ... -->"), and the row holds in the build under
// test as its column says: a cell that starts with "caught" needs a case
// that this build must catch (run_case's level) and every such case
// passed; "not caught" or "not checked", no case this build must catch;
// any other cell (an order, what memory holds) a case that ran here and
// passed.  Rows without cases are "for" and "cost" only.  The last case of
// the file: it reads the results of those before it.
TEST(ReadmeSecurityTable, EveryRowHoldsInThisBuild) {
  std::string build = build_under_test();
  int column = build == "default" ? 1 : build == "secure" ? 2 : build == "hardened" ? 3 : 0;
  if (column == 0) GTEST_SKIP() << "ROOSTTEST_BUILD is not default, secure or hardened";
#ifndef ROOSTTEST_README
  GTEST_SKIP() << "built without the README's path";
#else
  std::ifstream in(ROOSTTEST_README);
  ASSERT_TRUE(in.good()) << ROOSTTEST_README;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t header = text.find("| | default: `libroost` |");
  ASSERT_NE(header, std::string::npos) << "the table's header row";
  const ::testing::UnitTest* unit = ::testing::UnitTest::GetInstance();
  auto find_case = [unit](const std::string& name) -> const ::testing::TestInfo* {
    for (int i = 0; i < unit->total_test_suite_count(); i++) {
      const ::testing::TestSuite* suite = unit->GetTestSuite(i);
      for (int j = 0; j < suite->total_test_count(); j++) {
        const ::testing::TestInfo* t = suite->GetTestInfo(j);
        if (std::string(suite->name()) + "." + t->name() == name) return t;
      }
    }
    return nullptr;
  };
  std::istringstream lines(text.substr(header));
  std::string line;
  int rows = 0;
  while (std::getline(lines, line) && !line.empty() && line[0] == '|') {
    if (line.rfind("| |", 0) == 0 || line.rfind("|---", 0) == 0) continue;
    // The cells between the bars (no row's text holds a bar of its own).
    std::vector<std::string> cells;
    for (size_t at = 1; at < line.size();) {
      size_t bar = line.find('|', at);
      if (bar == std::string::npos) break;
      std::string cell = line.substr(at, bar - at);
      cell.erase(0, cell.find_first_not_of(' '));
      cell.erase(cell.find_last_not_of(' ') + 1);
      cells.push_back(cell);
      at = bar + 1;
    }
    ASSERT_EQ(cells.size(), 4u) << line;
    rows++;
    std::string first = cells[0];
    size_t comment = first.find("<!-- cases:");
    if (comment == std::string::npos) {
      EXPECT_TRUE(first == "for" || first.rfind("cost", 0) == 0)
          << "a row with no cases: " << first;
      continue;
    }
    std::istringstream names(
        first.substr(comment + strlen("<!-- cases:"),
                     first.find("-->", comment) - comment - strlen("<!-- cases:")));
    std::string row = first.substr(0, comment);
    std::string cell = cells[column];
    bool must_catch = cell.rfind("caught", 0) == 0;
    bool must_not = cell.rfind("not caught", 0) == 0 || cell.rfind("not checked", 0) == 0;
    bool any_caught = false, any_ran = false;
    std::string name;
    while (names >> name) {
      const ::testing::TestInfo* t = find_case(name);
      ASSERT_NE(t, nullptr) << row << ": no case " << name;
      if (!t->should_run())
        GTEST_SKIP() << "a filter left out " << name << ": run the whole catalog";
      const ::testing::TestResult* r = t->result();
      bool passed = r->Passed() && !r->Skipped();
      any_ran |= passed;
      auto level = caught_levels().find(name);
      if (level == caught_levels().end()) continue;
      bool catches_here = level->second == Caught::kAll ||
                          (level->second == Caught::kSecure && column >= 2) ||
                          (level->second == Caught::kHardened && column == 3);
      if (!catches_here) continue;
      any_caught = true;
      if (must_catch) {
        // (Under ROOST_OFFLOAD=1 a case may skip, saying why.)
        EXPECT_TRUE(passed || (offload_on() && r->Skipped()))
            << row << ": " << name << " did not pass in the " << build << " build";
      }
      EXPECT_FALSE(must_not) << row << ": the " << build << " column says \"" << cell << "\", but "
                             << name << " is caught here";
    }
    // (Under ROOST_OFFLOAD=1 some rows' cases all skip, saying why.)
    if (must_catch) {
      EXPECT_TRUE(any_caught || offload_on())
          << row << ": no case the " << build << " build catches";
    }
    if (!must_catch && !must_not) {
      EXPECT_TRUE(any_ran || offload_on()) << row << ": no case ran in the " << build << " build";
    }
  }
  EXPECT_GE(rows, 10) << "the table's rows";
#endif
}
