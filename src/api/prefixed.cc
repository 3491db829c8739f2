// api/prefixed.cc — the roost_* entry points of roost.h.
//
// Must never: contain logic beyond naming (see api/api.h).
#include "roost.h"

#include "api/api.h"

using namespace roost;

ROOST_EXPORT void* roost_malloc(size_t size) { return api::malloc(size); }
ROOST_EXPORT void roost_free(void* p) { api::free(p, "roost_free"); }
ROOST_EXPORT void* roost_calloc(size_t count, size_t size) { return api::calloc(count, size); }
ROOST_EXPORT void* roost_realloc(void* p, size_t size) { return api::realloc(p, size); }
ROOST_EXPORT void* roost_aligned_alloc(size_t align, size_t size) {
  return api::aligned_alloc(align, size);
}
ROOST_EXPORT size_t roost_usable_size(const void* p) { return api::usable_size(p); }
ROOST_EXPORT int roost_trim(void) { return api::trim(0); }
ROOST_EXPORT int roost_version(void) { return ROOST_VERSION; }
