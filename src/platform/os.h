// platform/os.h — the only door to the operating system.
//
// Owns: address-space reservation, purge, page size, the thread-exit hook,
// fork hooks, the process id, and files written by name (the statistics
// report).  Must never: allocate through malloc, call stdio, or hold
// allocator policy (which chunk, when to purge: that is the backend's).
#pragma once

#include <cstddef>
#include <cstdint>

namespace roost::os {

// Reserves `size` bytes aligned to `align` (a power of two >= page size),
// readable and writable but committed lazily by the kernel (no swap
// reservation).  Fresh pages read as zero.  nullptr when the OS refuses.
void* reserve_aligned(size_t size, size_t align);

// Returns address space reserved above to the OS.
void release(void* p, size_t size);

// Gives the physical pages under [p, p+size) back; the range stays reserved
// and reads as zero afterwards when `zero` is set (MADV_DONTNEED), or may
// keep old contents until the kernel needs memory (MADV_FREE).
void purge(void* p, size_t size, bool zero);

size_t page_size();

// Calls `fn(arg)` when the calling thread exits, once per arming.  The hook
// is process-wide: install once, arm per thread.  It is removed when roost's
// code goes away (dlclose of a plugin holding it, or exit): threads exiting
// after that are not called back.
bool install_thread_exit_hook(void (*fn)(void*));
void arm_thread_exit_hook(void* arg);

// pthread_atfork without allocation.
void install_fork_hooks(void (*prepare)(), void (*parent)(), void (*child)());

// Monotonic time in nanoseconds (for purge delays).
uint64_t now_ns();

}  // namespace roost::os

namespace roost::os {
// Opens `path` for writing: created (mode 0644, less the umask) or
// truncated, close-on-exec.  The descriptor, or -errno.
int open_for_writing(const char* path);
void close(int fd);

int process_id();
}  // namespace roost::os

namespace roost::os {
// Gives up the CPU to another runnable thread (lock back-off).
void yield();
}  // namespace roost::os
