// options.cc — the values of the run-time options: reading them from the
// environment, the warnings, the verbose print.
//
// Owns: the values in force and where each came from.  Must never: allocate,
// lock or use stdio (lines go out through err::Line).
#include "options.h"

#include <atomic>

#include "config.h"
#include "platform/env.h"
#include "platform/error.h"
#include "platform/os.h"
#include "platform/text_section.h"

namespace roost::options {

// The list must hold together: each default and bound parses, and
// min <= default <= max.
#define ROOST_OPTION(id, variable, type, fallback, min, max, help)                          \
  static_assert(parse_syntax(Type::type, min).status == Status::kOk, variable ": bad min"); \
  static_assert(parse_syntax(Type::type, max).status == Status::kOk, variable ": bad max"); \
  static_assert(parse_syntax(Type::type, min).value <= parse_syntax(Type::type, max).value, \
                variable ": min > max");                                                    \
  static_assert(parse(id, fallback).status == Status::kOk, variable ": default not in range");
#include "options.def"
#undef ROOST_OPTION

namespace {

constexpr char kPrefix[] = "ROOST_";

enum class Source : uint8_t {
  kDefault,
  kEnvironment,
  kRejected,  // the environment's value was malformed or out of range
  kSet,       // by set()
  kImplied,   // ROOST_STATS by ROOST_STATS_FILE, ROOST_PROFILE by ROOST_PROFILE_FILE (load())
};

struct Value {
  std::atomic<uint64_t> value;
  std::atomic<Source> source;
  std::atomic<const char*> text;  // a kPath option's value (in the environment)
};

constinit Value g_values[kCount] = {
#define ROOST_OPTION(id, variable, type, fallback, min, max, help) \
  {default_value(id), Source::kDefault, nullptr},
#include "options.def"
#undef ROOST_OPTION
};

enum State : unsigned { kUnread, kReading, kRead };
constinit std::atomic<unsigned> g_state{kUnread};

// What a value of each type is, for "... is not <this>".
const char* describe(Type type) {
  switch (type) {
    case Type::kBool:
      return "a boolean (0/1, on/off, true/false, yes/no)";
    case Type::kBytes:
      return "a size in bytes (digits, then optionally k, m, g or t)";
    case Type::kMillis:
      return "a duration (digits: milliseconds, or followed by ms or s)";
    case Type::kNumber:
      return "a number";
    case Type::kReport:
      return "one of 0/1, on/off, true/false, yes/no, text, json";
    case Type::kProfileMode:
      return "one of 0/1, on/off, true/false, yes/no, leaks";
    case Type::kHugePolicy:
      return "one of off, dense, always (or 0/1, on/off, true/false, yes/no)";
    case Type::kPath:
      return "a path";  // (any text is)
    case Type::kSignal:
      return "a signal roost may take (USR2, SIGUSR2, a number; not KILL, STOP, SEGV, BUS, ILL, "
             "FPE, TRAP, ABRT, SYS)";
  }
  return "valid";
}

// Appends at most 64 characters of `s`, up to `stop` or its end, and "..."
// if that cut it short: a line keeps room for its end whatever the
// environment holds.
void append_clipped(err::Line& line, const char* s, char stop) {
  char buf[68];
  size_t n = 0;
  for (; s[n] != 0 && s[n] != stop && n < 64; n++) buf[n] = s[n];
  if (s[n] != 0 && s[n] != stop) {
    buf[n++] = '.';
    buf[n++] = '.';
    buf[n++] = '.';
  }
  buf[n] = 0;
  line.str(buf);
}

// A value as the option's syntax writes it: 0 or 1, decimal milliseconds,
// bytes with the largest suffix that divides them (while that leaves fewer
// than seven digits), a report's 0, 1 or json.
void append_value(err::Line& line, Type type, uint64_t v) {
  if (type == Type::kReport && v == kReportJson) {
    line.str("json");
    return;
  }
  if (type == Type::kProfileMode && v == kProfileLeaks) {
    line.str("leaks");
    return;
  }
  if (type == Type::kHugePolicy) {
    line.str(v == kHugeAlways ? "always" : v == kHugeDense ? "dense" : "off");
    return;
  }
  if (type == Type::kSignal && signal_name(v) != nullptr) {
    line.str(signal_name(v));
    return;
  }
  if (type == Type::kBytes && v != 0) {
    constexpr struct {
      unsigned shift;
      const char* suffix;
    } kUnits[] = {{40, "t"}, {30, "g"}, {20, "m"}, {10, "k"}};
    for (const auto& u : kUnits) {
      uint64_t n = v >> u.shift;
      if ((n << u.shift) == v && n < 1000000) {
        line.dec(n).str(u.suffix);
        return;
      }
    }
  }
  line.dec(v);
}

ROOST_COMMON_TEXT void read_option(Id id) {
  const Option& o = kTable[id];
  const char* s = env::get(o.env);
  if (s == nullptr) return;
  Parsed p = parse(id, s);
  if (p.status == Status::kOk) {
    g_values[id].value.store(p.value, std::memory_order_relaxed);
    g_values[id].source.store(Source::kEnvironment, std::memory_order_relaxed);
    if (o.type == Type::kPath && *s != 0) g_values[id].text.store(s, std::memory_order_relaxed);
    return;
  }
  g_values[id].source.store(Source::kRejected, std::memory_order_relaxed);
  err::Line line;
  line.str("roost: ").str(o.env).str("=");
  append_clipped(line, s, 0);
  if (p.status == Status::kMalformed)
    line.str(" is not ").str(describe(o.type));
  else
    line.str(" is out of range (").str(o.min).str("..").str(o.max).str(")");
  line.str("; keeping the default ").str(o.fallback).str("\n");
  line.emit();
}

// env::for_each's visitor: a warning for a ROOST_* variable no option reads.
void warn_if_unknown(const char* entry) {
  size_t len = 0;
  while (entry[len] != 0 && entry[len] != '=') len++;
  for (const Option& o : kTable) {
    size_t n = 0;
    while (n < len && o.env[n] == entry[n]) n++;
    if (n == len && o.env[n] == 0) return;
  }
  err::Line line;
  line.str("roost: unknown variable ");
  append_clipped(line, entry, '=');
  line.str(" ignored");
  if (const char* near = nearest_variable(entry, len))
    line.str(" (did you mean ").str(near).str("?)");
  line.str("\n");
  line.emit();
}

// Option `file` set gives option `id`, left at its default, the value
// `value`.
void imply(Id id, Id file, uint64_t value) {
  if (text(file) == nullptr ||
      g_values[id].source.load(std::memory_order_relaxed) != Source::kDefault)
    return;
  g_values[id].value.store(value, std::memory_order_relaxed);
  g_values[id].source.store(Source::kImplied, std::memory_order_relaxed);
}

}  // namespace

ROOST_COMMON_TEXT void load() {
  if (g_state.load(std::memory_order_acquire) == kRead) return;
  // A ROOST_ASAN build serves ld.so's allocations while ASan starts up,
  // before the environment is there: the defaults until it is, then the
  // environment's values (config.h: kAsan).
  if constexpr (config::kAsan) {
    if (!env::present()) return;
  }
  unsigned expected = kUnread;
  if (!g_state.compare_exchange_strong(expected, kReading, std::memory_order_acquire)) {
    // Another thread is reading the environment: a few microseconds, unless
    // it lost its core (more threads than cores), so give ours up.
    while (g_state.load(std::memory_order_acquire) != kRead) os::yield();
    return;
  }
  for (unsigned i = 0; i < kCount; i++) read_option(static_cast<Id>(i));
  env::for_each(kPrefix, warn_if_unknown);
  // A file for the report asks for one: the JSON one, unless ROOST_STATS
  // says which (ROOST_STATS=0 keeps it off); a file for the heap profile
  // asks for the profile, unless ROOST_PROFILE says otherwise.
  imply(kStats, kStatsFile, kReportJson);
  imply(kProfile, kProfileFile, kProfileHeap);
  // For the reports at exit (on stderr, or there if their file cannot be
  // opened).
  if (get(kStats) != kReportNone || get(kProfile) != kProfileOff) err::keep_stderr();
  g_state.store(kRead, std::memory_order_release);
  if (get(kVerbose) != 0) print();
}

ROOST_COMMON_TEXT uint64_t get(Id id) { return g_values[id].value.load(std::memory_order_relaxed); }

const char* text(Id id) { return g_values[id].text.load(std::memory_order_relaxed); }

bool reports_here() {
  uint64_t only = get(kStatsPid);
  return only == 0 || only == static_cast<uint64_t>(os::process_id());
}

void set(Id id, uint64_t value) {
  load();  // the environment first, so that it cannot undo this later
  g_values[id].value.store(value, std::memory_order_relaxed);
  g_values[id].source.store(Source::kSet, std::memory_order_relaxed);
}

void print() {
  for (unsigned i = 0; i < kCount; i++) {
    const Option& o = kTable[i];
    err::Line line;
    line.str("roost: ").str(o.env).str("=");
    if (o.type == Type::kPath) {
      if (const char* t = text(static_cast<Id>(i))) append_clipped(line, t, 0);
    } else {
      append_value(line, o.type, get(static_cast<Id>(i)));
    }
    switch (g_values[i].source.load(std::memory_order_relaxed)) {
      case Source::kDefault:
        line.str(o.type == Type::kPath ? " (unset" : " (default");
        break;
      case Source::kEnvironment:
        line.str(" (from the environment");
        break;
      case Source::kRejected:
        line.str(" (default; the environment's value was rejected");
        break;
      case Source::kSet:
        line.str(" (set by the program");
        break;
      case Source::kImplied:
        line.str(" (implied by ").str(kTable[i == kStats ? kStatsFile : kProfileFile].env);
        break;
    }
    if (i == kBatchIt && !config::kBatchIt) line.str("; BatchIt is compiled out of this build");
    line.str(")\n");
    line.emit();
  }
}

}  // namespace roost::options
