// tools/timeline.cc — roost-run --timeline (tools/timeline.h).
//
// Owns: the child process, the temporary folder of its lines, and filling
// the page's template (tools/timeline_page.html, a generated header's
// string).  Must never: put into the page anything that is not the
// template or the data (the page stands alone), or let the data end the
// <script> element that holds it (every '<' goes in as \u003c).
#include "timeline.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "timeline_page_html.h"  // kTimelinePage, generated from tools/timeline_page.html

namespace roost_run {

namespace {

// `s` as a JSON string, quotes included ('<' escaped too: see above).
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == '<') {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// The command line as a shell would take it back: words with anything but
// letters, digits and -_./=:,+@% in single quotes.
std::string command_line(char** argv) {
  std::string out;
  for (char** a = argv; *a != nullptr; a++) {
    std::string word = *a;
    bool plain = !word.empty();
    for (char c : word)
      if (!isalnum(static_cast<unsigned char>(c)) && strchr("-_./=:,+@%", c) == nullptr)
        plain = false;
    if (!out.empty()) out += ' ';
    if (plain) {
      out += word;
    } else {
      out += '\'';
      for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
      out += '\'';
    }
  }
  return out;
}

}  // namespace

std::string timeline_page(const std::string& lines, const std::string& command, size_t* count) {
  std::string data = "{\"command\":" + json_string(command) + ",\"lines\":[";
  std::istringstream in(lines);
  std::string line;
  *count = 0;
  while (std::getline(in, line)) {
    // roost writes each line whole, in one write: a line that is not one
    // object (a file someone else wrote into) is left out.
    if (line.size() < 2 || line.front() != '{' || line.back() != '}') continue;
    if (*count != 0) data += ",\n";
    // In roost's lines '<' can only stand inside a string (the numbers and
    // keys have none): \u003c there keeps the JSON the same.
    for (char c : line) {
      if (c == '<')
        data += "\\u003c";
      else
        data += c;
    }
    ++*count;
  }
  data += "]}";
  std::string page = kTimelinePage;
  const std::string marker = "ROOST_TIMELINE_DATA</script>";
  size_t at = page.find(marker);
  if (at != std::string::npos) page.replace(at, marker.size() - strlen("</script>"), data);
  return page;
}

int run_with_timeline(char** argv, const std::string& page, const std::string& interval) {
  // The page's file first: a wrong path fails before the program runs.
  FILE* out = fopen(page.c_str(), "w");
  if (out == nullptr) {
    fprintf(stderr, "roost-run: cannot write %s: %s\n", page.c_str(), strerror(errno));
    exit(2);
  }
  const char* tmp = getenv("TMPDIR");
  std::string folder =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/roost-timeline.XXXXXX";
  if (mkdtemp(folder.data()) == nullptr) {
    fprintf(stderr, "roost-run: cannot make a folder %s: %s\n", folder.c_str(), strerror(errno));
    exit(2);
  }
  std::string lines_path = folder + "/lines.jsonl";
  setenv("ROOST_TIMELINE_FILE", lines_path.c_str(), 1);
  setenv("ROOST_STATS_INTERVAL", interval.c_str(), 1);
  fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "roost-run: cannot fork: %s\n", strerror(errno));
    exit(2);
  }
  if (pid == 0) {
    // Only the program's own process writes lines (and whatever it execs,
    // which keeps the pid), not the processes it starts.
    setenv("ROOST_STATS_PID", std::to_string(getpid()).c_str(), 1);
    execvp(argv[0], argv);
    int error = errno;
    fprintf(stderr, "roost-run: cannot run %s: %s\n", argv[0], strerror(error));
    _exit(error == ENOENT ? 127 : 126);
  }
  // As system() does: a ^C or ^\ goes to the program (the terminal's
  // process group), and roost-run waits for it to end and still draws.
  signal(SIGINT, SIG_IGN);
  signal(SIGQUIT, SIG_IGN);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      fprintf(stderr, "roost-run: cannot wait for %s: %s\n", argv[0], strerror(errno));
      exit(2);
    }
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);

  std::ifstream in(lines_path);
  std::stringstream text;
  bool recorded = static_cast<bool>(in);
  if (recorded) text << in.rdbuf();
  unlink(lines_path.c_str());
  rmdir(folder.c_str());
  size_t count = 0;
  std::string html = timeline_page(text.str(), command_line(argv), &count);
  bool written = fwrite(html.data(), 1, html.size(), out) == html.size();
  written = fclose(out) == 0 && written;
  if (!written) {
    fprintf(stderr, "roost-run: cannot write %s: %s\n", page.c_str(), strerror(errno));
    return code != 0 ? code : 2;
  }
  char resolved[PATH_MAX];
  const char* shown = realpath(page.c_str(), resolved) != nullptr ? resolved : page.c_str();
  if (count == 0)
    fprintf(stderr,
            "roost-run: %s recorded no timeline (it ended first, or does not use roost); "
            "the page at %s says so\n",
            argv[0], shown);
  else
    fprintf(stderr, "roost-run: timeline of pid %d (%s, %zu lines) written to %s\n",
            static_cast<int>(pid), argv[0], count, shown);
  return code;
}

}  // namespace roost_run
