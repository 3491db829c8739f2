// backend/large_guard.h — what the secure and hardened builds put after a
// large or huge object (config::kGuardLarge): a canary in the slack between
// the size asked for and the page boundary, and (the hardened build) an
// inaccessible guard page right after its page-rounded usable bytes.
//
// A store past the page the object ends in faults at once; one into the
// slack is found when the object is freed or resized (the caller names it
// a buffer overflow).  The canary is the object's key (a secret mixed with
// its address), byte k of every 8 at offset k from the page-aligned start,
// so a program cannot write it back without the secret.
//
// Owns: the guard page's protection and the canary's layout.  Must never:
// touch a byte below the size asked for, or depend on the build's switch
// (large.cc decides when to call it; tests call it in every build).
#pragma once

#include <cstddef>
#include <cstdint>

namespace roost::large_guard {

// Makes the page at `end` (page-aligned: where an object's usable bytes
// end) fault on every access; false if the OS refused (the object then
// has no guard).
bool place(uintptr_t end);

// Makes that page readable and writable again (before its memory is
// reused); false if the OS refused.
bool lift(uintptr_t end);

// Writes the canary of `key` into bytes [size, end) of the object at `base`
// (page-aligned), end - size less than a page.
void fill_slack(uintptr_t base, size_t size, size_t end, uint64_t key);

// The first byte of [size, end) that does not hold the canary any more, or
// 0 when the slack is intact.
uintptr_t first_overwritten(uintptr_t base, size_t size, size_t end, uint64_t key);

}  // namespace roost::large_guard
