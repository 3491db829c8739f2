// glibc's introspection calls (mallinfo2, mallinfo, malloc_stats,
// malloc_info, mallopt): the behaviour glibc and roost share is checked on
// both (api.glibc runs this binary on glibc's malloc); under roost, the
// figures are roost_stats()'s and mallopt follows docs/STATISTICS.md's table.  The
// XML and the text are read more closely by tests/introspection_check.py.
#include <malloc.h>

#include <climits>
#include <string>
#include <vector>

#include "support.h"

using namespace roost_test;

namespace {

// A roost.h entry point: linked, or looked up in the preloaded library.
template <class F>
F* roost_fn(F* linked, const char* name) {
#ifdef ROOST_TEST_LINKED
  (void)name;
  return linked;
#else
  (void)linked;
  return reinterpret_cast<F*>(dlsym(RTLD_DEFAULT, name));
#endif
}

size_t in_use(const struct mallinfo2& mi) { return mi.uordblks + mi.hblkhd; }

// The value after "<label> = " in malloc_stats' text, from `from` on.
long long stats_value(const std::string& text, const std::string& label, size_t from = 0) {
  size_t at = text.find(label, from);
  if (at == std::string::npos) return -1;
  at = text.find('=', at);
  return at == std::string::npos ? -1 : std::stoll(text.substr(at + 1));
}

}  // namespace

TEST(Introspection, MallinfoFollowsTheBytesInUse) {
  constexpr size_t kTotal = 10 << 20, kSize = 100;
  struct mallinfo2 before = mallinfo2();
  std::vector<void*> objects;
  for (size_t n = 0; n < kTotal; n += kSize) {
    objects.push_back(malloc(opaque(kSize)));
    escape(objects.back());
  }
  struct mallinfo2 during = mallinfo2();
  // 100 bytes take 112 under both allocators (a class; a chunk with its
  // header).
  EXPECT_GE(in_use(during) - in_use(before), kTotal);
  EXPECT_LE(in_use(during) - in_use(before), kTotal / 100 * 125);
  EXPECT_GE(during.arena + during.hblkhd, in_use(during));
  if (roost_active()) {
    // roost's figures, read back to back (nothing allocates in between).
    wait_for_offload_rest();
    struct mallinfo2 mi = mallinfo2();
    struct roost_stats s = stats_snapshot();
    EXPECT_EQ(in_use(mi), s.bytes_in_use);
    EXPECT_EQ(mi.arena, s.bytes_committed);
    EXPECT_EQ(mi.fordblks, mi.arena - mi.uordblks);
    EXPECT_EQ(mi.keepcost, s.bytes_dirty);
    EXPECT_EQ(mi.usmblks, 0u);
  }
  for (void* p : objects) free(p);
  std::vector<void*>().swap(objects);  // the vector's own megabyte too
  struct mallinfo2 after = mallinfo2();
  EXPECT_LT(in_use(after), in_use(before) + (1 << 20));
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
TEST(Introspection, MallinfoIsMallinfo2InInts) {
  void* p = malloc(opaque<size_t>(5000));
  escape(p);
  wait_for_offload_rest();
  struct mallinfo2 wide = mallinfo2();
  struct mallinfo narrow = mallinfo();
  EXPECT_EQ(static_cast<size_t>(narrow.arena), wide.arena);
  EXPECT_EQ(static_cast<size_t>(narrow.uordblks), wide.uordblks);
  EXPECT_EQ(static_cast<size_t>(narrow.fordblks), wide.fordblks);
  EXPECT_EQ(static_cast<size_t>(narrow.hblks), wide.hblks);
  EXPECT_EQ(static_cast<size_t>(narrow.hblkhd), wide.hblkhd);
  free(p);
}

// Beyond INT_MAX, roost's mallinfo saturates (glibc's wraps).
TEST(Introspection, MallinfoSaturatesPastIntMax) {
  REQUIRE_ROOST();
  const size_t size = size_t{3} << 30;  // address space only: never touched
  void* p = malloc(opaque(size));
  ASSERT_NE(p, nullptr);
  escape(p);
  EXPECT_GE(mallinfo2().hblkhd, size);
  EXPECT_EQ(mallinfo().hblkhd, INT_MAX);
  free(p);
  EXPECT_LT(mallinfo().hblkhd, INT_MAX);
}
#pragma GCC diagnostic pop

// Both allocators map an object this big on its own: one more mapped block.
TEST(Introspection, AHugeObjectIsAMappedBlock) {
  const size_t size = (size_t{3} << 30) / 2;  // 1.5 GiB, never touched
  struct mallinfo2 before = mallinfo2();
  void* p = malloc(opaque(size));
  ASSERT_NE(p, nullptr);
  escape(p);
  struct mallinfo2 during = mallinfo2();
  EXPECT_EQ(during.hblks, before.hblks + 1);
  EXPECT_GE(during.hblkhd, before.hblkhd + size);
  EXPECT_LE(during.hblkhd, before.hblkhd + size + (1 << 20));
  // ...and not in the arena's bytes in use.
  EXPECT_LT(during.uordblks, before.uordblks + (1 << 20));
  EXPECT_LT(during.arena, before.arena + (1 << 20));
  free(p);
  struct mallinfo2 after = mallinfo2();
  EXPECT_EQ(after.hblks, before.hblks);
  EXPECT_EQ(after.hblkhd, before.hblkhd);
}

TEST(Introspection, MallocInfoWritesGlibcsDocumentAndRefusesOptions) {
  FILE* f = tmpfile();
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(malloc_info(0, f), 0);
  std::string text;
  rewind(f);
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), f)) > 0;) text.append(buf, n);
  fclose(f);
  EXPECT_EQ(text.rfind("<malloc version=\"1\">\n", 0), 0u) << text;
  ASSERT_GE(text.size(), 10u);
  EXPECT_EQ(text.substr(text.size() - 10), "</malloc>\n") << text;
  for (const char* element :
       {"<heap nr=\"0\">", "<sizes>", "</sizes>", "</heap>", "<total type=\"fast\" count=\"",
        "<total type=\"rest\" count=\"", "<total type=\"mmap\" count=\"",
        "<system type=\"current\" size=\"", "<aspace type=\"total\" size=\""})
    EXPECT_NE(text.find(element), std::string::npos) << element << "\n" << text;
  // No options are defined: any is refused, and nothing written.  roost
  // answers as glibc's manual says, -1 with errno EINVAL; glibc 2.36 itself
  // returns EINVAL and leaves errno alone.
  f = tmpfile();
  ASSERT_NE(f, nullptr);
  errno = 0;
  int refused = malloc_info(1, f);
  EXPECT_NE(refused, 0);
  if (roost_active()) {
    EXPECT_EQ(refused, -1);
    EXPECT_EQ(errno, EINVAL);
  }
  EXPECT_EQ(ftell(f), 0) << "malloc_info wrote with an option it refused";
  fclose(f);
}

TEST(Introspection, MallocStatsPrintsGlibcsLayoutOnStderr) {
  ChildResult r = run_in_child([] {
    void* p = malloc(opaque<size_t>(300));
    escape(p);
    struct roost_stats s = stats_snapshot();
    malloc_stats();
    if (roost_active()) fprintf(stderr, "expect %llu\n", (unsigned long long)s.bytes_in_use);
  });
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  size_t total = r.err.find("Total (incl. mmap):\n");
  EXPECT_EQ(r.err.rfind("Arena 0:\nsystem bytes     = ", 0), 0u) << r.describe();
  ASSERT_NE(total, std::string::npos) << r.describe();
  EXPECT_GT(stats_value(r.err, "in use bytes", total), 0) << r.describe();
  EXPECT_GE(stats_value(r.err, "max mmap regions", total), 0) << r.describe();
  EXPECT_GE(stats_value(r.err, "max mmap bytes", total), 0) << r.describe();
  if (roost_active()) {
    size_t expect = r.err.find("expect ");
    ASSERT_NE(expect, std::string::npos) << r.describe();
    EXPECT_EQ(stats_value(r.err, "in use bytes", total), std::stoll(r.err.substr(expect + 7)))
        << r.describe();
    EXPECT_NE(r.err.find("\nroost: bytes_in_use "), std::string::npos) << r.describe();
  }
}

// What glibc and roost answer alike (in a child: they change the process).
TEST(Introspection, MalloptAcceptsWhatBothAllocatorsAccept) {
  ChildResult r = run_in_child([] {
    child_check(mallopt(M_TRIM_THRESHOLD, 1 << 20) == 1, "M_TRIM_THRESHOLD");
    child_check(mallopt(M_MMAP_THRESHOLD, 1 << 20) == 1, "M_MMAP_THRESHOLD");
    child_check(mallopt(M_TOP_PAD, 1 << 16) == 1, "M_TOP_PAD");
    child_check(mallopt(M_ARENA_MAX, 2) == 1, "M_ARENA_MAX");
    child_check(mallopt(M_ARENA_TEST, 2) == 1, "M_ARENA_TEST");
    child_check(mallopt(M_MMAP_MAX, 100) == 1, "M_MMAP_MAX");
    child_check(mallopt(M_MXFAST, 64) == 1, "M_MXFAST");
    void* p = malloc(opaque<size_t>(100));
    child_check(p != nullptr, "malloc after mallopt");
    free(p);
  });
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe();
}

// docs/STATISTICS.md's table: M_TRIM_THRESHOLD sets ROOST_SLAB_RESERVE; what roost
// cannot do, and what it does not know, is 0.
TEST(Introspection, MalloptFollowsRoostsTable) {
  REQUIRE_ROOST();
  auto* print_options = roost_fn(&roost_print_options, "roost_print_options");
  ASSERT_NE(print_options, nullptr);
  ChildResult r = run_in_child([print_options] {
    child_check(mallopt(M_TRIM_THRESHOLD, 3 << 20) == 1, "M_TRIM_THRESHOLD");
    child_check(mallopt(M_TRIM_THRESHOLD, -1) == 0, "a negative M_TRIM_THRESHOLD");
    child_check(mallopt(M_PERTURB, 0x55) == 0, "M_PERTURB");
    child_check(mallopt(M_CHECK_ACTION, 3) == 0, "M_CHECK_ACTION");
    child_check(mallopt(M_KEEP, 1) == 0, "M_KEEP");
    child_check(mallopt(12345, 1) == 0, "an unknown parameter");
    child_check(mallopt(M_MMAP_THRESHOLD, 0) == 1, "M_MMAP_THRESHOLD");
    child_check(mallopt(M_ARENA_MAX, 1) == 1, "M_ARENA_MAX");
    print_options();
  });
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  EXPECT_NE(r.err.find("roost: ROOST_SLAB_RESERVE=3m (set by the program)\n"), std::string::npos)
      << r.describe();
}
