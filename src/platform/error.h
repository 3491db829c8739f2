// platform/error.h — fatal diagnostics and allocation-free text output.
//
// Owns: writing to stderr (or another descriptor) with write(2), formatting
// numbers into caller buffers, and the one-line-then-abort path for misuse.
// Must never: call stdio, malloc or anything that may allocate.
#pragma once

#include <cstddef>
#include <cstdint>

namespace roost::err {

// Writes "roost: <where>: <fault> 0x<addr>\n" to stderr, then abort().
[[noreturn]] __attribute__((cold, noinline)) void fatal(const char* where, const char* fault,
                                                        const void* addr);
// The same for a fault about one object: "roost: <where>: <fault> 0x<addr>
// (size class <size> bytes)\n", then abort().
[[noreturn]] __attribute__((cold, noinline)) void fatal_object(const char* where, const char* fault,
                                                               const void* addr, size_t size);

// Writes a NUL-terminated string to stderr.
void write_str(const char* s);

// Keeps a private duplicate of stderr (close-on-exec) for report(): programs
// that close fd 2 before exiting (coreutils do) would otherwise silence the
// statistics printed at exit.
void keep_stderr();

// Writes to the kept duplicate of stderr, or to fd 2 if there is none.
void report(const char* s);
// The descriptor report() writes to.
int report_fd();

// Opens the file a report goes to, `pattern` with its "%p" the process id
// (os::open_named_for_writing), and leaves the name it opened in `name`
// (`size` bytes, at least 1; not given: kept to itself); when it cannot,
// says so in one line through report(), "roost: cannot open
// <variable>=<name> (errno N)<consequence>", and returns -1.  With
// `append`, every write goes to the file's end (O_APPEND).
int open_report_file(const char* variable, const char* pattern, const char* consequence,
                     char* name = nullptr, size_t size = 0, bool append = false);

// Writes all `n` bytes of `s` to `fd` (again after a signal interrupts),
// leaving errno as it was; false if the descriptor refused them.
bool write_all(int fd, const char* s, size_t n);

// Text of any length through a caller's buffer, in one of two ways:
//  - kept, snprintf's way: the buffer keeps the first size-1 characters and
//    a NUL (when size > 0); what does not fit is counted, not kept.
//  - passed on: each time the buffer fills, its contents go to `sink`
//    (flush() passes on the rest), so nothing is lost.
// length() counts every character written either way.
class Text {
 public:
  // Receives `n` characters; false if they could not be written.
  using Sink = bool (*)(void* context, const char* s, size_t n);

  Text(char* buf, size_t size) : buf_(buf), size_(size) { terminate(); }
  Text(char* buf, size_t size, Sink sink, void* context)
      : buf_(buf), size_(size), sink_(sink), context_(context) {
    terminate();
  }
  Text(const Text&) = delete;
  Text& operator=(const Text&) = delete;

  Text& chr(char c);
  Text& str(const char* s);
  Text& dec(uint64_t v);
  // `v` right-aligned in `width` characters (wider if it needs more).
  Text& dec_padded(uint64_t v, unsigned width);
  // `s` left-aligned in `width` characters (wider if it needs more).
  Text& str_padded(const char* s, unsigned width);
  // `v` in lower-case hexadecimal after "0x".
  Text& hex(uintptr_t v);

  // Characters written so far, kept or not.
  size_t length() const { return total_; }
  // Characters the buffer holds now (kept text: its first length()).
  size_t kept() const { return used_; }
  // Passes on what the buffer holds (passed-on text only); false if the
  // sink failed this time or before.
  bool flush();

  // A sink writing to the file descriptor that `context` points at.
  static bool to_fd(void* context, const char* s, size_t n);

 private:
  void terminate() {
    if (size_ > 0) buf_[used_] = 0;
  }

  char* buf_;
  size_t size_;
  size_t used_ = 0;   // characters in buf_
  size_t total_ = 0;  // characters written
  Sink sink_ = nullptr;
  void* context_ = nullptr;
  bool failed_ = false;
};

// The buffer of a Line, a base of its own so that it exists before the Text
// that writes into it.
struct LineBuffer {
  char buf[256];
};

// One line of a diagnostic or a statistic: kept text in a fixed buffer (255
// characters; the rest is cut), written with a single write(2).
class Line : public LineBuffer, public Text {
 public:
  Line() : Text(buf, sizeof(buf)) {}
  void emit();         // writes buf to stderr
  void emit_report();  // writes buf with report()
};

}  // namespace roost::err
