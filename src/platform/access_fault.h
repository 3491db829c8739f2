// platform/access_fault.h — a SIGSEGV handler that lets roost name the
// faults its own inaccessible ranges stop (the hardened build's guard
// pages, the secure build's zero-size allocations) in its one-line
// diagnostic, instead of a bare "Segmentation fault".
//
// The frontend registers a namer at start-up (no system call); the backend
// arms the handler when it first makes a range inaccessible (two sigaction
// calls, once per process).  The handler asks the namer about the faulting
// address: the namer writes its line and aborts when the address is one of
// roost's, and returns otherwise; the handler then puts SIGSEGV's default
// action back and returns, so the access faults again and ends the process
// as it would have without roost.
//
// Owns: the handler and the signal's disposition while it is roost's.
// Must never: take over a disposition the program or a sanitizer set (it
// arms only over the default action), allocate, or take a lock in the
// handler.
#pragma once

#include <cstdint>

namespace roost::access_fault {

// Called in the handler with the faulting address; does not return when the
// address is roost's (it reports and aborts).  Must be async-signal-safe.
using Namer = void (*)(uintptr_t addr);

// Sets the namer (once, at start-up, before anything is armed).
void set_namer(Namer namer);

// Installs the handler if SIGSEGV still has its default action and a namer
// is set; later calls do nothing.  Returns whether roost's handler is in
// place.
bool arm();

}  // namespace roost::access_fault
