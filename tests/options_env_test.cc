// Run-time options through the environment, end to end: runs
// tests/options_probe.cc under controlled environments and reads its stderr.
// Malformed and out-of-range values warn once and keep the default, unknown
// ROOST_* variables warn, boolean words work (ROOST_BATCHIT=off switches
// BatchIt off, ROOST_STATS=yes prints the counters at exit), ROOST_STATS=json
// writes one JSON object at exit that agrees with roost_stats(),
// ROOST_STATS_FILE writes the report to a file (JSON unless ROOST_STATS
// says otherwise, "%p" the process id, a file that cannot be opened warns
// and falls back to stderr), ROOST_VERBOSE=1 and roost_print_options()
// print the options in force (preloaded, even into a program that never
// allocates), and with no ROOST_* variable roost prints nothing.
//
// ROOSTTEST_PROBE names the probe to run; ROOSTTEST_PRELOAD, when set, the
// library to preload into it (options_env.prefixed and options_env.preload in
// tests/CMakeLists.txt).  This binary itself runs on the system allocator.
#include <dirent.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "json_reader.h"

extern char** environ;

namespace {

struct ProbeRun {
  int pid = 0;
  int exit_code = -1;  // -1: did not exit normally
  std::string out, err;

  std::string describe() const {
    return "exit " + std::to_string(exit_code) + "; stdout:\n" + out + "stderr:\n" + err;
  }
};

// Runs the probe in `mode` with this process's environment less every
// ROOST_* variable and LD_PRELOAD, plus `vars` (and LD_PRELOAD when
// ROOSTTEST_PRELOAD is set).
ProbeRun run_program(const std::string& program, const char* arg,
                     const std::vector<std::string>& vars);

ProbeRun run_probe(const char* mode, const std::vector<std::string>& vars) {
  const char* probe = getenv("ROOSTTEST_PROBE");
  if (probe == nullptr) {
    ADD_FAILURE() << "ROOSTTEST_PROBE is not set (run through ctest)";
    return ProbeRun{};
  }
  return run_program(probe, mode, vars);
}

// run_probe() for any program, with one argument or none (`arg` nullptr).
ProbeRun run_program(const std::string& program, const char* arg,
                     const std::vector<std::string>& vars) {
  ProbeRun r;
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; e++) {
    if (strncmp(*e, "ROOST_", 6) == 0 || strncmp(*e, "LD_PRELOAD=", 11) == 0) continue;
    env.push_back(*e);
  }
  if (const char* lib = getenv("ROOSTTEST_PRELOAD"))
    env.push_back(std::string("LD_PRELOAD=") + lib);
  env.insert(env.end(), vars.begin(), vars.end());
  std::vector<char*> envp;
  for (std::string& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string path = program, arg_copy = arg != nullptr ? arg : "";
  char* argv[] = {path.data(), arg != nullptr ? arg_copy.data() : nullptr, nullptr};

  int out[2], err[2];
  if (pipe(out) != 0 || pipe(err) != 0) {
    ADD_FAILURE() << "pipe failed";
    return r;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    close(out[0]);
    close(out[1]);
    close(err[0]);
    close(err[1]);
    alarm(60);
    execve(argv[0], argv, envp.data());
    _exit(127);
  }
  r.pid = static_cast<int>(pid);
  close(out[1]);
  close(err[1]);
  struct pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* dest[2] = {&r.out, &r.err};
  int open_fds = 2;
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) continue;  // EINTR
    for (int i = 0; i < 2; i++) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[4096];
      ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        dest[i]->append(buf, static_cast<size_t>(n));
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        open_fds--;
      }
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  return r;
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> v;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) v.push_back(line);
  return v;
}

bool has_line(const std::string& text, const std::string& line) {
  for (const std::string& l : lines(text))
    if (l == line) return true;
  return false;
}

struct Messages {
  unsigned long long remote_frees = 0, messages_sent = 0, slab_batches_sent = 0;
};

// The probe's "remote" report.
Messages parse_remote(const ProbeRun& r) {
  Messages m;
  EXPECT_EQ(sscanf(r.out.c_str(), "remote_frees=%llu messages_sent=%llu slab_batches_sent=%llu",
                   &m.remote_frees, &m.messages_sent, &m.slab_batches_sent),
            3)
      << r.describe();
  return m;
}

}  // namespace

TEST(OptionsEnv, NoRoostVariablePrintsNothing) {
  for (const char* mode : {"alloc", "remote"}) {
    ProbeRun r = run_probe(mode, {});
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_EQ(r.err, "") << mode << ": " << r.describe();
  }
}

namespace {
// One warning line, once (the probe runs two threads), and the default kept:
// the verbose print says so.
void expect_rejected(const std::string& var, const std::string& warning, const std::string& kept) {
  SCOPED_TRACE(var);
  ProbeRun r = run_probe("remote", {var});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.err, warning + "\n") << r.describe();
  ProbeRun v = run_probe("alloc", {var, "ROOST_VERBOSE=1"});
  EXPECT_TRUE(has_line(v.err, warning)) << v.describe();
  EXPECT_TRUE(has_line(v.err, kept + " (default; the environment's value was rejected)"))
      << v.describe();
}
}  // namespace

TEST(OptionsEnv, MalformedMillisecondsWarnAndKeepTheDefault) {
  expect_rejected("ROOST_PURGE_DELAY=abc",
                  "roost: ROOST_PURGE_DELAY=abc is not a duration (digits: milliseconds, or "
                  "followed by ms or s); keeping the default 10",
                  "roost: ROOST_PURGE_DELAY=10");
}

TEST(OptionsEnv, NegativeBytesWarnAndKeepTheDefault) {
  expect_rejected("ROOST_OUTBOX_BYTES=-5",
                  "roost: ROOST_OUTBOX_BYTES=-5 is not a size in bytes (digits, then optionally "
                  "k, m, g or t); keeping the default 256k",
                  "roost: ROOST_OUTBOX_BYTES=256k");
}

TEST(OptionsEnv, BytesPast64BitsWarnAsOutOfRange) {
  expect_rejected("ROOST_SLAB_RESERVE=99999999999999g",
                  "roost: ROOST_SLAB_RESERVE=99999999999999g is out of range (0..1t); keeping "
                  "the default 512k",
                  "roost: ROOST_SLAB_RESERVE=512k");
}

TEST(OptionsEnv, MalformedBooleansWarnAndKeepTheDefault) {
  expect_rejected("ROOST_BATCHIT=maybe",
                  "roost: ROOST_BATCHIT=maybe is not a boolean (0/1, on/off, true/false, yes/no); "
                  "keeping the default 1",
                  "roost: ROOST_BATCHIT=1");
}

TEST(OptionsEnv, MalformedStatsFormsWarnAndKeepTheDefault) {
  expect_rejected("ROOST_STATS=xml",
                  "roost: ROOST_STATS=xml is not one of 0/1, on/off, true/false, yes/no, text, "
                  "json; keeping the default 0",
                  "roost: ROOST_STATS=0");
}

TEST(OptionsEnv, LongValuesAreClippedInTheWarning) {
  std::string value(300, '9');
  ProbeRun r = run_probe("alloc", {"ROOST_PURGE_DELAY=" + value});
  EXPECT_EQ(r.err, "roost: ROOST_PURGE_DELAY=" + value.substr(0, 64) +
                       "... is out of range (0..86400000); keeping the default 10\n")
      << r.describe();
}

TEST(OptionsEnv, UnknownVariablesWarn) {
  ProbeRun r = run_probe("remote", {"ROOST_BATCH_IT=0"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.err, "roost: unknown variable ROOST_BATCH_IT ignored (did you mean ROOST_BATCHIT?)\n")
      << r.describe();
  // ...and it did not switch BatchIt off.
  Messages m = parse_remote(r);
  EXPECT_LT(m.slab_batches_sent * 10, m.messages_sent) << r.describe();

  r = run_probe("alloc", {"ROOST_XYZZY=1", "ROOST_STATS=0"});
  EXPECT_EQ(r.err, "roost: unknown variable ROOST_XYZZY ignored\n") << r.describe();
}

// With BatchIt off every remote free is its own batch; with it on, a run of
// frees into the same slabs goes home in a few batches.
TEST(OptionsEnv, BatchItTakesBooleanWords) {
  for (const char* off : {"0", "off", "OFF", "false", "no"}) {
    ProbeRun r = run_probe("remote", {std::string("ROOST_BATCHIT=") + off});
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_EQ(r.err, "") << r.describe();
    Messages m = parse_remote(r);
    EXPECT_GE(m.remote_frees, 1000u) << off << ": " << r.describe();
    EXPECT_EQ(m.slab_batches_sent, m.messages_sent) << off << ": " << r.describe();
  }
  for (const char* on : {"", "1", "on", "Yes", "TRUE"}) {
    ProbeRun r = run_probe("remote",
                           *on == 0 ? std::vector<std::string>{}
                                    : std::vector<std::string>{std::string("ROOST_BATCHIT=") + on});
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_EQ(r.err, "") << r.describe();
    Messages m = parse_remote(r);
    EXPECT_GE(m.remote_frees, 1000u) << on << ": " << r.describe();
    EXPECT_LT(m.slab_batches_sent * 10, m.messages_sent) << on << ": " << r.describe();
  }
}

TEST(OptionsEnv, StatsYesPrintsTheCountersAtExit) {
  for (const char* yes : {"1", "yes", "on", "true"}) {
    ProbeRun r = run_probe("alloc", {std::string("ROOST_STATS=") + yes});
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_NE(r.err.find("roost: allocations "), std::string::npos) << yes << ": " << r.describe();
    EXPECT_NE(r.err.find("roost: bytes_dirty "), std::string::npos) << yes << ": " << r.describe();
  }
  ProbeRun r = run_probe("alloc", {"ROOST_STATS=no"});
  EXPECT_EQ(r.err, "") << r.describe();
}

namespace {
// Every line of the options print: "roost: ROOST_NAME=value (source)".
void expect_option_lines(const ProbeRun& r) {
  static const std::regex kLine(
      R"(roost: ROOST_[A-Z_]+=([0-9]+[kmgt]?|json|leaks|off|dense|always|/[^ ]*|) \((default|unset|from the environment|set by the program|implied by ROOST_(STATS|PROFILE)_FILE)(; [^)]*)?\))");
  std::vector<std::string> got = lines(r.err);
  EXPECT_GE(got.size(), 8u) << r.describe();
  for (const std::string& l : got) EXPECT_TRUE(std::regex_match(l, kLine)) << l;
}
}  // namespace

TEST(OptionsEnv, VerbosePrintsTheOptionsInForce) {
  ProbeRun r =
      run_probe("alloc", {"ROOST_VERBOSE=1", "ROOST_OUTBOX_BYTES=1048576", "ROOST_BATCHIT=off"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  expect_option_lines(r);
  for (const char* line :
       {"roost: ROOST_STATS=0 (default)", "roost: ROOST_STATS_FILE= (unset)",
        "roost: ROOST_STATS_PID=0 (default)", "roost: ROOST_SLAB_RESERVE=512k (default)",
        "roost: ROOST_PURGE_DONTNEED=1 (default)",
        "roost: ROOST_OUTBOX_BYTES=1m (from the environment)",
        "roost: ROOST_PURGE_DELAY=10 (default)", "roost: ROOST_BATCHIT=0 (from the environment)",
        "roost: ROOST_VERBOSE=1 (from the environment)"})
    EXPECT_TRUE(has_line(r.err, line)) << line << "\n" << r.describe();
  // Once, though the probe allocates on.
  EXPECT_EQ(lines(r.err).size(), lines(run_probe("print", {}).err).size()) << r.describe();
}

// The last line of `r`'s stderr is the one at exit that names the file a
// profile went to (`what`: "heap profile" or "leak report"): checked, then
// taken off, which leaves the lines before it.
void take_written_line(ProbeRun& r, const std::string& what, const std::string& path) {
  std::vector<std::string> got = lines(r.err);
  ASSERT_FALSE(got.empty()) << r.describe();
  const std::regex line("roost: " + what + " of pid " + std::to_string(r.pid) +
                        R"( \([^)]+\) written to )" + path);
  EXPECT_TRUE(std::regex_match(got.back(), line)) << r.describe();
  r.err.resize(r.err.size() - got.back().size() - 1);
}

// A file for the heap profile asks for the profile, as a file for the
// statistics asks for the report; ROOST_PROFILE says otherwise when set.
// Either way the file is named at exit.
TEST(OptionsEnv, AProfileFileImpliesTheProfile) {
  ProbeRun r = run_probe("alloc", {"ROOST_VERBOSE=1", "ROOST_PROFILE_FILE=/dev/null"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  take_written_line(r, "heap profile", "/dev/null");
  expect_option_lines(r);
  EXPECT_TRUE(has_line(r.err, "roost: ROOST_PROFILE=1 (implied by ROOST_PROFILE_FILE)"))
      << r.describe();
  r = run_probe("alloc",
                {"ROOST_VERBOSE=1", "ROOST_PROFILE=leaks", "ROOST_PROFILE_FILE=/dev/null"});
  take_written_line(r, "leak report", "/dev/null");
  expect_option_lines(r);
  EXPECT_TRUE(has_line(r.err, "roost: ROOST_PROFILE=leaks (from the environment)")) << r.describe();
}

// The overriding library reads its options when the program starts, not
// only at its first allocation: a program that never allocates (true(1))
// still gets the warnings and the verbose print.
TEST(OptionsEnv, AProgramThatNeverAllocatesStillGetsTheWarnings) {
  if (getenv("ROOSTTEST_PRELOAD") == nullptr)
    GTEST_SKIP() << "the prefixed library serves only programs that call it";
  ProbeRun r = run_program("/bin/true", nullptr, {"ROOST_VERBOSE=1", "ROOST_BATCH_IT=0"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(has_line(
      r.err, "roost: unknown variable ROOST_BATCH_IT ignored (did you mean ROOST_BATCHIT?)"))
      << r.describe();
  EXPECT_TRUE(has_line(r.err, "roost: ROOST_VERBOSE=1 (from the environment)")) << r.describe();
}

TEST(OptionsEnv, PrintOptionsWritesTheOptionsInForce) {
  ProbeRun r = run_probe("print", {"ROOST_PURGE_DELAY=250"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  expect_option_lines(r);
  EXPECT_TRUE(has_line(r.err, "roost: ROOST_PURGE_DELAY=250 (from the environment)"))
      << r.describe();
  EXPECT_TRUE(has_line(r.err, "roost: ROOST_OUTBOX_BYTES=256k (default)")) << r.describe();
  EXPECT_TRUE(has_line(r.err, "roost: ROOST_VERBOSE=0 (default)")) << r.describe();
  // The environment was read at the first allocation: printing does not read
  // it again (one warning, not two).
  r = run_probe("print", {"ROOST_PURGE_DELAY=abc"});
  const std::string warning =
      "roost: ROOST_PURGE_DELAY=abc is not a duration (digits: milliseconds, or followed by ms "
      "or s); keeping the default 10";
  std::vector<std::string> got = lines(r.err);
  EXPECT_EQ(std::count(got.begin(), got.end(), warning), 1) << r.describe();
  EXPECT_TRUE(has_line(r.err,
                       "roost: ROOST_PURGE_DELAY=10 (default; the environment's value "
                       "was rejected)"))
      << r.describe();
}

// ---------------------------------------------------------------------------
// The report at exit: ROOST_STATS=json, ROOST_STATS_FILE.

namespace {

using roost_test::json::Reader;
using roost_test::json::Value;

const std::vector<std::string> kCounters = {
#define ROOST_STAT(name, source, description) #name,
#include "roost_stats.def"
#undef ROOST_STAT
};
const std::vector<std::string> kDescriptions = {
#define ROOST_STAT(name, source, description) description,
#include "roost_stats.def"
#undef ROOST_STAT
};

// The name reports give the probe: its file name.
std::string probe_name() {
  std::string path = getenv("ROOSTTEST_PROBE") != nullptr ? getenv("ROOSTTEST_PROBE") : "";
  return path.substr(path.rfind('/') + 1);
}

// A report's time ("YYYY-MM-DD hh:mm:ss", UTC) as seconds since the epoch,
// or -1 when it is not in that form.
long long report_time(const std::string& text) {
  struct tm t {};
  const char* end = strptime(text.c_str(), "%Y-%m-%d %H:%M:%S", &t);
  if (end == nullptr || *end != 0) return -1;
  return static_cast<long long>(timegm(&t));
}

// The text report's first line names the process `pid` (the probe) and a
// time within a minute of now.
void expect_text_header(const std::string& line, int pid) {
  static const std::regex kHeader(R"(roost: report of pid ([0-9]+) \((.*)\) at (.*) UTC)");
  std::smatch m;
  ASSERT_TRUE(std::regex_match(line, m, kHeader)) << line;
  EXPECT_EQ(m[1].str(), std::to_string(pid)) << line;
  EXPECT_EQ(m[2].str(), probe_name()) << line;
  long long when = report_time(m[3].str());
  EXPECT_LE(std::llabs(when - static_cast<long long>(time(nullptr))), 60) << line;
}

// A byte count as the text report writes it after the description: in the
// largest binary unit that leaves a whole part, one decimal, rounded half
// up; "" below 1 KiB.
std::string size_text(uint64_t bytes) {
  if (bytes < 1024) return "";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  unsigned u = 0;
  while (u + 1 < 4 && bytes >> (10 * (u + 2)) != 0) u++;
  uint64_t one = uint64_t{1} << (10 * (u + 1));
  uint64_t tenths = (bytes * 10 + one / 2) / one;
  return " (" + std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " " + units[u] +
         ")";
}

// The counter lines of a text report, after its header: "roost: ", the
// name padded, the value, two spaces and the description of
// roost_stats.def, then for a byte count of 1 KiB or more its size in
// units.  The values by name.
std::map<std::string, uint64_t> expect_counter_lines(const std::vector<std::string>& got) {
  std::map<std::string, uint64_t> values;
  EXPECT_GE(got.size(), kCounters.size() + 1);
  for (size_t i = 0; i < kCounters.size() && i + 1 < got.size(); i++) {
    const std::string& line = got[i + 1];
    std::string head = "roost: " + kCounters[i] + " ";
    EXPECT_EQ(line.rfind(head, 0), 0u) << line;
    size_t digits = line.find_first_not_of(' ', head.size());
    size_t after = line.find_first_not_of("0123456789", digits);
    if (digits == std::string::npos || after == std::string::npos || after == digits) {
      ADD_FAILURE() << "no value: " << line;
      continue;
    }
    uint64_t v = std::stoull(line.substr(digits, after - digits));
    values[kCounters[i]] = v;
    std::string rest = "  " + kDescriptions[i];
    if (kCounters[i].find("bytes") != std::string::npos) rest += size_text(v);
    EXPECT_EQ(line.substr(after), rest) << line;
  }
  return values;
}

// The huge-page lines that end a text report (api/stats.cc): a heading, then
// one line per figure, "roost: <name> <value>  <description>" (the value "?"
// for the two smaps gives where it cannot be read).
const std::vector<std::string> kHugeFigures = {"heap_bytes_resident", "heap_bytes_huge",
                                               "collapses_tried",     "collapses_done",
                                               "collapses_refused",   "blocks_collapsed"};
constexpr size_t kHugeLines = 7;

void expect_huge_lines(const std::vector<std::string>& got) {
  ASSERT_GE(got.size(), kHugeLines);
  size_t first = got.size() - kHugeLines;
  EXPECT_EQ(got[first], "roost: huge pages:");
  for (size_t i = 0; i < kHugeFigures.size(); i++) {
    const std::string& line = got[first + 1 + i];
    EXPECT_EQ(line.rfind("roost: " + kHugeFigures[i] + " ", 0), 0u) << line;
  }
}

// The probe's "stats" output: roost_stats() just before it returned.
std::map<std::string, uint64_t> parse_stats(const ProbeRun& r) {
  std::map<std::string, uint64_t> m;
  for (const std::string& l : lines(r.out)) {
    size_t eq = l.find('=');
    if (eq != std::string::npos) m[l.substr(0, eq)] = std::stoull(l.substr(eq + 1));
  }
  EXPECT_EQ(m.size(), kCounters.size()) << r.describe();
  return m;
}

Value parse_json(const std::string& text) {
  Value v;
  Reader reader(text);
  EXPECT_TRUE(reader.read(&v)) << reader.error() << "\n" << text;
  return v;
}

// The JSON report of a "stats" probe run: every counter, equal to what the
// probe's roost_stats() read (nothing runs in roost after it but the
// report), and the probe's 1000 objects of 100 bytes in class 112.
void expect_report_of_stats_run(const Value& v, const ProbeRun& r) {
  std::map<std::string, uint64_t> printed = parse_stats(r);
  EXPECT_EQ(v["version"].number, 1u) << r.describe();
  EXPECT_EQ(v.keys,
            (std::vector<std::string>{"version", "process", "totals", "classes", "huge_pages"}));
  EXPECT_EQ(v["process"].keys, (std::vector<std::string>{"pid", "program", "time"}));
  EXPECT_EQ(v["huge_pages"].keys, kHugeFigures) << r.describe();
  EXPECT_LE(v["huge_pages"]["heap_bytes_huge"].number,
            v["huge_pages"]["heap_bytes_resident"].number)
      << r.describe();
  EXPECT_EQ(v["process"]["pid"].number, static_cast<uint64_t>(r.pid)) << r.describe();
  EXPECT_EQ(v["process"]["program"].string, probe_name()) << r.describe();
  std::string when = v["process"]["time"].string;
  ASSERT_EQ(when.size(), 20u) << when;
  EXPECT_EQ(when[10], 'T') << when;
  EXPECT_EQ(when[19], 'Z') << when;
  when[10] = ' ';
  EXPECT_LE(std::llabs(report_time(when.substr(0, 19)) - static_cast<long long>(time(nullptr))), 60)
      << when;
  EXPECT_EQ(v["totals"].keys, kCounters) << r.describe();
  for (const std::string& name : kCounters)
    EXPECT_EQ(v["totals"][name].number, printed[name]) << name << "\n" << r.describe();
  bool found = false;
  for (const Value& c : v["classes"].array) {
    if (c["size"].number != 112) continue;
    found = true;
    EXPECT_GE(c["objects_in_use"].number, 1000u) << r.describe();
    EXPECT_EQ(c["bytes_in_use"].number, c["objects_in_use"].number * 112) << r.describe();
    EXPECT_GE(c["slabs"].number, 2u) << r.describe();
  }
  EXPECT_TRUE(found) << "no class of 112 bytes in the report\n" << r.describe();
}

// A fresh directory, removed with its files at the end of the test.
class TempDir {
 public:
  TempDir() {
    const char* base = getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr ? base : "/tmp") + "/roost-stats-XXXXXX";
    path_ = mkdtemp(pattern.data()) != nullptr ? pattern : "";
    EXPECT_FALSE(path_.empty()) << "mkdtemp failed";
  }
  ~TempDir() {
    for (const std::string& f : files()) unlink((path_ + "/" + f).c_str());
    rmdir(path_.c_str());
  }
  const std::string& path() const { return path_; }
  std::vector<std::string> files() const {
    std::vector<std::string> names;
    if (DIR* d = opendir(path_.c_str())) {
      while (dirent* e = readdir(d))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) names.push_back(e->d_name);
      closedir(d);
    }
    std::sort(names.begin(), names.end());
    return names;
  }
  std::string read(const std::string& name) const {
    std::string text;
    if (FILE* f = fopen((path_ + "/" + name).c_str(), "r")) {
      char buf[4096];
      for (size_t n; (n = fread(buf, 1, sizeof(buf), f)) > 0;) text.append(buf, n);
      fclose(f);
    }
    return text;
  }

 private:
  std::string path_;
};

}  // namespace

TEST(OptionsEnv, StatsJsonWritesOneObjectAtExitThatAgreesWithRoostStats) {
  for (const char* json : {"json", "JSON", "Json"}) {
    ProbeRun r = run_probe("stats", {std::string("ROOST_STATS=") + json});
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    // One line: the object and a newline.
    ASSERT_FALSE(r.err.empty()) << r.describe();
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.describe();
    EXPECT_EQ(r.err[0], '{') << r.describe();
    expect_report_of_stats_run(parse_json(r.err), r);
  }
}

TEST(OptionsEnv, StatsTextIsTheBooleanForm) {
  ProbeRun text = run_probe("stats", {"ROOST_STATS=text"});
  ProbeRun one = run_probe("stats", {"ROOST_STATS=1"});
  std::vector<std::string> got = lines(text.err);
  // The header, a line per counter; no message was sent, so no note; the
  // huge-page lines.
  ASSERT_EQ(got.size(), kCounters.size() + 1 + kHugeLines) << text.describe();
  expect_huge_lines(got);
  expect_text_header(got[0], text.pid);
  std::map<std::string, uint64_t> printed = expect_counter_lines(got);
  EXPECT_EQ(printed, parse_stats(text)) << text.describe();
  EXPECT_EQ(lines(one.err).size(), got.size()) << one.describe();
  expect_text_header(lines(one.err)[0], one.pid);
}

// Messages still on their way home when the report is taken (in
// `in-flight`, a thread's outbox not yet posted; in `remote`, whatever the
// owner has not read): the text report says why messages_received is below
// messages_sent, with the difference, and says nothing of it when every
// message has arrived.
TEST(OptionsEnv, StatsTextExplainsMessagesInFlight) {
  for (const char* mode : {"in-flight", "remote"}) {
    ProbeRun r = run_probe(mode, {"ROOST_STATS=1"});
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    std::vector<std::string> got = lines(r.err);
    ASSERT_GE(got.size(), kCounters.size() + 1) << r.describe();
    std::map<std::string, uint64_t> v = expect_counter_lines(got);
    EXPECT_GE(v["messages_sent"], 1000u) << r.describe();
    uint64_t in_flight = v["messages_sent"] - v["messages_received"];
    if (strcmp(mode, "in-flight") == 0) {
      EXPECT_GE(in_flight, 1000u) << r.describe();
    }
    if (in_flight == 0) {
      EXPECT_EQ(got.size(), kCounters.size() + 1 + kHugeLines) << r.describe();
      continue;
    }
    ASSERT_EQ(got.size(), kCounters.size() + 2 + kHugeLines) << r.describe();
    EXPECT_EQ(got[kCounters.size() + 1],
              "roost: note: messages_received is " + std::to_string(in_flight) +
                  " below messages_sent: those objects were still on their way "
                  "home (in outboxes, BatchIt caches or unread inboxes) when the "
                  "report was taken");
  }
}

// Every process that inherits ROOST_STATS reports, each under its own pid;
// ROOST_STATS_PID keeps the report to the one process it names.
TEST(OptionsEnv, EachProcessNamesItselfAndStatsPidKeepsOne) {
  ProbeRun r = run_probe("fork", {"ROOST_STATS=1"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  std::vector<std::string> headers;
  for (const std::string& l : lines(r.err))
    if (l.rfind("roost: report of pid ", 0) == 0) headers.push_back(l);
  ASSERT_EQ(headers.size(), 2u) << r.describe();
  std::string child = r.out.substr(r.out.find("child=") + 6);
  child = child.substr(0, child.find('\n'));
  expect_text_header(headers[0], std::stoi(child));  // the child exits first
  expect_text_header(headers[1], r.pid);
  // Another process's id: neither reports.
  r = run_probe("fork", {"ROOST_STATS=1", "ROOST_STATS_PID=1"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.err, "") << r.describe();
  r = run_probe("alloc", {"ROOST_STATS=1", "ROOST_STATS_PID=x"});
  EXPECT_EQ(r.err.rfind("roost: ROOST_STATS_PID=x is not a number; keeping the default 0\n", 0), 0u)
      << r.describe();
}

TEST(OptionsEnv, StatsFileAloneWritesTheJsonReportThere) {
  TempDir dir;
  ProbeRun r = run_probe("stats", {"ROOST_STATS_FILE=" + dir.path() + "/report.%p.json"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.err, "") << r.describe();
  std::vector<std::string> files = dir.files();
  ASSERT_EQ(files.size(), 1u) << r.describe();
  EXPECT_TRUE(std::regex_match(files[0], std::regex(R"(report\.[1-9][0-9]*\.json)"))) << files[0];
  std::string text = dir.read(files[0]);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  expect_report_of_stats_run(parse_json(text), r);
  struct stat st;
  ASSERT_EQ(stat((dir.path() + "/" + files[0]).c_str(), &st), 0);
  mode_t mask = umask(0);
  umask(mask);
  EXPECT_EQ(st.st_mode & 0777, 0644 & ~mask);
}

TEST(OptionsEnv, StatsFileTakesTheFormRoostStatsNames) {
  TempDir dir;
  // Text, and an old file is truncated, "%%" is a "%".
  std::string name = dir.path() + "/100%%.txt";
  {
    FILE* f = fopen((dir.path() + "/100%.txt").c_str(), "w");
    ASSERT_NE(f, nullptr);
    fputs(std::string(100000, '#').c_str(), f);
    fclose(f);
  }
  ProbeRun r = run_probe("stats", {"ROOST_STATS=on", "ROOST_STATS_FILE=" + name});
  EXPECT_EQ(r.err, "") << r.describe();
  EXPECT_EQ(dir.files(), std::vector<std::string>{"100%.txt"});
  std::string text = dir.read("100%.txt");
  EXPECT_EQ(lines(text).size(), kCounters.size() + 1 + kHugeLines) << text;
  EXPECT_EQ(text.find('#'), std::string::npos) << "the old contents were not truncated";
  ASSERT_FALSE(lines(text).empty());
  expect_text_header(lines(text)[0], r.pid);
  EXPECT_EQ(expect_counter_lines(lines(text)), parse_stats(r)) << text;
  // ROOST_STATS=0 keeps the report off: no file.
  r = run_probe("stats", {"ROOST_STATS=0", "ROOST_STATS_FILE=" + dir.path() + "/none.json"});
  EXPECT_EQ(r.err, "") << r.describe();
  EXPECT_EQ(dir.files(), std::vector<std::string>{"100%.txt"});
  // An empty ROOST_STATS_FILE is no file: nothing either.
  r = run_probe("stats", {"ROOST_STATS_FILE="});
  EXPECT_EQ(r.err, "") << r.describe();
}

TEST(OptionsEnv, AStatsFileThatCannotBeOpenedWarnsAndTheReportGoesToStderr) {
  ProbeRun r = run_probe("stats", {"ROOST_STATS_FILE=/nonexistent-roost-dir/report.json"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  std::vector<std::string> got = lines(r.err);
  ASSERT_EQ(got.size(), 2u) << r.describe();
  EXPECT_EQ(got[0],
            "roost: cannot open ROOST_STATS_FILE=/nonexistent-roost-dir/report.json (errno " +
                std::to_string(ENOENT) + "); the report goes to stderr");
  expect_report_of_stats_run(parse_json(got[1]), r);
}

TEST(OptionsEnv, VerboseSaysTheStatsFileImpliesJson) {
  ProbeRun r = run_probe("alloc", {"ROOST_VERBOSE=1", "ROOST_STATS_FILE=/dev/null"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  expect_option_lines(r);
  EXPECT_TRUE(has_line(r.err, "roost: ROOST_STATS=json (implied by ROOST_STATS_FILE)"))
      << r.describe();
  EXPECT_TRUE(has_line(r.err, "roost: ROOST_STATS_FILE=/dev/null (from the environment)"))
      << r.describe();
  r = run_probe("alloc", {"ROOST_VERBOSE=1", "ROOST_STATS=text", "ROOST_STATS_FILE=/dev/null"});
  EXPECT_TRUE(has_line(r.err, "roost: ROOST_STATS=1 (from the environment)")) << r.describe();
}
