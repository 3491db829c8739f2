// BitSet<N> (ds/bitset.h): insert, erase and clear; for_each visiting the
// members in increasing order across word boundaries, for sizes that are
// and are not multiples of 64; and the walk's contract when fn changes the
// set: it may erase the member it is given, a member is visited as the set
// was when the walk reached its word (later words see changes made before
// the walk got there, the current word does not).
#include "ds/bitset.h"

#include <gtest/gtest.h>

#include <vector>

using namespace roost;

namespace {

template <unsigned N>
std::vector<unsigned> members(const BitSet<N>& s) {
  std::vector<unsigned> out;
  s.for_each([&](unsigned i) { out.push_back(i); });
  return out;
}

using V = std::vector<unsigned>;

}  // namespace

TEST(BitSet, AnEmptySetVisitsNothing) {
  EXPECT_EQ(members(BitSet<1>{}), V{});
  EXPECT_EQ(members(BitSet<64>{}), V{});
  EXPECT_EQ(members(BitSet<200>{}), V{});
}

TEST(BitSet, InsertEraseAndClear) {
  BitSet<128> s;
  s.insert(3);
  s.insert(3);  // already a member: no duplicate
  s.insert(64);
  s.insert(100);
  EXPECT_EQ(members(s), (V{3, 64, 100}));
  s.erase(64);
  s.erase(5);  // not a member: no change
  EXPECT_EQ(members(s), (V{3, 100}));
  s.erase(3);
  s.erase(100);
  EXPECT_EQ(members(s), V{});
  for (unsigned i = 0; i < 128; i += 7) s.insert(i);
  s.clear();
  EXPECT_EQ(members(s), V{});
  s.insert(127);  // still usable after clear
  EXPECT_EQ(members(s), V{127});
}

// Every bit of every word, including bit 63 (a 32-bit count of trailing
// zeros or shift would lose the upper half of each word).
TEST(BitSet, EveryPositionIsItsOwnMember) {
  constexpr unsigned kN = 192;
  for (unsigned i = 0; i < kN; i++) {
    BitSet<kN> s;
    s.insert(i);
    ASSERT_EQ(members(s), V{i}) << "inserted " << i;
    s.erase(i);
    ASSERT_EQ(members(s), V{}) << "erased " << i;
  }
  BitSet<kN> all;
  V want;
  for (unsigned i = 0; i < kN; i++) {
    all.insert(i);
    want.push_back(i);
  }
  EXPECT_EQ(members(all), want);
}

TEST(BitSet, WalksInIncreasingOrderAcrossWordBoundaries) {
  BitSet<256> s;
  for (unsigned i : {255u, 0u, 128u, 63u, 64u, 127u, 5u, 191u, 192u, 32u, 31u}) s.insert(i);
  EXPECT_EQ(members(s), (V{0, 5, 31, 32, 63, 64, 127, 128, 191, 192, 255}));
}

// The last word is partly used: its members are visited like any other.
TEST(BitSet, SizesThatAreNotMultiplesOf64) {
  BitSet<65> a;
  a.insert(64);
  a.insert(0);
  EXPECT_EQ(members(a), (V{0, 64}));
  BitSet<130> b;
  b.insert(129);
  b.insert(128);
  b.insert(1);
  EXPECT_EQ(members(b), (V{1, 128, 129}));
  BitSet<3> c;
  c.insert(2);
  c.insert(1);
  EXPECT_EQ(members(c), (V{1, 2}));
  BitSet<1> d;
  d.insert(0);
  EXPECT_EQ(members(d), V{0});
}

// fn may erase the member it is called for: every member is still visited
// once, and the set ends empty.
TEST(BitSet, TheWalkMayEraseTheMemberItVisits) {
  BitSet<200> s;
  V want;
  for (unsigned i = 1; i < 200; i += 3) {
    s.insert(i);
    want.push_back(i);
  }
  V seen;
  s.for_each([&](unsigned i) {
    seen.push_back(i);
    s.erase(i);
  });
  EXPECT_EQ(seen, want);
  EXPECT_EQ(members(s), V{});
}

// A member is visited as the set was when the walk reached its word: one
// erased from a later word before the walk gets there is not visited; one
// erased from the word being walked still is.
TEST(BitSet, ErasingOtherMembersDuringTheWalk) {
  BitSet<192> s;
  for (unsigned i : {1u, 2u, 10u, 70u, 80u, 150u}) s.insert(i);
  V seen;
  s.for_each([&](unsigned i) {
    seen.push_back(i);
    if (i == 1) {
      s.erase(10);   // same word (0), already read: still visited
      s.erase(80);   // word 1, not reached yet: not visited
      s.erase(150);  // word 2: not visited
    }
  });
  EXPECT_EQ(seen, (V{1, 2, 10, 70}));
  EXPECT_EQ(members(s), (V{1, 2, 70}));
}

// Members inserted during the walk: one in a word the walk has not reached
// is visited (it is a member when the walk reaches its word); one in the
// word being walked or an earlier one is not.  All of them are members
// afterwards.
TEST(BitSet, InsertingDuringTheWalk) {
  BitSet<192> s;
  s.insert(5);
  s.insert(100);
  V seen;
  s.for_each([&](unsigned i) {
    seen.push_back(i);
    if (i == 5) {
      s.insert(2);    // earlier in the current word
      s.insert(40);   // later in the current word (already read)
      s.insert(64);   // first bit of the next word
      s.insert(191);  // last bit of the last word
    }
    if (i == 100) s.insert(0);  // an earlier word
  });
  EXPECT_EQ(seen, (V{5, 64, 100, 191}));
  EXPECT_EQ(members(s), (V{0, 2, 5, 40, 64, 100, 191}));
}
