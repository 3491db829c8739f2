// platform/cpu.h — what roost asks of the processor itself.
//
// Owns: the spin-wait hint, the one instruction roost names by
// architecture (x86-64: pause; AArch64: yield).  Everything else that
// differs between the two is in config.h (the address width, the page
// sizes) or read from the OS at start (the page size: os::page_size()).
// Must never: be used on a fast path, or hold a loop or a policy (how long
// to spin is the caller's).
#pragma once

namespace roost::cpu {

// Tells the core that the thread is spinning on a shared word (lock
// back-off): the sibling hyperthread gets the pipeline, and the core does
// not speculate a memory-order violation when the word changes.
inline void relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#else
#error "roost is built for x86-64 and AArch64 Linux (see config.h)"
#endif
}

}  // namespace roost::cpu
