// platform/stack_trace.h — the calling thread's call stack, and which of the
// process's objects code lies in.
//
// Owns: capturing return addresses from the unwind tables (so programs
// built without frame pointers give whole stacks: platform/unwind.h's
// cached walk, else glibc's backtrace(), which walks them with libgcc's
// unwinder), roost's own code ranges, and naming an address for a report
// (its object's path and the address in that object's file, and an
// exported symbol when there is one).
// Must never: be called on a path that holds one of roost's locks, or
// without the caller's guard against reentry: prime() loads libgcc_s
// (which allocates and takes the loader's lock), libgcc's walk may take
// that lock, and naming an address does.
#pragma once

#include <cstddef>
#include <cstdint>

namespace roost::stack_trace {

// Return addresses of the calling thread's frames, innermost first (the
// caller of capture() is the first): at most `max`; the count.
size_t capture(uintptr_t* pcs, size_t max);

// Loads what capture() needs and finds roost's own code: called once, early,
// by a thread that may allocate (and samples nothing meanwhile).
void prime();

// Does `pc` lie in roost's own code?  Known where roost is a shared object
// (LD_PRELOAD, a linked libroost.so); false for every address where roost
// is part of the program (linked statically), and before prime().
bool in_roost(uintptr_t pc);

// Where `pc` lies, for a report: the path of its object (the program's own
// path for the program), `pc` as an address of that object's file (what
// addr2line takes), and the exported symbol before it with the offset into
// it (nullptr when none).  False when no object holds `pc`.
struct Place {
  const char* object;
  uintptr_t file_address;
  const char* symbol;
  uintptr_t symbol_offset;
};
bool locate(uintptr_t pc, Place* out);

}  // namespace roost::stack_trace
