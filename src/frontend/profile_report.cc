// frontend/profile_report.cc — implementation of frontend/profile_report.h,
// and the heap profile or leak report at exit.
#include "frontend/profile_report.h"

#include <atomic>
#include <cerrno>

#include "ds/bits.h"
#include "ds/sampling.h"
#include "frontend/profile.h"
#include "options.h"
#include "platform/error.h"
#include "platform/memcheck.h"
#include "platform/os.h"
#include "platform/stack_trace.h"
#include "platform/text_section.h"

namespace roost::profile::report {

namespace {

constexpr const char* kDefaultPath = "roost.%p.heap";
// The leak report lists this many stacks, and sums up the rest.
constexpr size_t kLeakStacksListed = 50;

std::atomic<uint64_t> g_periodic{0};

const char* profile_path() {
  const char* path = options::text(options::kProfileFile);
  return path != nullptr ? path : kDefaultPath;
}

const char* profile_variable() { return options::kTable[options::kProfileFile].env; }

// Every stack's figures, copied in one snapshot into memory mapped for it.
class Snapshot {
 public:
  Snapshot() {
    // Room for the stacks sampled meanwhile too.
    capacity_ = summary().stacks + 256;
    bytes_ = bits::align_up(capacity_ * sizeof(StackFigures), os::page_size());
    figures_ = static_cast<StackFigures*>(os::reserve_aligned(bytes_, os::page_size()));
    if (figures_ != nullptr) count_ = snapshot(figures_, capacity_);
  }
  ~Snapshot() {
    if (figures_ != nullptr) os::release(figures_, bytes_);
  }
  Snapshot(const Snapshot&) = delete;
  Snapshot& operator=(const Snapshot&) = delete;

  bool ok() const { return figures_ != nullptr; }
  size_t count() const { return count_; }
  StackFigures* begin() { return figures_; }
  StackFigures* end() { return figures_ + count_; }

 private:
  size_t capacity_ = 0, bytes_ = 0, count_ = 0;
  StackFigures* figures_ = nullptr;
};

uint64_t objects(uint64_t objects_fp) {
  constexpr unsigned kBits = sampling::kObjectFractionBits;
  return (objects_fp + (uint64_t{1} << (kBits - 1))) >> kBits;
}

// Orders figures[0..n) by live bytes, the largest first (heap sort: no
// memory of its own).
void sort_by_live_bytes(StackFigures* f, size_t n) {
  auto sift = [f](size_t root, size_t end) {
    for (;;) {
      size_t child = 2 * root + 1;
      if (child >= end) return;
      // A min-heap: the smallest goes to the end, so the result descends.
      if (child + 1 < end && f[child + 1].live_bytes < f[child].live_bytes) child++;
      if (f[root].live_bytes <= f[child].live_bytes) return;
      StackFigures t = f[root];
      f[root] = f[child];
      f[child] = t;
      root = child;
    }
  };
  for (size_t i = n / 2; i-- > 0;) sift(i, n);
  for (size_t end = n; end > 1; end--) {
    StackFigures t = f[0];
    f[0] = f[end - 1];
    f[end - 1] = t;
    sift(0, end - 1);
  }
}

// "1 object", "2 objects".
void append_count(err::Text& out, uint64_t n, const char* noun) {
  out.dec(n).chr(' ').str(noun);
  if (n != 1) out.chr('s');
}

// "1.25 s" from nanoseconds.
void append_seconds(err::Text& out, uint64_t ns) {
  uint64_t centis = ns / 10000000;
  out.dec(centis / 100).chr('.');
  if (centis % 100 < 10) out.chr('0');
  out.dec(centis % 100).str(" s");
}

// One frame of the leak report: the return address, then where the call
// is (return address less one): exported symbol, object and the address in
// its file.
void append_frame(err::Text& out, unsigned index, uintptr_t pc) {
  out.str("roost:     #").dec(index).chr(' ').hex(pc);
  stack_trace::Place place;
  if (pc != 0 && stack_trace::locate(pc - 1, &place)) {
    if (place.symbol != nullptr) out.chr(' ').str(place.symbol).str("+").hex(place.symbol_offset);
    out.str(" (").str(place.object).chr('+').hex(place.file_address).chr(')');
  }
  out.chr('\n');
}

}  // namespace

bool write_heap_profile(int fd) {
  Inside inside;
  Snapshot snap;
  if (!snap.ok()) return false;
  uint64_t live_objects = 0, live_bytes = 0, alloc_objects = 0, alloc_bytes = 0;
  for (const StackFigures& s : snap) {
    live_objects += objects(s.live_objects_fp);
    live_bytes += s.live_bytes;
    alloc_objects += objects(s.alloc_objects_fp);
    alloc_bytes += s.alloc_bytes;
  }
  char buf[2048];
  err::Text out(buf, sizeof(buf), err::Text::to_fd, &fd);
  out.str("heap profile: ").dec(live_objects).str(": ").dec(live_bytes);
  out.str(" [").dec(alloc_objects).str(": ").dec(alloc_bytes).str("] @ heapprofile\n");
  for (const StackFigures& s : snap) {
    out.dec(objects(s.live_objects_fp)).str(": ").dec(s.live_bytes);
    out.str(" [").dec(objects(s.alloc_objects_fp)).str(": ").dec(s.alloc_bytes).str("] @");
    for (uint32_t i = 0; i < s.depth; i++) out.chr(' ').hex(s.pcs[i]);
    out.chr('\n');
  }
  out.str("\nMAPPED_LIBRARIES:\n");
  bool ok = out.flush();
  return os::copy_file_to("/proc/self/maps", fd) && ok;
}

bool write_leak_report(int fd) {
  Inside inside;
  Snapshot snap;
  char buf[1024];
  err::Text out(buf, sizeof(buf), err::Text::to_fd, &fd);
  if (!snap.ok()) {
    out.str("roost: leak report: no memory for it\n");
    return out.flush();
  }
  // The stacks still holding memory first, the largest first.
  StackFigures* f = snap.begin();
  size_t live = 0;
  for (size_t i = 0; i < snap.count(); i++) {
    if (f[i].live_samples == 0) continue;
    StackFigures t = f[live];
    f[live++] = f[i];
    f[i] = t;
  }
  sort_by_live_bytes(f, live);
  Summary sum = summary();
  uint64_t bytes = 0, objects_fp = 0, samples = 0;
  for (size_t i = 0; i < live; i++) {
    bytes += f[i].live_bytes;
    objects_fp += f[i].live_objects_fp;
    samples += f[i].live_samples;
  }
  out.str("roost: leak report: ");
  if (live == 0) {
    out.str("no sampled object is still allocated (");
  } else {
    out.str("about ").dec(bytes).str(" bytes in ");
    append_count(out, objects(objects_fp), "object");
    out.str(" still allocated, from ");
    append_count(out, live, "stack");
    out.str(" (").dec(samples).str(" of the ");
  }
  append_count(out, sum.samples, "sample");
  if (sum.rate <= 1)
    out.str(" taken, every allocation sampled)\n");
  else
    out.str(" taken, one per ").dec(sum.rate).str(" bytes allocated on average)\n");
  uint64_t now = os::now_ns();
  for (size_t i = 0; i < live && i < kLeakStacksListed; i++) {
    const StackFigures& s = f[i];
    out.str("roost: about ").dec(s.live_bytes).str(" bytes in ");
    append_count(out, objects(s.live_objects_fp), "object");
    out.str(" (");
    append_count(out, s.live_samples, "sample");
    out.str(", the oldest ");
    append_seconds(out, now > s.oldest_ns ? now - s.oldest_ns : 0);
    out.str(" old) allocated at:\n");
    for (uint32_t k = 0; k < s.depth; k++) append_frame(out, k, s.pcs[k]);
  }
  if (live > kLeakStacksListed) {
    uint64_t rest = 0;
    for (size_t i = kLeakStacksListed; i < live; i++) rest += f[i].live_bytes;
    out.str("roost: ... and ");
    append_count(out, live - kLeakStacksListed, "more stack");
    out.str(" with about ");
    out.dec(rest).str(" bytes\n");
  }
  return out.flush();
}

void say_written(const char* what, const char* name, bool whole) {
  char absolute[4096];
  const char* shown = os::absolute_path(name, absolute, sizeof(absolute)) ? absolute : name;
  char buf[1024];
  int fd = err::report_fd();
  err::Text out(buf, sizeof(buf), err::Text::to_fd, &fd);
  out.str("roost: ").str(what).str(" of pid ").dec(static_cast<uint64_t>(os::process_id()));
  out.str(" (").str(os::program_name()).str(whole ? ") written to " : ") not written whole to ");
  out.str(shown).chr('\n');
  out.flush();
}

int dump(const char* path) {
  memcheck::Quiet quiet;  // (roost's own records)
  if (!on()) return -ENOTSUP;
  char name[4096];
  int fd = os::open_named_for_writing(path != nullptr ? path : profile_path(), name, sizeof(name));
  if (fd < 0) return fd;
  bool ok = write_heap_profile(fd);
  os::close(fd);
  return ok ? 0 : -EIO;
}

void dump_periodic() {
  // A fork child of the process that reports samples on, but writes nothing.
  if (!options::reports_here()) return;
  char pattern[4096];
  err::Text numbered(pattern, sizeof(pattern));
  // Relaxed: the atomic increment alone makes each profile's number its own.
  numbered.str(profile_path()).chr('.').dec(g_periodic.fetch_add(1, std::memory_order_relaxed) + 1);
  if (numbered.length() >= sizeof(pattern)) return;
  char name[4096];
  int fd = err::open_report_file(profile_variable(), pattern, "; no periodic profile written", name,
                                 sizeof(name));
  if (fd < 0) return;
  bool whole = write_heap_profile(fd);
  os::close(fd);
  say_written("heap profile", name, whole);
}

}  // namespace roost::profile::report

using namespace roost;

// The profile at exit: ROOST_PROFILE=1 writes the heap profile to
// ROOST_PROFILE_FILE (or its default), ROOST_PROFILE=leaks the leak report
// on stderr or there; a file written is named on stderr.  Only in the
// process that reports (ROOST_STATS_PID): elsewhere the profiler never
// started, but a fork child of that process inherits it running.  A
// destructor, not a constructor: nothing happens unless profiling ran.
ROOST_COMMON_TEXT __attribute__((destructor)) static void profile_at_exit() {
  if (!profile::on() || !options::reports_here()) return;
  memcheck::Quiet quiet;  // (roost's own records)
  profile::Inside inside;
  const char* file = options::text(options::kProfileFile);
  char name[4096];
  if (options::get(options::kProfile) == options::kProfileLeaks) {
    int fd = err::report_fd();
    int opened = -1;
    if (file != nullptr) {
      opened = err::open_report_file(profile::report::profile_variable(), file,
                                     "; the report goes to stderr", name, sizeof(name));
      if (opened >= 0) fd = opened;
    }
    bool whole = profile::report::write_leak_report(fd);
    if (opened >= 0) {
      os::close(opened);
      profile::report::say_written("leak report", name, whole);
    }
    return;
  }
  int fd =
      err::open_report_file(profile::report::profile_variable(), profile::report::profile_path(),
                            "; no profile written", name, sizeof(name));
  if (fd < 0) return;
  bool whole = profile::report::write_heap_profile(fd);
  os::close(fd);
  profile::report::say_written("heap profile", name, whole);
}
