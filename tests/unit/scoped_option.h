// tests/unit/scoped_option.h — sets a run-time option for one test and
// puts the old value back after it, however the test ends.
#pragma once

#include <cstdint>

#include "options.h"

namespace roost::test {

class ScopedOption {
 public:
  ScopedOption(options::Id id, uint64_t value) : id_(id), saved_(options::get(id)) {
    options::set(id, value);
  }
  ~ScopedOption() { options::set(id_, saved_); }
  ScopedOption(const ScopedOption&) = delete;
  ScopedOption& operator=(const ScopedOption&) = delete;

 private:
  options::Id id_;
  uint64_t saved_;
};

}  // namespace roost::test
