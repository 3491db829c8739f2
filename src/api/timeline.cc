// api/timeline.cc — memory over time: the lines ROOST_STATS_INTERVAL asks
// for, one JSON object per line, appended to ROOST_TIMELINE_FILE (default
// roost-timeline.%p.jsonl).  The service thread writes one per interval
// through the writer this file registers at start-up (frontend/service.h);
// the report at exit (api/stats.cc) writes the last one.
// docs/STATISTICS.md, "Memory over time", lists the fields.
//
// Owns: the file (opened at the first line of each process: a forked child
// opens its own), the lines' format, the time since the process started.
// Must never: allocate (fixed buffers, used under its lock), write a line in
// more than one write(2) (a reader sees whole lines only), or write in a
// process that does not report (options::reports_here()).
#include "api/timeline.h"

#include "api/stats.h"
#include "ds/spinlock.h"
#include "frontend/heap.h"
#include "frontend/service.h"
#include "options.h"
#include "platform/error.h"
#include "platform/os.h"
#include "platform/text_section.h"

using namespace roost;

namespace {

constexpr const char* kDefaultFile = "roost-timeline.%p.jsonl";

// Everything below is guarded by g_lock: the service thread's lines and the
// last line at exit.
SpinLock g_lock;
int g_pid = 0;            // the process the file and the clock are for (0: none yet)
int g_fd = -1;            // the file (-1: it could not be opened)
bool g_last = false;      // the last line is written: no more in this process
uint64_t g_start_ns = 0;  // os::now_ns() when the process started
uint64_t g_seq = 0;       // lines this process wrote
// The counts that only grow, as the last line gave them.  A snapshot sums
// the threads' figures while they run (frees are counters plus free lists
// plus slabs' free objects, read one after another), so a count can come
// out a little under the one before; a line never shows it going down.
enum Cumulative : unsigned {
  kAllocations,
  kFrees,
  kLargeAllocations,
  kRemoteFrees,
  kMessagesSent,
  kMessagesReceived,
  kBytesPurged,
  kCumulativeCount
};
uint64_t g_highest[kCumulativeCount];

// `value`, or the highest the field showed before if that is more.
uint64_t at_least_before(Cumulative field, uint64_t value) {
  if (value < g_highest[field]) return g_highest[field];
  g_highest[field] = value;
  return value;
}
// One line: its figures (under 1 KiB), then each class in use (under 48
// characters each).
char g_buf[1024 + sizeclass::kCount * 48];
stats::Snapshot g_snapshot;

// The figures of one line, from a snapshot.
void format(err::Text& out, const stats::Snapshot& s, uint64_t now, bool last) {
  const struct roost_stats& t = s.totals;
  uint64_t ms = (now - g_start_ns) / 1000000u;
  out.str("{\"seq\":").dec(g_seq).str(",\"t\":").dec(ms / 1000).chr('.');
  out.chr(static_cast<char>('0' + ms / 100 % 10)).chr(static_cast<char>('0' + ms / 10 % 10));
  out.chr(static_cast<char>('0' + ms % 10));
  out.str(",\"unix_ms\":").dec(os::wall_clock_ms());
  out.str(",\"pid\":").dec(static_cast<uint64_t>(g_pid));
  out.str(",\"last\":").str(last ? "true" : "false");
  out.str(",\"interval_ms\":").dec(options::get(options::kStatsInterval));
  out.str(",\"rss_bytes\":").dec(os::resident_bytes());
#define FIELD(name) out.str(",\"" #name "\":").dec(t.name)
#define GROWING(name, field) out.str(",\"" #name "\":").dec(at_least_before(field, t.name))
  FIELD(bytes_in_use);
  FIELD(bytes_committed);
  FIELD(bytes_dirty);
  GROWING(bytes_purged, kBytesPurged);
  GROWING(allocations, kAllocations);
  GROWING(frees, kFrees);
  GROWING(large_allocations, kLargeAllocations);
  GROWING(remote_frees, kRemoteFrees);
  GROWING(messages_sent, kMessagesSent);
  GROWING(messages_received, kMessagesReceived);
  FIELD(allocators);
  FIELD(purge_delay_ms);
#undef GROWING
#undef FIELD
  out.str(",\"trims\":").dec(heap::trims());
  out.str(",\"classes\":[");
  const char* sep = "";
  for (unsigned sc = 0; sc < sizeclass::kCount; sc++) {
    const struct roost_class_stats& c = s.classes[sc];
    if (c.objects_in_use == 0) continue;
    out.str(sep).chr('[').dec(c.size).chr(',').dec(c.objects_in_use).chr(']');
    sep = ",";
  }
  out.str("]}\n");
}

// Writes one line (g_lock held): opens this process's file first if it has
// none (a forked child has its parent's: it opens its own).
void write_line(bool last) {
  int pid = os::process_id();
  if (pid != g_pid) {
    if (g_pid != 0 && g_fd >= 0) os::close(g_fd);  // the parent's (a forked child)
    g_pid = pid;
    g_seq = 0;
    for (uint64_t& h : g_highest) h = 0;
    g_last = false;
    g_start_ns = os::now_ns() - os::process_age_ns();
    const char* pattern = options::text(options::kTimelineFile);
    g_fd = err::open_report_file(options::kTable[options::kTimelineFile].env,
                                 pattern != nullptr ? pattern : kDefaultFile, "; no timeline",
                                 nullptr, 0, true);
  }
  if (g_fd < 0 || g_last) return;
  stats::take(g_snapshot);
  err::Text out(g_buf, sizeof(g_buf));
  format(out, g_snapshot, os::now_ns(), last);
  // A line cut short by the buffer would not parse: never the case with
  // the buffer's size above, but dropped rather than written.
  if (out.length() < sizeof(g_buf)) err::write_all(g_fd, g_buf, out.length());
  g_seq++;
  if (last) g_last = true;
}

// The service thread's writer (frontend/service.h: set_line_writer).
void write_interval_line() {
  LockGuard guard(g_lock);
  write_line(false);
}

// Registers the writer: one store, whether or not a timeline is asked for
// (the options may not be read yet); the service calls it only with one.
ROOST_COMMON_TEXT __attribute__((constructor)) void register_writer() {
  service::set_line_writer(write_interval_line);
}

}  // namespace

namespace roost::timeline {

ROOST_COMMON_TEXT void write_last_line() {
  if (options::get(options::kStatsInterval) == 0) return;
  if (!options::reports_here()) return;
  LockGuard guard(g_lock);
  write_line(true);
}

}  // namespace roost::timeline
