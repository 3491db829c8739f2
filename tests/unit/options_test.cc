// The run-time options' parser and list: byte suffixes, overflow, malformed
// values, boolean words, signals, ranges, the defaults, and the "did you
// mean" match.
// (What the environment does to a process is tests/options_env_test.cc.)
#include "options.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace roost;
using options::Id;
using options::Parsed;
using options::Status;
using options::Type;

namespace {
::testing::AssertionResult Ok(const Parsed& p, uint64_t want) {
  if (p.status != Status::kOk) return ::testing::AssertionFailure() << "not kOk";
  if (p.value != want) return ::testing::AssertionFailure() << p.value << " != " << want;
  return ::testing::AssertionSuccess();
}

Status status(Type type, const char* s) { return options::parse_syntax(type, s).status; }
}  // namespace

TEST(Options, BytesTakeBinarySuffixesInEitherCase) {
  EXPECT_TRUE(Ok(options::parse_syntax(Type::kBytes, "0"), 0));
  EXPECT_TRUE(Ok(options::parse_syntax(Type::kBytes, "12345"), 12345));
  EXPECT_TRUE(Ok(options::parse_syntax(Type::kBytes, "64k"), 64 << 10));
  EXPECT_TRUE(Ok(options::parse_syntax(Type::kBytes, "64K"), 64 << 10));
  EXPECT_TRUE(Ok(options::parse_syntax(Type::kBytes, "3m"), uint64_t{3} << 20));
  EXPECT_TRUE(Ok(options::parse_syntax(Type::kBytes, "3M"), uint64_t{3} << 20));
  EXPECT_TRUE(Ok(options::parse_syntax(Type::kBytes, "5g"), uint64_t{5} << 30));
  EXPECT_TRUE(Ok(options::parse_syntax(Type::kBytes, "7T"), uint64_t{7} << 40));
  EXPECT_TRUE(Ok(options::parse_syntax(Type::kBytes, "0k"), 0));
  EXPECT_TRUE(Ok(options::parse_syntax(Type::kBytes, "18446744073709551615"), UINT64_MAX));
  EXPECT_TRUE(Ok(options::parse_syntax(Type::kBytes, "16777215t"), uint64_t{16777215} << 40));
}

TEST(Options, NumbersPast64BitsAreOutOfRange) {
  EXPECT_EQ(status(Type::kBytes, "18446744073709551616"), Status::kOutOfRange);
  EXPECT_EQ(status(Type::kBytes, "99999999999999999999999"), Status::kOutOfRange);
  EXPECT_EQ(status(Type::kBytes, "99999999999999g"), Status::kOutOfRange);
  EXPECT_EQ(status(Type::kBytes, "16777216t"), Status::kOutOfRange);
  EXPECT_EQ(status(Type::kBytes, "17179869184g"), Status::kOutOfRange);
  EXPECT_EQ(status(Type::kMillis, "18446744073709551616"), Status::kOutOfRange);
}

TEST(Options, MalformedNumbersAreRejected) {
  for (const char* s : {"", "abc", "-5", "+5", "12x", "12kb", "k", " 12", "12 ", "1.5m", "0x10"})
    EXPECT_EQ(status(Type::kBytes, s), Status::kMalformed) << '"' << s << '"';
  // Durations take `ms` or `s` only, after whole digits.
  for (const char* s : {"", "abc", "-5", "10k", "1e3", "ms", "s", "1.5s", "10 ms", "10sec", "10m"})
    EXPECT_EQ(status(Type::kMillis, s), Status::kMalformed) << '"' << s << '"';
  EXPECT_TRUE(Ok(options::parse_syntax(Type::kMillis, "250"), 250));
  EXPECT_TRUE(Ok(options::parse_syntax(Type::kMillis, "250ms"), 250));
  EXPECT_TRUE(Ok(options::parse_syntax(Type::kMillis, "250MS"), 250));
  EXPECT_TRUE(Ok(options::parse_syntax(Type::kMillis, "1s"), 1000));
  EXPECT_TRUE(Ok(options::parse_syntax(Type::kMillis, "2S"), 2000));
  EXPECT_EQ(status(Type::kMillis, "18446744073709552s"), Status::kOutOfRange);
}

TEST(Options, BooleansTakeWordsInAnyCase) {
  for (const char* s : {"1", "on", "ON", "true", "True", "yes", "YES"})
    EXPECT_TRUE(Ok(options::parse_syntax(Type::kBool, s), 1)) << s;
  for (const char* s : {"0", "off", "Off", "false", "FALSE", "no", "No"})
    EXPECT_TRUE(Ok(options::parse_syntax(Type::kBool, s), 0)) << s;
  for (const char* s : {"", "2", "y", "n", "onn", "of", "yes ", "truee", "01", "-1"})
    EXPECT_EQ(status(Type::kBool, s), Status::kMalformed) << '"' << s << '"';
}

// ROOST_STATS: a boolean word (off, or the text report), text or json.
TEST(Options, ReportsTakeBooleanWordsTextAndJson) {
  for (const char* s : {"0", "off", "false", "NO"})
    EXPECT_TRUE(Ok(options::parse_syntax(Type::kReport, s), options::kReportNone)) << s;
  for (const char* s : {"1", "on", "true", "Yes", "text", "TEXT"})
    EXPECT_TRUE(Ok(options::parse_syntax(Type::kReport, s), options::kReportText)) << s;
  for (const char* s : {"json", "JSON", "Json"})
    EXPECT_TRUE(Ok(options::parse_syntax(Type::kReport, s), options::kReportJson)) << s;
  for (const char* s : {"", "2", "xml", "jsonl", "json ", "txt", "yaml"})
    EXPECT_EQ(status(Type::kReport, s), Status::kMalformed) << '"' << s << '"';
  EXPECT_TRUE(Ok(options::parse(options::kStats, "json"), options::kReportJson));
}

TEST(Options, HugePagePoliciesTakeOffDenseAlwaysAndBooleanWords) {
  for (const char* s : {"0", "off", "false", "NO"})
    EXPECT_TRUE(Ok(options::parse_syntax(Type::kHugePolicy, s), options::kHugeOff)) << s;
  for (const char* s : {"dense", "DENSE", "Dense"})
    EXPECT_TRUE(Ok(options::parse_syntax(Type::kHugePolicy, s), options::kHugeDense)) << s;
  // `1` was "on" before `dense` existed: it stays mimalloc's trade.
  for (const char* s : {"1", "on", "true", "always", "Always"})
    EXPECT_TRUE(Ok(options::parse_syntax(Type::kHugePolicy, s), options::kHugeAlways)) << s;
  for (const char* s : {"", "2", "madvise", "never", "dense "})
    EXPECT_EQ(status(Type::kHugePolicy, s), Status::kMalformed) << '"' << s << '"';
  EXPECT_EQ(options::default_value(options::kHugePages), options::kHugeDense);
}

TEST(Options, ProfileModesTakeBooleanWordsAndLeaks) {
  for (const char* s : {"0", "off", "false", "NO"})
    EXPECT_TRUE(Ok(options::parse_syntax(Type::kProfileMode, s), options::kProfileOff)) << s;
  for (const char* s : {"1", "on", "true", "Yes"})
    EXPECT_TRUE(Ok(options::parse_syntax(Type::kProfileMode, s), options::kProfileHeap)) << s;
  for (const char* s : {"leaks", "LEAKS", "Leaks"})
    EXPECT_TRUE(Ok(options::parse_syntax(Type::kProfileMode, s), options::kProfileLeaks)) << s;
  for (const char* s : {"", "2", "leak", "heap", "json", "leaks "})
    EXPECT_EQ(status(Type::kProfileMode, s), Status::kMalformed) << '"' << s << '"';
  EXPECT_TRUE(Ok(options::parse(options::kProfile, "leaks"), options::kProfileLeaks));
  // A rate of 0 would be no sampling at all: the profiler is off instead.
  EXPECT_EQ(options::parse(options::kProfileRate, "0").status, Status::kOutOfRange);
}

// A path is any text; its value is the text (options::text), its number 0.
TEST(Options, PathsTakeAnyText) {
  for (const char* s : {"", "/tmp/x.json", "relative %p", "   "})
    EXPECT_TRUE(Ok(options::parse_syntax(Type::kPath, s), 0)) << '"' << s << '"';
  EXPECT_EQ(options::kTable[options::kStatsFile].type, Type::kPath);
  EXPECT_STREQ(options::kTable[options::kStatsFile].env, "ROOST_STATS_FILE");
}

TEST(Options, SignalsTakeNamesWithOrWithoutSigAndNumbers) {
  EXPECT_TRUE(Ok(options::parse_syntax(Type::kSignal, "USR2"), SIGUSR2));
  EXPECT_TRUE(Ok(options::parse_syntax(Type::kSignal, "SIGUSR2"), SIGUSR2));
  EXPECT_TRUE(Ok(options::parse_syntax(Type::kSignal, "usr2"), SIGUSR2));
  EXPECT_TRUE(Ok(options::parse_syntax(Type::kSignal, "sigUsr1"), SIGUSR1));
  EXPECT_TRUE(Ok(options::parse_syntax(Type::kSignal, "12"), 12));
  EXPECT_TRUE(Ok(options::parse_syntax(Type::kSignal, "40"), 40));  // a real-time signal
  EXPECT_TRUE(Ok(options::parse_syntax(Type::kSignal, "0"), 0));
  EXPECT_TRUE(Ok(options::parse_syntax(Type::kSignal, "off"), 0));
  EXPECT_STREQ(options::signal_name(SIGUSR2), "USR2");
  EXPECT_EQ(options::signal_name(40), nullptr);
  // Those roost cannot take, by name or number.
  for (const char* refused : {"KILL", "SIGSTOP", "segv", "9", "11", "7", "ABRT", "6", "32", "33"})
    EXPECT_EQ(status(Type::kSignal, refused), Status::kMalformed) << refused;
  EXPECT_EQ(status(Type::kSignal, "65"), Status::kOutOfRange);
  for (const char* bad : {"", "SIG", "USR", "USR22", "SIGUSR2 ", "-12", "on"})
    EXPECT_EQ(status(Type::kSignal, bad), Status::kMalformed) << bad;
}

TEST(Options, RangesAreEnforced) {
  EXPECT_TRUE(Ok(options::parse(options::kSlabReserveBytes, "1t"), uint64_t{1} << 40));
  EXPECT_EQ(options::parse(options::kSlabReserveBytes, "1025g").status, Status::kOutOfRange);
  EXPECT_EQ(options::parse(options::kSlabReserveBytes, "99999999999999g").status,
            Status::kOutOfRange);
  EXPECT_TRUE(Ok(options::parse(options::kPurgeDelayMs, "86400000"), 86400000));
  EXPECT_EQ(options::parse(options::kPurgeDelayMs, "86400001").status, Status::kOutOfRange);
  // The outbox takes every 64-bit value: 0 posts every remote free at once,
  // 2^63 and more never fills (tests/remote_free_test.cc relies on both).
  EXPECT_TRUE(Ok(options::parse(options::kOutboxBytes, "0"), 0));
  EXPECT_TRUE(
      Ok(options::parse(options::kOutboxBytes, "18000000000000000000"), 18000000000000000000u));
  EXPECT_TRUE(Ok(options::parse(options::kOutboxBytes, "18446744073709551615"), UINT64_MAX));
  // A malformed value stays malformed whatever the range.
  EXPECT_EQ(options::parse(options::kOutboxBytes, "-5").status, Status::kMalformed);
  EXPECT_EQ(options::parse(options::kPurgeDelayMs, "abc").status, Status::kMalformed);
  EXPECT_EQ(options::parse(options::kBatchIt, "2").status, Status::kMalformed);
}

// The documented defaults (docs/OPTIONS.md), and that the list holds them.
TEST(Options, DefaultsAreTheDocumentedOnes) {
  EXPECT_EQ(options::default_value(options::kStats), options::kReportNone);
  EXPECT_EQ(options::default_value(options::kStatsFile), 0u);
  EXPECT_EQ(options::default_value(options::kSlabReserveBytes), 512u << 10);
  EXPECT_EQ(options::default_value(options::kPurgeZero), 1u);
  EXPECT_EQ(options::default_value(options::kPurgeDelayMs), 10u);
  EXPECT_EQ(options::default_value(options::kOutboxBytes), 256u << 10);
  EXPECT_EQ(options::default_value(options::kBatchIt), 1u);
  EXPECT_EQ(options::default_value(options::kVerbose), 0u);
  EXPECT_EQ(options::default_value(options::kProfile), options::kProfileOff);
  EXPECT_EQ(options::default_value(options::kProfileRate), 512u << 10);
  EXPECT_EQ(options::default_value(options::kProfileInterval), 0u);
  EXPECT_EQ(options::kTable[options::kProfileFile].type, Type::kPath);
  EXPECT_STREQ(options::kTable[options::kSlabReserveBytes].env, "ROOST_SLAB_RESERVE");
  EXPECT_STREQ(options::kTable[options::kBatchIt].env, "ROOST_BATCHIT");
  for (unsigned i = 0; i < options::kCount; i++) {
    const options::Option& o = options::kTable[i];
    EXPECT_EQ(strncmp(o.env, "ROOST_", 6), 0) << o.env;
    EXPECT_EQ(options::parse(static_cast<Id>(i), o.fallback).status, Status::kOk) << o.env;
    EXPECT_NE(o.help[0], 0) << o.env;
  }
}

TEST(Options, NearestVariableSuggestsWithinTwoEdits) {
  auto nearest = [](const char* name) -> std::string {
    const char* n = options::nearest_variable(name, strlen(name));
    return n == nullptr ? "(none)" : n;
  };
  EXPECT_EQ(nearest("ROOST_BATCH_IT"), "ROOST_BATCHIT");  // one insertion
  EXPECT_EQ(nearest("ROOST_STAT"), "ROOST_STATS");        // one deletion
  EXPECT_EQ(nearest("ROOST_STAT_FILE"), "ROOST_STATS_FILE");
  EXPECT_EQ(nearest("ROOST_PURGE_DELAI"), "ROOST_PURGE_DELAY");  // one substitution
  EXPECT_EQ(nearest("ROOST_OUTBOX_BYTE"), "ROOST_OUTBOX_BYTES");
  EXPECT_EQ(nearest("ROOST_VERBOSEE"), "ROOST_VERBOSE");
  EXPECT_EQ(nearest("ROOST_SLAB_RESREVE"), "ROOST_SLAB_RESERVE");  // two edits
  EXPECT_EQ(nearest("ROOST_SLAB_RES"), "(none)");                  // four
  EXPECT_EQ(nearest("ROOST_BUILD_DIR"), "(none)");
  EXPECT_EQ(nearest("ROOST_"), "(none)");
  // Only the first `len` characters count (the name, not "=value").
  EXPECT_STREQ(options::nearest_variable("ROOST_STATZ=1", 11), "ROOST_STATS");
}

// set() overrides get(), and the environment is read once: a later load()
// does not undo set() (nor see a variable set since).
TEST(Options, SetOverridesTheValueInForce) {
  uint64_t saved = options::get(options::kOutboxBytes);
  ASSERT_EQ(setenv("ROOST_OUTBOX_BYTES", "777", 1), 0);
  options::set(options::kOutboxBytes, 12345);
  EXPECT_EQ(options::get(options::kOutboxBytes), 12345u);
  options::load();
  EXPECT_EQ(options::get(options::kOutboxBytes), 12345u);
  unsetenv("ROOST_OUTBOX_BYTES");
  options::set(options::kOutboxBytes, saved);
  EXPECT_EQ(options::get(options::kOutboxBytes), saved);
}
