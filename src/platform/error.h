// platform/error.h — fatal diagnostics and allocation-free text output.
//
// Owns: writing to stderr with write(2), formatting numbers into caller
// buffers, and the one-line-then-abort path for misuse.  Must never: call
// stdio, malloc or anything that may allocate.
#pragma once

#include <cstddef>
#include <cstdint>

namespace roost::err {

// Writes "roost: <where>: <fault> 0x<addr>\n" to stderr, then abort().
[[noreturn]] __attribute__((cold, noinline)) void fatal(const char* where, const char* fault,
                                                        const void* addr);

// Writes a NUL-terminated string to stderr.
void write_str(const char* s);

// Keeps a private duplicate of stderr (close-on-exec) for report(): programs
// that close fd 2 before exiting (coreutils do) would otherwise silence the
// statistics printed at exit.
void keep_stderr();

// Writes to the kept duplicate of stderr, or to fd 2 if there is none.
void report(const char* s);

// Small fixed-buffer text builder for diagnostics and statistics.
struct Line {
  char buf[256];
  size_t len = 0;
  Line& str(const char* s);
  Line& dec(uint64_t v);
  Line& hex(uintptr_t v);
  void emit();         // writes buf to stderr
  void emit_report();  // writes buf with report()
};

}  // namespace roost::err
