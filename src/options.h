// options.h — roost's run-time options: their ids, their syntax, the values in force.
//
// Owns: the table generated from options.def (the one list of options), the
// parser of option values (constexpr: the list's defaults and bounds go
// through it at compile time), and the values in force, read once at the
// first allocation from ROOST_* environment variables without allocating.
// Must never: allocate, lock, or be changed or consulted on a fast path.
#pragma once

#include <csignal>
#include <cstddef>
#include <cstdint>

namespace roost::options {

enum Id : unsigned {
#define ROOST_OPTION(id, variable, type, fallback, min, max, help) id,
#include "options.def"
#undef ROOST_OPTION
  kCount
};

// The syntax of an option's values (see options.def).
enum class Type : uint8_t {
  kBool,
  kBytes,
  kMillis,
  kNumber,
  kReport,
  kProfileMode,
  kHugePolicy,
  kPath,
  kSignal
};

// The values of a kReport option.
enum Report : uint64_t { kReportNone = 0, kReportText = 1, kReportJson = 2 };

// The values of a kProfileMode option (ROOST_PROFILE).
enum ProfileMode : uint64_t { kProfileOff = 0, kProfileHeap = 1, kProfileLeaks = 2 };

// The values of a kHugePolicy option (ROOST_HUGEPAGES): ordered, so that
// `>= kHugeDense` reads "collapses dense blocks".
enum HugePolicy : uint64_t { kHugeOff = 0, kHugeDense = 1, kHugeAlways = 2 };

struct Option {
  const char* env;  // the environment variable
  Type type;
  const char* fallback;  // the default, min and max, in the option's syntax
  const char* min;
  const char* max;
  const char* help;
};

inline constexpr Option kTable[kCount] = {
#define ROOST_OPTION(id, variable, type, fallback, min, max, help) \
  {variable, Type::type, fallback, min, max, help},
#include "options.def"
#undef ROOST_OPTION
};

// ---------------------------------------------------------------------------
// Parsing.

enum class Status : uint8_t {
  kOk,
  kMalformed,   // not in the option's syntax
  kOutOfRange,  // a number, but outside the option's range (or 64 bits)
};

struct Parsed {
  Status status;
  uint64_t value;  // when status is kOk
};

namespace detail {
constexpr char lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c + ('a' - 'A')) : c;
}

constexpr bool same_word(const char* s, const char* word) {
  for (; *word != 0; s++, word++)
    if (lower(*s) != *word) return false;
  return *s == 0;
}

constexpr Parsed parse_bool(const char* s) {
  constexpr const char* kTrue[] = {"1", "on", "true", "yes"};
  constexpr const char* kFalse[] = {"0", "off", "false", "no"};
  for (const char* w : kTrue)
    if (same_word(s, w)) return {Status::kOk, 1};
  for (const char* w : kFalse)
    if (same_word(s, w)) return {Status::kOk, 0};
  return {Status::kMalformed, 0};
}

// A boolean word (off: no report, on: the text one), `text` or `json`.
constexpr Parsed parse_report(const char* s) {
  if (same_word(s, "text")) return {Status::kOk, kReportText};
  if (same_word(s, "json")) return {Status::kOk, kReportJson};
  Parsed p = parse_bool(s);
  return {p.status, p.value != 0 ? uint64_t{kReportText} : uint64_t{kReportNone}};
}

// A boolean word (off; on: a heap profile) or `leaks`.
constexpr Parsed parse_profile_mode(const char* s) {
  if (same_word(s, "leaks")) return {Status::kOk, kProfileLeaks};
  Parsed p = parse_bool(s);
  return {p.status, p.value != 0 ? uint64_t{kProfileHeap} : uint64_t{kProfileOff}};
}

// `dense`, `always`, or a boolean word (off; on: `always`, as `1` was
// before `dense` existed).
constexpr Parsed parse_huge_policy(const char* s) {
  if (same_word(s, "dense")) return {Status::kOk, kHugeDense};
  if (same_word(s, "always")) return {Status::kOk, kHugeAlways};
  Parsed p = parse_bool(s);
  return {p.status, p.value != 0 ? uint64_t{kHugeAlways} : uint64_t{kHugeOff}};
}

// Reads the decimal digits at `s` into `v`, moving `s` past them; true if
// the number does not fit 64 bits.
constexpr bool read_digits(const char*& s, uint64_t& v) {
  bool overflow = false;
  for (; *s >= '0' && *s <= '9'; s++) {
    uint64_t digit = static_cast<uint64_t>(*s - '0');
    if (v > (UINT64_MAX - digit) / 10) overflow = true;
    v = v * 10 + digit;
  }
  return overflow;
}

// Decimal digits, then nothing or `ms` (milliseconds), or `s` (seconds), in
// either case: a duration in milliseconds.
constexpr Parsed parse_millis(const char* s) {
  if (*s < '0' || *s > '9') return {Status::kMalformed, 0};
  uint64_t v = 0;
  bool overflow = read_digits(s, v);
  uint64_t scale = 1;
  if (same_word(s, "s"))
    scale = 1000;
  else if (*s != 0 && !same_word(s, "ms"))
    return {Status::kMalformed, 0};
  if (overflow || v > UINT64_MAX / scale) return {Status::kOutOfRange, 0};
  return {Status::kOk, v * scale};
}

// The signals a kSignal option may name, as `kill -l` writes them (without
// SIG).  Not among them, whatever the spelling: those a process cannot catch
// (KILL, STOP), those of faults and of abort() (SEGV, which roost's guard
// pages use, BUS, ILL, FPE, TRAP, ABRT, SYS), and glibc's own (32, 33).
struct SignalName {
  int number;
  const char* name;
};
inline constexpr SignalName kSignalNames[] = {
    {SIGHUP, "HUP"},       {SIGINT, "INT"},   {SIGQUIT, "QUIT"},   {SIGUSR1, "USR1"},
    {SIGUSR2, "USR2"},     {SIGPIPE, "PIPE"}, {SIGALRM, "ALRM"},   {SIGTERM, "TERM"},
    {SIGCHLD, "CHLD"},     {SIGCONT, "CONT"}, {SIGTSTP, "TSTP"},   {SIGTTIN, "TTIN"},
    {SIGTTOU, "TTOU"},     {SIGURG, "URG"},   {SIGXCPU, "XCPU"},   {SIGXFSZ, "XFSZ"},
    {SIGVTALRM, "VTALRM"}, {SIGPROF, "PROF"}, {SIGWINCH, "WINCH"}, {SIGIO, "IO"},
    {SIGPWR, "PWR"}};

constexpr bool refused_signal(uint64_t n) {
  return n == SIGKILL || n == SIGSTOP || n == SIGSEGV || n == SIGBUS || n == SIGILL ||
         n == SIGFPE || n == SIGTRAP || n == SIGABRT || n == SIGSYS || n == 32 || n == 33;
}

// Decimal digits, then (with `suffixes`) one of k, m, g, t in either case.
constexpr Parsed parse_number(const char* s, bool suffixes) {
  if (*s < '0' || *s > '9') return {Status::kMalformed, 0};
  uint64_t v = 0;
  bool overflow = read_digits(s, v);
  unsigned shift = 0;
  if (suffixes && *s != 0) {
    switch (lower(*s)) {
      case 'k':
        shift = 10;
        break;
      case 'm':
        shift = 20;
        break;
      case 'g':
        shift = 30;
        break;
      case 't':
        shift = 40;
        break;
      default:
        return {Status::kMalformed, 0};
    }
    s++;
  }
  if (*s != 0) return {Status::kMalformed, 0};
  if (overflow || (shift != 0 && (v >> (64 - shift)) != 0)) return {Status::kOutOfRange, 0};
  return {Status::kOk, v << shift};
}

// A signal: its name with or without SIG (any case) or its number (1 to
// 64); 0, off, false or no: none.  A signal roost refuses is kMalformed.
constexpr Parsed parse_signal(const char* s) {
  if (*s >= '0' && *s <= '9') {
    Parsed p = parse_number(s, false);
    if (p.status != Status::kOk) return p;
    if (p.value > 64) return {Status::kOutOfRange, 0};
    if (refused_signal(p.value)) return {Status::kMalformed, 0};
    return p;
  }
  if (same_word(s, "off") || same_word(s, "false") || same_word(s, "no")) return {Status::kOk, 0};
  const char* name = s;
  if (lower(s[0]) == 's' && lower(s[1]) == 'i' && lower(s[2]) == 'g') name = s + 3;
  for (const SignalName& sn : kSignalNames) {
    const char* a = name;
    const char* b = sn.name;
    while (*a != 0 && *b != 0 && lower(*a) == lower(*b)) a++, b++;
    if (*a == 0 && *b == 0) return {Status::kOk, static_cast<uint64_t>(sn.number)};
  }
  return {Status::kMalformed, 0};
}
}  // namespace detail

// The name of signal `n` without SIG ("USR2"), or nullptr for one without
// a name here (a real-time signal).
constexpr const char* signal_name(uint64_t n) {
  for (const detail::SignalName& sn : detail::kSignalNames)
    if (static_cast<uint64_t>(sn.number) == n) return sn.name;
  return nullptr;
}

// `s` in the syntax of `type`, whatever the range: kBool takes 0/1, on/off,
// true/false, yes/no in any case; kBytes decimal digits with an optional k,
// m, g or t suffix (binary units, either case); kMillis decimal digits
// (milliseconds), optionally followed by `ms`, or by `s` for seconds (either
// case); kNumber decimal digits; kReport a boolean word, `text` or `json` (a Report); kProfileMode
// a boolean word or `leaks` (a ProfileMode); kHugePolicy a boolean word, `dense` or `always` (a
// HugePolicy); kPath any text (its
// value is the text itself, options::text(), and the number 0); kSignal a
// signal's name or number (detail::parse_signal).  A number
// past 64 bits is kOutOfRange; anything else (empty, a sign, spaces,
// another suffix or word) is kMalformed.
constexpr Parsed parse_syntax(Type type, const char* s) {
  switch (type) {
    case Type::kBool:
      return detail::parse_bool(s);
    case Type::kBytes:
      return detail::parse_number(s, true);
    case Type::kMillis:
      return detail::parse_millis(s);
    case Type::kNumber:
      return detail::parse_number(s, false);
    case Type::kReport:
      return detail::parse_report(s);
    case Type::kProfileMode:
      return detail::parse_profile_mode(s);
    case Type::kHugePolicy:
      return detail::parse_huge_policy(s);
    case Type::kPath:
      return {Status::kOk, 0};
    case Type::kSignal:
      return detail::parse_signal(s);
  }
  return {Status::kMalformed, 0};
}

// `s` as a value of option `id`: its syntax, then its range.
constexpr Parsed parse(Id id, const char* s) {
  const Option& o = kTable[id];
  Parsed p = parse_syntax(o.type, s);
  if (p.status != Status::kOk) return p;
  if (p.value < parse_syntax(o.type, o.min).value || p.value > parse_syntax(o.type, o.max).value)
    return {Status::kOutOfRange, 0};
  return p;
}

constexpr uint64_t default_value(Id id) { return parse(id, kTable[id].fallback).value; }

// The option whose variable is within two edits (insertions, deletions,
// substitutions) of the first `len` characters of `name`, the nearest one;
// nullptr if none is.  For "did you mean" in the unknown-variable warning
// and in roost-run's unknown-option error (which includes this header
// without linking roost).
constexpr const char* nearest_variable(const char* name, size_t len) {
  // Levenshtein distance, one row at a time; names this long are no typo.
  constexpr size_t kMaxLen = 64;
  constexpr unsigned kMaxEdits = 2;
  if (len >= kMaxLen) return nullptr;
  const char* best = nullptr;
  unsigned best_distance = kMaxEdits + 1;
  for (const Option& o : kTable) {
    size_t olen = 0;
    while (o.env[olen] != 0) olen++;
    if (olen >= kMaxLen) continue;
    unsigned row[kMaxLen + 1] = {};
    for (size_t j = 0; j <= olen; j++) row[j] = static_cast<unsigned>(j);
    for (size_t i = 1; i <= len; i++) {
      unsigned diagonal = row[0];  // row[i-1][j-1]
      row[0] = static_cast<unsigned>(i);
      for (size_t j = 1; j <= olen; j++) {
        unsigned above = row[j];
        unsigned cost = diagonal + (name[i - 1] == o.env[j - 1] ? 0 : 1);
        unsigned best_here = above + 1 < row[j - 1] + 1 ? above + 1 : row[j - 1] + 1;
        row[j] = cost < best_here ? cost : best_here;
        diagonal = above;
      }
    }
    if (row[olen] < best_distance) {
      best_distance = row[olen];
      best = o.env;
    }
  }
  return best;
}

// ---------------------------------------------------------------------------
// The values in force.

// Reads the environment: each option's variable (a malformed or out-of-range
// value keeps the default and prints a warning on stderr), and a warning for
// each unknown ROOST_* variable; with ROOST_VERBOSE on, then print().  Once
// per process: later calls return at once (or wait for the first to finish).
// ROOST_STATS_FILE set with ROOST_STATS unset makes ROOST_STATS json, and
// ROOST_PROFILE_FILE set with ROOST_PROFILE unset makes ROOST_PROFILE 1.
void load();

// The value in force: the default until load(), or the value set().  (0 for
// a kPath option: see text().)
uint64_t get(Id id);

// The value in force of a kPath option: the environment's text, or nullptr
// when the variable is unset or empty (and for other options).  The text is
// not copied: it is where the environment held it when load() read it, which
// lasts the process's life unless the program overwrites that string in
// place (or frees the buffer it gave putenv() for it).
const char* text(Id id);

// Does this process write what roost writes of its own accord: the
// statistics report at exit and the heap profiles (at exit, periodic, the
// leak report)?  Yes unless ROOST_STATS_PID names another process.  (A
// getpid() call: not for a path that runs often.)
bool reports_here();

// Overrides the value of a numeric option (reads the environment first if it
// was not read yet).
void set(Id id, uint64_t value);

// Writes one line per option on stderr: its variable, the value in force,
// and where it came from.
void print();

}  // namespace roost::options
