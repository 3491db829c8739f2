// api/options_api.cc — roost_print_options().
//
// Owns: the roost.h entry point over options::print().  Must never: hold
// option state or format anything itself (src/options.cc does).
#include "api/api.h"
#include "options.h"
#include "roost.h"

using namespace roost;

ROOST_EXPORT void roost_print_options(void) {
  options::load();
  options::print();
}
