// api/profile.cc — roost_profile_dump(), roost.h's entry point of the heap
// profiler (frontend/profile.h).
//
// Must never: contain logic beyond naming and errno (see api/api.h).
#include "api/api.h"
#include "frontend/profile_report.h"
#include "roost.h"

using namespace roost;

ROOST_EXPORT int roost_profile_dump(const char* path) {
  int rc = profile::report::dump(path);
  if (rc == 0) return 0;
  errno = -rc;
  return -1;
}
