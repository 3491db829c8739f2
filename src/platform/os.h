// platform/os.h — the only door to the operating system.
//
// Owns: address-space reservation (anywhere, or at an address the backend
// picks), purge, moving pages between ranges, huge-page advice, the
// address-space limit, page size, the thread-exit hook, fork hooks, roost's
// own thread and its sleep and wake-up (futex), a signal's handler where
// the program has none (the dumps' signal), the process id, files written
// by name (the statistics report, the heap profiles, the dumps, renamed
// into place) and their absolute paths, and the test-only fault injection
// that makes the OS refuse.  Must never: allocate through malloc, call
// stdio, or hold allocator policy (which chunk, where, when to purge: that
// is the backend's).
#pragma once

#include <cstddef>
#include <cstdint>

namespace roost::os {

// Reserves `size` bytes aligned to `align` (a power of two >= page size),
// readable and writable but committed lazily by the kernel (no swap
// reservation).  Fresh pages read as zero.  nullptr when the OS refuses.
void* reserve_aligned(size_t size, size_t align);

// What reserve_at() did.
enum class Placement {
  kPlaced,    // the range is reserved at the address asked for
  kOccupied,  // something else is there (or the kernel put it elsewhere)
  kRefused,   // the OS refused the memory (address-space limit, map count)
};

// Reserves [addr, addr + size) as reserve_aligned() does, but only at that
// address, never over an existing mapping.
Placement reserve_at(uintptr_t addr, size_t size);

// The calls below take a range that starts on a page (os::page_size()) and
// act on every page it touches, as the kernel does (its length is rounded
// up to whole pages); a range that starts elsewhere is refused.

// Returns address space reserved above to the OS; false if it refused (the
// range stays reserved).
bool release(void* p, size_t size);

// Makes [p, p+size) (page-aligned, reserved above) fault on every read and
// write; false if the OS refused.
bool make_inaccessible(void* p, size_t size);
// Makes such a range readable and writable again; false if the OS refused.
bool make_accessible(void* p, size_t size);
// The mprotect calls the two above made since start (statistics).
size_t protect_calls();

// Gives the physical pages under [p, p+size) back; the range stays reserved
// and reads as zero afterwards when `zero` is set (MADV_DONTNEED), or may
// keep old contents until the kernel needs memory (MADV_FREE).  False if
// the OS refused: the pages keep their contents.
bool purge(void* p, size_t size, bool zero);

// Has the kernel map the pages of [p, p+size) (page-aligned, readable and
// writable) as written, each a zeroed page of its own where none was
// (MADV_POPULATE_WRITE, Linux 5.14 and later): what a first write to each
// would do, in one call.  False if the OS refused or does not know how;
// the range reads as it did either way.
bool populate_write(void* p, size_t size);

// Whether the page at `p` (page-aligned, reserved above) is in memory now
// (mincore); false where the OS cannot tell.
bool resident(const void* p);

// What move_pages() did.
enum class Moved {
  kMoved,    // the pages moved
  kRefused,  // nothing moved; both ranges read as before
  kLost,     // nothing moved, and `to` is no longer reserved (the kernel
             // unmapped it and failed, and the range could not be taken back)
};
// Moves the physical pages under [from, from+size) to [to, to+size), both
// page-aligned, reserved above and apart, without copying (mremap with
// MREMAP_DONTUNMAP, Linux 5.7 and later): `to` then reads as `from` did,
// and `from` stays reserved and reads as zero.  Whatever `to` held is
// discarded.  The kernel moves the page tables of 2 MiB-aligned stretches
// whole; each moved range may become a mapping of its own (so a caller
// bounds the distinct ranges it creates: vm.max_map_count), and kernels
// before 6.17 refuse a `from` that spans two mappings (after unmapping
// `to`).  Refused where the kernel does not know how, or where the first
// call finds that a scratch move leaves its source unmapped (qemu-user):
// later calls are refused at once.
Moved move_pages(void* from, void* to, size_t size);
// Whether move_pages() can move pages here (the scratch move above, tried
// once).
bool can_move_pages();

// Whether the kernel gives transparent huge pages of 2 MiB
// (config::kHugePageBits) to the ranges a process asks for them (THP mode
// `madvise`), and only to those; false where its huge pages are of another
// size (AArch64 kernels with 16 or 64 KiB pages).  Reads /sys once per
// call (slow: call it once).
bool huge_pages_on_advice();
// Asks for transparent huge pages on [p, p+size) (2 MiB-aligned, reserved
// above) when `on`, or that it have none; pages already mapped stay as they
// are.  False if the OS refused.
bool advise_huge_pages(void* p, size_t size, bool on);
// What collapse_huge_page() got from the kernel.
enum class Collapse {
  kDone,         // [p, p+size) is backed by huge pages now
  kRefused,      // not this time (no huge page to be had, a page busy): try later
  kUnsupported,  // never here (the kernel does not know MADV_COLLAPSE, THP is
                 // off, or the process may not): do not ask again
};
// Has the kernel back [p, p+size) (2 MiB-aligned, reserved above) with
// transparent huge pages now, copying its pages into them
// (MADV_COLLAPSE, Linux 6.1 and later), whatever the range's advice; may
// take milliseconds per 2 MiB (compaction, the copy): never on a program's
// thread.  Pages not mapped are mapped zeroed.
Collapse collapse_huge_page(void* p, size_t size);
// How many of the OS's pages of [p, p+size) (page-aligned, reserved above,
// at most 2 MiB) are in memory now (mincore); 0 where the OS cannot tell.
size_t resident_pages(const void* p, size_t size);

// Addresses [begin, end).
struct AddressRange {
  uintptr_t begin, end;
};
// What the kernel maps in some ranges: the resident bytes (Rss) and, of
// those, the bytes backed by transparent huge pages (AnonHugePages).
struct MappedBytes {
  uint64_t resident, huge;
};
// Sums Rss and AnonHugePages of /proc/self/smaps over the mappings that
// overlap any of `ranges` (`count` of them): a mapping is counted whole, so
// the ranges should cover whole mappings (roost's own).  False where smaps
// cannot be read.  The file is read in pieces through a fixed buffer on the
// stack (no allocation), but the kernel walks every mapping's page tables
// to write it: slow, for reports only.
bool mapped_bytes(const AddressRange* ranges, size_t count, MappedBytes* out);

// The process's address-space limit (RLIMIT_AS, `ulimit -v`) in bytes;
// SIZE_MAX when there is none.
size_t address_space_limit();
// The address space the process has mapped now (VmSize), in bytes; 0 if
// unknown.  Reads /proc (slow: diagnostics only).
size_t address_space_used();

// The OS's page size in bytes, read from the kernel once: 4 KiB on x86-64;
// 4, 16 or 64 KiB on AArch64 (config.h says where roost uses it).
size_t page_size();

// 64 random bits from the kernel (getrandom, else the bytes the kernel gave
// the process at start); for layout randomisation, not cryptography.
uint64_t entropy();

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
// With `append`, every write goes to the file's end (O_APPEND).
int open_for_writing(const char* path, bool append = false);
// The same for the path `pattern` names, its "%p" the process id ("%%" a
// "%"); `name` receives that path, NUL-terminated and cut to `size`
// (-ENAMETOOLONG when it does not fit).
int open_named_for_writing(const char* pattern, char* name, size_t size, bool append = false);
// `name` as an absolute path, into `out` (NUL-terminated): `name` itself
// when it starts with '/', else the working directory, '/' and `name` less
// any leading "./"; false when it does not fit `size` or the working
// directory cannot be read (it is removed, or outside the root).
bool absolute_path(const char* name, char* out, size_t size);
// Appends the contents of the file at `path` (a /proc file, say) to `fd`;
// false if either refused.
bool copy_file_to(const char* path, int fd);
void close(int fd);
// Renames `from` to `to` (replacing it, in one step, on one file system);
// 0 or -errno.
int rename_file(const char* from, const char* to);
// Removes the file `path` (a temporary one that failed); errno kept.
void remove_file(const char* path);

int process_id();
// The program's name (argv[0] without its folder), for reports.
const char* program_name();
// Seconds since the epoch (UTC), for the time a report was written.
uint64_t wall_clock_seconds();
// Milliseconds since the epoch (UTC).
uint64_t wall_clock_ms();
// The process's resident bytes (/proc/self/statm), 0 where it cannot be read.
uint64_t resident_bytes();
// Nanoseconds since the kernel started the process (/proc/self/stat, to the
// kernel's clock tick), 0 where it cannot be read.
uint64_t process_age_ns();
}  // namespace roost::os

namespace roost::os {
// Gives up the CPU to another runnable thread (lock back-off).
void yield();

// A thread of roost's own (the service): runs fn(arg) with every signal
// blocked (the program's handlers never run on it), named `name` (at most
// 15 characters).  False when the OS refuses a thread.
struct Thread {
  unsigned long handle = 0;
};
bool start_thread(Thread* t, void* (*fn)(void*), void* arg, const char* name);
void join_thread(Thread t);

// Is the caller the process's first thread (main's)?
bool is_main_thread();
// Does a thread of the process other than the caller still run (one that
// has not ended)?  True where /proc cannot tell.
bool other_threads_run();

// What catch_signal() did.
enum class Caught {
  kCaught,  // the handler is installed
  kTaken,   // the signal's action was not the default one (the program's
            // handler, or ignored): left as it was
  kFailed,  // the OS refused
};
// Installs `handler` for signal `sig` (SA_RESTART; other signals not
// blocked while it runs) where its action now is the default one.
Caught catch_signal(int sig, void (*handler)(int));

// Sleeps while *word == expected, at most timeout_ns (UINT64_MAX: no limit),
// or until wake_one(word); may return early (spuriously, or on a signal).
void wait_on(const uint32_t* word, uint32_t expected, uint64_t timeout_ns);
void wake_one(const uint32_t* word);
}  // namespace roost::os

// Test-only fault injection, compiled in with -DROOST_FAULT_INJECTION=1
// (the test variants of the library): the calls of one kind made after
// roost_test_inject_faults() are numbered from 0, and those numbered
// [first, first + count) fail as the OS fails them (mmap: ENOMEM; madvise:
// EAGAIN; munmap: ENOMEM; mprotect: ENOMEM; mremap: ENOMEM, after unmapping
// the destination).  count < 0: every call from `first` on.
namespace roost::os {
enum class FaultKind : int {
  kMap = 0,
  kPurge = 1,
  kUnmap = 2,
  kProtect = 3,
  kPopulate = 4,
  kMove = 5,  // fails as a kernel that unmapped the destination first does
};
}  // namespace roost::os
#if defined(ROOST_FAULT_INJECTION) && ROOST_FAULT_INJECTION
extern "C" void roost_test_inject_faults(int kind, long first, long count);
// Calls of `kind` that failed by injection so far.
extern "C" long roost_test_injected_faults(int kind);
// From now on os::page_size() says `bytes` (a kernel with pages roost does
// not support: tests of the refusal to start); 0 goes back to the kernel's.
extern "C" void roost_test_set_page_size(size_t bytes);
#endif
