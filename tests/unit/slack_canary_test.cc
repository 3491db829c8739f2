// The hardened build's canaries (ds/slack_canary.h): the canary written
// and read back, and the byte before an object, which reads 0 or the key's
// top byte through every step of its neighbour's canary write (so that a
// free on another thread meanwhile never takes it for an underflow), and
// nothing else once the program writes it.  (The default build's unit
// tests: the functions on a buffer of their own, the key set here.)
#include <gtest/gtest.h>

#include <cstring>

#include "ds/slack_canary.h"

using namespace roost;

namespace {

// Sets the key for a test, and puts the one before back after it.
class KeySet {
 public:
  explicit KeySet(uint64_t k) : key_(slack_canary::g_key), bytes_(slack_canary::g_bytes) {
    slack_canary::set_key(k);
  }
  ~KeySet() {
    slack_canary::g_key = key_;
    slack_canary::g_bytes = bytes_;
  }

 private:
  uint64_t key_, bytes_;
};

constexpr uint64_t kKeys[] = {0, 0x0123456789abcdefull, 0xfedcba9876543210ull, 0x41ull << 56,
                              0x3e00000000004100ull};

}  // namespace

TEST(SlackCanary, WrittenThenReadBackForEverySizeThatFits) {
  for (uint64_t k : kKeys) {
    KeySet key(k);
    for (size_t slot : {size_t{16}, size_t{64}, size_t{2048}}) {
      alignas(16) char object[2048] = {};
      for (size_t size = 1; size + slack_canary::kWordBytes <= slot; size++) {
        slack_canary::write(object, size, slot);
        size_t got = 0;
        ASSERT_TRUE(slack_canary::read(object, slot, &got)) << slot << " " << size;
        EXPECT_EQ(got, size);
      }
    }
  }
}

TEST(SlackCanary, TheCanaryByteIsTheKeysTopByteNeitherZeroNorAscii) {
  for (uint64_t k : kKeys) {
    KeySet key(k);
    auto top = static_cast<uint8_t>(slack_canary::g_key >> 56);
    EXPECT_GE(top, 0x80);
    for (int i = 0; i < 8; i++)
      EXPECT_EQ(static_cast<uint8_t>(slack_canary::g_bytes >> (8 * i)), top) << k;
  }
}

// Two slots, `q` and the next; the byte before the next is q's last word's
// top byte.  From zero (as carved, freed or handed out), through the slack's
// store (which, where the slack is empty, lands on the word itself before
// the word is written: the state a free of the next object on another
// thread may see) to the canary word.
TEST(SlackCanary, TheByteBeforeAnObjectReadsIntactThroughItsNeighboursCanaryWrite) {
  for (uint64_t k : kKeys) {
    KeySet key(k);
    for (size_t slot : {size_t{16}, size_t{64}, size_t{2048}}) {
      for (size_t size = 1; size + slack_canary::kWordBytes <= slot; size++) {
        alignas(16) char two[2 * 2048] = {};
        char* next = two + slot;
        ASSERT_TRUE(slack_canary::byte_before_intact(next));
        // write()'s first store alone.
        memcpy(two + size, &slack_canary::g_bytes, sizeof(slack_canary::g_bytes));
        ASSERT_TRUE(slack_canary::byte_before_intact(next)) << slot << " " << size;
        slack_canary::write(two, size, slot);
        ASSERT_TRUE(slack_canary::byte_before_intact(next)) << slot << " " << size;
      }
    }
  }
}

// Any other value there is a write before the object: an XOR with any byte
// but the key's top byte, a store of any byte but 0 and that one.
TEST(SlackCanary, TheByteBeforeAnObjectWrittenIsCaught) {
  for (uint64_t k : kKeys) {
    KeySet key(k);
    auto top = static_cast<uint8_t>(slack_canary::g_key >> 56);
    for (bool live : {false, true}) {
      alignas(16) char two[2 * 64] = {};
      char* next = two + 64;
      if (live) slack_canary::write(two, 56, 64);
      uint8_t before = static_cast<uint8_t>(next[-1]);
      for (unsigned c = 1; c < 256; c++) {
        next[-1] = static_cast<char>(before ^ c);
        bool missed =
            static_cast<uint8_t>(before ^ c) == 0 || static_cast<uint8_t>(before ^ c) == top;
        EXPECT_EQ(slack_canary::byte_before_intact(next), missed) << live << " " << c;
      }
      next[-1] = static_cast<char>(before ^ 'A');
      EXPECT_FALSE(slack_canary::byte_before_intact(next));
    }
  }
}
