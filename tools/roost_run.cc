// tools/roost_run.cc — roost-run, the launcher: runs a program with roost
// preloaded and its options set.
//
//   roost-run [--secure | --hardened] [--stats[=text|json]] [--no-children]
//             [--profile[=path]] [--verbose] [--option NAME=VALUE]...
//             [--] program [args...]
//
// Owns: finding the library (next to the launcher in a build tree, or in
// the install's library folder beside its bin/), LD_PRELOAD and the ROOST_*
// variables of the program it runs, its own flags and their "did you mean",
// and the option help and "did you mean", which it takes from
// src/options.h's table (generated from src/options.def, like everything
// else that lists the options).  Must never: link roost itself, parse or
// judge option values (roost does, and warns), or drop a variable the
// caller had set but for the ones it names.
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "options.h"
#include "roost.h"

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
          "                 [--] program [args...]\n"
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
          "  --option NAME=VALUE  set an option; NAME with or without ROOST_, any case\n"
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
    {"--secure", false},      {"--hardened", false}, {"--stats", true},
    {"--no-children", false}, {"--profile", true},   {"--verbose", false},
    {"--option", true},       {"--help", false},     {"--version", false},
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

}  // namespace

int main(int argc, char** argv) {
  const char* library = "libroost";
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
    } else if (arg == "--verbose") {
      set_variable("ROOST_VERBOSE", "1");
    } else if (arg == "--profile" || arg.rfind("--profile=", 0) == 0) {
      set_variable("ROOST_PROFILE", "1");
      if (arg != "--profile") set_variable("ROOST_PROFILE_FILE", arg.substr(strlen("--profile=")));
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
  if (i >= argc) fail("no program to run");

  std::string preload = find_library(library);
  if (const char* old = getenv("LD_PRELOAD"); old != nullptr && *old != '\0')
    preload += std::string(":") + old;
  set_variable("LD_PRELOAD", preload);

  execvp(argv[i], argv + i);
  int error = errno;
  fprintf(stderr, "roost-run: cannot run %s: %s\n", argv[i], strerror(error));
  return error == ENOENT ? 127 : 126;
}
