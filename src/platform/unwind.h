// platform/unwind.h — a fast walk of the calling thread's frames by the
// unwind tables (x86-64 with glibc 2.35's _dl_find_object).
//
// libgcc's unwinder (what glibc's backtrace() uses) interprets each frame's
// call-frame instructions anew every time.  Here the rule that steps from a
// return address to its caller's frame (where the caller's frame starts,
// where its return address and rbp were saved) is computed once per return
// address from the same tables (.eh_frame through .eh_frame_hdr) and kept,
// so that a stack of addresses seen before is walked with a cache lookup
// and a few loads a frame (docs/PROFILING.md says what a sample costs).
//
// Owns: the rule cache (without a lock: threads that walk at once never
// wait on one another) and the interpreter of the few call-frame
// instructions compilers emit for ordinary frames.  Must never: guess:
// anything else (a CFA given by an expression, a signal frame, 64-bit
// .eh_frame, an encoding it does not read) makes capture() give up, and
// the caller takes the slow walk; never take a lock that a thread holding
// the loader's lock could wait on (_dl_find_object takes none).
#pragma once

#include <cstddef>
#include <cstdint>

namespace roost::unwind {

// Is the fast walk built for this platform?
bool available();

// Return addresses of the calling thread's frames, innermost first (the
// caller of capture() is the first); the count, at most `max`; or -1 when
// a frame's rule is beyond what this walk reads (the caller then takes the
// slow walk).  A frame with no unwind table (or one that says the return
// address is undefined: a thread's first frame) ends the walk.
long capture(uintptr_t* pcs, size_t max);

}  // namespace roost::unwind
