// config.h — every compile-time setting of roost, in one place.
//
// Owns: the sizes and limits that shape the heap (granule, region, size
// class range, slab sizing, message passing).  Must never: hold run-time
// state or run-time options' defaults, or include anything but
// <cstddef>/<cstdint>.  Run-time options (ROOST_* variables), with their
// defaults and ranges, are listed in src/options.def.
#pragma once

#include <cstddef>
#include <cstdint>

namespace roost::config {

// The architectures roost is built and tested for, and what differs
// between them here: the width of a user address.  On x86-64 Linux user
// space ends at 2^47 (4-level paging; 5-level kernels give more only to a
// program that asks for addresses above it).  AArch64 Linux kernels
// configure 39, 42, 47, 48 or 52 bits, and place the program's mappings
// from the top of that space down: with 48 bits (the common configuration,
// 4 KiB and 64 KiB pages alike) the kernel's addresses are above 2^47, so
// the pagemap must cover 48 bits wherever the kernel places roost's memory
// (a 52-bit kernel, too, maps above 2^48 only on request).
#if defined(__x86_64__)
inline constexpr unsigned kAddressBits = 47;
#elif defined(__aarch64__)
inline constexpr unsigned kAddressBits = 48;
#else
#error "roost is built for x86-64 and AArch64 Linux: set kAddressBits for another"
#endif

// The pagemap granule: the smallest chunk the backend hands out.  Every
// granule roost owns has one pagemap entry.
inline constexpr unsigned kGranuleBits = 16;  // 64 KiB
inline constexpr size_t kGranule = size_t{1} << kGranuleBits;

// The backend reserves address space in regions of at most this size,
// aligned to their size, and splits them buddy-style into power-of-two
// chunks.  Objects bigger than this are "huge": mapped alone.
inline constexpr unsigned kRegionBits = 30;  // 1 GiB
inline constexpr size_t kRegion = size_t{1} << kRegionBits;
inline constexpr unsigned kChunkOrders = kRegionBits - kGranuleBits + 1;
// Under an address-space limit (RLIMIT_AS), a region is at most this share
// of the limit (and at least what the request needs), so that roost's
// reserved-but-unused address space stays small beside the program's.
inline constexpr size_t kRegionLimitShare = 16;

// Where roost puts its memory.  The flat pagemap costs address space in
// proportion to the highest address it covers, so roost places its regions
// and huge objects itself, in 1 GiB slots from kWindowBase upward (above
// the low 32 GiB that MAP_32BIT users and zero-based compressed pointers
// want), and the pagemap, which grows in place, from kPagemapBase (the
// window's end).  Sanitizers own the address-space layout: under them (and
// wherever the kernel does not honour the placement) the kernel places
// everything and the pagemap covers the whole address space.  The kernel
// places everything in a ROOST_ASAN build too (below): it serves ld.so's
// allocations while ASan starts up, before ASan maps its shadow memory
// where the window would be.
inline constexpr uintptr_t kWindowBase = uintptr_t{1} << 35;   // 32 GiB
inline constexpr uintptr_t kPagemapBase = uintptr_t{1} << 44;  // 16 TiB
// Under an address-space limit too small for a program that wants the low
// 32 GiB (under 256 MiB), the window starts lower, down to this, so that
// the pagemap's entries for the space below it cost at most
// 1/kSpreadLimitShare of the limit, as the spread does.
inline constexpr uintptr_t kLowestWindowBase = uintptr_t{1} << 32;  // 4 GiB
// Layout randomisation (addresses an attacker cannot predict): the window's
// first slot is one of up to kWindowSpreadSlots + 1 slots from kWindowBase
// (each slot below it costs the pagemap 128 KiB of address space, so under
// a limit the spread is cut to keep that under 1/kSpreadLimitShare of it),
// and the pagemap starts at one of kPagemapSpread 4 GiB steps from
// kPagemapBase.
inline constexpr size_t kWindowSpreadSlots = 255;
inline constexpr size_t kSpreadLimitShare = 64;
inline constexpr size_t kPagemapSpread = 4096;
inline constexpr unsigned kPagemapStepBits = 32;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || \
    (defined(ROOST_ASAN) && ROOST_ASAN)
inline constexpr bool kPlaceInWindow = false;
#else
inline constexpr bool kPlaceInWindow = true;
#endif

// Objects: 16-byte minimum size and alignment.
inline constexpr unsigned kMinAllocBits = 4;
inline constexpr size_t kMinAlloc = size_t{1} << kMinAllocBits;

// Small objects live in slabs up to this size; larger ones are "large":
// page-granular chunks straight from the backend.  The hardened build
// stops at 64 KiB: a bigger class's slab (2 or 4 MiB) would be one
// accessible run of more than a megabyte between its guard pages (below,
// kGuardSlabs), where a large object ends at a guard page of its own.
#if defined(ROOST_HARDENED) && ROOST_HARDENED
inline constexpr unsigned kMaxSmallBits = 16;  // 64 KiB
#else
inline constexpr unsigned kMaxSmallBits = 18;  // 256 KiB
#endif
inline constexpr size_t kMaxSmall = size_t{1} << kMaxSmallBits;

// Sizes up to this bound are classified by one table lookup.
inline constexpr size_t kTableClassified = 1024;

// A slab holds at least 2^kMinObjectsPerSlabBits objects, and aims for
// 2^kTargetObjectsPerSlabBits while that keeps it within kTargetSlabBits
// (slab size = a power of two, at least one granule).  More objects per slab
// mean bigger batches per refill; pages are touched only as objects go out.
// One slab size for every class up to 4 KiB means an emptied slab can serve
// any of them: released memory is reused instead of fragmenting the backend
// into chunk sizes that the next request cannot use.
#ifndef ROOST_SLAB_BITS
#define ROOST_SLAB_BITS 16
#endif
inline constexpr unsigned kMinObjectsPerSlabBits = 4;         // 16
inline constexpr unsigned kTargetObjectsPerSlabBits = 7;      // 128
inline constexpr unsigned kTargetSlabBits = ROOST_SLAB_BITS;  // 64 KiB
static_assert(kTargetSlabBits >= kGranuleBits);

// Released chunks stay resident (reusable without page faults) for one to
// two purge delays (run-time option ROOST_PURGE_DELAY)...
// ...chunks of at least this size longer, for as long as the program keeps
// taking as many bytes of such chunks from the backend (big buffers cycled
// through malloc and free); smaller ones are slab memory, which the
// frontend keeps a reserve of itself...
inline constexpr unsigned kDemandKeptMinOrder = 20;  // 1 MiB
// ...unless more is waiting than the program holds (the bytes of chunks
// handed out), or than this floor where it holds less: then the oldest
// chunks, the biggest first, are purged at once, down to
// kDirtyAfterCapQuarters quarters of that cap (what is left stays reusable
// without faults, so a program that cycles buffers bigger than the cap's
// share does not fault every one in again).  A heap of a few GiB may so
// keep as much again resident for a delay or two; a small one, at most the
// floor.
inline constexpr size_t kDirtyCapFloor = size_t{256} << 20;
inline constexpr unsigned kDirtyAfterCapQuarters = 3;  // of the cap: 3/4
// A big chunk handed out where no released chunk of its size is at hand
// (or beyond the part of one that was written) gets the resident pages of
// smaller released chunks moved into its first bytes, up to what the caller
// will use (run-time option ROOST_MOVE_PAGES): the kernel moves page tables,
// no byte is copied and no page faulted in.  Moves go in stretches of
// 2^kMoveBits bytes, at offsets that are multiples of it (where the kernel
// moves whole page tables), from chunks of at least that size, at most
// kMaxMovesPerChunk per chunk handed out (from the first kMaxMoveLooks
// released chunks looked at)...
inline constexpr unsigned kMoveBits = 21;  // 2 MiB
inline constexpr unsigned kMaxMovesPerChunk = 16;
inline constexpr unsigned kMaxMoveLooks = 64;  // released chunks looked at for them
// ...and only while the regions span at most this much address space: each
// moved stretch may become a kernel mapping of its own (one per 2 MiB of
// regions at most), and the process's count of those is limited
// (vm.max_map_count, 65530 by default).
inline constexpr size_t kMoveMaxReservedBytes = size_t{16} << 30;
// A released chunk is moved only where its pages at this many points
// through the part of it that would move are resident (mincore): a program
// that wrote only a buffer's head and tail leaves a long dirty extent of
// which little is resident, and moving it would only pin its head far from
// the head of what it fills.
inline constexpr unsigned kMoveResidentProbes = 4;
// A purge the program undoes at once (it takes memory that must be faulted
// in within a delay: at least a granule, and at least 1/kUndonePurgeShare
// of what was purged lately) doubles the delay, at most this many times; a
// delay in which it takes no memory halves it again.
inline constexpr unsigned kMaxPurgeDelayShift = 3;
inline constexpr size_t kUndonePurgeShare = 4;
// "Lately": what was purged is halved (shifted right this many bits) at
// every rotation of the dirty generations, a purge delay apart.
inline constexpr unsigned kPurgedLatelyShift = 1;
// A thread's chunk cache takes fresh slab memory from the backend in chunks
// of 2^kFreshBatchOrder bytes (the default reserve's size, 512 KiB) while
// its reserve has room for the rest, so a growing heap asks the backend's
// lock once per eight one-granule slabs.
inline constexpr unsigned kFreshBatchOrder = 19;

// Requests above this are refused with ENOMEM before touching the OS.
inline constexpr size_t kMaxRequest = size_t{1} << 46;

// Pages.  The OS's page size is read at start (os::page_size()): 4 KiB on
// x86-64; 4, 16 or 64 KiB on AArch64, whichever the kernel was built with,
// and one build runs on all of them (roost refuses to start, saying so, on
// any other).  It is used wherever the OS's page matters: a large object's
// bytes are rounded to whole pages (so its end, where the secure build's
// guard page goes and where an in-place shrink gives the tail back, is
// page-aligned for mprotect, munmap and madvise), the guard page itself,
// valloc and pvalloc.  Every size fixed here that the OS sees a range of
// (the granule, so every chunk, slab, region and huge object's start; the
// pagemap's growth step; the service's scratch table) is a multiple of the
// largest page.
inline constexpr unsigned kMinPageBits = 12;  // 4 KiB
inline constexpr unsigned kMaxPageBits = 16;  // 64 KiB
inline constexpr size_t kMinPageSize = size_t{1} << kMinPageBits;
inline constexpr size_t kMaxPageSize = size_t{1} << kMaxPageBits;
static_assert(kGranuleBits >= kMaxPageBits, "a granule holds whole pages of every size");
constexpr bool page_size_supported(size_t page) {
  return page >= kMinPageSize && page <= kMaxPageSize && (page & (page - 1)) == 0;
}
// What roost counts in pages it counts in the smallest page, whatever the
// OS's: a chunk's dirty extent (the leading bytes written since its last
// purge) and a slab's touched pages are byte extents rounded up to 4 KiB.
// A purge of such an extent starts at its chunk's base (granule-aligned)
// and the kernel rounds its end up to a whole page, inside the chunk.
// The kernel's transparent huge page where it is 2 MiB (x86-64, and
// AArch64 with 4 KiB pages; 32 MiB with 16 KiB pages and 512 MiB with
// 64 KiB pages, where ROOST_HUGEPAGES does nothing).
inline constexpr unsigned kHugePageBits = 21;
// ROOST_HUGEPAGES=dense (backend/huge_pages.h): the service thread collapses
// a 2 MiB block into a huge page once every granule of it is handed out
// (slabs, a large object) and at most kDenseMissingPages of its 4 KiB pages
// are not resident: so a collapse adds at most 64 KiB, 1/32, to the RSS of
// a block the program already uses (a slab's page not carved yet, a large
// object's last page), while the slack at the heap's growing edge does not
// keep a block from it...
inline constexpr size_t kDenseMissingPages = 16;
// ...found so on two looks in a row (2 << splits for a block that was
// collapsed and split again since, up to 15 looks), the looks at least
// kDenseLookNs apart (and a purge delay in force)...
inline constexpr uint64_t kDenseLookNs = 20'000'000;  // 20 ms
// ...at most kMaxCollapsesPerLook blocks a look (a collapse copies 2 MiB:
// about 3 ms on the project's machines, a core the program may want) and
// at most kDenseBlocksPerLook blocks examined (one mincore each)...
inline constexpr unsigned kMaxCollapsesPerLook = 2;
inline constexpr unsigned kDenseBlocksPerLook = 1024;
// ...and only once the program holds kDenseHeapFloor bytes of chunks: a
// heap below it fits in the reach of the second-level TLB's 4 KiB entries
// several times over (1.5-2k entries: 6-8 MiB), so huge pages would buy it
// little, while each one it took could add up to 64 KiB (above) and a
// collapse costs milliseconds.  A program that stays below it makes no
// system call for huge pages at all.  After kDenseIdleLooks looks in a row
// that find nothing to do and a heap that did not grow, the looks stop
// until the backend hands out memory again.
inline constexpr size_t kDenseHeapFloor = size_t{32} << 20;
// The filler (`dense`): a clean chunk smaller than a block comes from the
// block with the most granules out among the first kFillerLooks free
// chunks of its size (backend/chunk_allocator.cc: pop_fullest).
inline constexpr unsigned kFillerLooks = 8;
inline constexpr unsigned kDenseIdleLooks = 8;

// Bump-pointer carving: a slab's never-used tail is turned into free objects
// a small page at a time, so untouched pages stay untouched (linking an
// object writes its first word; where the OS's pages are bigger, the first
// carve into one brings all of it in)...
inline constexpr size_t kCarveBytes = kMinPageSize;
// ...but at least this many objects, so a class of bigger objects refills
// its fast list in batches worth the refill's cost, as long as a carve then
// touches at most kMaxCarveBytes (a 4 KiB object is carved eight at a time,
// a 32 KiB one alone).
inline constexpr size_t kMinCarveObjects = 32;
inline constexpr size_t kMaxCarveBytes = 32768;
// A class of objects up to 4 KiB (one-granule slabs) that starts a slab
// with none active (new to its allocator, or it let go of everything) on
// memory an earlier use left resident keeps resident only what it is likely
// to carve: its first kResidentCarves carves, or as far as it carved its
// last released slab if that is more; the rest goes back to the OS when it
// is at least kMinResidentExcess.  A 16-byte class carves a page at a time,
// and a chunk that a 1 KiB class had filled would otherwise stay resident
// under it for as long as the slab lives.  (A class that carved its active
// slab to the end is busy, and a class of bigger objects takes pages per
// object: their new slabs keep what is resident.)
inline constexpr size_t kResidentCarves = 2;
inline constexpr size_t kMinResidentExcess = size_t{32} << 10;

// Message passing.  The outbox sorts remote frees into 2^kBucketBits
// buckets by destination-allocator id bits (snmalloc's temporal radix tree);
// a test build sets ROOST_BUCKET_BITS small to force multi-hop forwarding.
#ifndef ROOST_BUCKET_BITS
#define ROOST_BUCKET_BITS 6
#endif
inline constexpr unsigned kBucketBits = ROOST_BUCKET_BITS;
static_assert(kBucketBits >= 1 && kBucketBits <= 8);
// BatchIt (ISMM'24): remote frees are collected per slab in a small
// set-associative cache (frontend/remote_cache.h) and go home as one batch
// per slab.  -DROOST_BATCHIT=0 removes it from the build; ROOST_BATCHIT=0 in
// the environment switches it off at run time.  Sets and ways can be set at
// build time (-DROOST_BATCHIT_SET_BITS=k for 2^k sets, -DROOST_BATCHIT_WAYS=w),
// and -DROOST_BATCHIT_LRU=1 evicts the least recently used way instead of
// the one holding the most objects.  32 sets x 2 ways, not the paper's 8 x 2,
// so that a consumer whose producers allocate over a few dozen size classes
// keeps its hot slabs (about two per class) cached without evicting them.
#ifndef ROOST_BATCHIT
#define ROOST_BATCHIT 1
#endif
#ifndef ROOST_BATCHIT_SET_BITS
#define ROOST_BATCHIT_SET_BITS 5
#endif
#ifndef ROOST_BATCHIT_WAYS
#define ROOST_BATCHIT_WAYS 2
#endif
#ifndef ROOST_BATCHIT_LRU
#define ROOST_BATCHIT_LRU 0
#endif
inline constexpr bool kBatchIt = ROOST_BATCHIT != 0;
inline constexpr unsigned kBatchItSetBits = ROOST_BATCHIT_SET_BITS;  // 32 sets
inline constexpr unsigned kBatchItWays = ROOST_BATCHIT_WAYS;         // x 2 ways
static_assert(kBatchItSetBits <= 8 && kBatchItWays >= 1 && kBatchItWays <= 16);
enum class Eviction { kMostObjects, kLeastRecentlyUsed };
inline constexpr Eviction kBatchItEviction =
    ROOST_BATCHIT_LRU ? Eviction::kLeastRecentlyUsed : Eviction::kMostObjects;

// Messages (batches) an allocator takes from its inbox per visit on the
// way of a malloc or free: a large inbox is taken in stages, so that no one
// call pays for thousands of messages (each a cache miss or two: the
// message and its slab's record), whatever the batches hold.
inline constexpr unsigned kInboxStage = 256;
// A size class that runs dry with no freed object at hand visits the inbox
// up to this many more times before it carves fresh memory.
inline constexpr unsigned kInboxVisitsBeforeFreshMemory = 4;
// Back-pressure (frontend/backpressure.h, ROOST_BACKPRESSURE): the adaptive
// budget of slab bytes a thread whose objects others free may hold before
// it waits for them, where it starts and how far it may grow; and how
// often a wait yields the core (it spins, and yields now and then, so that
// the threads it waits for can run).  How long one wait lasts at most is
// the option ROOST_BACKPRESSURE_WAIT_US.
inline constexpr uint64_t kBackpressureStartBytes = uint64_t{4} << 20;
inline constexpr uint64_t kBackpressureMaxBytes = uint64_t{1} << 40;
inline constexpr unsigned kBackpressureSpinsPerYield = 16;

// Checked build (-DROOST_CHECKED=1): the free fast path verifies that a
// pointer is exactly an object start (interior pointers are diagnosed);
// the default build checks 16-byte alignment there and the exact start on
// every slow path.
#ifndef ROOST_CHECKED
#define ROOST_CHECKED 0
#endif
inline constexpr bool kCheckedFree = ROOST_CHECKED != 0;  // assumed; checked at start-up

// Every build catches a double free of a small object that is still free.
// A freed small object carries its free mark (ds/free_mark.h): the word
// beside its link holds the address of its slab's record, wiped when the
// object is handed out again, and every free compares it first (a compare,
// a branch and a store on the free fast path, a store on malloc's).  The
// default build keeps it in the object's first word (kLinkWord below) and
// confirms a mark found on a slow path; the secure build keeps it in the
// second, reports it at once and checks it on every hand-out
// (kDetectDoubleFree).  -DROOST_FREE_MARK=0 removes the default build's
// mark (to measure what it costs).
#ifndef ROOST_FREE_MARK
#define ROOST_FREE_MARK 1
#endif
#ifdef ROOST_FREE_TAG
#error "ROOST_FREE_TAG is now ROOST_FREE_MARK"
#endif

// Valgrind's memcheck told of every block roost hands out and takes back
// (client requests: platform/memcheck.h), so that a program run under it
// gets memcheck's reports on its own code through roost_malloc & co., and
// through malloc & co. where valgrind leaves roost's in place (CMake's
// ROOST_VALGRIND=ON; docs/DEBUGGING.md).  Off (the default), none of it is
// compiled in.
#ifndef ROOST_VALGRIND
#define ROOST_VALGRIND 0
#endif
inline constexpr bool kValgrind = ROOST_VALGRIND != 0;
// AddressSanitizer told which memory the program must not touch (freed, or
// not handed out yet) and which it may (platform/asan.h), for a program
// built with -fsanitize=address that links roost as its malloc: a use
// after free in its code is reported at its line (CMake's ROOST_ASAN=ON;
// docs/DEBUGGING.md).  Off (the default), none of it is compiled in.
#ifndef ROOST_ASAN
#define ROOST_ASAN 0
#endif
inline constexpr bool kAsan = ROOST_ASAN != 0;

// Three levels (docs/SECURITY.md).  The default build keeps the checks
// that cost its fast paths next to nothing.  The secure build
// (libroost-secure, -DROOST_SECURE=1), the production level, turns on the
// hardening mechanisms below but the three that cost most: the random
// reuse order (SHUFFLE), the check of freed objects (FREED_CHECK) and the
// guard pages after large objects (MAX_LARGE_GUARDS; their canaries stay).  The
// hardened build (libroost-hardened, -DROOST_HARDENED=1, which implies
// ROOST_SECURE) turns on every one.  Each mechanism has a switch of its
// own, so that its cost can be measured alone (-DROOST_SECURE_<NAME>=0 or
// 1 overrides the build's default).
#ifndef ROOST_HARDENED
#define ROOST_HARDENED 0
#endif
#ifndef ROOST_SECURE
#define ROOST_SECURE ROOST_HARDENED
#endif
static_assert(ROOST_SECURE || !ROOST_HARDENED, "the hardened build is the secure build and more");
inline constexpr bool kSecure = ROOST_SECURE != 0;
// The secure build's free mark: in a freed small object's second word, it
// makes a free that finds it a double free at once, local or remote, before
// or after the object sat in a BatchIt cache or a message, and every free
// list's hand-out checks it.
#ifndef ROOST_SECURE_DOUBLE_FREE
#define ROOST_SECURE_DOUBLE_FREE ROOST_SECURE
#endif
inline constexpr bool kDetectDoubleFree = ROOST_SECURE_DOUBLE_FREE != 0;
// Does a freed small object carry its free mark?  (Then a message keeps its
// batch word elsewhere: ds/slab_batch.h.)
inline constexpr bool kMarkFreed = ROOST_FREE_MARK != 0 || kDetectDoubleFree;
// The default build's mark, which a free that finds it confirms first
// (checks::marked_twice) and nothing else checks.
inline constexpr bool kMarkUnchecked = kMarkFreed && !kDetectDoubleFree;
// Which of a free object's first two words links it (ds/freelist.h).  The
// default build's second: an overflow of up to 8 bytes into a free
// neighbour then lands on its mark, which nothing follows and the next
// hand-out wipes, so the program runs on (as under glibc) instead of
// following a broken link.  The secure build's first, its mark second
// (there such an overflow is caught: the link is checked).
inline constexpr unsigned kLinkWord = kMarkUnchecked ? 1 : 0;
// free_sized, free_aligned_sized and sized delete: the size given must be
// one the object could have been allocated with.
#ifndef ROOST_SECURE_SIZED_FREE
#define ROOST_SECURE_SIZED_FREE ROOST_SECURE
#endif
inline constexpr bool kCheckSizedFree = ROOST_SECURE_SIZED_FREE != 0;
// Every message an allocator receives is checked before it is spliced: it
// lies in a slab, at an object start, its batch within that slab and no
// bigger than the slab.
#ifndef ROOST_SECURE_MESSAGES
#define ROOST_SECURE_MESSAGES ROOST_SECURE
#endif
inline constexpr bool kCheckMessages = ROOST_SECURE_MESSAGES != 0;
// Objects carved from a slab are linked in random order, and a slab's free
// list is handed out with its most recently freed object moved back, so
// that neither the next address nor `free(p); malloc(n) == p` can be relied
// on.
#ifndef ROOST_SECURE_SHUFFLE
#define ROOST_SECURE_SHUFFLE ROOST_HARDENED
#endif
inline constexpr bool kShuffle = ROOST_SECURE_SHUFFLE != 0;
// Free-list links, and the inbox queue's links between messages, are
// encoded with a per-process key and the holder's address (ds/freelist.h,
// ds/mpsc_queue.h); an object handed out from a free list must still
// carry its free mark, and its link must decode to an object of its slab
// that carries one too: a corrupted link or an overwritten freed object is
// caught before the link is followed.  Needs the marks (DOUBLE_FREE).
#ifndef ROOST_SECURE_LINKS
#define ROOST_SECURE_LINKS ROOST_SECURE
#endif
inline constexpr bool kEncodeLinks = ROOST_SECURE_LINKS != 0;

// The malloc fast path's per-class allocation counts in 32 bits, folded
// into 64 by refills (ds/counter.h EventCounts): on x86-64 the count is
// then addressed from the class index at a scale of 4, apart from the fast
// list head's 8, and the fast path forms no address of the head first (one
// instruction fewer).  The secure build's fast path uses the head's
// address four times (the class's slab size sits beside it) and keeps
// 64-bit counts, which share it.
inline constexpr bool kNarrowAllocCounts = !kEncodeLinks;
static_assert(!kEncodeLinks || kDetectDoubleFree, "checked links need the free marks");
// A freed small object's bytes past its link and mark (its first 16) are
// zeroed at its free, and so are the stale bytes of a carve from pages an
// earlier use of its chunk left resident; its first 16 are zeroed when it
// is handed out (ds/freed_zero.h): nothing a program stored in an object
// outlives its free, and an allocation that reuses one reads zero
// throughout.  Needs the marks (DOUBLE_FREE).
#ifndef ROOST_SECURE_ZERO_ON_FREE
#define ROOST_SECURE_ZERO_ON_FREE ROOST_HARDENED
#endif
inline constexpr bool kZeroOnFree = ROOST_SECURE_ZERO_ON_FREE != 0;
static_assert(!kZeroOnFree || kDetectDoubleFree,
              "a freed object is zeroed where the mark is set (DOUBLE_FREE)");
// Every hand-out of a small object from a free list (the malloc fast
// path's, a slab's, an offload ring's; a quarantined object's link word as
// it leaves) checks that those bytes still read zero: a write after free
// (or an overflow into a free neighbour, or an underflow into one)
// anywhere in the object is caught at reuse.  A loop over the whole
// object, 16 bytes a step.  Needs ZERO_ON_FREE.
#ifndef ROOST_SECURE_FREED_CHECK
#define ROOST_SECURE_FREED_CHECK ROOST_HARDENED
#endif
inline constexpr bool kCheckFreed = ROOST_SECURE_FREED_CHECK != 0;
static_assert(!kCheckFreed || kZeroOnFree, "the check is of the zero on free (ZERO_ON_FREE)");

// Small objects carry a canary after the size asked for
// (ds/slack_canary.h): each takes the class of its size plus a canary
// word, whose last word encodes the size asked for; the slack between
// holds a canary byte (its first 8 bytes: where a write that runs on past
// the object's end lands first).  Free, realloc,
// malloc_usable_size and sized frees check it: an overflow past the end
// of a live object (into its slack, or on into its neighbour) is caught
// at its free, an underflow into the object before at that one's.
// malloc_usable_size() says the size asked for.  Needs the marks
// (DOUBLE_FREE: a canary word is never a mark).
#ifndef ROOST_SECURE_SLACK_CANARY
#define ROOST_SECURE_SLACK_CANARY ROOST_HARDENED
#endif
inline constexpr bool kSlackCanaries = ROOST_SECURE_SLACK_CANARY != 0;
static_assert(!kSlackCanaries || kDetectDoubleFree, "a canary word is told from a free mark");
// What the canary adds to a size asked for (0 where there are none).
inline constexpr size_t kSlackCanaryBytes = kSlackCanaries ? 8 : 0;
// Where there are canaries and freed and carved objects read zero, the
// free (realloc, malloc_usable_size) of a small object that is not its
// slab's first checks the byte before it, the top byte of the slot
// before's last word, which roost keeps 0 or the canary key's top byte in
// every state of that slot (ds/slack_canary.h): a write of one byte (or
// more) before the object's start is caught at its own free, whatever
// state its neighbour is in.
inline constexpr bool kCheckByteBefore = kSlackCanaries && kZeroOnFree;

// A freed small object of up to kQuarantineMaxBytes waits in its freeing
// thread's quarantine (frontend/quarantine.h) before it can be handed out
// again: kQuarantineSlots objects, each free putting one in and sending a
// random one of them on (its slot's), so that how long an object waits,
// and which comes back next, cannot be relied on.  malloc_trim() and the
// thread's exit empty it.  At most kQuarantineSlots * kQuarantineMaxBytes
// (2 MiB) held per thread.
#ifndef ROOST_SECURE_QUARANTINE
#define ROOST_SECURE_QUARANTINE ROOST_HARDENED
#endif
inline constexpr bool kQuarantine = ROOST_SECURE_QUARANTINE != 0;
static_assert(!kQuarantine || kDetectDoubleFree, "a quarantined object is marked freed");
inline constexpr unsigned kQuarantineSlots = 128;
inline constexpr size_t kQuarantineMaxBytes = 16 * 1024;
static_assert((kQuarantineSlots & (kQuarantineSlots - 1)) == 0);

// Foreign reuse (issue 57; frontend/foreign_reuse.h): at a post, the
// BatchIt cache's batches of a class the thread has demand for go in front
// of that class's fast list instead of into a message, while most of the
// thread's frees of the class are remote.  The objects stay their owner's
// (its slab counts them out); those not handed out by the next post go
// home then, and every path that lets fast lists go sends what is left of
// them home by message.  Only where a kept object needs no check of its
// own and BatchIt is built: not with checked links, double-free detection
// or the quarantine (the secure and hardened builds).  Run-time option
// ROOST_FOREIGN_REUSE.
#ifndef ROOST_FOREIGN_REUSE
#define ROOST_FOREIGN_REUSE 1
#endif
inline constexpr bool kForeignReuse =
    ROOST_FOREIGN_REUSE != 0 && kBatchIt && !kEncodeLinks && !kDetectDoubleFree && !kQuarantine;

// malloc(0) and the other zero-size allocations (alignments up to
// kZeroSizeMaxAlign) return addresses in one inaccessible range
// (backend/zero_size.h): a read or write through one faults at once.  No
// two live ones share an address (kZeroSizeRangeBytes / 16 of them at
// most), a second free of one is a double free, and malloc_usable_size()
// says 0.
#ifndef ROOST_SECURE_ZERO_SIZE
#define ROOST_SECURE_ZERO_SIZE ROOST_SECURE
#endif
inline constexpr bool kZeroSizeFaults = ROOST_SECURE_ZERO_SIZE != 0;
inline constexpr size_t kZeroSizeRangeBytes = size_t{64} << 20;
inline constexpr size_t kZeroSizeMaxAlign = 4096;

// The bytes between a large or huge object's size asked for and its page
// boundary hold a canary that free and realloc check (backend/large_guard.h):
// malloc_usable_size() says the size asked for.  In the hardened build the
// object also ends at an inaccessible guard page (a store past the page its
// last byte is in faults): two mprotect calls per large object; no page of
// memory.
#ifndef ROOST_SECURE_LARGE_GUARD
#define ROOST_SECURE_LARGE_GUARD ROOST_SECURE
#endif
inline constexpr bool kGuardLarge = ROOST_SECURE_LARGE_GUARD != 0;
// Each guard page splits a mapping in three, and the kernel caps a
// process's mappings (vm.max_map_count, 65 530 by default): beyond this
// many guarded objects at once, large objects get their canary only (0:
// canaries only, no mprotect: the secure build's default, since two
// mprotect calls per large object are dear to a program that churns them:
// docs/DESIGN.md).
#ifndef ROOST_SECURE_MAX_LARGE_GUARDS
#if ROOST_HARDENED
#define ROOST_SECURE_MAX_LARGE_GUARDS 16384
#else
#define ROOST_SECURE_MAX_LARGE_GUARDS 0
#endif
#endif
inline constexpr size_t kMaxLargeGuards = ROOST_SECURE_MAX_LARGE_GUARDS;

// The hardened build's guard pages between slabs: a slab's last small page
// (4 KiB) holds no object (its capacity leaves it out) and is made
// inaccessible when the slab starts, so no accessible run of slab memory
// is longer than a slab (1 MiB at most: kMaxSmallBits), and a linear
// overflow of a megabyte from any small object faults.  The guard stays
// with the chunk while it waits empty in its allocator's ChunkCache and in
// the backend's released lists (backend/chunk_allocator.h: a bit per
// granule beside its record), purged or not, so a chunk that serves a slab
// of its size again costs no system call; it is lifted only where it would
// end up inside memory that must be accessible (a buddy merge, a large
// object).  Only where the OS's page is the small page (x86-64; AArch64
// with 4 KiB pages): a bigger page would take objects with it.
#ifndef ROOST_SECURE_SLAB_GUARDS
#define ROOST_SECURE_SLAB_GUARDS ROOST_HARDENED
#endif
inline constexpr bool kGuardSlabs = ROOST_SECURE_SLAB_GUARDS != 0;
// The bytes at a slab's end that hold no object (its guard page's place).
inline constexpr size_t kSlabGuardBytes = kGuardSlabs ? kMinPageSize : 0;
// Each guard page splits a mapping in three, and the kernel caps a
// process's mappings (vm.max_map_count, 65 530 by default), past which
// mprotect, and the program's own mmap, fail.  Slab guards in place at
// once (in slabs, ChunkCaches and the backend's lists together) are
// capped here: with the large objects' kMaxLargeGuards (16 384) that is
// at most 2 * (16 384 + 8 192) = 49 152 extra mappings, and a quarter of
// the kernel's default limit stays for the program.  8 192 guards cover
// 512 MiB of 64 KiB slabs (a heap of some 500 000 live 1 KiB objects);
// beyond the cap a new slab gets no guard (its last page simply unused),
// and the statistics count it (slab_guards_refused).
#ifndef ROOST_SECURE_MAX_SLAB_GUARDS
#define ROOST_SECURE_MAX_SLAB_GUARDS 8192
#endif
inline constexpr size_t kMaxSlabGuards = kGuardSlabs ? ROOST_SECURE_MAX_SLAB_GUARDS : 0;

// The hardened build's quarantine of freed large objects (backend/large.cc):
// a freed large object (inside a region; a huge one is unmapped anyway) is
// made inaccessible and waits, oldest out first, while more than
// kLargeQuarantineObjects objects or kLargeQuarantineBytes bytes wait
// behind it, before its chunk goes back to the backend: a write into it
// faults (named a write after free), and a request of its size does not
// get its address back at once.  Its pages stay resident while it waits
// (16 MiB at most).  One mprotect call more per large object: it is made
// inaccessible at its free, and made accessible again with its guard page
// in one call as it leaves (where the guard alone was lifted at the free).
// malloc_trim() empties it.
#ifndef ROOST_SECURE_LARGE_QUARANTINE
#define ROOST_SECURE_LARGE_QUARANTINE ROOST_HARDENED
#endif
inline constexpr bool kQuarantineLarge = ROOST_SECURE_LARGE_QUARANTINE != 0;
inline constexpr unsigned kLargeQuarantineObjects = 64;
inline constexpr size_t kLargeQuarantineBytes = size_t{16} << 20;

// A sleeping slab (its free objects handed to the allocator's fast list)
// wakes after 1/2^kWakeShift of its capacity has been freed into it.
inline constexpr unsigned kWakeShift = 3;

// Full offload (ROOST_OFFLOAD=1, frontend/offload.h): per thread, one ring
// per size class of objects the service thread allocated ahead, holding
// up to kOffloadRingSlots objects and about kOffloadRingBytes (classes
// whose object is bigger than that are not offloaded), and one ring of
// kOffloadFreeSlots frees for the service to carry out.  Powers of two.
inline constexpr unsigned kOffloadRingSlots = 64;
inline constexpr size_t kOffloadRingBytes = 64 * 1024;
inline constexpr unsigned kOffloadFreeSlots = 256;
static_assert((kOffloadRingSlots & (kOffloadRingSlots - 1)) == 0);
static_assert((kOffloadFreeSlots & (kOffloadFreeSlots - 1)) == 0);
// Passes over the rings that find nothing to do before the service sleeps
// (it yields between them): while the program allocates it stays awake.
inline constexpr unsigned kOffloadIdlePasses = 128;

// Once the main thread has returned, the service thread looks this often
// whether it is the process's last thread (and then ends the process).
inline constexpr uint64_t kAloneCheckNs = 100'000'000;  // 100 ms

}  // namespace roost::config
