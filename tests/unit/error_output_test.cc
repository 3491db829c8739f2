// Error and statistics output (platform/error.h): Line's formatting (str,
// dec and hex at their extremes, truncation at the 256-byte buffer without
// writing past it), Text's (kept snprintf's way, or passed on to a sink), write_str/emit/report
// writing to fd 2, keep_stderr() letting report() write after the program closed fd 2 (in a child
// process: the kept descriptor is process-wide and cannot be undone), and fatal() printing its one
// line before it aborts.  The tests point fd 2 at a memory file and put it back afterwards.
#include "platform/error.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace roost;

namespace {

std::string text(const err::Line& line) { return std::string(line.buf, line.kept()); }

// The contents of `fd` from its start.
std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  off_t at = 0;
  for (;;) {
    ssize_t n = pread(fd, buf, sizeof(buf), at);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    at += n;
  }
  return out;
}

// Points fd 2 at a fresh memory file until text() or destruction puts the
// real stderr back.
class CapturedStderr {
 public:
  CapturedStderr() {
    file_ = memfd_create("roost-test-stderr", MFD_CLOEXEC);
    saved_ = dup(2);
    if (file_ >= 0 && saved_ >= 0) dup2(file_, 2);
  }
  ~CapturedStderr() {
    restore();
    if (file_ >= 0) close(file_);
  }
  bool ok() const { return file_ >= 0 && saved_ >= 0; }
  int file() const { return file_; }
  // Puts fd 2 back and returns what was written to it.
  std::string text() {
    restore();
    return read_all(file_);
  }

 private:
  void restore() {
    if (saved_ >= 0) {
      dup2(saved_, 2);
      close(saved_);
      saved_ = -1;
    }
  }
  int file_ = -1;
  int saved_ = -1;
};

}  // namespace

TEST(ErrorOutput, LineAppendsStrings) {
  err::Line line;
  line.str("roost").str(": ").str("").str("stats");
  EXPECT_EQ(text(line), "roost: stats");
  EXPECT_EQ(line.kept(), 12u);
  EXPECT_EQ(line.buf[line.kept()], '\0');
}

TEST(ErrorOutput, LineFormatsDecimals) {
  err::Line zero;
  zero.dec(0);
  EXPECT_EQ(text(zero), "0");
  err::Line max;
  max.dec(UINT64_MAX);
  EXPECT_EQ(text(max), "18446744073709551615");
  err::Line mixed;
  mixed.str("n=").dec(7).str(" m=").dec(1234567890).str(" p=").dec(10).dec(100);
  EXPECT_EQ(text(mixed), "n=7 m=1234567890 p=10100");
  EXPECT_EQ(mixed.buf[mixed.kept()], '\0');
}

TEST(ErrorOutput, LineFormatsHexWithAPrefix) {
  err::Line zero;
  zero.hex(0);
  EXPECT_EQ(text(zero), "0x0");
  err::Line max;
  max.hex(UINTPTR_MAX);
  EXPECT_EQ(text(max), "0xffffffffffffffff");
  err::Line mixed;
  mixed.hex(0xdeadbeef).str(" ").hex(0x10).str(" ").hex(0xa0b1c2d3e4f5ULL);
  EXPECT_EQ(text(mixed), "0xdeadbeef 0x10 0xa0b1c2d3e4f5");
  EXPECT_EQ(mixed.buf[mixed.kept()], '\0');
}

// The buffer holds 255 characters and the NUL: anything beyond is dropped
// (a number keeps its leading digits), nothing is written past it.
TEST(ErrorOutput, LineTruncatesAtItsBufferWithoutOverflow) {
  struct Guarded {
    err::Line line;
    unsigned char guard[64];
  };
  auto check = [](Guarded& g, const std::string& want) {
    EXPECT_EQ(g.line.kept(), want.size());
    EXPECT_LE(g.line.kept(), sizeof(g.line.buf) - 1);
    EXPECT_EQ(std::string(g.line.buf), want) << "not NUL-terminated where it ends";
    for (unsigned char c : g.guard) ASSERT_EQ(c, 0x5a) << "written past the line";
  };
  const std::string a300(300, 'a');
  {
    Guarded g;
    std::memset(g.guard, 0x5a, sizeof(g.guard));
    g.line.str(a300.c_str());
    check(g, std::string(255, 'a'));
    g.line.str("more").dec(UINT64_MAX).hex(UINTPTR_MAX);  // all dropped
    check(g, std::string(255, 'a'));
  }
  {
    Guarded g;
    std::memset(g.guard, 0x5a, sizeof(g.guard));
    g.line.str(std::string(250, 'b').c_str()).dec(UINT64_MAX);
    check(g, std::string(250, 'b').append("18446"));
  }
  {
    Guarded g;
    std::memset(g.guard, 0x5a, sizeof(g.guard));
    g.line.str(std::string(252, 'c').c_str()).hex(0xabcdef);
    check(g, std::string(252, 'c').append("0xa"));
  }
  {
    Guarded g;
    std::memset(g.guard, 0x5a, sizeof(g.guard));
    g.line.str(std::string(254, 'd').c_str()).str("ef");  // exactly full, then one over
    check(g, std::string(254, 'd').append("e"));
  }
}

// Text into a caller's buffer keeps what fits and counts the rest, as
// snprintf does; nothing is written past the buffer.
TEST(ErrorOutput, TextKeepsWhatFitsAndCountsEverything) {
  for (size_t size : {size_t{0}, size_t{1}, size_t{2}, size_t{8}, size_t{64}}) {
    SCOPED_TRACE(size);
    char buf[80];
    std::memset(buf, 0x5a, sizeof(buf));
    err::Text t(size == 0 ? nullptr : buf, size);
    t.str("abc").dec(1234567890).chr('!').dec_padded(42, 6).str("");
    const std::string full = "abc1234567890!    42";
    EXPECT_EQ(t.length(), full.size());
    if (size == 0) {
      EXPECT_EQ(buf[0], 0x5a);
      continue;
    }
    size_t kept = size - 1 < full.size() ? size - 1 : full.size();
    EXPECT_EQ(std::string(buf), full.substr(0, kept));
    for (size_t i = kept + 1; i < sizeof(buf); i++) ASSERT_EQ(buf[i], 0x5a) << "byte " << i;
  }
  char buf[32];
  err::Text t(buf, sizeof(buf));
  t.dec(0).chr(' ').dec(UINT64_MAX).chr(' ').dec_padded(123456, 3);
  EXPECT_STREQ(buf, "0 18446744073709551615 123456");
}

// Text passed on: every full buffer goes to the sink, flush() the rest;
// a failed sink is reported by flush() and the rest dropped.
TEST(ErrorOutput, TextPassesEverythingOnThroughASink) {
  struct Collected {
    std::string text;
    int calls = 0;
    bool fail = false;
  } c;
  auto sink = [](void* context, const char* s, size_t n) {
    auto* c = static_cast<Collected*>(context);
    c->calls++;
    if (c->fail) return false;
    c->text.append(s, n);
    return true;
  };
  char buf[16];
  err::Text t(buf, sizeof(buf), sink, &c);
  std::string want;
  for (int i = 0; i < 100; i++) {
    t.str("line ").dec(static_cast<uint64_t>(i)).chr('\n');
    want += "line " + std::to_string(i) + "\n";
  }
  EXPECT_TRUE(t.flush());
  EXPECT_EQ(c.text, want);
  EXPECT_EQ(t.length(), want.size());
  EXPECT_GE(c.calls, static_cast<int>(want.size() / 15));
  EXPECT_TRUE(t.flush()) << "an empty flush";
  c.fail = true;
  t.str(std::string(40, 'x').c_str());
  EXPECT_FALSE(t.flush());
  c.fail = false;
  t.str("after");
  EXPECT_FALSE(t.flush()) << "a sink that failed once stays failed";
  EXPECT_EQ(c.text, want);
  // To a descriptor.
  CapturedStderr captured;
  ASSERT_TRUE(captured.ok());
  int fd = 2;
  err::Text out(buf, sizeof(buf), err::Text::to_fd, &fd);
  const std::string big(10000, 'y');
  out.str(big.c_str()).str("end\n");
  EXPECT_TRUE(out.flush());
  EXPECT_EQ(captured.text(), big + "end\n");
}

TEST(ErrorOutput, WriteStrAndEmitWriteToFd2) {
  CapturedStderr captured;
  ASSERT_TRUE(captured.ok());
  err::write_str("first line\n");
  err::write_str("");
  err::Line line;
  line.str("bytes_in_use ").dec(4096).str(" at ").hex(0x1000).str("\n");
  line.emit();
  err::Line empty;
  empty.emit();
  const std::string big(100000, 'x');  // more than one write may take
  err::write_str(big.c_str());
  EXPECT_EQ(captured.text(), "first line\nbytes_in_use 4096 at 0x1000\n" + big);
}

// Without keep_stderr() (only ROOST_STATS calls it), report() writes to
// fd 2 like write_str().
TEST(ErrorOutput, ReportWritesToFd2WhenNothingIsKept) {
  const char* stats = getenv("ROOST_STATS");
  if (stats != nullptr && std::strcmp(stats, "0") != 0)
    GTEST_SKIP() << "ROOST_STATS is set: stderr may have been kept already";
  CapturedStderr captured;
  ASSERT_TRUE(captured.ok());
  err::report("report\n");
  err::Line line;
  line.str("line ").dec(3).str("\n");
  line.emit_report();
  EXPECT_EQ(captured.text(), "report\nline 3\n");
}

// A program that closes fd 2 before it exits (coreutils do) still gets its
// statistics: report() writes to the duplicate keep_stderr() made, which
// lies at 64 or above and is closed on exec; write_str() to the closed fd 2
// writes nothing and returns.  Runs in a child process, which exits 0 when
// every check holds (and names the first that did not otherwise).
TEST(ErrorOutput, KeptStderrOutlivesClosingFd2) {
  // The child re-runs this test from a fresh exec instead of a plain fork:
  // ThreadSanitizer's background thread makes the process multithreaded.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto child = [] {
    auto fail = [](const char* why) {
      // fd 2 is the death test's own capture again here.
      err::write_str(why);
      err::write_str("\n");
      _exit(1);
    };
    int saved = dup(2);
    int file = memfd_create("roost-test-kept", MFD_CLOEXEC);
    if (saved < 0 || file < 0) fail("no descriptors");
    dup2(file, 2);
    err::report("before keep\n");  // nothing kept yet: fd 2
    err::keep_stderr();
    err::keep_stderr();  // a second call keeps the first duplicate
    // The duplicate: the only other descriptor of the memory file.
    struct stat want;
    fstat(file, &want);
    int kept = -1, duplicates = 0;
    for (int fd = 3; fd < 1024; fd++) {
      struct stat st;
      if (fd == file || fstat(fd, &st) != 0) continue;
      if (st.st_dev == want.st_dev && st.st_ino == want.st_ino) {
        kept = fd;
        duplicates++;
      }
    }
    close(2);
    err::write_str("lost\n");  // fd 2 is closed: dropped, no hang or crash
    err::report("after close\n");
    err::Line line;
    line.str("line ").dec(42).str("\n");
    line.emit_report();
    dup2(saved, 2);  // the real fd 2 back
    close(saved);
    std::string got = read_all(file);
    if (got != "before keep\nafter close\nline 42\n") {
      err::write_str("kept file holds: ");
      fail(got.c_str());
    }
    if (duplicates != 1) fail("not exactly one duplicate of stderr");
    if (kept < 64) fail("the duplicate lies below 64");
    if ((fcntl(kept, F_GETFD) & FD_CLOEXEC) == 0) fail("the duplicate is not close-on-exec");
    _exit(0);
  };
  EXPECT_EXIT(child(), ::testing::ExitedWithCode(0), "");
}

TEST(ErrorOutput, FatalPrintsOneLineAndAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // as above
  EXPECT_EXIT(err::fatal("free", "not allocated by roost", reinterpret_cast<void*>(0x7f00dead0)),
              ::testing::KilledBySignal(SIGABRT),
              "^roost: free: not allocated by roost 0x7f00dead0\n$");
  EXPECT_EXIT(err::fatal("malloc_usable_size", "interior pointer", nullptr),
              ::testing::KilledBySignal(SIGABRT),
              "^roost: malloc_usable_size: interior pointer 0x0\n$");
}

TEST(ErrorOutput, WritingLeavesErrnoAsItWas) {
  // fd 2 pointing at a descriptor that refuses writes (read-only): the
  // write fails, and errno still holds the program's value.
  int saved = dup(2);
  ASSERT_GE(saved, 0);
  int read_only = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(read_only, 0);
  dup2(read_only, 2);
  errno = EDOM;
  err::write_str("roost: nowhere\n");
  int after = errno;
  dup2(saved, 2);
  close(saved);
  close(read_only);
  EXPECT_EQ(after, EDOM);
}
