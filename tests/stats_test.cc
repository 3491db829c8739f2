// Statistics through the prefixed API (roost.h): roost_stats_json() is one
// well-formed JSON object holding every counter of roost_stats.def (equal to
// roost_stats()) and, per active size class, the figures of
// roost_class_stats(); the class figures follow allocations, and count
// frees exactly whoever made them; the JSON is truncated as snprintf
// truncates; bad arguments are refused.  (The report at exit,
// ROOST_STATS=json and ROOST_STATS_FILE, is tests/options_env_test.cc's.)
#include <errno.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "json_reader.h"
#include "roost.h"
#include "support.h"

using roost_test::json::Reader;
using roost_test::json::Value;

namespace {

const std::vector<std::string> kTotals = {
#define ROOST_STAT(name, source, description) #name,
#include "roost_stats.def"
#undef ROOST_STAT
};
const std::vector<std::string> kClassFields = {
#define ROOST_CLASS_STAT(name, description) #name,
#include "roost_stats.def"
#undef ROOST_CLASS_STAT
};

// Waits until roost is at rest: nothing dirty for the service thread to
// purge, and the service asleep (its wake-ups no longer change), so that two
// snapshots taken one after the other agree.
void quiesce() {
  roost_trim();
  struct roost_stats before, now;
  ASSERT_EQ(roost_stats(&before), 0);
  for (int i = 0; i < 200; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_EQ(roost_stats(&now), 0);
    if (now.bytes_dirty == 0 && now.service_wakeups == before.service_wakeups) return;
    before = now;
  }
  FAIL() << "roost did not come to rest";
}

// One report, written by one call: the service thread may change a figure
// (and so the report's length) between a sizing call and a writing call, so
// the writing call gets room to spare.  That a sizing call gives the length
// a writing call writes is checked at rest (JsonIsTruncatedAsSnprintfTruncates).
std::string json_text() {
  int sized = roost_stats_json(nullptr, 0);
  EXPECT_GT(sized, 0);
  std::string s(static_cast<size_t>(sized) + 4096, '\0');
  int n = roost_stats_json(s.data(), s.size());
  EXPECT_GT(n, 0);
  EXPECT_LT(static_cast<size_t>(n), s.size());
  s.resize(strlen(s.c_str()));
  EXPECT_EQ(s.size(), static_cast<size_t>(n));
  return s;
}

Value json_value() {
  std::string text = json_text();
  Value v;
  Reader r(text);
  EXPECT_TRUE(r.read(&v)) << r.error() << "\n" << text;
  return v;
}

struct roost_class_stats class_stats(unsigned cls) {
  struct roost_class_stats c;
  EXPECT_EQ(roost_class_stats(cls, &c), 0);
  return c;
}

// The fields of struct roost_class_stats by name, as the JSON has them.
std::vector<uint64_t> fields(const struct roost_class_stats& c) {
  return {
#define ROOST_CLASS_STAT(name, description) c.name,
#include "roost_stats.def"
#undef ROOST_CLASS_STAT
  };
}

unsigned class_of_size(uint64_t size) {
  for (unsigned c = 0; c < roost_class_count(); c++)
    if (class_stats(c).size >= size) return c;
  ADD_FAILURE() << "no class holds " << size;
  return 0;
}

}  // namespace

TEST(Stats, JsonHoldsEveryCounterAndAgreesWithRoostStats) {
  std::vector<void*> keep;
  for (int i = 0; i < 100; i++) keep.push_back(roost_malloc(24 + i * 8));
  quiesce();
  struct roost_stats s;
  ASSERT_EQ(roost_stats(&s), 0);
  Value v = json_value();  // nothing allocates through roost in between
  ASSERT_EQ(v.kind, Value::kObject);
  EXPECT_EQ(v.keys,
            (std::vector<std::string>{"version", "process", "totals", "classes", "huge_pages"}));
  EXPECT_EQ(v["version"].number, 1u);
  EXPECT_EQ(v["huge_pages"].keys,
            (std::vector<std::string>{"heap_bytes_resident", "heap_bytes_huge", "collapses_tried",
                                      "collapses_done", "collapses_refused", "blocks_collapsed"}));
  // The heap holds the 100 objects: some of it is resident.
  EXPECT_GT(v["huge_pages"]["heap_bytes_resident"].number, 0u);
  EXPECT_LE(v["huge_pages"]["heap_bytes_huge"].number,
            v["huge_pages"]["heap_bytes_resident"].number);
  EXPECT_EQ(v["process"]["pid"].number, static_cast<uint64_t>(getpid()));
  EXPECT_EQ(v["process"]["program"].string, program_invocation_short_name);
  EXPECT_EQ(v["process"]["time"].string.size(), strlen("2026-11-25T09:12:03Z"));
  const Value& totals = v["totals"];
  ASSERT_EQ(totals.kind, Value::kObject);
  EXPECT_EQ(totals.keys, kTotals);
  std::vector<uint64_t> want = {
#define ROOST_STAT(name, source, description) s.name,
#include "roost_stats.def"
#undef ROOST_STAT
  };
  for (size_t i = 0; i < kTotals.size(); i++) {
    EXPECT_EQ(totals[kTotals[i]].kind, Value::kNumber) << kTotals[i];
    EXPECT_EQ(totals[kTotals[i]].number, want[i]) << kTotals[i];
  }
  EXPECT_GE(totals["allocations"].number, 100u);
  for (void* p : keep) roost_free(p);
}

TEST(Stats, JsonClassesAreTheActiveClassesOfRoostClassStats) {
  std::vector<void*> keep;
  for (int i = 0; i < 300; i++) keep.push_back(roost_malloc(16 + (i % 30) * 100));
  void* large = roost_malloc(1 << 20);
  quiesce();  // the service thread (offload's rings included) at rest too
  Value v = json_value();
  const Value& classes = v["classes"];
  ASSERT_EQ(classes.kind, Value::kArray);
  std::vector<std::string> keys = {"class"};
  keys.insert(keys.end(), kClassFields.begin(), kClassFields.end());
  std::vector<bool> listed(roost_class_count(), false);
  uint64_t slabs = 0, small_bytes = 0;
  int64_t last = -1;
  for (const Value& c : classes.array) {
    ASSERT_EQ(c.kind, Value::kObject);
    EXPECT_EQ(c.keys, keys);
    uint64_t cls = c["class"].number;
    ASSERT_LT(cls, roost_class_count());
    EXPECT_GT(static_cast<int64_t>(cls), last) << "classes are listed smallest first, once";
    last = static_cast<int64_t>(cls);
    listed[cls] = true;
    std::vector<uint64_t> want = fields(class_stats(static_cast<unsigned>(cls)));
    for (size_t i = 0; i < kClassFields.size(); i++)
      EXPECT_EQ(c[kClassFields[i]].number, want[i]) << "class " << cls << " " << kClassFields[i];
    EXPECT_TRUE(c["allocations"].number != 0 || c["slabs"].number != 0) << "class " << cls;
    EXPECT_EQ(c["bytes_in_use"].number, c["objects_in_use"].number * c["size"].number);
    slabs += c["slabs"].number;
    small_bytes += c["bytes_in_use"].number;
  }
  EXPECT_GE(classes.array.size(), 20u);  // 30 sizes, some sharing a class
  // The classes left out have nothing to show.
  for (unsigned c = 0; c < roost_class_count(); c++) {
    if (listed[c]) continue;
    struct roost_class_stats s = class_stats(c);
    EXPECT_EQ(s.allocations, 0u) << "class " << c;
    EXPECT_EQ(s.slabs, 0u) << "class " << c;
  }
  // The classes add up to the totals; large objects are in the totals only.
  EXPECT_EQ(slabs, v["totals"]["slabs"].number);
  uint64_t with_large = v["totals"]["bytes_in_use"].number - small_bytes;
  EXPECT_GE(with_large, 1u << 20);
  roost_free(large);
  Value after = json_value();
  uint64_t after_small = 0;
  for (const Value& c : after["classes"].array) after_small += c["bytes_in_use"].number;
  EXPECT_EQ(after_small, small_bytes);
  EXPECT_EQ(with_large - (after["totals"]["bytes_in_use"].number - after_small), 1u << 20);
  for (void* p : keep) roost_free(p);
}

TEST(Stats, ClassFiguresFollowAllocations) {
  unsigned cls = class_of_size(100);
  struct roost_class_stats before = class_stats(cls);
  EXPECT_EQ(before.size, 112u);
  std::vector<void*> objects;
  for (int i = 0; i < 2000; i++) objects.push_back(roost_malloc(100));
  struct roost_class_stats during = class_stats(cls);
  EXPECT_EQ(during.size, 112u);
  EXPECT_EQ(during.allocations - before.allocations, 2000u);
  EXPECT_EQ(during.objects_in_use - before.objects_in_use, 2000u);
  EXPECT_EQ(during.bytes_in_use - before.bytes_in_use, 2000u * 112);
  // 2000 objects of 112 bytes need four 64 KiB slabs at least.
  EXPECT_GE(during.slabs, 4u);
  EXPECT_EQ(during.slab_bytes, during.slabs * 65536);
  EXPECT_GE(during.slab_bytes, during.bytes_in_use);
  // Under full offload these are the service's objects, and the frees wait
  // on this thread's free ring, which the service need not empty before it
  // is half full: trim carries them out.  Trim also lets go of other
  // classes' empty slabs, so the neighbour is read after a first one.
  bool trim_frees = roost_test::offload_on();
  if (trim_frees) quiesce();
  // Other classes did not move.
  struct roost_class_stats neighbour_before = class_stats(cls + 1);
  for (void* p : objects) roost_free(p);
  if (trim_frees) quiesce();
  struct roost_class_stats after = class_stats(cls);
  EXPECT_EQ(after.objects_in_use, before.objects_in_use);
  EXPECT_EQ(after.allocations, during.allocations);
  EXPECT_LT(after.slabs, during.slabs) << "emptied slabs went back";
  EXPECT_EQ(fields(class_stats(cls + 1)), fields(neighbour_before));
}

// Frees by the owning thread are not counted as they happen but from the
// slabs: the figures must still be exact once the threads stop, whoever
// freed, whether the owner exited with objects on its fast list, and
// whether the mail has been delivered.
TEST(Stats, ClassFiguresCountFreesByOwnersAndOthersExactly) {
  unsigned cls = class_of_size(100);
  // Objects kept live throughout, so that a count of frees too high shows
  // (objects in use are reported clamped at zero).
  std::vector<void*> kept;
  for (int i = 0; i < 100; i++) kept.push_back(roost_malloc(100));
  struct roost_class_stats before = class_stats(cls);
  ASSERT_GE(before.objects_in_use, 100u);
  std::vector<void*> handed;
  std::thread owner([&handed] {
    std::vector<void*> mine;
    for (int i = 0; i < 3000; i++) mine.push_back(roost_malloc(100));
    // A third freed by their owner (into its slabs, some the active one),
    // the rest handed over; it exits with objects left on its fast list.
    for (int i = 0; i < 3000; i++) {
      if (i % 3 == 0)
        roost_free(mine[i]);
      else
        handed.push_back(mine[i]);
    }
  });
  owner.join();
  struct roost_class_stats exited = class_stats(cls);
  EXPECT_EQ(exited.allocations - before.allocations, 3000u);
  EXPECT_EQ(exited.objects_in_use - before.objects_in_use, 2000u);
  // Freed by another thread: counted as they are sent, then delivered.
  struct roost_stats received_before;
  ASSERT_EQ(roost_stats(&received_before), 0);
  for (void* p : handed) roost_free(p);
  struct roost_class_stats sent = class_stats(cls);
  EXPECT_EQ(sent.objects_in_use, before.objects_in_use);
  quiesce();
  // The mail came home (the figures below cross that path): under full
  // offload the frees wait on this thread's free ring for the service's
  // allocator, whose mail travels on the service's schedule.
  struct roost_stats received_after;
  ASSERT_EQ(roost_stats(&received_after), 0);
  // (Or, where frees adopt slabs (ROOST_ADOPT=2) and this thread took over
  // the exited owner's slabs as it freed their objects, the frees were its
  // own: the figures below hold either way; stats.prefixed.adopt_on runs it
  // so.)
  uint64_t adopted = received_after.slabs_adopted - received_before.slabs_adopted;
  if (!roost_test::offload_on() && adopted == 0) {
    EXPECT_GE(received_after.messages_received - received_before.messages_received, 2000u);
  }
  if (roost_test::adopt_level() < 2) {
    EXPECT_EQ(adopted, 0u);
  }
  struct roost_class_stats delivered = class_stats(cls);
  EXPECT_EQ(delivered.objects_in_use, before.objects_in_use);
  EXPECT_EQ(delivered.allocations, sent.allocations);
  for (void* p : kept) roost_free(p);
  EXPECT_EQ(class_stats(cls).objects_in_use, before.objects_in_use - 100);
}

// `text` (a JSON report, or a prefix of one) with the digits of its
// report time masked: two reports taken a moment apart may fall in
// different seconds; everything else of a roost at rest is the same.
std::string time_masked(std::string text) {
  const std::string key = "\"time\":\"";
  size_t at = text.find(key);
  if (at == std::string::npos) return text;
  for (size_t i = at + key.size(); i < text.size() && text[i] != '"'; i++)
    if (text[i] >= '0' && text[i] <= '9') text[i] = '#';
  return text;
}

TEST(Stats, JsonIsTruncatedAsSnprintfTruncates) {
  quiesce();
  const std::string full = json_text();
  const size_t n = full.size();
  for (size_t len : {size_t{1}, size_t{2}, size_t{10}, n / 2, n - 1, n, n + 1, n + 100}) {
    SCOPED_TRACE(len);
    std::string buf(n + 200, 'x');
    EXPECT_EQ(roost_stats_json(buf.data(), len), static_cast<int>(n));
    size_t kept = len - 1 < n ? len - 1 : n;
    EXPECT_EQ(time_masked(buf.substr(0, kept)), time_masked(full.substr(0, kept)));
    EXPECT_EQ(buf[kept], '\0');
    // Nothing written at or past len (but the NUL, within it).
    for (size_t i = len; i < buf.size(); i++) ASSERT_EQ(buf[i], 'x') << "byte " << i;
  }
  // No room at all: nothing written, the length returned.
  char one = 'x';
  EXPECT_EQ(roost_stats_json(&one, 0), static_cast<int>(n));
  EXPECT_EQ(one, 'x');
  EXPECT_EQ(roost_stats_json(nullptr, 0), static_cast<int>(n));
  EXPECT_EQ(roost_stats_json(nullptr, 5), -1);
}

TEST(Stats, ClassStatsNameEveryClassAndRefuseBadArguments) {
  unsigned count = roost_class_count();
  ASSERT_GT(count, 40u);
  EXPECT_EQ(class_stats(0).size, 16u);
  EXPECT_EQ(class_stats(count - 1).size, 256u << 10);  // the largest small object
  for (unsigned c = 1; c < count; c++) EXPECT_GT(class_stats(c).size, class_stats(c - 1).size);
  struct roost_class_stats s;
  memset(&s, 0x5a, sizeof(s));
  EXPECT_EQ(roost_class_stats(count, &s), -1);
  EXPECT_EQ(roost_class_stats(~0u, &s), -1);
  EXPECT_EQ(s.size, 0x5a5a5a5a5a5a5a5aull) << "a refused call wrote *out";
  EXPECT_EQ(roost_class_stats(0, nullptr), -1);
  EXPECT_EQ(roost_stats(nullptr), -1);
}

// purge_delay_ms is ROOST_PURGE_DELAY's value (10 unless the environment
// sets it) once roost_trim() has set a stretched delay back, and never
// more than eight times it.
TEST(Stats, PurgeDelayIsTheOptionsAfterATrim) {
  const char* env = getenv("ROOST_PURGE_DELAY");
  uint64_t option = env != nullptr ? strtoull(env, nullptr, 10) : 10;
  struct roost_stats s;
  ASSERT_EQ(roost_stats(&s), 0);
  EXPECT_LE(s.purge_delay_ms, option * 8);
  roost_trim();
  ASSERT_EQ(roost_stats(&s), 0);
  EXPECT_EQ(s.purge_delay_ms, option);
}
