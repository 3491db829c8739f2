// tests/fuzz/input_reader.h — a fuzz input read as little-endian integers,
// for the harnesses of tests/fuzz/.
//
// Owns: the byte order and what a used-up input reads as (zeros).  Must
// never: allocate (it runs between the allocations under test).
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace roost_fuzz {

// Bytes of the input in order; zeros once it is used up.
class InputReader {
 public:
  InputReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint32_t u16() { return u8() | uint32_t{u8()} << 8; }
  uint32_t u24() { return u16() | uint32_t{u8()} << 16; }
  uint64_t u64() { return u24() | uint64_t{u24()} << 24 | uint64_t{u16()} << 48; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace roost_fuzz
