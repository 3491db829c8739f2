// api/override_malloc.cc — the C/POSIX/glibc malloc family under its own
// names, for LD_PRELOAD (libroost.so) and static linking (libroost.a), and
// glibc's introspection calls beside them.
//
// Must never: contain logic beyond naming; every body is one call into
// api/api.h or api/introspection.h.  All of them sit in this one object so
// a static link takes none of glibc's malloc: glibc keeps mallinfo2,
// malloc_info and mallopt in the same object as its malloc, so a program
// calling one of them that roost did not define would pull glibc's malloc
// in beside roost's.
#include "api/api.h"
#include "api/dump.h"
#include "api/introspection.h"
#include "frontend/service.h"
#include "options.h"
#include "platform/text_section.h"

using namespace roost;

// Options are read on the first allocation; a program that overrides its
// malloc with roost reads them when it starts as well, so that the option
// warnings and ROOST_VERBOSE speak for a program that never allocates.
// Roost is then the process's malloc, to its end (frontend/service.h).
// Dumps on demand (ROOST_DUMP_SIGNAL) are for such programs: the signal
// is taken here, before the program's main, or not at all.
ROOST_COMMON_TEXT __attribute__((constructor)) static void read_options_at_start() {
  options::load();
  service::end_with_process();
  dump::install();
}

ROOST_EXPORT ROOST_COMMON_TEXT ROOST_HOT_ENTRY void* malloc(size_t size) {
  return api::malloc(size);
}
ROOST_EXPORT ROOST_COMMON_TEXT ROOST_HOT_ENTRY void free(void* p) { api::free(p, "free"); }
ROOST_EXPORT ROOST_COMMON_TEXT void* calloc(size_t count, size_t size) {
  return api::calloc(count, size);
}
ROOST_EXPORT ROOST_COMMON_TEXT void* realloc(void* p, size_t size) { return api::realloc(p, size); }
ROOST_EXPORT ROOST_COMMON_TEXT void* reallocarray(void* p, size_t count, size_t size) {
  return api::reallocarray(p, count, size);
}
ROOST_EXPORT ROOST_COMMON_TEXT void* aligned_alloc(size_t align, size_t size) {
  return api::aligned_alloc(align, size);
}
ROOST_EXPORT ROOST_COMMON_TEXT int posix_memalign(void** out, size_t align, size_t size) {
  return api::posix_memalign(out, align, size);
}
ROOST_EXPORT ROOST_COMMON_TEXT void* memalign(size_t align, size_t size) {
  return api::memalign(align, size);
}
ROOST_EXPORT void* valloc(size_t size) { return api::valloc(size); }
ROOST_EXPORT void* pvalloc(size_t size) { return api::pvalloc(size); }
ROOST_EXPORT ROOST_COMMON_TEXT size_t malloc_usable_size(void* p) { return api::usable_size(p); }
ROOST_EXPORT ROOST_COMMON_TEXT void free_sized(void* p, size_t size) {
  api::free_sized(p, size, 0, "free_sized");
}
ROOST_EXPORT ROOST_COMMON_TEXT void free_aligned_sized(void* p, size_t align, size_t size) {
  api::free_sized(p, size, align, "free_aligned_sized");
}
ROOST_EXPORT int malloc_trim(size_t pad) { return api::trim(pad); }
// glibc's legacy name for free, still called by some programs.
ROOST_EXPORT void cfree(void* p) { api::free(p, "cfree"); }

// glibc's introspection, with roost's figures (api/introspection.h).
ROOST_EXPORT struct mallinfo2 mallinfo2(void) { return api::mallinfo2(); }
ROOST_EXPORT struct mallinfo mallinfo(void) { return api::mallinfo(); }
ROOST_EXPORT void malloc_stats(void) { api::malloc_stats(); }
ROOST_EXPORT int malloc_info(int options, FILE* fp) { return api::malloc_info(options, fp); }
ROOST_EXPORT int mallopt(int param, int value) { return api::mallopt(param, value); }
