// platform/os.cc — Linux implementation of platform/os.h.
#include "platform/os.h"

#include <atomic>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "platform/error.h"
#include "platform/text_section.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

namespace roost::os {

namespace {

#if defined(ROOST_FAULT_INJECTION) && ROOST_FAULT_INJECTION
struct FaultPlan {
  std::atomic<long> calls{0};
  std::atomic<long> first{0};
  std::atomic<long> count{0};
  std::atomic<long> injected{0};
};
FaultPlan g_faults[6];
// A page size page_size() reports instead of the kernel's (0: none).
std::atomic<size_t> g_page_size_override{0};

// True when this call of `kind` is one the test asked to fail.
bool injected(FaultKind kind) {
  FaultPlan& f = g_faults[static_cast<int>(kind)];
  long n = f.calls.fetch_add(1, std::memory_order_relaxed);
  long first = f.first.load(std::memory_order_relaxed);
  long count = f.count.load(std::memory_order_relaxed);
  if (count == 0 || n < first || (count > 0 && n - first >= count)) return false;
  f.injected.fetch_add(1, std::memory_order_relaxed);
  return true;
}
#else
constexpr bool injected(FaultKind) { return false; }
#endif

constexpr int kProt = PROT_READ | PROT_WRITE;
constexpr int kFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;

// The calls AddressSanitizer intercepts that roost makes while it serves an
// allocation: while ASan starts up its interceptors are not ready, and
// ld.so allocates then, so a ROOST_ASAN build makes the system calls
// itself (config.h: kAsan).  In any other build, the C library's.
void* sys_mmap(void* addr, size_t size, int prot, int flags) {
  if constexpr (config::kAsan)
    return reinterpret_cast<void*>(syscall(SYS_mmap, addr, size, prot, flags, -1, 0));
  return mmap(addr, size, prot, flags, -1, 0);
}
int sys_mprotect(void* p, size_t size, int prot) {
  if constexpr (config::kAsan) return static_cast<int>(syscall(SYS_mprotect, p, size, prot));
  return mprotect(p, size, prot);
}
int sys_mincore(void* p, size_t size, unsigned char* vec) {
  if constexpr (config::kAsan) return static_cast<int>(syscall(SYS_mincore, p, size, vec));
  return mincore(p, size, vec);
}
ssize_t sys_read(int fd, void* buf, size_t size) {
  if constexpr (config::kAsan) return syscall(SYS_read, fd, buf, size);
  return ::read(fd, buf, size);
}
void sys_clock_gettime(clockid_t clock, timespec* ts) {
  if constexpr (config::kAsan) {
    syscall(SYS_clock_gettime, clock, ts);
    return;
  }
  clock_gettime(clock, ts);
}

void* map(void* hint, size_t size, int extra_flags) {
  if (injected(FaultKind::kMap)) {
    errno = ENOMEM;
    return MAP_FAILED;
  }
  return sys_mmap(hint, size, kProt, kFlags | extra_flags);
}

// Linux refuses (EINVAL) munmap, mprotect and madvise of a range that does
// not start on a page, and MAP_FIXED_NOREPLACE at such an address, and
// rounds a range's length up to whole pages.  roost does both before the
// call too, so that under an emulator that reports a bigger page than it
// enforces a range is treated as a kernel with that page treats it
// (qemu-user's -p 65536 reports 64 KiB pages, takes 4 KiB-aligned ranges,
// and ignores an MADV_DONTNEED whose end is not on its page while
// reporting success), and the emulated tests see what such a kernel does.
bool page_aligned(uintptr_t a) { return (a & (page_size() - 1)) == 0; }
bool page_aligned(const void* p) { return page_aligned(reinterpret_cast<uintptr_t>(p)); }
size_t whole_pages(size_t size) { return (size + page_size() - 1) & ~(page_size() - 1); }

}  // namespace

ROOST_COMMON_TEXT void* reserve_aligned(size_t size, size_t align) {
  if (align <= page_size()) {
    void* p = map(nullptr, size, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  // Over-reserve, then trim both ends to the alignment.
  size_t span = size + align;
  if (span < size) return nullptr;
  void* raw = map(nullptr, span, 0);
  if (raw == MAP_FAILED) return nullptr;
  uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  uintptr_t aligned = (start + align - 1) & ~(uintptr_t{align} - 1);
  if (aligned > start) munmap(raw, aligned - start);
  uintptr_t end = start + span;
  if (end > aligned + size) munmap(reinterpret_cast<void*>(aligned + size), end - (aligned + size));
  return reinterpret_cast<void*>(aligned);
}

ROOST_COMMON_TEXT Placement reserve_at(uintptr_t addr, size_t size) {
  if (!page_aligned(addr)) return Placement::kRefused;
  void* want = reinterpret_cast<void*>(addr);
  int saved = errno;
  void* p = map(want, size, MAP_FIXED_NOREPLACE);
  int error = errno;
  errno = saved;
  if (p == want) return Placement::kPlaced;
  if (p != MAP_FAILED) {
    // A kernel older than MAP_FIXED_NOREPLACE takes the address as a hint.
    munmap(p, size);
    return Placement::kOccupied;
  }
  return error == EEXIST ? Placement::kOccupied : Placement::kRefused;
}

bool release(void* p, size_t size) {
  if (injected(FaultKind::kUnmap) || !page_aligned(p)) return false;
  return munmap(p, whole_pages(size)) == 0;
}

namespace {
std::atomic<size_t> g_protect_calls{0};  // relaxed: a count for statistics
}  // namespace

size_t protect_calls() { return g_protect_calls.load(std::memory_order_relaxed); }

bool make_inaccessible(void* p, size_t size) {
  if (injected(FaultKind::kProtect) || !page_aligned(p)) return false;
  g_protect_calls.fetch_add(1, std::memory_order_relaxed);
  return sys_mprotect(p, whole_pages(size), PROT_NONE) == 0;
}

bool make_accessible(void* p, size_t size) {
  if (injected(FaultKind::kProtect) || !page_aligned(p)) return false;
  g_protect_calls.fetch_add(1, std::memory_order_relaxed);
  return sys_mprotect(p, whole_pages(size), kProt) == 0;
}

ROOST_COMMON_TEXT bool purge(void* p, size_t size, bool zero) {
  if (injected(FaultKind::kPurge) || !page_aligned(p)) return false;
  return madvise(p, whole_pages(size), zero ? MADV_DONTNEED : MADV_FREE) == 0;
}

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif

namespace {
// Whether moves work: -1 not tried yet, 1 yes, 0 no (the kernel does not
// know MREMAP_DONTUNMAP, or the first try found them wrong).
std::atomic<int> g_moves_work{-1};

// Is every page of [p, p+size) mapped?  (msync says ENOMEM where one is not.)
bool mapped(void* p, size_t size) { return msync(p, size, MS_ASYNC) == 0 || errno != ENOMEM; }

// Whether pages move as move_pages() says: a scratch page moved onto the
// next one must leave its own range mapped (mincore answers for it) and
// reading as zero.  qemu-user moves the pages but takes the range they
// left for unmapped in its own map of the program's memory, and would hand
// it out again: no moves there.
bool moves_work() {
  const size_t page = page_size();
  void* scratch = sys_mmap(nullptr, 2 * page, kProt, kFlags);
  if (scratch == MAP_FAILED) return false;
  auto* first = static_cast<volatile char*>(scratch);
  volatile char* second = first + page;
  first[0] = 1;
  unsigned char in = 0;
  bool ok = mremap(scratch, page, page, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP,
                   const_cast<char*>(second)) == second &&
            sys_mincore(scratch, page, &in) == 0 && second[0] == 1 && first[0] == 0;
  munmap(scratch, 2 * page);
  return ok;
}
}  // namespace

bool resident(const void* p) {
  unsigned char in = 0;
  int saved = errno;
  bool ok = page_aligned(p) && sys_mincore(const_cast<void*>(p), 1, &in) == 0;
  errno = saved;
  return ok && (in & 1) != 0;
}

bool can_move_pages() {
  // relaxed: a fact about the kernel, the same whoever finds it first.
  int works = g_moves_work.load(std::memory_order_relaxed);
  if (works < 0) {
    int saved = errno;
    works = moves_work() ? 1 : 0;
    errno = saved;
    g_moves_work.store(works, std::memory_order_relaxed);
  }
  return works != 0;
}

Moved move_pages(void* from, void* to, size_t size) {
  if (!page_aligned(from) || !page_aligned(to) || !can_move_pages()) return Moved::kRefused;
  size = whole_pages(size);
  int saved = errno;
  void* p;
  if (injected(FaultKind::kMove)) {
    munmap(to, size);
    errno = ENOMEM;
    p = MAP_FAILED;
  } else {
    p = mremap(from, size, size, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, to);
  }
  if (p == to) {
    errno = saved;
    return Moved::kMoved;
  }
  // relaxed: as above.
  if (p == MAP_FAILED && errno == EINVAL) g_moves_work.store(0, std::memory_order_relaxed);
  // A kernel may unmap the destination before it fails: take the range
  // back, never over a mapping someone made there meanwhile.
  Moved result = Moved::kRefused;
  if (!mapped(to, size)) {
    void* q = map(to, size, MAP_FIXED_NOREPLACE);
    if (q != to) {
      if (q != MAP_FAILED) munmap(q, size);
      result = Moved::kLost;
    }
  }
  errno = saved;
  return result;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace {
// Cleared when the kernel says it does not know MADV_POPULATE_WRITE.
std::atomic<bool> g_populate_known{true};
}  // namespace

bool populate_write(void* p, size_t size) {
  if (injected(FaultKind::kPopulate) || !page_aligned(p)) return false;
  // relaxed: a hint that saves a failing system call, set once.
  if (!g_populate_known.load(std::memory_order_relaxed)) return false;
  int saved = errno;
  if (madvise(p, whole_pages(size), MADV_POPULATE_WRITE) == 0) return true;
  // relaxed: as above.
  if (errno == EINVAL) g_populate_known.store(false, std::memory_order_relaxed);
  errno = saved;
  return false;
}

namespace {

// The first size - 1 bytes (at most) of the file at `path` into `buf`, with
// a terminating NUL; the bytes read, 0 when it cannot be read.
size_t read_start(const char* path, char* buf, size_t size) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = sys_read(fd, buf, size - 1);
  ::close(fd);
  size_t got = n > 0 ? static_cast<size_t>(n) : 0;
  buf[got] = '\0';
  return got;
}

// The unsigned decimal number at `s` (0 if none); `s` moves past it.
uint64_t read_decimal(const char*& s) {
  uint64_t v = 0;
  for (; *s >= '0' && *s <= '9'; s++) v = v * 10 + static_cast<uint64_t>(*s - '0');
  return v;
}

// Field `field` (from 0) of /proc/self/statm, "size resident shared text
// lib data dt", in pages; 0 where it cannot be read.
uint64_t statm_pages(int field) {
  char buf[128];
  if (read_start("/proc/self/statm", buf, sizeof(buf)) == 0) return 0;
  const char* s = buf;
  for (int i = 0; i < field; i++) {
    read_decimal(s);
    if (*s != ' ') return 0;
    s++;
  }
  return read_decimal(s);
}

}  // namespace

bool huge_pages_on_advice() {
  // "always [madvise] never": the mode in force is the one in brackets.
  char buf[128];
  if (read_start("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof(buf)) == 0 ||
      strstr(buf, "[madvise]") == nullptr)
    return false;
  // The huge page's size in bytes: 2 MiB with 4 KiB pages; an AArch64
  // kernel with 16 or 64 KiB pages has 32 or 512 MiB ones.  Where an older
  // kernel does not say, its page size tells.
  if (read_start("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", buf, sizeof(buf)) == 0)
    return page_size() == 4096;
  const char* s = buf;
  return read_decimal(s) == uint64_t{2} << 20;
}

namespace {

// The fields of /proc/self/smaps that mapped_bytes() reads: a mapping's
// first line ("start-end perms offset dev inode path", the addresses in
// lowercase hex) starts its record, and its fields follow, one a line
// ("Name:   N kB", names capitalised).
struct SmapsSum {
  const AddressRange* ranges;
  size_t count;
  bool inside = false;  // does the current mapping overlap a range?
  MappedBytes sum = {0, 0};

  static bool hex_digit(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

  static uint64_t read_hex(const char*& s, const char* end) {
    uint64_t v = 0;
    for (; s < end && hex_digit(*s); s++)
      v = v * 16 + static_cast<uint64_t>(*s <= '9' ? *s - '0' : *s - 'a' + 10);
    return v;
  }

  // "Name:" at `s` followed by spaces, a number and " kB": the number in
  // bytes; false when the line is another field.
  static bool field_kib(const char* s, const char* end, const char* name, uint64_t* bytes) {
    for (; *name != '\0'; name++, s++)
      if (s >= end || *s != *name) return false;
    while (s < end && *s == ' ') s++;
    uint64_t v = 0;
    for (; s < end && *s >= '0' && *s <= '9'; s++) v = v * 10 + static_cast<uint64_t>(*s - '0');
    *bytes = v * 1024;
    return true;
  }

  // One line, or the start of one too long for the buffer (its start is
  // all that is read).
  void line(const char* s, const char* end) {
    if (s < end && hex_digit(*s)) {
      const char* p = s;
      uintptr_t begin = read_hex(p, end);
      if (p < end && *p == '-') {
        p++;
        uintptr_t stop = read_hex(p, end);
        inside = false;
        for (size_t i = 0; i < count && !inside; i++)
          inside = begin < ranges[i].end && ranges[i].begin < stop;
        return;
      }
    }
    if (!inside) return;
    uint64_t bytes;
    if (field_kib(s, end, "Rss:", &bytes)) {
      sum.resident += bytes;
    } else if (field_kib(s, end, "AnonHugePages:", &bytes)) {
      sum.huge += bytes;
    }
  }
};

}  // namespace

bool mapped_bytes(const AddressRange* ranges, size_t count, MappedBytes* out) {
  *out = {0, 0};
  int fd = ::open("/proc/self/smaps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  SmapsSum sum{ranges, count};
  char buf[4096];
  size_t have = 0;        // bytes in buf, the start of a line first
  bool skipping = false;  // dropping the rest of a line too long for buf
  bool ok = true;
  for (;;) {
    ssize_t n = sys_read(fd, buf + have, sizeof(buf) - have);
    if (n < 0) {
      ok = false;
      break;
    }
    if (n == 0) {
      if (have != 0 && !skipping) sum.line(buf, buf + have);
      break;
    }
    have += static_cast<size_t>(n);
    const char* s = buf;
    const char* end = buf + have;
    for (;;) {
      const char* nl = static_cast<const char*>(memchr(s, '\n', static_cast<size_t>(end - s)));
      if (nl == nullptr) break;
      if (!skipping) sum.line(s, nl);
      skipping = false;
      s = nl + 1;
    }
    have = static_cast<size_t>(end - s);
    if (have == sizeof(buf)) {  // one line fills the buffer: read its start
      if (!skipping) sum.line(buf, buf + have);
      skipping = true;
      have = 0;
    } else if (have != 0 && s != buf) {
      memmove(buf, s, have);
    }
  }
  ::close(fd);
  *out = sum.sum;
  return ok;
}

bool advise_huge_pages(void* p, size_t size, bool on) {
  return madvise(p, size, on ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) == 0;
}

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

Collapse collapse_huge_page(void* p, size_t size) {
  int saved = errno;
  Collapse c = Collapse::kDone;
  if (madvise(p, size, MADV_COLLAPSE) != 0)
    c = errno == EAGAIN || errno == ENOMEM ? Collapse::kRefused : Collapse::kUnsupported;
  errno = saved;
  return c;
}

size_t resident_pages(const void* p, size_t size) {
  unsigned char vec[(size_t{2} << 20) / config::kMinPageSize];
  const size_t page = page_size();
  size_t pages = size / page;
  if (pages > sizeof(vec) || !page_aligned(p)) return 0;
  int saved = errno;
  bool ok = sys_mincore(const_cast<void*>(p), size, vec) == 0;
  errno = saved;
  if (!ok) return 0;
  size_t n = 0;
  for (size_t i = 0; i < pages; i++) n += vec[i] & 1u;
  return n;
}

ROOST_COMMON_TEXT size_t address_space_limit() {
  rlimit r;
  if (getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return SIZE_MAX;
  return static_cast<size_t>(r.rlim_cur);
}

size_t address_space_used() { return statm_pages(0) * page_size(); }

ROOST_COMMON_TEXT uint64_t entropy() {
  uint64_t v = 0;
  if constexpr (config::kAsan) {
    // (ASan's getrandom is not ready while it starts up, when ld.so
    // allocates: the system call itself.)
    if (syscall(SYS_getrandom, &v, sizeof(v), GRND_NONBLOCK) == static_cast<long>(sizeof(v)))
      return v;
  } else if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == static_cast<ssize_t>(sizeof(v))) {
    return v;
  }
  if (const auto* bytes = reinterpret_cast<const unsigned char*>(getauxval(AT_RANDOM)))
    for (int i = 0; i < 8; i++) v = v << 8 | bytes[i];
  return v ^ now_ns();
}

ROOST_COMMON_TEXT size_t page_size() {
#if defined(ROOST_FAULT_INJECTION) && ROOST_FAULT_INJECTION
  if (size_t page = g_page_size_override.load(std::memory_order_relaxed)) return page;
#endif
  // Read once (any thread may be first: the same value either way).  The
  // kernel passes its page size to every process (AT_PAGESZ), which is
  // what sysconf(_SC_PAGESIZE) returns.
  static std::atomic<size_t> cached{0};
  size_t page = cached.load(std::memory_order_relaxed);
  if (page == 0) {
    page = static_cast<size_t>(getauxval(AT_PAGESZ));
    if (page == 0) page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    cached.store(page, std::memory_order_relaxed);
  }
  return page;
}

namespace {
pthread_key_t exit_key;
std::atomic<bool> exit_key_live{false};

// Runs when the object holding roost is unloaded or the process exits.  A
// plugin that embeds roost (libroost-prefixed.a) and is closed with
// dlclose() takes the hook's code with it: the key goes too, so that the
// threads that used the plugin and exit later call nothing.  Threads that
// exit after this keep their allocators out of the pool.
ROOST_COMMON_TEXT __attribute__((destructor)) void remove_thread_exit_hook() {
  if (exit_key_live.exchange(false, std::memory_order_acq_rel)) pthread_key_delete(exit_key);
}
}  // namespace

ROOST_COMMON_TEXT bool install_thread_exit_hook(void (*fn)(void*)) {
  if (pthread_key_create(&exit_key, fn) != 0) return false;
  exit_key_live.store(true, std::memory_order_release);
  return true;
}

ROOST_COMMON_TEXT void arm_thread_exit_hook(void* arg) {
  if (exit_key_live.load(std::memory_order_acquire)) pthread_setspecific(exit_key, arg);
}

#if defined(__GLIBC__)
// glibc's pthread_atfork is a stub in libc_nonshared.a, linked into each
// caller at the far end of its text, that passes the caller's handle on to
// this; roost calls it directly so that its start-up runs no code there.
extern "C" int __register_atfork(void (*prepare)(), void (*parent)(), void (*child)(), void* dso);
extern "C" void* __dso_handle __attribute__((weak, visibility("hidden")));
#endif

ROOST_COMMON_TEXT void install_fork_hooks(void (*prepare)(), void (*parent)(), void (*child)()) {
#if defined(__GLIBC__)
  __register_atfork(prepare, parent, child, &__dso_handle == nullptr ? nullptr : __dso_handle);
#else
  pthread_atfork(prepare, parent, child);
#endif
}

int open_for_writing(const char* path, bool append) {
  for (;;) {
    int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | (append ? O_APPEND : 0), 0644);
    if (fd >= 0) return fd;
    if (errno != EINTR) return -errno;
  }
}

int open_named_for_writing(const char* pattern, char* name, size_t size, bool append) {
  err::Text expanded(name, size);
  for (const char* p = pattern; *p != 0; p++) {
    if (p[0] == '%' && p[1] == 'p') {
      expanded.dec(static_cast<uint64_t>(process_id()));
      p++;
    } else if (p[0] == '%' && p[1] == '%') {
      expanded.chr('%');
      p++;
    } else {
      expanded.chr(*p);
    }
  }
  return expanded.length() < size ? open_for_writing(name, append) : -ENAMETOOLONG;
}

bool copy_file_to(const char* path, int fd) {
  int from = ::open(path, O_RDONLY | O_CLOEXEC);
  if (from < 0) return false;
  char buf[4096];
  bool ok = true;
  for (;;) {
    ssize_t n = sys_read(from, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = n == 0;
      break;
    }
    if (!err::write_all(fd, buf, static_cast<size_t>(n))) {
      ok = false;
      break;
    }
  }
  ::close(from);
  return ok;
}

void close(int fd) { ::close(fd); }

int rename_file(const char* from, const char* to) {
  int saved = errno;
  // The system call itself: rename() is declared by stdio.h.
  int rc = syscall(SYS_renameat, AT_FDCWD, from, AT_FDCWD, to) == 0 ? 0 : -errno;
  errno = saved;
  return rc;
}

void remove_file(const char* path) {
  int saved = errno;
  ::unlink(path);
  errno = saved;
}

int process_id() { return static_cast<int>(::getpid()); }

const char* program_name() {
  return program_invocation_short_name != nullptr ? program_invocation_short_name : "?";
}

uint64_t wall_clock_seconds() {
  timespec ts;
  sys_clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec > 0 ? static_cast<uint64_t>(ts.tv_sec) : 0;
}

uint64_t wall_clock_ms() {
  timespec ts;
  sys_clock_gettime(CLOCK_REALTIME, &ts);
  if (ts.tv_sec < 0) return 0;
  return static_cast<uint64_t>(ts.tv_sec) * 1000u + static_cast<uint64_t>(ts.tv_nsec) / 1000000u;
}

uint64_t resident_bytes() {
  // The kernel's pages, whatever page_size() says.
  return statm_pages(1) * getauxval(AT_PAGESZ);
}

uint64_t process_age_ns() {
  // The fields after the command's closing parenthesis (the command may hold
  // spaces and parentheses): state is field 3, starttime (clock ticks since
  // boot) field 22.
  char buf[1024];
  if (read_start("/proc/self/stat", buf, sizeof(buf)) == 0) return 0;
  const char* s = strrchr(buf, ')');
  if (s == nullptr) return 0;
  for (int field = 2; field < 22 && *s != 0; s++)
    if (*s == ' ') field++;
  uint64_t ticks = read_decimal(s);
  uint64_t hz = getauxval(AT_CLKTCK);
  if (hz == 0) return 0;
  timespec ts;
  sys_clock_gettime(CLOCK_BOOTTIME, &ts);
  uint64_t boot_ns =
      static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
  uint64_t start_ns = ticks / hz * 1000000000u + ticks % hz * 1000000000u / hz;
  return boot_ns > start_ns ? boot_ns - start_ns : 0;
}

ROOST_COMMON_TEXT uint64_t now_ns() {
  timespec ts;
  sys_clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace roost::os

#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

namespace roost::os {
ROOST_COMMON_TEXT void yield() { sched_yield(); }

// The system call, not glibc's getcwd(), which falls back to reading
// directories (and allocating) where the kernel's answer does not fit.
bool absolute_path(const char* name, char* out, size_t size) {
  size_t used = 0;
  if (name[0] != '/') {
    long n = syscall(SYS_getcwd, out, size);
    // Anything but a path from the root ("(unreachable)/..."): no answer.
    if (n <= 0 || out[0] != '/') return false;
    used = strlen(out);
    if (used > 1) {  // not the root itself
      if (used + 1 >= size) return false;
      out[used++] = '/';
    }
    while (name[0] == '.' && name[1] == '/') {
      name += 2;
      while (name[0] == '/') name++;
    }
  }
  err::Text rest(out + used, size - used);
  rest.str(name);
  return rest.length() < size - used;
}

namespace {
struct ThreadStart {
  void* (*fn)(void*);
  void* arg;
  char name[16];
};
ThreadStart g_thread_start;  // one start at a time (the caller serialises)
// The stack of roost's threads: its code keeps no large frames and never
// recurses deeply; sanitizers' frames are several times larger.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr size_t kThreadStack = size_t{1} << 20;
#else
constexpr size_t kThreadStack = size_t{256} << 10;
#endif

ROOST_COMMON_TEXT void* thread_main(void* start) {
  ThreadStart s = *static_cast<ThreadStart*>(start);
  prctl(PR_SET_NAME, s.name, 0, 0, 0);
  return s.fn(s.arg);
}
}  // namespace

ROOST_COMMON_TEXT bool start_thread(Thread* t, void* (*fn)(void*), void* arg, const char* name) {
  g_thread_start.fn = fn;
  g_thread_start.arg = arg;
  size_t i = 0;
  for (; name[i] != '\0' && i + 1 < sizeof(g_thread_start.name); i++)
    g_thread_start.name[i] = name[i];
  g_thread_start.name[i] = '\0';
  // The new thread inherits the creator's signal mask: block everything
  // around the creation, so no signal reaches the new thread.
  sigset_t all, old;
  sigfillset(&all);
  // A small stack: roost's own code needs little, and the default (the
  // stack limit, often 8 MiB) would count against an address-space limit.
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kThreadStack);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t handle;
  int rc = pthread_create(&handle, &attr, thread_main, &g_thread_start);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  pthread_attr_destroy(&attr);
  if (rc != 0) return false;
  t->handle = handle;
  return true;
}

ROOST_COMMON_TEXT bool is_main_thread() { return syscall(SYS_gettid) == getpid(); }

namespace {
// The state letter of /proc/self/task/<tid>/stat ("R", "S", "Z", ...), or
// 0 where it cannot be read.  No allocation: the service calls it.
char task_state(long tid) {
  char path[48] = "/proc/self/task/";
  size_t n = strlen(path);
  char digits[24];
  size_t d = 0;
  for (; tid > 0 && d < sizeof(digits); tid /= 10) digits[d++] = static_cast<char>('0' + tid % 10);
  while (d > 0) path[n++] = digits[--d];
  memcpy(path + n, "/stat", 6);
  char buf[512];
  size_t got = read_start(path, buf, sizeof(buf));
  // "tid (comm) S ...": the state follows the last ')'.
  const char* close = strrchr(buf, ')');
  if (got == 0 || close == nullptr || close[1] != ' ') return 0;
  return close[2];
}
}  // namespace

bool other_threads_run() {
  int fd = ::open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return true;
  long self = syscall(SYS_gettid);
  bool running = false;
  alignas(8) char buf[4096];
  for (;;) {
    long n = syscall(SYS_getdents64, fd, buf, sizeof(buf));
    if (n < 0) running = true;  // cannot tell
    if (n <= 0 || running) break;
    for (long at = 0; at < n && !running;) {
      // struct linux_dirent64: inode, offset, record length, type, name.
      unsigned short length;
      memcpy(&length, buf + at + 16, sizeof(length));
      const char* name = buf + at + 19;
      at += length;
      if (name[0] < '0' || name[0] > '9') continue;  // "." and ".."
      long tid = 0;
      for (const char* c = name; *c >= '0' && *c <= '9'; c++) tid = tid * 10 + (*c - '0');
      if (tid == self) continue;
      char state = task_state(tid);
      running = state != 'Z' && state != 'X';  // 0 (gone, or unreadable): counted
    }
  }
  ::close(fd);
  return running;
}

ROOST_COMMON_TEXT void join_thread(Thread t) {
  pthread_join(static_cast<pthread_t>(t.handle), nullptr);
}

Caught catch_signal(int sig, void (*handler)(int)) {
  struct sigaction old = {};
  if (sigaction(sig, nullptr, &old) != 0) return Caught::kFailed;
  if ((old.sa_flags & SA_SIGINFO) != 0 || old.sa_handler != SIG_DFL) return Caught::kTaken;
  struct sigaction act = {};
  act.sa_handler = handler;
  sigemptyset(&act.sa_mask);
  act.sa_flags = SA_RESTART;
  return sigaction(sig, &act, nullptr) == 0 ? Caught::kCaught : Caught::kFailed;
}

ROOST_COMMON_TEXT void wait_on(const uint32_t* word, uint32_t expected, uint64_t timeout_ns) {
  timespec ts;
  timespec* limit = nullptr;
  if (timeout_ns != UINT64_MAX) {
    ts.tv_sec = static_cast<time_t>(timeout_ns / 1000000000u);
    ts.tv_nsec = static_cast<long>(timeout_ns % 1000000000u);
    limit = &ts;
  }
  syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, limit, nullptr, 0);
}

ROOST_COMMON_TEXT void wake_one(const uint32_t* word) {
  syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}
}  // namespace roost::os

#if defined(ROOST_FAULT_INJECTION) && ROOST_FAULT_INJECTION
extern "C" void roost_test_inject_faults(int kind, long first, long count) {
  auto& f = roost::os::g_faults[kind];
  f.count.store(0, std::memory_order_relaxed);
  f.calls.store(0, std::memory_order_relaxed);
  f.first.store(first, std::memory_order_relaxed);
  f.count.store(count, std::memory_order_relaxed);
}
extern "C" long roost_test_injected_faults(int kind) {
  return roost::os::g_faults[kind].injected.load(std::memory_order_relaxed);
}
extern "C" void roost_test_set_page_size(size_t bytes) {
  roost::os::g_page_size_override.store(bytes, std::memory_order_relaxed);
}
#endif
