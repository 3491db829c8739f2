// platform/env.h — reading ROOST_* environment variables without allocating.
//
// Owns: lookups in the process environment.  Must never: call getenv-like
// functions that may allocate or lock, parse values, or cache policy.
#pragma once

extern char** environ;  // the C library's (unistd.h)

namespace roost::env {

// The value of `name` in the environment (its first entry), or nullptr.
const char* get(const char* name);

// Whether the C library has set the environment up yet: not while
// functions of the program's .preinit_array run (AddressSanitizer starts
// up there, and ld.so allocates then).
inline bool present() { return ::environ != nullptr; }

// Calls visit(entry) for each environment entry ("NAME=value") whose name
// starts with `prefix`, in the environment's order.
void for_each(const char* prefix, void (*visit)(const char* entry));

}  // namespace roost::env
