// api/override_new.cc — every C++ operator new and delete form but the
// nothrow news (api/override_new_nothrow.cc, which must catch).
//
// libroost.so must not need libstdc++ at run time, yet throwing new must
// honour std::new_handler and throw std::bad_alloc.  Both come from
// libstdc++ through weak references: present in any C++ program (which
// links libstdc++), absent in a C program, where failure is a diagnostic and
// abort() instead.  Must never: reference libstdc++ strongly.
#include <new>

#include "api/api.h"
#include "api/new_failure.h"
#include "platform/error.h"
#include "platform/text_section.h"

using namespace roost;

// Weak references to libstdc++, by their mangled names.
extern "C" std::new_handler _ZSt15get_new_handlerv() __attribute__((weak));
extern "C" void _ZSt17__throw_bad_allocv() __attribute__((weak, noreturn));

namespace roost::api {

ROOST_SLOW void* new_failed(size_t size, size_t align, bool nothrow) {
  for (;;) {
    std::new_handler handler = _ZSt15get_new_handlerv ? _ZSt15get_new_handlerv() : nullptr;
    if (handler == nullptr) break;
    handler();
    void* p = align <= config::kMinAlloc ? api::malloc(size) : api::aligned(align, size);
    if (p != nullptr) return p;
  }
  if (nothrow) return nullptr;
  if (_ZSt17__throw_bad_allocv) _ZSt17__throw_bad_allocv();
  err::fatal("operator new", "out of memory, no bad_alloc to throw; size",
             reinterpret_cast<void*>(size));
}

}  // namespace roost::api

namespace {
using roost::api::new_failed;

ROOST_INLINE void* new_impl(size_t size) {
  void* p = api::malloc(size);
  if (ROOST_LIKELY(p != nullptr)) return p;
  return new_failed(size, 1, false);
}

ROOST_INLINE void delete_impl(void* p) { api::free(p, "operator delete"); }
ROOST_INLINE void delete_sized(void* p, size_t size, size_t align = 0) {
  api::free_sized(p, size, align, "operator delete");
}

ROOST_INLINE void* new_aligned(size_t size, std::align_val_t align) {
  void* p = api::aligned(static_cast<size_t>(align), size);
  if (ROOST_LIKELY(p != nullptr)) return p;
  return new_failed(size, static_cast<size_t>(align), false);
}

}  // namespace

#define ROOST_NEW_EXPORT __attribute__((visibility("default")))

ROOST_NEW_EXPORT ROOST_COMMON_TEXT ROOST_HOT_ENTRY void* operator new(size_t size) {
  return new_impl(size);
}
ROOST_NEW_EXPORT ROOST_COMMON_TEXT void* operator new[](size_t size) { return new_impl(size); }
ROOST_NEW_EXPORT ROOST_COMMON_TEXT void* operator new(size_t size, std::align_val_t a) {
  return new_aligned(size, a);
}
ROOST_NEW_EXPORT ROOST_COMMON_TEXT void* operator new[](size_t size, std::align_val_t a) {
  return new_aligned(size, a);
}

ROOST_NEW_EXPORT ROOST_COMMON_TEXT ROOST_HOT_ENTRY void operator delete(void* p) noexcept {
  delete_impl(p);
}
ROOST_NEW_EXPORT ROOST_COMMON_TEXT void operator delete[](void* p) noexcept { delete_impl(p); }
ROOST_NEW_EXPORT ROOST_COMMON_TEXT ROOST_HOT_ENTRY void operator delete(void* p,
                                                                        size_t size) noexcept {
  delete_sized(p, size);
}
ROOST_NEW_EXPORT ROOST_COMMON_TEXT void operator delete[](void* p, size_t size) noexcept {
  delete_sized(p, size);
}
ROOST_NEW_EXPORT ROOST_COMMON_TEXT void operator delete(void* p, const std::nothrow_t&) noexcept {
  delete_impl(p);
}
ROOST_NEW_EXPORT ROOST_COMMON_TEXT void operator delete[](void* p, const std::nothrow_t&) noexcept {
  delete_impl(p);
}
ROOST_NEW_EXPORT ROOST_COMMON_TEXT void operator delete(void* p, std::align_val_t) noexcept {
  delete_impl(p);
}
ROOST_NEW_EXPORT ROOST_COMMON_TEXT void operator delete[](void* p, std::align_val_t) noexcept {
  delete_impl(p);
}
ROOST_NEW_EXPORT ROOST_COMMON_TEXT void operator delete(void* p, size_t size,
                                                        std::align_val_t a) noexcept {
  delete_sized(p, size, static_cast<size_t>(a));
}
ROOST_NEW_EXPORT ROOST_COMMON_TEXT void operator delete[](void* p, size_t size,
                                                          std::align_val_t a) noexcept {
  delete_sized(p, size, static_cast<size_t>(a));
}
ROOST_NEW_EXPORT ROOST_COMMON_TEXT void operator delete(void* p, std::align_val_t,
                                                        const std::nothrow_t&) noexcept {
  delete_impl(p);
}
ROOST_NEW_EXPORT ROOST_COMMON_TEXT void operator delete[](void* p, std::align_val_t,
                                                          const std::nothrow_t&) noexcept {
  delete_impl(p);
}
