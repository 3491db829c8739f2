// tools/roost_run.cc — roost-run, the launcher: runs a program with roost
// preloaded and its options set.
//
//   roost-run [--secure | --hardened] [--stats[=text|json]] [--no-children]
//             [--profile[=path]] [--verbose] [--option NAME=VALUE]...
//             [--timeline FILE.html [--interval D]] [--] program [args...]
//   roost-run --dump PID [--wait]
//
// Owns: finding the library (next to the launcher in a build tree, or in
// the install's library folder beside its bin/), LD_PRELOAD and the ROOST_*
// variables of the program it runs, its own flags and their "did you mean",
// running the program with a timeline (tools/timeline.h), and the option
// help and "did you mean", which it takes from
// src/options.h's table (generated from src/options.def, like everything
// else that lists the options); and --dump, which asks a running process
// for a dump: the signal and file pattern read from its environment (the
// signal through roost's own parser, options.h), sent only where the
// process catches it.  Must never: link roost itself, parse or judge the
// values of the options it sets (roost does, and warns), drop a variable
// the caller had set but for the ones it names, or send a signal the
// target does not catch (its default action would end it).
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include "options.h"
#include "roost.h"
#include "timeline.h"

namespace {

using roost::options::kTable;
using Option = roost::options::Option;

// The SONAME file (libroost.so.MAJOR): in a build tree and in an install.
#define ROOST_STR2(x) #x
#define ROOST_STR(x) ROOST_STR2(x)
constexpr const char* kVersion = ROOST_STR(ROOST_VERSION_MAJOR) "." ROOST_STR(
    ROOST_VERSION_MINOR) "." ROOST_STR(ROOST_VERSION_PATCH);

#ifndef ROOST_RUN_LIBDIR
#define ROOST_RUN_LIBDIR "lib"  // the install's library folder: relative to its prefix, or absolute
#endif

// Writes `text` from column `indent` (where the line already is) to
// `width`, words unbroken, continuation lines indented alike.
void print_wrapped(FILE* to, const char* text, int indent, int width) {
  int column = indent;
  while (*text != '\0') {
    while (*text == ' ') text++;
    int word = static_cast<int>(strcspn(text, " "));
    if (word == 0) break;
    if (column > indent && column + 1 + word > width) {
      fprintf(to, "\n%*s", indent, "");
      column = indent;
    }
    fprintf(to, " %.*s", word, text);
    column += 1 + word;
    text += word;
  }
  fputc('\n', to);
}

void usage(FILE* to) {
  fprintf(to,
          "usage: roost-run [--secure | --hardened] [--stats[=text|json]] [--no-children]\n"
          "                 [--profile[=path]] [--verbose] [--option NAME=VALUE]...\n"
          "                 [--timeline FILE.html [--interval D]] [--] program [args...]\n"
          "       roost-run --dump PID [--wait]\n"
          "       roost-run --help | --version\n"
          "\n"
          "Runs program with the roost allocator preloaded (LD_PRELOAD).\n"
          "\n"
          "  --secure             preload the production hardening level, libroost-secure\n"
          "  --hardened           preload the maximal hardening level, libroost-hardened\n"
          "  --stats              print roost's counters to stderr at exit (ROOST_STATS=1),\n"
          "                       in every process that inherits the environment, each\n"
          "                       report headed by its pid, program and time\n"
          "  --stats=json         the same as one JSON object (ROOST_STATS=json);\n"
          "                       --stats json and --stats text also work\n"
          "  --no-children        only the program's own report and heap profile, not\n"
          "                       those of the processes it starts (ROOST_STATS_PID=its\n"
          "                       pid; the program keeps it when it execs another)\n"
          "  --profile[=path]     write a heap profile at exit (ROOST_PROFILE=1) to path\n"
          "                       (ROOST_PROFILE_FILE; default roost.%%p.heap, %%p: the pid)\n"
          "                       in every process that inherits the environment; each\n"
          "                       process says on stderr where its profile went\n"
          "  --verbose            print the options in force at start (ROOST_VERBOSE=1)\n"
          "  --timeline FILE.html run the program, recording its memory over time\n"
          "                       (ROOST_STATS_INTERVAL, in its own process only), then\n"
          "                       write FILE.html: one self-contained page (no network)\n"
          "                       charting memory, activity, object sizes and events;\n"
          "                       roost-run exits with the program's status\n"
          "  --interval D         with --timeline: a line every D (250ms, 1s; plain digits\n"
          "                       are milliseconds; default 100ms)\n"
          "  --option NAME=VALUE  set an option; NAME with or without ROOST_, any case\n"
          "  --dump PID           ask the running process PID for a dump: its statistics\n"
          "                       and, where it profiles, a heap profile, each to a new\n"
          "                       file (ROOST_DUMP_FILE; default roost-dump.PID.N.*, in\n"
          "                       its working directory); it must have been started\n"
          "                       with ROOST_DUMP_SIGNAL set (--option dump_signal=USR2),\n"
          "                       which says the signal sent; exit status 1 when the\n"
          "                       process does not exist or does not take dumps\n"
          "  --wait               with --dump: wait (60 s at most) until the dump is\n"
          "                       written, and print its statistics file's path\n"
          "\n"
          "Options (environment variable, default, what it does):\n");
  for (const Option& o : kTable) {
    fprintf(to, "  %-22s %-6s", o.env, o.fallback);
    print_wrapped(to, o.help, 31, 79);
  }
}

[[noreturn]] void fail(const char* message, const char* detail = nullptr) {
  if (detail != nullptr)
    fprintf(stderr, "roost-run: %s %s\n", message, detail);
  else
    fprintf(stderr, "roost-run: %s\n", message);
  fprintf(stderr, "roost-run: try 'roost-run --help'\n");
  exit(2);
}

// The folder roost-run was started from.
std::string own_folder() {
  char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return ".";
  path[n] = '\0';
  char* slash = strrchr(path, '/');
  if (slash == nullptr) return ".";
  *slash = '\0';
  return path;
}

// The library named `stem` (libroost, libroost-secure or libroost-hardened):
// beside roost-run (a build tree), else in the install's library folder.
std::string find_library(const char* stem) {
  std::string file = std::string(stem) + ".so." + ROOST_STR(ROOST_VERSION_MAJOR);
  std::string here = own_folder();
  std::string libdir =
      ROOST_RUN_LIBDIR[0] == '/' ? ROOST_RUN_LIBDIR : here + "/../" ROOST_RUN_LIBDIR;
  for (const std::string& dir : {here, libdir}) {
    std::string candidate = dir + "/" + file;
    char resolved[PATH_MAX];
    if (access(candidate.c_str(), R_OK) == 0 && realpath(candidate.c_str(), resolved) != nullptr)
      return resolved;
  }
  fprintf(stderr, "roost-run: %s is neither beside roost-run (%s) nor in %s/../%s\n", file.c_str(),
          here.c_str(), here.c_str(), ROOST_RUN_LIBDIR);
  if (strcmp(stem, "libroost") != 0)
    fprintf(stderr, "roost-run: this build of roost has no %s library\n",
            stem + strlen("libroost-"));
  exit(2);
}

// The option `name` names (ROOST_ optional, any case), or nullptr.
const Option* find_option(const std::string& name) {
  for (const Option& o : kTable) {
    if (strcasecmp(name.c_str(), o.env) == 0) return &o;
    if (strcasecmp(name.c_str(), o.env + strlen("ROOST_")) == 0) return &o;
  }
  return nullptr;
}

// An unknown option `name`: the error, with the nearest option's name
// written as `name` was (with or without ROOST_, in its case) when one is
// within two edits.
[[noreturn]] void fail_unknown_option(const std::string& name) {
  bool prefixed = strncasecmp(name.c_str(), "ROOST_", strlen("ROOST_")) == 0;
  std::string variable = prefixed ? name : "ROOST_" + name;
  for (char& c : variable) c = static_cast<char>(toupper(static_cast<unsigned char>(c)));
  const char* near = roost::options::nearest_variable(variable.c_str(), variable.size());
  if (near == nullptr) fail("unknown option", name.c_str());
  std::string suggestion = prefixed ? near : near + strlen("ROOST_");
  bool lower = !name.empty() && name.back() >= 'a' && name.back() <= 'z';
  if (lower)
    for (char& c : suggestion) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  std::string detail = name + " (did you mean " + suggestion + "?)";
  fail("unknown option", detail.c_str());
}

// roost-run's own flags, for "did you mean": the name, and whether it takes
// a value after '=' (--stats=json, --profile=path, --option=NAME=VALUE).
struct Flag {
  const char* name;
  bool takes_value;
};
constexpr Flag kFlags[] = {
    {"--secure", false},  {"--hardened", false}, {"--stats", true},    {"--no-children", false},
    {"--profile", true},  {"--verbose", false},  {"--option", true},   {"--help", false},
    {"--version", false}, {"--timeline", true},  {"--interval", true}, {"--dump", true},
    {"--wait", false},
};

// Levenshtein distance: insertions, deletions, substitutions.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); j++) row[j] = j;
  for (size_t i = 1; i <= a.size(); i++) {
    size_t diagonal = row[0];  // row[i-1][j-1]
    row[0] = i;
    for (size_t j = 1; j <= b.size(); j++) {
      size_t above = row[j];
      row[j] = std::min({above + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The flag `given` (before any '=') most likely meant: the one it begins,
// when it begins only one and names two letters of it (--stat, --no-child),
// else the nearest within two edits (--hardend, --stast); nullptr if none.
const Flag* nearest_flag(const std::string& given) {
  const Flag* begun = nullptr;
  int begins = 0;
  for (const Flag& f : kFlags) {
    if (given.size() >= 4 && strncmp(f.name, given.c_str(), given.size()) == 0) {
      begun = &f;
      begins++;
    }
  }
  if (begins == 1) return begun;
  const Flag* best = nullptr;
  size_t best_distance = 3;
  for (const Flag& f : kFlags) {
    size_t d = edit_distance(given, f.name);
    if (d < best_distance) {
      best_distance = d;
      best = &f;
    }
  }
  return best;
}

// An argument that is none of the flags: the error, with the flag it most
// likely meant, its value kept (--stat=json: --stats=json).
[[noreturn]] void fail_unknown_argument(const std::string& arg) {
  size_t eq = arg.find('=');
  std::string head = arg.substr(0, eq);
  std::string value = eq == std::string::npos ? "" : arg.substr(eq);
  const Flag* near = nearest_flag(head);
  if (near == nullptr) fail("unknown argument", arg.c_str());
  std::string detail;
  if (head == near->name)  // only the value is wrong: a flag that takes none
    detail = arg + " (" + head + " takes no value)";
  else
    detail = arg + " (did you mean " + near->name + (near->takes_value ? value : "") + "?)";
  fail("unknown argument", detail.c_str());
}

// The report's form after --stats, as a separate argument: `text` or `json`.
bool is_report_form(const char* arg) {
  return strcasecmp(arg, "text") == 0 || strcasecmp(arg, "json") == 0;
}

void set_variable(const char* variable, const std::string& value) {
  if (setenv(variable, value.c_str(), 1) != 0) fail("cannot set", variable);
}

// --dump: one line on stderr, exit status 1 (the request could not be
// made, or was not answered).
[[noreturn]] void dump_fails(const std::string& message) {
  fprintf(stderr, "roost-run: %s\n", message.c_str());
  exit(1);
}

// The text of /proc/PID/FILE, or false if it cannot be read (errno set).
bool read_proc(const std::string& pid, const char* file, std::string* out) {
  std::string path = "/proc/" + pid + "/" + file;
  FILE* f = fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out->append(buf, n);
  fclose(f);
  return true;
}

// A regular expression matching `text` literally.
std::string regex_quote(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (strchr("\\^$.|?*+()[]{}", c) != nullptr) out += '\\';
    out += c;
  }
  return out;
}

// The statistics files of the process's dumps, as roost names them
// (api/dump.cc): ROOST_DUMP_FILE's pattern with %p the pid, %n the dump's
// number (".%n" appended where the pattern has none), then .stats.json or
// .stats.txt; relative to the process's working directory.  Sets the
// folder and the expression a file name in it must match (the number its
// first group), and `shown`, the name for dump `n` as the user reads it;
// false where %n is not in the last part of the name (not watched).
bool dump_names(const std::string& pattern, const std::string& pid, const std::string& cwd,
                const char* suffix, std::string* folder, std::regex* name, std::string* shown) {
  std::string expanded;  // %p and %% expanded, %n kept
  bool numbered = false;
  for (size_t i = 0; i < pattern.size(); i++) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'p') {
      expanded += pid;
      i++;
    } else if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == '%') {
      expanded += '\x01';  // a literal '%', kept apart from the %n below
      i++;
    } else {
      if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'n') numbered = true;
      expanded += pattern[i];
    }
  }
  if (!numbered) expanded += ".%n";
  expanded += suffix;
  if (expanded[0] != '/') expanded = cwd + "/" + expanded;
  size_t slash = expanded.rfind('/');
  *folder = expanded.substr(0, slash);
  std::string base = expanded.substr(slash + 1);
  auto literal = [](std::string t) {
    std::replace(t.begin(), t.end(), '\x01', '%');
    return t;
  };
  *shown = literal(*folder) + "/" + literal(base);
  if (folder->find("%n") != std::string::npos) return false;
  *folder = literal(*folder);
  size_t at = base.find("%n");
  std::string expression = regex_quote(literal(base.substr(0, at))) + "([0-9]+)";
  std::string rest = base.substr(at + 2);
  // Later %n repeat the number.
  for (size_t next; (next = rest.find("%n")) != std::string::npos; rest = rest.substr(next + 2))
    expression += regex_quote(literal(rest.substr(0, next))) + "\\1";
  expression += regex_quote(literal(rest));
  *name = std::regex(expression);
  return true;
}

// The highest dump number among the files in `folder` that `name`
// matches; 0 if none.
unsigned long last_dump(const std::string& folder, const std::regex& name,
                        std::string* file = nullptr) {
  unsigned long last = 0;
  std::string listing;
  DIR* d = opendir(folder.c_str());
  if (d == nullptr) return 0;
  while (struct dirent* e = readdir(d)) {
    std::smatch m;
    std::string entry = e->d_name;
    if (!std::regex_match(entry, m, name)) continue;
    unsigned long n = strtoul(m[1].str().c_str(), nullptr, 10);
    if (n > last) {
      last = n;
      if (file != nullptr) *file = folder + "/" + entry;
    }
  }
  closedir(d);
  return last;
}

// roost-run --dump PID [--wait].
int dump(const std::string& pid, bool wait) {
  char* end = nullptr;
  long number = strtol(pid.c_str(), &end, 10);
  if (pid.empty() || *end != '\0' || number <= 0 || number > INT_MAX)
    fail("--dump takes a process id, not", pid.c_str());
  std::string environ_text, comm, status;
  if (!read_proc(pid, "environ", &environ_text)) {
    if (errno == ENOENT) dump_fails("no process " + pid);
    dump_fails("cannot read the environment of process " + pid + ": " + strerror(errno));
  }
  if (read_proc(pid, "comm", &comm) && !comm.empty() && comm.back() == '\n') comm.pop_back();
  std::string who = "process " + pid + " (" + comm + ")";
  // The variables it started with (a program's later setenv is not there,
  // but roost read its options at start too).
  auto variable = [&environ_text](const char* name) -> const char* {
    size_t len = strlen(name);
    for (size_t at = 0; at < environ_text.size(); at += strlen(environ_text.c_str() + at) + 1) {
      const char* entry = environ_text.c_str() + at;
      if (strncmp(entry, name, len) == 0 && entry[len] == '=') return entry + len + 1;
    }
    return nullptr;
  };
  const char* signal_text = variable("ROOST_DUMP_SIGNAL");
  if (signal_text == nullptr)
    dump_fails(who +
               " does not take dumps: ROOST_DUMP_SIGNAL is not in its environment (start "
               "it with --option dump_signal=USR2)");
  roost::options::Parsed signal = roost::options::parse(roost::options::kDumpSignal, signal_text);
  if (signal.status != roost::options::Status::kOk)
    dump_fails(who + " does not take dumps: its ROOST_DUMP_SIGNAL=" + signal_text +
               " is no signal roost takes");
  if (signal.value == 0) dump_fails(who + " does not take dumps: its ROOST_DUMP_SIGNAL is 0");
  const char* signame = roost::options::signal_name(signal.value);
  std::string sig =
      signame != nullptr ? std::string("SIG") + signame : "signal " + std::to_string(signal.value);
  // Sent only where the process catches it: otherwise its default action
  // would end the process.
  if (!read_proc(pid, "status", &status)) dump_fails("no process " + pid);
  size_t at = status.find("\nSigCgt:");
  unsigned long long caught =
      at == std::string::npos ? 0 : strtoull(status.c_str() + at + 8, nullptr, 16);
  if ((caught >> (signal.value - 1) & 1) == 0)
    dump_fails(who + " does not catch " + sig +
               ": roost did not take it (ROOST_SERVICE=0, ROOST_STATS_PID naming another "
               "process, a program that handles or ignores it, or roost is not its malloc; "
               "ROOST_VERBOSE=1 says which); not sent, it would end the process");
  // Where the files go.
  char cwd[PATH_MAX];
  std::string proc_cwd = "/proc/" + pid + "/cwd";
  ssize_t n = readlink(proc_cwd.c_str(), cwd, sizeof(cwd) - 1);
  std::string folder_of_cwd = n > 0 ? std::string(cwd, static_cast<size_t>(n)) : ".";
  const char* pattern = variable("ROOST_DUMP_FILE");
  if (pattern == nullptr || *pattern == '\0') pattern = "roost-dump.%p.%n";
  const char* stats = variable("ROOST_STATS");
  bool text = stats != nullptr && roost::options::parse(roost::options::kStats, stats).value ==
                                      roost::options::kReportText;
  std::string folder, shown;
  std::regex name;
  bool watched = dump_names(pattern, pid, folder_of_cwd, text ? ".stats.txt" : ".stats.json",
                            &folder, &name, &shown);
  unsigned long before = watched ? last_dump(folder, name) : 0;
  if (kill(static_cast<pid_t>(number), static_cast<int>(signal.value)) != 0)
    dump_fails("cannot send " + sig + " to " + who + ": " + strerror(errno));
  std::string next = watched ? std::to_string(before + 1) : "N";
  std::string file = shown;
  if (size_t k = file.find("%n"); k != std::string::npos) file.replace(k, 2, next);
  fprintf(stderr, "roost-run: sent %s to %s: its statistics go to %s%s\n", sig.c_str(), who.c_str(),
          file.c_str(),
          variable("ROOST_PROFILE") != nullptr || variable("ROOST_PROFILE_FILE") != nullptr
              ? " (its heap profile beside it, .heap for the suffix, where it profiles)"
              : "");
  if (!wait) return 0;
  if (!watched) dump_fails("--wait: cannot watch for " + shown + " (%n outside the file's name)");
  constexpr int kWaitSeconds = 60;
  for (int tick = 0; tick < kWaitSeconds * 20; tick++) {
    std::string written;
    if (last_dump(folder, name, &written) > before) {
      printf("%s\n", written.c_str());
      return 0;
    }
    if (kill(static_cast<pid_t>(number), 0) != 0 && errno == ESRCH)
      dump_fails(who + " ended before its dump was written");
    struct timespec pause = {0, 50 * 1000 * 1000};
    nanosleep(&pause, nullptr);
  }
  dump_fails("no dump from " + who + " within " + std::to_string(kWaitSeconds) + " s");
}
}  // namespace

int main(int argc, char** argv) {
  const char* library = "libroost";
  std::string timeline;  // --timeline's page
  std::string interval;  // --interval's duration
  const char* dump_pid = nullptr;
  bool wait = false;
  int i = 1;
  for (; i < argc; i++) {
    std::string arg = argv[i];
    if (arg == "--") {
      i++;
      break;
    }
    if (arg == "-h") {
      usage(stdout);
      return 0;
    }
    if (arg.rfind("--", 0) != 0) break;  // the program
    if (arg == "--help") {
      usage(stdout);
      return 0;
    } else if (arg == "--version") {
      printf("roost-run %s\n", kVersion);
      return 0;
    } else if (arg == "--secure") {
      library = "libroost-secure";
    } else if (arg == "--hardened") {
      library = "libroost-hardened";
    } else if (arg == "--stats") {
      bool form = i + 1 < argc && is_report_form(argv[i + 1]);
      set_variable("ROOST_STATS", form ? argv[++i] : "1");
    } else if (arg.rfind("--stats=", 0) == 0) {
      std::string form = arg.substr(strlen("--stats="));
      if (!is_report_form(form.c_str())) fail("--stats takes text or json, not", form.c_str());
      set_variable("ROOST_STATS", form);
    } else if (arg == "--no-children") {
      // exec keeps the process id: the program will have roost-run's.  Roost
      // reports and profiles only in that process (options::reports_here()).
      set_variable("ROOST_STATS_PID", std::to_string(getpid()));
    } else if (arg == "--dump") {
      if (i + 1 >= argc) fail("--dump needs a process id");
      dump_pid = argv[++i];
    } else if (arg.rfind("--dump=", 0) == 0) {
      dump_pid = argv[i] + strlen("--dump=");
    } else if (arg == "--wait") {
      wait = true;
    } else if (arg == "--verbose") {
      set_variable("ROOST_VERBOSE", "1");
    } else if (arg == "--profile" || arg.rfind("--profile=", 0) == 0) {
      set_variable("ROOST_PROFILE", "1");
      if (arg != "--profile") set_variable("ROOST_PROFILE_FILE", arg.substr(strlen("--profile=")));
    } else if (arg == "--timeline" || arg.rfind("--timeline=", 0) == 0 || arg == "--interval" ||
               arg.rfind("--interval=", 0) == 0) {
      bool is_timeline = arg.rfind("--timeline", 0) == 0;
      std::string& value = is_timeline ? timeline : interval;
      size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        value = arg.substr(eq + 1);
      } else {
        if (i + 1 >= argc) fail(is_timeline ? "--timeline needs FILE.html" : "--interval needs D");
        value = argv[++i];
      }
      if (value.empty()) fail(is_timeline ? "--timeline needs FILE.html" : "--interval needs D");
    } else if (arg == "--option" || arg.rfind("--option=", 0) == 0) {
      std::string setting;
      if (arg == "--option") {
        if (i + 1 >= argc) fail("--option needs NAME=VALUE");
        setting = argv[++i];
      } else {
        setting = arg.substr(strlen("--option="));
      }
      size_t eq = setting.find('=');
      if (eq == std::string::npos) fail("--option needs NAME=VALUE, not", setting.c_str());
      const Option* o = find_option(setting.substr(0, eq));
      if (o == nullptr) fail_unknown_option(setting.substr(0, eq));
      set_variable(o->env, setting.substr(eq + 1));
    } else {
      fail_unknown_argument(arg);
    }
  }
  if (dump_pid != nullptr) {
    if (i < argc) fail("--dump runs no program:", argv[i]);
    if (!timeline.empty() || !interval.empty()) fail("--dump runs no program: no --timeline");
    return dump(dump_pid, wait);
  }
  if (wait) fail("--wait goes with --dump PID");
  if (i >= argc) fail("no program to run");
  if (!interval.empty() && timeline.empty()) fail("--interval goes with --timeline");

  std::string preload = find_library(library);
  if (const char* old = getenv("LD_PRELOAD"); old != nullptr && *old != '\0')
    preload += std::string(":") + old;
  set_variable("LD_PRELOAD", preload);

  if (!timeline.empty())
    return roost_run::run_with_timeline(argv + i, timeline, interval.empty() ? "100ms" : interval);

  execvp(argv[i], argv + i);
  int error = errno;
  fprintf(stderr, "roost-run: cannot run %s: %s\n", argv[i], strerror(error));
  return error == ENOENT ? 127 : 126;
}
