// tools/timeline.h — roost-run --timeline: runs the program with
// ROOST_STATS_INTERVAL set, then draws its lines as one self-contained HTML
// page (tools/timeline_page.html, embedded at build time).
//
// Owns: the child process and its wait, the temporary folder its lines go
// to, and the page.  Must never: fetch or point to anything outside the
// page (no network, no other file), or outlive the program's status (it
// exits with it).
#pragma once

#include <string>

namespace roost_run {

// Runs argv[0] (searched in PATH) with argv, the environment as it is
// (LD_PRELOAD already set) plus ROOST_STATS_INTERVAL=`interval`, the lines
// going to a temporary file, only in the program's own process
// (ROOST_STATS_PID); waits for it, writes the page to `page`, says so on
// stderr and returns the program's exit status (128 + the signal that
// killed it).  Exits with 2 if `page` cannot be written to, before running
// anything.
int run_with_timeline(char** argv, const std::string& page, const std::string& interval);

// The page for the lines in `lines` (one JSON object per line; any other
// line is left out) of the command `command`: the template with the data in
// place.  *count: the lines it holds.
std::string timeline_page(const std::string& lines, const std::string& command, size_t* count);

}  // namespace roost_run
