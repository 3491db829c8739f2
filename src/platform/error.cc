// platform/error.cc — implementation of platform/error.h.
#include "platform/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "platform/os.h"

namespace roost::err {

namespace {
int g_report_fd = -1;

void write_fd(int fd, const char* s) {
  size_t n = 0;
  while (s[n] != 0) n++;
  write_all(fd, s, n);
}
}  // namespace

// Leaves errno as the program had it: a warning at the first malloc must not
// change it.
bool write_all(int fd, const char* s, size_t n) {
  int saved = errno;
  bool ok = true;
  while (n > 0) {
    ssize_t w = ::write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      ok = false;
      break;
    }
    s += w;
    n -= static_cast<size_t>(w);
  }
  errno = saved;
  return ok;
}

void keep_stderr() {
  if (g_report_fd < 0) g_report_fd = fcntl(2, F_DUPFD_CLOEXEC, 64);
}

int report_fd() { return g_report_fd >= 0 ? g_report_fd : 2; }

void report(const char* s) { write_fd(report_fd(), s); }

int open_report_file(const char* variable, const char* pattern, const char* consequence, char* name,
                     size_t size, bool append) {
  char own[4096];
  if (name == nullptr) {
    name = own;
    size = sizeof(own);
  }
  int fd = os::open_named_for_writing(pattern, name, size, append);
  if (fd >= 0) return fd;
  // The name as far as it fits the line (64 characters, then "...").
  size_t n = 0;
  while (n <= 64 && n + 4 <= size && name[n] != 0) n++;
  if (n > 64) __builtin_memcpy(name + 64, "...", 4);
  Line line;
  line.str("roost: cannot open ").str(variable).str("=").str(name);
  line.str(" (errno ").dec(static_cast<uint64_t>(-fd)).str(")").str(consequence).str("\n");
  line.emit_report();
  return -1;
}

void write_str(const char* s) { write_fd(2, s); }

void Line::emit() { write_str(buf); }

void Line::emit_report() { report(buf); }

Text& Text::chr(char c) {
  total_++;
  if (used_ + 1 >= size_) {  // no room beside the NUL
    // Kept text: counted, not kept.  Passed on: the buffer goes first (and
    // after a failed sink, is dropped).
    if (sink_ == nullptr || size_ < 2) return *this;
    flush();
  }
  buf_[used_++] = c;
  terminate();
  return *this;
}

Text& Text::str(const char* s) {
  while (*s != 0) chr(*s++);
  return *this;
}

Text& Text::dec(uint64_t v) { return dec_padded(v, 0); }

Text& Text::dec_padded(uint64_t v, unsigned width) {
  char tmp[24];
  unsigned n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  for (unsigned i = n; i < width; i++) chr(' ');
  while (n > 0) chr(tmp[--n]);
  return *this;
}

Text& Text::str_padded(const char* s, unsigned width) {
  unsigned n = 0;
  for (; s[n] != 0; n++) chr(s[n]);
  for (; n < width; n++) chr(' ');
  return *this;
}

Text& Text::hex(uintptr_t v) {
  static const char digits[] = "0123456789abcdef";
  char tmp[2 * sizeof(v)];
  unsigned n = 0;
  do {
    tmp[n++] = digits[v & 15];
    v >>= 4;
  } while (v != 0);
  str("0x");
  while (n > 0) chr(tmp[--n]);
  return *this;
}

bool Text::flush() {
  if (sink_ != nullptr && used_ > 0 && !failed_) failed_ = !sink_(context_, buf_, used_);
  if (sink_ != nullptr) used_ = 0;
  terminate();
  return !failed_;
}

bool Text::to_fd(void* context, const char* s, size_t n) {
  return write_all(*static_cast<int*>(context), s, n);
}

namespace {
// "roost: <where>: <fault> 0x<addr>", the start of every fatal line.
void start_fatal(Line& line, const char* where, const char* fault, const void* addr) {
  line.str("roost: ").str(where).str(": ").str(fault).str(" ");
  line.hex(reinterpret_cast<uintptr_t>(addr));
}
}  // namespace

void fatal(const char* where, const char* fault, const void* addr) {
  Line line;
  start_fatal(line, where, fault, addr);
  line.str("\n");
  line.emit();
  abort();
}

void fatal_object(const char* where, const char* fault, const void* addr, size_t size) {
  Line line;
  start_fatal(line, where, fault, addr);
  line.str(" (size class ").dec(size).str(" bytes)\n");
  line.emit();
  abort();
}

}  // namespace roost::err
