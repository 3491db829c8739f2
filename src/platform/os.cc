// platform/os.cc — Linux implementation of platform/os.h.
#include "platform/os.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

namespace roost::os {

void* reserve_aligned(size_t size, size_t align) {
  const int prot = PROT_READ | PROT_WRITE;
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  if (align <= page_size()) {
    void* p = mmap(nullptr, size, prot, flags, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  // Over-reserve, then trim both ends to the alignment.
  size_t span = size + align;
  if (span < size) return nullptr;
  void* raw = mmap(nullptr, span, prot, flags, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  uintptr_t aligned = (start + align - 1) & ~(uintptr_t{align} - 1);
  if (aligned > start) munmap(raw, aligned - start);
  uintptr_t end = start + span;
  if (end > aligned + size) munmap(reinterpret_cast<void*>(aligned + size), end - (aligned + size));
  return reinterpret_cast<void*>(aligned);
}

void release(void* p, size_t size) { munmap(p, size); }

void purge(void* p, size_t size, bool zero) { madvise(p, size, zero ? MADV_DONTNEED : MADV_FREE); }

size_t page_size() {
  static size_t cached = 0;
  if (cached == 0) cached = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return cached;
}

namespace {
pthread_key_t exit_key;
std::atomic<bool> exit_key_live{false};

// Runs when the object holding roost is unloaded or the process exits.  A
// plugin that embeds roost (libroost-prefixed.a) and is closed with
// dlclose() takes the hook's code with it: the key goes too, so that the
// threads that used the plugin and exit later call nothing.  Threads that
// exit after this keep their allocators out of the pool.
__attribute__((destructor)) void remove_thread_exit_hook() {
  if (exit_key_live.exchange(false, std::memory_order_acq_rel)) pthread_key_delete(exit_key);
}
}  // namespace

bool install_thread_exit_hook(void (*fn)(void*)) {
  if (pthread_key_create(&exit_key, fn) != 0) return false;
  exit_key_live.store(true, std::memory_order_release);
  return true;
}

void arm_thread_exit_hook(void* arg) {
  if (exit_key_live.load(std::memory_order_acquire)) pthread_setspecific(exit_key, arg);
}

void install_fork_hooks(void (*prepare)(), void (*parent)(), void (*child)()) {
  pthread_atfork(prepare, parent, child);
}

int open_for_writing(const char* path) {
  for (;;) {
    int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) return fd;
    if (errno != EINTR) return -errno;
  }
}

void close(int fd) { ::close(fd); }

int process_id() { return static_cast<int>(::getpid()); }

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace roost::os

#include <sched.h>
namespace roost::os {
void yield() { sched_yield(); }
}  // namespace roost::os
