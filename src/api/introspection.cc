// api/introspection.cc — implementation of api/introspection.h.
//
// Owns: glibc's introspection figures computed from one statistics
// snapshot (api/stats.h), and mallopt's mapping.  Must never: stop
// threads, or call stdio before the snapshot is taken (malloc_info formats
// from its snapshot through a small buffer, and only then reaches fp).
#include "api/introspection.h"

#include <cerrno>
#include <climits>

#include "api/stats.h"
#include "backend/large.h"
#include "options.h"

namespace roost::api {

namespace {

// glibc's view of roost's memory (see mallinfo2() in the header).
struct View {
  size_t arena, hblks, hblkhd, uordblks, fordblks, keepcost;
  size_t huge_peak_objects, huge_peak_bytes;
};

View view(const stats::Snapshot& s) {
  large::Counters lc = large::counters();
  View v{};
  v.arena = s.totals.bytes_committed;
  v.hblks = lc.huge_objects;
  v.hblkhd = lc.huge_bytes;
  v.uordblks = s.totals.bytes_in_use > lc.huge_bytes ? s.totals.bytes_in_use - lc.huge_bytes : 0;
  v.fordblks = v.arena > v.uordblks ? v.arena - v.uordblks : 0;
  v.keepcost = s.totals.bytes_dirty;
  v.huge_peak_objects = lc.huge_peak_objects;
  v.huge_peak_bytes = lc.huge_peak_bytes;
  return v;
}

View view_now() {
  stats::Snapshot s;
  stats::take(s);
  return view(s);
}

int saturated(size_t v) { return v > INT_MAX ? INT_MAX : static_cast<int>(v); }

// Objects of class `sc` in its slabs and not handed out (on fast lists, on
// slabs' free lists, in flight home, or never carved).
uint64_t free_objects(const stats::Snapshot& s, unsigned sc) {
  const struct roost_class_stats& c = s.classes[sc];
  uint64_t capacity = c.slabs * sizeclass::kInfo.info[sc].capacity;
  return capacity > c.objects_in_use ? capacity - c.objects_in_use : 0;
}

struct FileSink {
  FILE* fp;
};

bool to_file(void* context, const char* s, size_t n) {
  return fwrite(s, 1, n, static_cast<FileSink*>(context)->fp) == n;
}

// `<name type="type" count="count" size="size"/>` (count left out when
// `with_count` is false), glibc's shape for totals.
void element(err::Text& out, const char* name, const char* type, bool with_count, uint64_t count,
             uint64_t size) {
  out.str("<").str(name).str(" type=\"").str(type).str("\"");
  if (with_count) out.str(" count=\"").dec(count).str("\"");
  out.str(" size=\"").dec(size).str("\"/>\n");
}

}  // namespace

struct mallinfo2 mallinfo2() {
  View v = view_now();
  struct mallinfo2 mi = {};
  mi.arena = v.arena;
  mi.hblks = v.hblks;
  mi.hblkhd = v.hblkhd;
  mi.uordblks = v.uordblks;
  mi.fordblks = v.fordblks;
  mi.keepcost = v.keepcost;
  return mi;
}

struct mallinfo mallinfo() {
  View v = view_now();
  struct mallinfo mi = {};
  mi.arena = saturated(v.arena);
  mi.hblks = saturated(v.hblks);
  mi.hblkhd = saturated(v.hblkhd);
  mi.uordblks = saturated(v.uordblks);
  mi.fordblks = saturated(v.fordblks);
  mi.keepcost = saturated(v.keepcost);
  return mi;
}

void malloc_stats() {
  stats::Snapshot s;
  stats::take(s);
  stats::take_huge_pages(s);
  View v = view(s);
  char buf[512];
  int fd = 2;
  err::Text out(buf, sizeof(buf), err::Text::to_fd, &fd);
  out.str("Arena 0:\n");
  out.str("system bytes     = ").dec_padded(v.arena, 10).chr('\n');
  out.str("in use bytes     = ").dec_padded(v.uordblks, 10).chr('\n');
  out.str("Total (incl. mmap):\n");
  out.str("system bytes     = ").dec_padded(v.arena + v.hblkhd, 10).chr('\n');
  out.str("in use bytes     = ").dec_padded(v.uordblks + v.hblkhd, 10).chr('\n');
  out.str("max mmap regions = ").dec_padded(v.huge_peak_objects, 10).chr('\n');
  out.str("max mmap bytes   = ").dec_padded(v.huge_peak_bytes, 10).chr('\n');
  stats::write_text(out, s);
  out.flush();
}

int malloc_info(int options, FILE* fp) {
  if (options != 0 || fp == nullptr) {
    errno = EINVAL;
    return -1;
  }
  stats::Snapshot s;
  stats::take(s);
  View v = view(s);
  char buf[1024];
  FileSink sink{fp};
  err::Text out(buf, sizeof(buf), to_file, &sink);
  out.str("<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n");
  uint64_t free_count = 0, free_bytes = 0;
  for (unsigned sc = 0; sc < sizeclass::kCount; sc++) {
    uint64_t n = free_objects(s, sc);
    if (n == 0) continue;
    uint64_t size = s.classes[sc].size;
    uint64_t from = sc == 0 ? 1 : s.classes[sc - 1].size + 1;
    out.str("  <size from=\"").dec(from).str("\" to=\"").dec(size);
    out.str("\" total=\"").dec(n * size).str("\" count=\"").dec(n).str("\"/>\n");
    free_count += n;
    free_bytes += n * size;
  }
  out.str("</sizes>\n");
  element(out, "total", "fast", true, 0, 0);
  element(out, "total", "rest", true, free_count, free_bytes);
  element(out, "system", "current", false, 0, v.arena);
  element(out, "aspace", "total", false, 0, s.totals.bytes_reserved);
  element(out, "aspace", "mprotect", false, 0, v.arena);
  out.str("</heap>\n");
  element(out, "total", "fast", true, 0, 0);
  element(out, "total", "rest", true, free_count, free_bytes);
  element(out, "total", "mmap", true, v.hblks, v.hblkhd);
  element(out, "system", "current", false, 0, v.arena + v.hblkhd);
  element(out, "aspace", "total", false, 0, s.totals.bytes_reserved + v.hblkhd);
  element(out, "aspace", "mprotect", false, 0, v.arena + v.hblkhd);
  out.str("</malloc>\n");
  return out.flush() ? 0 : -1;
}

int mallopt(int param, int value) {
  switch (param) {
    case M_TRIM_THRESHOLD:
      // Free memory kept before it goes back: each allocator's reserve of
      // empty slabs (the backend then purges after ROOST_PURGE_DELAY).
      if (value < 0) return 0;
      options::set(options::kSlabReserveBytes, static_cast<uint64_t>(value));
      return 1;
    case M_MXFAST:          // no fastbins: every class has per-thread fast lists
    case M_TOP_PAD:         // no heap top: regions are reserved, pages committed as touched
    case M_MMAP_THRESHOLD:  // large objects (above 256 KiB) are whole chunks, kept a purge delay
    case M_MMAP_MAX:        // only objects beyond a region are mapped alone
    case M_ARENA_TEST:      // no arenas: one allocator per thread
    case M_ARENA_MAX:
      return 1;
    default:  // M_PERTURB (roost does not fill memory), M_CHECK_ACTION (misuse
              // always aborts), the unused and the unknown
      return 0;
  }
}

}  // namespace roost::api
