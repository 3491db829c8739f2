// platform/env.cc — implementation of platform/env.h over `environ`.
#include "platform/env.h"

extern char** environ;

namespace roost::env {

const char* get(const char* name) {
  char** e = environ;
  if (e == nullptr) return nullptr;
  for (; *e != nullptr; e++) {
    const char* s = *e;
    const char* n = name;
    while (*n != 0 && *s == *n) {
      s++;
      n++;
    }
    if (*n == 0 && *s == '=') return s + 1;
  }
  return nullptr;
}

uint64_t get_u64(const char* name, uint64_t fallback) {
  const char* s = get(name);
  if (s == nullptr || *s == 0) return fallback;
  uint64_t v = 0;
  for (; *s >= '0' && *s <= '9'; s++) {
    uint64_t next = v * 10 + static_cast<uint64_t>(*s - '0');
    if (next < v) return fallback;
    v = next;
  }
  unsigned shift = 0;
  switch (*s) {
    case 0:
      break;
    case 'k':
    case 'K':
      shift = 10;
      s++;
      break;
    case 'm':
    case 'M':
      shift = 20;
      s++;
      break;
    case 'g':
    case 'G':
      shift = 30;
      s++;
      break;
    default:
      return fallback;
  }
  if (*s != 0) return fallback;
  if (shift != 0 && (v >> (64 - shift)) != 0) return fallback;
  return v << shift;
}

}  // namespace roost::env
