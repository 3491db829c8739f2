// api/override_new_nothrow.cc — the four nothrow forms of operator new.
//
// The standard defines them as the throwing form with any exception turned
// into a null result, so this one file is built with -fexceptions to catch.
// The personality routine and the catch helpers come from libstdc++ through
// weak references: a process without libstdc++ cannot throw, so it never
// reaches them.  Must never: reference libstdc++ strongly; catch anywhere
// but around the failure path.
#include <new>

#include "api/api.h"
#include "api/new_failure.h"

asm(".weak __gxx_personality_v0");
extern "C" void* __cxa_begin_catch(void*) noexcept __attribute__((weak));
extern "C" void __cxa_end_catch() __attribute__((weak));

using namespace roost;

namespace {

ROOST_SLOW void* nothrow_failed(size_t size, size_t align) noexcept {
  try {
    return api::new_failed(size, align, true);
  } catch (...) {
    return nullptr;
  }
}

ROOST_INLINE void* new_nothrow(size_t size, size_t align) noexcept {
  void* p = align <= config::kMinAlloc ? api::malloc(size) : api::aligned(align, size);
  if (ROOST_LIKELY(p != nullptr)) return p;
  return nothrow_failed(size, align);
}

}  // namespace

#define ROOST_NEW_EXPORT __attribute__((visibility("default")))

ROOST_NEW_EXPORT void* operator new(size_t size, const std::nothrow_t&) noexcept {
  return new_nothrow(size, 1);
}
ROOST_NEW_EXPORT void* operator new[](size_t size, const std::nothrow_t&) noexcept {
  return new_nothrow(size, 1);
}
ROOST_NEW_EXPORT void* operator new(size_t size, std::align_val_t a,
                                    const std::nothrow_t&) noexcept {
  return new_nothrow(size, static_cast<size_t>(a));
}
ROOST_NEW_EXPORT void* operator new[](size_t size, std::align_val_t a,
                                      const std::nothrow_t&) noexcept {
  return new_nothrow(size, static_cast<size_t>(a));
}
