// api/new_failure.h — what throwing operator new does when memory runs out.
//
// Owns: the new-handler loop and the throw of std::bad_alloc, shared by the
// throwing forms (override_new.cc) and the nothrow forms, which catch it
// (override_new_nothrow.cc).  Must never: reference libstdc++ strongly.
#pragma once

#include <cstddef>

namespace roost::api {

// Runs the new handler until an allocation of `size` aligned to `align`
// succeeds (returns it), or there is no handler: then returns nullptr if
// `nothrow`, else throws std::bad_alloc (without libstdc++ in the process, a
// diagnostic and abort()).  A handler's own exception passes through.
void* new_failed(size_t size, size_t align, bool nothrow);

}  // namespace roost::api
