// platform/asan.h — what AddressSanitizer is told, in a ROOST_ASAN build
// (config::kAsan; docs/DEBUGGING.md), for a program built with
// -fsanitize=address that has roost as its malloc.
//
// Owns: the calls of ASan's public interface (sanitizer/asan_interface.h):
// memory poisoned while the program must not touch it (freed, or not handed
// out yet: a new slab whole), a block unpoisoned when it is handed out.
// Roost's own code is not instrumented, so its accesses to poisoned memory
// (free marks, links, messages) are never reported.  The calls are weak
// references, made only once ASan's shadow memory is in place: ld.so
// allocates while ASan starts up, and roost serves that too.  And the
// blocks of ASan's own allocator, which ASan's strdup, getline, asprintf,
// realpath & co. allocate even in a program whose malloc is roost's: told
// apart (the sanitizers' allocator interface), sized, and freed by ASan's
// free (the name after the program's own: dlsym's RTLD_NEXT).
// Must never: be compiled into another build: without ROOST_ASAN every
// function here is empty (no instruction).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "config.h"

#if ROOST_ASAN
#include <dlfcn.h>

extern "C" {
// The sanitizers' allocator interface (sanitizer/allocator_interface.h).
int __sanitizer_get_ownership(const volatile void* p) __attribute__((weak));
size_t __sanitizer_get_allocated_size(const volatile void* p) __attribute__((weak));
void __asan_poison_memory_region(void const volatile* addr, size_t size) __attribute__((weak));
void __asan_unpoison_memory_region(void const volatile* addr, size_t size) __attribute__((weak));
// Where ASan's shadow memory lies, set once it is mapped (0 before; all
// ones while ASan looks for a place for it).
extern uintptr_t __asan_shadow_memory_dynamic_address __attribute__((weak));
}
#endif

namespace roost::asan {

inline constexpr bool kOn = config::kAsan;

// ASan runs in this process and its shadow memory is mapped (without
// ROOST_ASAN: false).
inline bool ready() {
#if ROOST_ASAN
  if (&__asan_shadow_memory_dynamic_address == nullptr) return false;
  uintptr_t shadow = __asan_shadow_memory_dynamic_address;
  return shadow != 0 && shadow != UINTPTR_MAX;
#else
  return false;
#endif
}

// ASan runs in this process and is starting up: its shadow memory is not
// mapped yet (in a program without ASan, or without ROOST_ASAN: false).
inline bool starting() {
#if ROOST_ASAN
  return &__asan_shadow_memory_dynamic_address != nullptr && !ready();
#else
  return false;
#endif
}

// The program's accesses to [p, p + size) are reported from now on.
inline void poison(const void* p, size_t size) {
#if ROOST_ASAN
  if (ready()) __asan_poison_memory_region(p, size);
#else
  (void)p, (void)size;
#endif
}

// [p, p + size) is the program's.
inline void unpoison(const void* p, size_t size) {
#if ROOST_ASAN
  if (ready()) __asan_unpoison_memory_region(p, size);
#else
  (void)p, (void)size;
#endif
}

// Whether `p` is a live block of ASan's own allocator (without ROOST_ASAN,
// or ASan: false).
inline bool owns(const void* p) {
#if ROOST_ASAN
  return ready() && __sanitizer_get_ownership != nullptr && __sanitizer_get_ownership(p) != 0;
#else
  (void)p;
  return false;
#endif
}

// The size of `p`, a live block of ASan's own allocator.
inline size_t size_of_own(const void* p) {
#if ROOST_ASAN
  return __sanitizer_get_allocated_size(p);
#else
  (void)p;
  return 0;
#endif
}

// Frees `p`, a live block of ASan's own allocator, with ASan's free.
inline void free_own(void* p) {
#if ROOST_ASAN
  using Free = void (*)(void*);
  // Relaxed: any thread finds the same function.
  static std::atomic<Free> asan_free{nullptr};
  Free f = asan_free.load(std::memory_order_relaxed);
  if (f == nullptr) {
    f = reinterpret_cast<Free>(dlsym(RTLD_NEXT, "free"));
    asan_free.store(f, std::memory_order_relaxed);
  }
  if (f != nullptr) f(p);
#else
  (void)p;
#endif
}

}  // namespace roost::asan
