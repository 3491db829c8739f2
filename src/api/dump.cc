// api/dump.cc — implementation of api/dump.h.
//
// The handler counts the request (service::request()); the service thread
// runs write_dump() under its work lock, after a round of its work, so a
// thread that was inside malloc when the signal came finishes its call
// untouched, and a fork waits for a dump in progress.  Each file is
// written as "<name>.tmp", then renamed to <name>: a reader never sees a
// file half written.  The heap profile, where the profiler runs, is
// written before the statistics, so that the statistics file's arrival
// says the dump is complete.
#include "api/dump.h"

#include <cerrno>

#include "api/stats.h"
#include "frontend/profile.h"
#include "frontend/profile_report.h"
#include "frontend/service.h"
#include "options.h"
#include "platform/error.h"
#include "platform/os.h"
#include "platform/text_section.h"

namespace roost::dump {

namespace {

constexpr const char* kDefaultPattern = "roost-dump.%p.%n";
constexpr char kTemporary[] = ".tmp";

// The service thread's own: the last dump's number, and the process it
// counted in (a fork child numbers its dumps from 1).
uint64_t g_sequence = 0;
int g_sequence_pid = 0;
// The snapshot a dump reads (one dump at a time, under the service's work
// lock): kept off the service thread's small stack.
stats::Snapshot g_snapshot;

void on_signal(int) {
  int saved = errno;
  service::request();
  errno = saved;
}

const char* pattern() {
  const char* p = options::text(options::kDumpFile);
  return p != nullptr ? p : kDefaultPattern;
}

// `pattern` with "%n" the number `n` (".n" appended where it has none),
// then `suffix` and ".tmp"; "%p" and "%%" left for os::open_named_for_writing.
void temporary_pattern(err::Text& out, const char* pattern, uint64_t n, const char* suffix) {
  bool numbered = false;
  for (const char* p = pattern; *p != 0; p++) {
    if (p[0] == '%' && p[1] == '%') {
      out.str("%%");
      p++;
    } else if (p[0] == '%' && p[1] == 'n') {
      out.dec(n);
      numbered = true;
      p++;
    } else {
      out.chr(*p);
    }
  }
  if (!numbered) out.chr('.').dec(n);
  out.str(suffix).str(kTemporary);
}

// Writes one file of dump `n`: `write(fd, context)` into its temporary
// name, then renamed into place, and the line that names it.
void write_file(uint64_t n, const char* suffix, const char* what,
                bool (*write)(int fd, void* context), void* context) {
  char tmp_pattern[4096];
  err::Text p(tmp_pattern, sizeof(tmp_pattern));
  temporary_pattern(p, pattern(), n, suffix);
  if (p.length() >= sizeof(tmp_pattern)) return;
  char tmp[4096];
  int fd = err::open_report_file(options::kTable[options::kDumpFile].env, tmp_pattern,
                                 "; no dump written", tmp, sizeof(tmp));
  if (fd < 0) return;
  bool whole = write(fd, context);
  os::close(fd);
  char name[4096];
  size_t len = 0;
  for (; tmp[len] != 0; len++) name[len] = tmp[len];
  name[len - (sizeof(kTemporary) - 1)] = 0;
  if (whole && os::rename_file(tmp, name) == 0) {
    profile::report::say_written(what, name, true);
    return;
  }
  os::remove_file(tmp);
  err::Line line;
  line.str("roost: ").str(what).str(" of pid ").dec(static_cast<uint64_t>(os::process_id()));
  line.str(" not written (to ").str(name).str(")\n");
  line.emit_report();
}

bool write_profile(int fd, void*) { return profile::report::write_heap_profile(fd); }

// `text`: points to true for the text form, false for JSON.
bool write_stats(int fd, void* text) {
  char buf[2048];
  err::Text out(buf, sizeof(buf), err::Text::to_fd, &fd);
  if (*static_cast<const bool*>(text)) {
    stats::write_text(out, g_snapshot);
  } else {
    stats::write_json(out, g_snapshot);
    out.chr('\n');
  }
  return out.flush();
}

// The request hook: on the service thread, under its work lock.
void write_dump() {
  // A fork child of the process that reports inherits the handler, but
  // writes nothing.
  if (!options::reports_here()) return;
  int pid = os::process_id();
  if (pid != g_sequence_pid) {
    g_sequence_pid = pid;
    g_sequence = 0;
  }
  uint64_t n = ++g_sequence;
  if (profile::on()) write_file(n, ".heap", "heap profile", write_profile, nullptr);
  bool text = options::get(options::kStats) == options::kReportText;
  stats::take(g_snapshot);
  stats::take_huge_pages(g_snapshot);
  write_file(n, text ? ".stats.txt" : ".stats.json", "statistics", write_stats, &text);
}

// A line on stderr: "roost: ROOST_DUMP_SIGNAL=SIGNAME: <rest>".
void say(const char* rest, uint64_t signal) {
  err::Line line;
  line.str("roost: ").str(options::kTable[options::kDumpSignal].env).str("=");
  if (const char* name = options::signal_name(signal))
    line.str("SIG").str(name);
  else
    line.dec(signal);
  line.str(": ").str(rest).str("\n");
  line.emit();
}

}  // namespace

ROOST_COMMON_TEXT void install() {
  uint64_t signal = options::get(options::kDumpSignal);
  if (signal == 0) return;
  bool verbose = options::get(options::kVerbose) != 0;
  if (options::get(options::kService) == 0) {
    say("no dumps: they are written by the service thread, which ROOST_SERVICE=0 keeps off "
        "(the signal is left as it was)",
        signal);
    return;
  }
  if (!options::reports_here()) {
    if (verbose) say("no dumps in this process: ROOST_STATS_PID names another", signal);
    return;
  }
  // Before the handler, which may run at once.
  service::set_request_hook(write_dump);
  os::Caught caught = os::catch_signal(static_cast<int>(signal), on_signal);
  if (caught != os::Caught::kCaught) service::set_request_hook(nullptr);
  if (caught == os::Caught::kTaken && verbose)
    say("the program already handles or ignores this signal: roost leaves it, no dumps", signal);
  if (caught == os::Caught::kFailed)
    say("cannot take this signal (sigaction refused): no dumps", signal);
  if (caught != os::Caught::kCaught) return;
  if (verbose) say("dumps on this signal, written by the service thread", signal);
  // The service answers the requests: started at the next safe point.
  service::want();
}

}  // namespace roost::dump
