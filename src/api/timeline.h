// api/timeline.h — memory over time (ROOST_STATS_INTERVAL): one JSON line of
// figures per interval, appended to ROOST_TIMELINE_FILE.
//
// Owns: the timeline's file and its lines.  Must never: allocate, write a
// line in more than one write(2), or write in a process that does not
// report (options::reports_here()).
#pragma once

namespace roost::timeline {

// The last line, at exit (the report at exit calls it): "last":true.  Does
// nothing without a timeline in this process.
void write_last_line();

}  // namespace roost::timeline
