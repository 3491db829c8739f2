// api/stats.h — one reading of roost's statistics, and its two reports.
//
// Owns: the snapshot that roost_stats(), roost_class_stats(),
// roost_stats_json(), the report at exit and glibc's introspection calls
// (api/introspection.cc) read, and the text and JSON forms of it.  Must
// never: stop other threads, take a lock while it writes, or allocate.
#pragma once

#include "ds/sizeclass.h"
#include "platform/error.h"
#include "roost.h"

namespace roost::stats {

struct Snapshot {
  struct roost_stats totals;
  struct roost_class_stats classes[sizeclass::kCount];
  // Transparent huge pages, read only for a report (take_huge_pages()):
  // /proc/self/smaps is slow to read.
  struct HugePages {
    bool read;               // taken (else the reports leave it out)
    bool mapped_known;       // smaps could be read
    uint64_t heap_resident;  // resident bytes of roost's ranges
    uint64_t heap_huge;      // of those, backed by huge pages
    uint64_t collapses_tried, collapses_done, collapses_refused, blocks_collapsed;
  } huge_pages;
};

// Reads every figure once: the allocators' counters as they are (threads
// that run meanwhile make it approximate), then the backend's.
void take(Snapshot& s);

// Adds the huge-page figures to `s` (after take(), which clears them):
// roost's heap as the kernel maps it (/proc/self/smaps over roost's
// ranges, address_space::heap_mapped_bytes()) and the collapse counters
// (huge_pages::counts()).  Only the reports call it: reading smaps makes the
// kernel walk every mapping's page tables.
void take_huge_pages(Snapshot& s);

// Does class `sc` appear in the reports: has it allocated, or does it hold
// slabs?
inline bool active(const Snapshot& s, unsigned sc) {
  return s.classes[sc].allocations != 0 || s.classes[sc].slabs != 0;
}

// The text report: a line naming the process (pid, program, time), then
// "roost: <counter> <value>  <description>\n" for each counter of
// roost_stats.def (byte counts also in KiB, MiB...), then a note where two
// counters differ for a reason that is not plain (messages in flight), then
// the huge-page figures if taken ("roost: huge_<figure> <value> ...").
void write_text(err::Text& out, const Snapshot& s);

// The JSON object of roost_stats_json() (no newline after it): "version",
// "process" (pid, program, time), "totals", "classes", and "huge_pages"
// if taken.
void write_json(err::Text& out, const Snapshot& s);

}  // namespace roost::stats
