// api/stats.cc — roost's statistics: roost_stats(), roost_class_stats(),
// roost_stats_json(), roost_print_stats(), and the report at exit
// (ROOST_STATS, ROOST_STATS_FILE).
//
// Owns: the figures of include/roost_stats.def (the message counters summed
// over every allocator; the others computed from the allocators' class
// counters, list balances and slab counts, the slab records' free objects,
// and the backend) and their text and JSON forms.
// Must never: stop other threads or allocate; counters of running threads
// are read as they are.  Reports are formatted through fixed buffers
// (err::Text) and written with write(2).
#include "api/stats.h"

#include "api/api.h"
#include "api/timeline.h"
#include "backend/address_space.h"
#include "backend/chunk_allocator.h"
#include "backend/huge_pages.h"
#include "backend/large.h"
#include "backend/meta_arena.h"
#include "backend/pagemap.h"
#include "ds/counter.h"
#include "frontend/adoption.h"
#include "frontend/backpressure.h"
#include "frontend/offload.h"
#include "frontend/ownership.h"
#include "frontend/service.h"
#include "frontend/slab.h"
#include "options.h"
#include "platform/memcheck.h"
#include "platform/os.h"
#include "platform/text_section.h"

using namespace roost;

namespace {

// What a snapshot gathers from the allocators.
struct AllocatorTotals {
  uint64_t allocs[sizeclass::kCount] = {};
  uint64_t frees[sizeclass::kCount] = {};
  uint64_t slabs[sizeclass::kCount] = {};
  MessageCounters messages;
  // From the slab records: where each class's slabs are.
  struct Census {
    uint64_t touched_bytes = 0;
    uint64_t carved_bytes = 0;
    uint64_t free_objects = 0;
    uint64_t by_state[3] = {};  // indexed by SlabState
    uint64_t parked = 0;
  } census[sizeclass::kCount];
};

// A slab record's free objects into the frees of its class: local frees
// are the allocators' list balances plus the objects on the slabs' free
// lists (SizeClassSlabs::list_balance).  A record inside a larger chunk may
// keep a stale kind: only the record the pagemap maps a slab's base to
// counts.
ROOST_RACY_READER void add_slab_free_objects(const ChunkMeta* m, void* totals) {
  uintptr_t base = ROOST_RACY_LOAD(m->base, uintptr_t);
  if (pagemap::lookup(reinterpret_cast<const void*>(base)) != m) return;
  unsigned sc = ROOST_RACY_LOAD(m->sizeclass, uint8_t);
  if (sc >= sizeclass::kCount) return;
  uint32_t carved = ROOST_RACY_LOAD(m->carved, uint16_t);
  auto state = static_cast<SlabState>(ROOST_RACY_LOAD(m->state, uint8_t));
  int32_t needed = ROOST_RACY_LOAD(m->needed, int32_t);
  auto* t = static_cast<AllocatorTotals*>(totals);
  uint32_t free_objects = slab::free_objects(state, needed, carved, sc);
  t->frees[sc] += free_objects;
  AllocatorTotals::Census& c = t->census[sc];
  c.free_objects += free_objects;
  c.touched_bytes += size_t{ROOST_RACY_LOAD(m->touched_pages, uint16_t)} << config::kMinPageBits;
  c.carved_bytes += uint64_t{carved} * sizeclass::kInfo.info[sc].size;
  if (static_cast<unsigned>(state) < 3) c.by_state[static_cast<unsigned>(state)]++;
  // The owner's record is never freed (pool entries live on), so reading
  // it through a stale owner is safe.
  auto* owner = static_cast<const Allocator*>(ownership::owner(m));
  if (owner != nullptr && owner->parked()) c.parked++;
}

// `offload`: holds full offload's side still, whose corrections turn the
// allocators' counts into the program's.
void sum_allocators(AllocatorTotals& t, const offload::Still& offload) {
  // Parked allocators still: the service delivering their mail moves
  // objects between their list balances and their slabs.
  pool::Still parked;
  pool::for_each([&t](const Allocator& a) {
    const ClassCounters& c = a.class_counters();
    for (unsigned sc = 0; sc < sizeclass::kCount; sc++) {
      t.allocs[sc] += c.allocs.read(sc) + a.sampled_allocs(sc);
      t.frees[sc] += read_counter(c.frees[sc]) + a.list_balance(sc) + a.remote_frees_sent(sc);
      t.slabs[sc] += a.slab_count(sc);
    }
    t.messages.add(a.message_counters());
    // Remote frees still in its BatchIt cache: freed, not sent yet (the
    // messenger counts them as they leave it).
    a.for_each_cached_free([&t](unsigned sc, uint32_t n) {
      t.frees[sc] += n;
      t.messages.remote_frees += n;
    });
  });
  chunks::for_each_record(ChunkKind::kSlab, add_slab_free_objects, &t);
  // Frees by threads past their exit hook, and batches the service found
  // whole in a sleeping thread's mail: counted apart.
  t.messages.add(Messenger::alone_counters());
  t.messages.add(Messenger::collected_counters());
  for (unsigned sc = 0; sc < sizeclass::kCount; sc++) {
    t.frees[sc] += heap::unbound_frees(sc);
    offload::ClassCorrection k = offload.correction(sc);
    t.allocs[sc] -= k.made;
    t.frees[sc] += k.given - k.unmade;
  }
}

}  // namespace

namespace roost::stats {

void take(Snapshot& s) {
  memcheck::Quiet quiet;  // (roost's own records)
  s = {};
  offload::Still still;
  offload::Counters oc = still.counters();
  AllocatorTotals t;
  sum_allocators(t, still);
  struct roost_stats& out = s.totals;
#define ROOST_STAT(name, source, description) ROOST_STAT_FROM_##source(name)
#define ROOST_STAT_FROM_message(name) out.name = t.messages.name;
#define ROOST_STAT_FROM_message_max(name) out.name = t.messages.name;
#define ROOST_STAT_FROM_derived(name)
#include "roost_stats.def"
#undef ROOST_STAT
#undef ROOST_STAT_FROM_message
#undef ROOST_STAT_FROM_message_max
#undef ROOST_STAT_FROM_derived
  uint64_t allocs = 0, frees = 0, slabs = 0;
  int64_t small_bytes = 0;
  for (unsigned sc = 0; sc < sizeclass::kCount; sc++) {
    allocs += t.allocs[sc];
    frees += t.frees[sc];
    slabs += t.slabs[sc];
    uint64_t size = sizeclass::kInfo.info[sc].size;
    // A free read before its allocation (another thread's counters, read a
    // moment apart) can put a class below zero for a moment.
    int64_t in_use = static_cast<int64_t>(t.allocs[sc] - t.frees[sc]);
    small_bytes += in_use * static_cast<int64_t>(size);
    struct roost_class_stats& c = s.classes[sc];
    c.size = size;
    c.allocations = t.allocs[sc];
    c.objects_in_use = in_use > 0 ? static_cast<uint64_t>(in_use) : 0;
    c.bytes_in_use = c.objects_in_use * size;
    c.slabs = t.slabs[sc];
    c.slab_bytes = t.slabs[sc] * sizeclass::slab_size(sc);
    const AllocatorTotals::Census& census = t.census[sc];
    c.slab_bytes_touched = census.touched_bytes;
    c.slab_bytes_carved = census.carved_bytes;
    c.slab_objects_free = census.free_objects;
    c.slabs_active = census.by_state[static_cast<unsigned>(SlabState::kActive)];
    c.slabs_available = census.by_state[static_cast<unsigned>(SlabState::kAvailable)];
    c.slabs_sleeping = census.by_state[static_cast<unsigned>(SlabState::kSleeping)];
    c.slabs_parked = census.parked;
  }
  large::Counters lc = large::counters();
  out.bytes_in_use = static_cast<uint64_t>(small_bytes > 0 ? small_bytes : 0) + lc.bytes_in_use;
  out.bytes_dirty = chunks::dirty_bytes();
  out.bytes_committed = chunks::bytes_out() + out.bytes_dirty;
  out.bytes_reserved = chunks::reserved_bytes() + meta_arena::reserved_bytes();
  out.allocations = allocs + lc.allocations;
  out.frees = frees + lc.frees;
  out.large_allocations = lc.allocations;
  out.slabs = slabs;
  out.chunks = chunks::chunks_out();
  out.allocators = pool::allocators_created();
  out.slabs_adopted = adoption::adopted();
  out.backpressure_waiting = Backpressure::hungry_now();
  out.bytes_purged = chunks::purged_bytes();
  out.bytes_moved = chunks::moved_bytes();
  out.purge_delay_ms = chunks::purge_delay_now_ns() / 1000000u;
  service::Counters sc = service::counters();
  out.service_running = sc.running ? 1 : 0;
  out.service_wakeups = sc.wakeups;
  out.service_bytes_purged = sc.bytes_purged;
  out.service_allocators_drained = sc.allocators_drained;
  out.service_bytes_collected = sc.bytes_collected;
  out.offload_ports = oc.ports;
  out.offload_ring_allocs = oc.ring_allocs;
  out.offload_ring_frees = oc.ring_frees;
  out.offload_ring_misses = oc.ring_misses;
  out.protect_calls = os::protect_calls();
  out.slab_guards = chunks::end_guards();
  out.slab_guards_refused = chunks::end_guards_refused();
  out.large_quarantined = large::quarantined();
  // Every object a thread frees remotely or forwards is sent, but those it
  // kept for reuse (frontend/foreign_reuse.h), of which those it sent home
  // unused were.
  out.foreign_reused = out.foreign_kept - out.foreign_sent_home;
  out.messages_sent =
      out.remote_frees - out.foreign_kept + out.foreign_sent_home + out.messages_forwarded;
}

void take_huge_pages(Snapshot& s) {
  Snapshot::HugePages& h = s.huge_pages;
  h = {};
  h.read = true;
  os::MappedBytes mapped;
  h.mapped_known = address_space::heap_mapped_bytes(&mapped);
  if (h.mapped_known) {
    h.heap_resident = mapped.resident;
    h.heap_huge = mapped.huge;
  }
  huge_pages::Counts c = huge_pages::counts();
  h.collapses_tried = c.collapses_tried;
  h.collapses_done = c.collapses_done;
  h.collapses_refused = c.collapses_refused;
  h.blocks_collapsed = c.blocks_collapsed;
}

namespace {

// The huge-page figures of the reports: name, description, value (nullptr
// for the two smaps could not give).
struct HugeFigure {
  const char* name;
  const char* description;
  const uint64_t* value;
};

constexpr unsigned kHugeFigures = 6;

void huge_figures(const Snapshot::HugePages& h, HugeFigure (&f)[kHugeFigures]) {
  const uint64_t* resident = h.mapped_known ? &h.heap_resident : nullptr;
  const uint64_t* huge = h.mapped_known ? &h.heap_huge : nullptr;
  f[0] = {"heap_bytes_resident",
          "resident bytes of roost's heap now (Rss of its mappings, /proc/self/smaps)", resident};
  f[1] = {"heap_bytes_huge",
          "of heap_bytes_resident: backed by transparent huge pages (AnonHugePages)", huge};
  f[2] = {"collapses_tried", "dense 2 MiB blocks the service asked the kernel to collapse",
          &h.collapses_tried};
  f[3] = {"collapses_done", "of those, collapsed into a huge page", &h.collapses_done};
  f[4] = {"collapses_refused", "of those, refused (no huge page to give, or no MADV_COLLAPSE)",
          &h.collapses_refused};
  f[5] = {"blocks_collapsed", "blocks roost holds as collapsed now", &h.blocks_collapsed};
}

// Seconds since the epoch as "YYYY-MM-DD hh:mm:ss" (UTC), written with
// `between` between the date and the time.
void write_utc(err::Text& out, uint64_t seconds, char between) {
  // Days to a civil date (proleptic Gregorian): eras of 400 years, each
  // 146097 days, counted from 0000-03-01 so that leap days end a year.
  uint64_t days = seconds / 86400 + 719468;
  uint64_t era = days / 146097;
  uint64_t day_of_era = days - era * 146097;
  uint64_t year_of_era =
      (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
  uint64_t day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
  uint64_t month_index = (5 * day_of_year + 2) / 153;  // 0 = March
  uint64_t day = day_of_year - (153 * month_index + 2) / 5 + 1;
  uint64_t month = month_index < 10 ? month_index + 3 : month_index - 9;
  uint64_t year = year_of_era + era * 400 + (month <= 2 ? 1 : 0);
  uint64_t second_of_day = seconds % 86400;
  auto two = [&out](uint64_t v) {
    out.chr(static_cast<char>('0' + v / 10)).chr(static_cast<char>('0' + v % 10));
  };
  out.dec(year).chr('-');
  two(month);
  out.chr('-');
  two(day);
  out.chr(between);
  two(second_of_day / 3600);
  out.chr(':');
  two(second_of_day / 60 % 60);
  out.chr(':');
  two(second_of_day % 60);
}

// `bytes` in the largest binary unit that leaves a whole part (one decimal).
void write_size(err::Text& out, uint64_t bytes) {
  constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  unsigned unit = 0;  // kUnits[unit] is 1024^(unit+1) bytes
  while (unit + 1 < 4 && bytes >> (10 * (unit + 2)) != 0) unit++;
  uint64_t scaled = (bytes * 10 + (uint64_t{1} << (10 * (unit + 1))) / 2) >> (10 * (unit + 1));
  out.dec(scaled / 10).chr('.').dec(scaled % 10).chr(' ').str(kUnits[unit]);
}

// A counter whose name says it counts bytes.
constexpr bool counts_bytes(const char* name) {
  for (const char* p = name; *p != 0; p++)
    if (p[0] == 'b' && p[1] == 'y' && p[2] == 't' && p[3] == 'e' && p[4] == 's') return true;
  return false;
}

// `s` as the body of a JSON string: quotes, backslashes and control
// characters escaped.
void write_json_string(err::Text& out, const char* s) {
  constexpr char kHex[] = "0123456789abcdef";
  for (; *s != 0; s++) {
    auto c = static_cast<unsigned char>(*s);
    if (c == '"' || c == '\\') {
      out.chr('\\').chr(static_cast<char>(c));
    } else if (c < 0x20) {
      out.str("\\u00").chr(kHex[c >> 4]).chr(kHex[c & 15]);
    } else {
      out.chr(static_cast<char>(c));
    }
  }
}

}  // namespace

void write_text(err::Text& out, const Snapshot& s) {
  out.str("roost: report of pid ").dec(static_cast<uint64_t>(os::process_id()));
  out.str(" (").str(os::program_name()).str(") at ");
  write_utc(out, os::wall_clock_seconds(), ' ');
  out.str(" UTC\n");
  const struct roost_stats& t = s.totals;
#define ROOST_STAT(name, source, description)                                       \
  out.str("roost: ").str_padded(#name, kNameWidth).dec_padded(t.name, kValueWidth); \
  out.str("  ").str(description);                                                   \
  if (counts_bytes(#name) && t.name >= 1024) {                                      \
    out.str(" (");                                                                  \
    write_size(out, t.name);                                                        \
    out.chr(')');                                                                   \
  }                                                                                 \
  out.chr('\n');
  constexpr unsigned kNameWidth = 27, kValueWidth = 14;
#include "roost_stats.def"
#undef ROOST_STAT
  if (t.messages_sent > t.messages_received) {
    out.str("roost: note: messages_received is ").dec(t.messages_sent - t.messages_received);
    out.str(
        " below messages_sent: those objects were still on their way home (in outboxes, "
        "BatchIt caches or unread inboxes) when the report was taken\n");
  }
  if (!s.huge_pages.read) return;
  HugeFigure f[kHugeFigures];
  huge_figures(s.huge_pages, f);
  out.str("roost: huge pages:\n");
  for (const HugeFigure& h : f) {
    out.str("roost: ").str_padded(h.name, kNameWidth);
    if (h.value == nullptr) {
      out.str_padded("?", kValueWidth).str("  ").str(h.description);
      out.str(" (/proc/self/smaps cannot be read)\n");
      continue;
    }
    out.dec_padded(*h.value, kValueWidth).str("  ").str(h.description);
    if (counts_bytes(h.name) && *h.value >= 1024) {
      out.str(" (");
      write_size(out, *h.value);
      out.chr(')');
    }
    out.chr('\n');
  }
}

void write_json(err::Text& out, const Snapshot& s) {
  out.str("{\"version\":1,\"process\":{\"pid\":").dec(static_cast<uint64_t>(os::process_id()));
  out.str(",\"program\":\"");
  write_json_string(out, os::program_name());
  out.str("\",\"time\":\"");
  write_utc(out, os::wall_clock_seconds(), 'T');
  // Every key below is a C identifier from roost_stats.def: nothing to escape.
  out.str("Z\"},\"totals\":{");
  const char* sep = "";
#define ROOST_STAT(name, source, description)            \
  out.str(sep).str("\"" #name "\":").dec(s.totals.name); \
  sep = ",";
#include "roost_stats.def"
#undef ROOST_STAT
  out.str("},\"classes\":[");
  sep = "";
  for (unsigned sc = 0; sc < sizeclass::kCount; sc++) {
    if (!active(s, sc)) continue;
    const struct roost_class_stats& c = s.classes[sc];
    out.str(sep).str("{\"class\":").dec(sc);
#define ROOST_CLASS_STAT(name, description) out.str(",\"" #name "\":").dec(c.name);
#include "roost_stats.def"
#undef ROOST_CLASS_STAT
    out.chr('}');
    sep = ",";
  }
  out.chr(']');
  if (s.huge_pages.read) {
    HugeFigure f[kHugeFigures];
    huge_figures(s.huge_pages, f);
    out.str(",\"huge_pages\":{");
    sep = "";
    for (const HugeFigure& h : f) {
      out.str(sep).chr('"').str(h.name).str("\":");
      if (h.value == nullptr) {
        out.str("null");
      } else {
        out.dec(*h.value);
      }
      sep = ",";
    }
    out.chr('}');
  }
  out.chr('}');
}

}  // namespace roost::stats

ROOST_EXPORT int roost_stats(struct roost_stats* out) {
  if (out == nullptr) return -1;
  stats::Snapshot s;
  stats::take(s);
  *out = s.totals;
  return 0;
}

ROOST_EXPORT unsigned roost_class_count(void) { return sizeclass::kCount; }

ROOST_EXPORT int roost_class_stats(unsigned cls, struct roost_class_stats* out) {
  if (out == nullptr || cls >= sizeclass::kCount) return -1;
  stats::Snapshot s;
  stats::take(s);
  *out = s.classes[cls];
  return 0;
}

ROOST_EXPORT int roost_stats_json(char* buf, size_t len) {
  if (buf == nullptr && len != 0) return -1;
  stats::Snapshot s;
  stats::take(s);
  stats::take_huge_pages(s);
  err::Text out(buf, len);
  stats::write_json(out, s);
  return static_cast<int>(out.length());
}

ROOST_EXPORT void roost_print_stats(void) {
  stats::Snapshot s;
  stats::take(s);
  stats::take_huge_pages(s);
  char buf[512];
  int fd = 2;
  err::Text out(buf, sizeof(buf), err::Text::to_fd, &fd);
  stats::write_text(out, s);
  out.flush();
}

// The report at exit: ROOST_STATS=1 (text) or json, on stderr or to
// ROOST_STATS_FILE, in every process or (ROOST_STATS_PID) in one.  A
// destructor, not a constructor: it has no effect unless the option is set.
ROOST_COMMON_TEXT __attribute__((destructor)) static void report_at_exit() {
  timeline::write_last_line();  // (ROOST_STATS_INTERVAL: its last line)
  uint64_t form = options::get(options::kStats);
  if (form == options::kReportNone) return;
  if (!options::reports_here()) return;
  int fd = err::report_fd();
  int file = -1;
  if (const char* path = options::text(options::kStatsFile)) {
    file = err::open_report_file(options::kTable[options::kStatsFile].env, path,
                                 "; the report goes to stderr");
    if (file >= 0) fd = file;
  }
  stats::Snapshot s;
  stats::take(s);
  stats::take_huge_pages(s);
  char buf[512];
  err::Text out(buf, sizeof(buf), err::Text::to_fd, &fd);
  if (form == options::kReportJson) {
    stats::write_json(out, s);
    out.chr('\n');
  } else {
    stats::write_text(out, s);
  }
  out.flush();
  if (file >= 0) os::close(file);
}
