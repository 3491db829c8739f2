// frontend/profile_report.h — what the heap profiler writes: the heap
// profile that pprof reads, and the leak report.
//
// The heap profile is gperftools' legacy heap format, which `go tool
// pprof` and Debian's `google-pprof` read:
//   heap profile: <in-use objects>: <in-use bytes> [<allocated objects>: <allocated bytes>] @
//   heapprofile <in-use objects>: <in-use bytes> [<objects>: <bytes>] @ 0x<pc> 0x<pc> ...   (one
//   line per stack) MAPPED_LIBRARIES: <the process's /proc/self/maps>
// with every figure the estimate the samples give (so the header names no
// sampling rate: pprof takes the figures as they are).
//
// Owns: both formats, the files they go to (ROOST_PROFILE_FILE, its
// default, the numbered periodic profiles), the line on stderr that says
// where each went ("roost: heap profile of pid N (program) written to
// /absolute/path"), and the profile at exit, written only in the process
// that reports (ROOST_STATS_PID: options::reports_here()).
// Must never: allocate through malloc, or hold the profiler's lock while
// it writes or names addresses (it works on a snapshot).
#pragma once

namespace roost::profile::report {

// Writes the heap profile to `fd`; false if writing failed.
bool write_heap_profile(int fd);

// Writes the leak report to `fd`: the sampled stacks whose objects are
// still allocated, the largest estimate first, each frame named (object,
// address in its file, exported symbol); false if writing failed.
bool write_leak_report(int fd);

// roost_profile_dump(): the heap profile to the file `path` names ("%p":
// the process id), nullptr for ROOST_PROFILE_FILE or its default.
// 0, or -errno (-ENOTSUP with profiling off).  Says nothing on stderr: its
// caller names the file and gets the outcome.
int dump(const char* path);

// The line that says where `what` ("heap profile", "statistics") of this
// process went: "roost: <what> of pid N (program) written to
// /absolute/path" (`name` made absolute where the working directory can be
// read; "not written whole to" where `whole` is false), on the reports'
// descriptor.
void say_written(const char* what, const char* name, bool whole);

// The periodic profile (ROOST_PROFILE_INTERVAL): the next numbered file,
// and the line that names it; nothing in a process that does not report.
void dump_periodic();

}  // namespace roost::profile::report
