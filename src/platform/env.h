// platform/env.h — reading ROOST_* environment variables without allocating.
//
// Owns: lookups in the process environment.  Must never: call getenv-like
// functions that may allocate or lock, or cache policy.
#pragma once

#include <cstddef>
#include <cstdint>

namespace roost::env {

// The value of `name` in the environment, or nullptr.
const char* get(const char* name);

// Parses an unsigned number with an optional k/m/g suffix (binary units);
// returns `fallback` when absent or malformed.
uint64_t get_u64(const char* name, uint64_t fallback);

}  // namespace roost::env
