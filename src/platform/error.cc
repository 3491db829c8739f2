// platform/error.cc — implementation of platform/error.h.
#include "platform/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

namespace roost::err {

namespace {
int g_report_fd = -1;

// Writes all of `s`, again after a signal interrupts, and leaves errno as
// the program had it (a warning at the first malloc must not change it).
void write_fd(int fd, const char* s) {
  int saved = errno;
  size_t n = 0;
  while (s[n] != 0) n++;
  while (n > 0) {
    ssize_t w = ::write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    s += w;
    n -= static_cast<size_t>(w);
  }
  errno = saved;
}
}  // namespace

void keep_stderr() {
  if (g_report_fd < 0) g_report_fd = fcntl(2, F_DUPFD_CLOEXEC, 64);
}

void report(const char* s) { write_fd(g_report_fd >= 0 ? g_report_fd : 2, s); }

void write_str(const char* s) { write_fd(2, s); }

Line& Line::str(const char* s) {
  while (*s != 0 && len + 1 < sizeof(buf)) buf[len++] = *s++;
  buf[len] = 0;
  return *this;
}

Line& Line::dec(uint64_t v) {
  char tmp[24];
  int n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (n > 0 && len + 1 < sizeof(buf)) buf[len++] = tmp[--n];
  buf[len] = 0;
  return *this;
}

Line& Line::hex(uintptr_t v) {
  static const char digits[] = "0123456789abcdef";
  char tmp[20];
  int n = 0;
  do {
    tmp[n++] = digits[v & 15];
    v >>= 4;
  } while (v != 0);
  str("0x");
  while (n > 0 && len + 1 < sizeof(buf)) buf[len++] = tmp[--n];
  buf[len] = 0;
  return *this;
}

void Line::emit() {
  buf[len] = 0;
  write_str(buf);
}

void Line::emit_report() {
  buf[len] = 0;
  report(buf);
}

void fatal(const char* where, const char* fault, const void* addr) {
  Line line;
  line.str("roost: ").str(where).str(": ").str(fault).str(" ");
  line.hex(reinterpret_cast<uintptr_t>(addr)).str("\n");
  line.emit();
  abort();
}

}  // namespace roost::err
