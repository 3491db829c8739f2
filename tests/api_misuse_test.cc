// Misuse and exhaustion, each in a forked child: freeing pointers roost never
// returned (stack, global array, interior of an object) and asking the
// usable size or realloc of one must print one diagnostic line naming the
// address and abort; running out of address space (RLIMIT_AS) must give NULL
// + ENOMEM, nullptr or std::bad_alloc, never a crash, and recover.
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <regex>
#include <string>
#include <vector>

#include "support.h"

using namespace roost_test;

namespace {

// Through volatile pointers, so the compiler neither warns about nor
// reasons about freeing non-heap memory.
void (*volatile g_free)(void*) = free;
size_t (*volatile g_usable_size)(void*) = malloc_usable_size;
void* (*volatile g_realloc)(void*, size_t) = realloc;

char g_global_array[4096] __attribute__((aligned(64)));

std::string hex(const void* p) {
  char buf[32];
  snprintf(buf, sizeof(buf), "0x%" PRIxPTR, reinterpret_cast<uintptr_t>(p));
  return buf;
}

// The child must die of SIGABRT after writing exactly one line on stderr of
// the form "roost: ... 0x<address>", naming one of `addresses`.
void expect_roost_diagnostic(const std::function<void()>& misuse,
                             std::vector<const void*> addresses) {
  ChildResult r = run_in_child(misuse, 20);
  EXPECT_FALSE(r.exited) << "misuse was not detected: " << r.describe();
  EXPECT_EQ(r.signal, SIGABRT) << r.describe();
  static const std::regex line_re("roost: [^\n]*0x[0-9a-f]+[^\n]*\n?");
  EXPECT_TRUE(std::regex_match(r.err, line_re))
      << "stderr is not one line \"roost: <fault> 0x<address>\":\n"
      << r.err;
  bool names_address = false;
  for (const void* a : addresses) {
    std::regex addr_re(hex(a) + "([^0-9a-f]|$)");
    names_address |= std::regex_search(r.err, addr_re);
  }
  std::string wanted;
  for (const void* a : addresses) wanted += hex(a) + " ";
  EXPECT_TRUE(names_address) << "the diagnostic does not name the address (" << wanted
                             << "): " << r.err;
}

}  // namespace

TEST(Misuse, FreeOfAStackPointerAborts) {
  REQUIRE_ROOST();
  alignas(64) char on_stack[256];
  memset(on_stack, 1, sizeof(on_stack));
  void* p = on_stack + 32;
  expect_roost_diagnostic([p] { g_free(p); }, {p});
}

TEST(Misuse, FreeOfAPointerIntoAGlobalArrayAborts) {
  REQUIRE_ROOST();
  void* p = g_global_array + 128;
  expect_roost_diagnostic([p] { g_free(p); }, {p});
}

TEST(Misuse, FreeOfAnInteriorPointerOfASmallObjectAborts) {
  REQUIRE_ROOST();
  char* obj = static_cast<char*>(malloc(64));
  ASSERT_NE(obj, nullptr);
  void* inner = obj + 8;
  expect_roost_diagnostic([inner] { g_free(inner); }, {inner, obj});
  free(obj);  // the parent's copy is untouched
}

TEST(Misuse, UsableSizeOfAForeignPointerAborts) {
  REQUIRE_ROOST();
  void* p = g_global_array + 256;
  expect_roost_diagnostic([p] { (void)g_usable_size(p); }, {p});
  alignas(16) char on_stack[64];
  void* s = on_stack;
  expect_roost_diagnostic([s] { (void)g_usable_size(s); }, {s});
}

TEST(Misuse, ReallocOfAForeignPointerAborts) {
  REQUIRE_ROOST();
  void* p = g_global_array + 512;
  expect_roost_diagnostic([p] { escape(g_realloc(p, 100)); }, {p});
}

// ---------------------------------------------------------------------------
// Out of memory under RLIMIT_AS.

namespace {

constexpr size_t kMiB = 1024 * 1024;

// Limits the address space to what is mapped now plus `headroom`.  roost
// reserves a lot of address space up front, so the limit is taken after a
// warm-up allocation.
void limit_address_space(size_t headroom) {
  void* warm = malloc(kMiB);
  escape(warm);
  free(warm);
  long vm_kb = status_kb("VmSize");
  child_check(vm_kb > 0, "VmSize not readable");
  struct rlimit rl;
  rl.rlim_cur = rl.rlim_max = static_cast<rlim_t>(vm_kb) * 1024 + headroom;
  child_check(setrlimit(RLIMIT_AS, &rl) == 0, "setrlimit(RLIMIT_AS) failed");
}

// More 1 MiB blocks than this means the limit is not working.
constexpr size_t kMaxBlocks = 64 * 1024;

}  // namespace

TEST(OutOfMemory, MallocReturnsNullWithENOMEMAndRecovers) {
  ChildResult r = run_in_child([] {
    limit_address_space(64 * kMiB);
    std::vector<void*> blocks;
    blocks.reserve(kMaxBlocks);
    int err = 0;
    for (;;) {
      errno = 0;
      void* p = malloc(kMiB);
      if (p == nullptr) {
        err = errno;
        break;
      }
      static_cast<char*>(p)[blocks.size() % kMiB] = 1;  // one page per block
      blocks.push_back(p);
      child_check(blocks.size() < kMaxBlocks, "no failure after 64 GiB: is RLIMIT_AS ignored?");
    }
    child_check(err == ENOMEM, "malloc failed without errno == ENOMEM");
    child_check(!blocks.empty(), "not a single 1 MiB block fitted in 64 MiB of headroom");
    // Other functions fail cleanly too while memory is exhausted.
    errno = 0;
    child_check(calloc(1, 64 * kMiB) == nullptr && errno == ENOMEM, "calloc at the limit");
    void* keep = malloc(100);
    if (keep != nullptr) {
      memset(keep, 0x5c, 100);
      errno = 0;
      child_check(realloc(keep, 512 * kMiB) == nullptr && errno == ENOMEM, "realloc at the limit");
      for (int i = 0; i < 100; i++)
        child_check(static_cast<char*>(keep)[i] == 0x5c, "realloc lost data");
      free(keep);
    }
    for (void* p : blocks) free(p);
    void* small = malloc(100);
    child_check(small != nullptr, "malloc(100) after freeing everything");
    memset(small, 0, 100);
    free(small);
    void* big = malloc(kMiB);
    child_check(big != nullptr, "malloc(1 MiB) after freeing everything");
    free(big);
  });
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe();
}

TEST(OutOfMemory, NothrowNewReturnsNullAndRecovers) {
  ChildResult r = run_in_child([] {
    limit_address_space(64 * kMiB);
    std::vector<void*> blocks;
    for (;;) {
      void* p = blocks.size() % 2 ? ::operator new(kMiB, std::nothrow)
                                  : ::operator new[](kMiB, std::align_val_t{4096}, std::nothrow);
      if (p == nullptr) break;
      blocks.push_back(p);
      child_check(blocks.size() < kMaxBlocks, "no failure after 64 GiB: is RLIMIT_AS ignored?");
    }
    for (size_t i = 0; i < blocks.size(); i++) {
      if (i % 2) {
        ::operator delete(blocks[i]);
      } else {
        ::operator delete[](blocks[i], std::align_val_t{4096});
      }
    }
    void* p = ::operator new(kMiB, std::nothrow);
    child_check(p != nullptr, "nothrow new after freeing everything");
    ::operator delete(p);
  });
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe();
}

TEST(OutOfMemory, ThrowingNewThrowsBadAllocAndRecovers) {
  ChildResult r = run_in_child([] {
    limit_address_space(64 * kMiB);
    std::vector<char*> blocks;
    bool threw = false;
    try {
      for (;;) {
        blocks.push_back(new char[kMiB]);
        child_check(blocks.size() < kMaxBlocks, "no failure after 64 GiB: is RLIMIT_AS ignored?");
      }
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    child_check(threw, "new did not throw std::bad_alloc");
    for (char* b : blocks) delete[] b;
    char* again = new char[kMiB];
    delete[] again;
  });
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe();
}

namespace {
std::vector<void*>* g_reserve = nullptr;
int g_oom_handler_calls = 0;
// Frees one reserved block per call: the allocation that failed can then
// succeed on retry.
void releasing_handler() {
  g_oom_handler_calls++;
  if (g_reserve->empty()) {
    std::set_new_handler(nullptr);
    return;
  }
  free(g_reserve->back());
  g_reserve->pop_back();
}
}  // namespace

TEST(OutOfMemory, NewHandlerThatReleasesMemoryLetsNewSucceed) {
  ChildResult r = run_in_child([] {
    limit_address_space(64 * kMiB);
    std::vector<void*> reserve;
    for (;;) {
      void* p = malloc(kMiB);
      if (p == nullptr) break;
      reserve.push_back(p);
      child_check(reserve.size() < kMaxBlocks, "no failure after 64 GiB: is RLIMIT_AS ignored?");
    }
    child_check(reserve.size() >= 4, "too few blocks before the limit");
    g_reserve = &reserve;
    std::set_new_handler(releasing_handler);
    char* p = new char[kMiB];  // must not throw: the handler frees memory
    child_check(g_oom_handler_calls >= 1, "the new handler was not called");
    p[0] = 1;
    delete[] p;
    std::set_new_handler(nullptr);
    for (void* b : reserve) free(b);
  });
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe();
}
