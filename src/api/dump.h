// api/dump.h — dumps on demand: the statistics and the heap profile of a
// running process, written when it receives ROOST_DUMP_SIGNAL (roost-run
// --dump PID sends it).
//
// Owns: the signal's handler and its installation, the dumps' files
// (ROOST_DUMP_FILE, their numbers, their temporary names), and the lines
// that say what happened.  Must never: write, allocate or take a lock in
// the handler (it only counts the request and wakes the service thread:
// service::request()); allocate from roost's heap while it writes (fixed
// buffers, write(2)); install a handler over one the program has.
#pragma once

namespace roost::dump {

// At start-up, in a program whose malloc roost is (options read): with
// ROOST_DUMP_SIGNAL set, takes the signal where its action is the default
// one and asks for the service thread (it starts at the next safe point:
// the program's next slow-path allocation).  Nothing at all without the
// option.
void install();

}  // namespace roost::dump
