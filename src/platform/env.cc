// platform/env.cc — implementation of platform/env.h over `environ`.
#include "platform/env.h"

#include "platform/text_section.h"

namespace roost::env {

namespace {
// The rest of `s` past `prefix`, or nullptr if `s` does not start with it.
const char* skip(const char* s, const char* prefix) {
  for (; *prefix != 0; s++, prefix++)
    if (*s != *prefix) return nullptr;
  return s;
}
}  // namespace

ROOST_COMMON_TEXT const char* get(const char* name) {
  char** e = environ;
  if (e == nullptr) return nullptr;
  for (; *e != nullptr; e++) {
    const char* rest = skip(*e, name);
    if (rest != nullptr && *rest == '=') return rest + 1;
  }
  return nullptr;
}

ROOST_COMMON_TEXT void for_each(const char* prefix, void (*visit)(const char* entry)) {
  char** e = environ;
  if (e == nullptr) return;
  for (; *e != nullptr; e++)
    if (skip(*e, prefix) != nullptr) visit(*e);
}

}  // namespace roost::env
