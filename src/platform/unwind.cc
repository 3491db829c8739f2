// platform/unwind.cc — implementation of platform/unwind.h.
#include "platform/unwind.h"

#include <atomic>

#include <dlfcn.h>
#include <link.h>

#include "platform/os.h"

namespace roost::unwind {

#if defined(__x86_64__) && defined(DLFO_EH_SEGMENT_TYPE)

namespace {

// DWARF register numbers on x86-64.
constexpr unsigned kRbp = 6, kRsp = 7, kReturnAddress = 16;

// How to step from a frame, stopped at a return address, to its caller's.
struct Rule {
  enum Kind : uint8_t { kStep = 1, kEnd, kUnknown };
  Kind kind;
  uint8_t cfa_register;  // kRsp or kRbp
  bool rbp_saved;
  int32_t cfa_offset;
  int32_t ra_offset;   // where the return address is, from the CFA
  int32_t rbp_offset;  // where the caller's rbp is (when saved)
};

// ---- reading .eh_frame_hdr and .eh_frame ----

class Reader {
 public:
  Reader(const uint8_t* p, const uint8_t* end) : p_(p), end_(end) {}
  bool ok() const { return ok_; }
  const uint8_t* at() const { return p_; }
  const uint8_t* end() const { return end_; }
  void skip(uint64_t n) {
    if (n > static_cast<uint64_t>(end_ - p_))
      ok_ = false;
    else
      p_ += n;
  }
  template <typename T>
  T fixed() {
    T v{};
    if (static_cast<size_t>(end_ - p_) < sizeof(T)) {
      ok_ = false;
      return v;
    }
    __builtin_memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }
  uint64_t uleb() {
    uint64_t v = 0;
    for (unsigned shift = 0;; shift += 7) {
      if (p_ >= end_ || shift > 63) {
        ok_ = false;
        return 0;
      }
      uint8_t b = *p_++;
      v |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) return v;
    }
  }
  int64_t sleb() {
    int64_t v = 0;
    unsigned shift = 0;
    uint8_t b;
    do {
      if (p_ >= end_ || shift > 63) {
        ok_ = false;
        return 0;
      }
      b = *p_++;
      v |= int64_t{b & 0x7f} << shift;
      shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40)) v |= -(int64_t{1} << shift);
    return v;
  }
  // A pointer in DW_EH_PE encoding `enc`: absolute, relative to where it is
  // (pcrel) or to `datarel`.  Other applications, and indirection, fail.
  uintptr_t encoded(uint8_t enc, uintptr_t datarel) {
    uintptr_t field = reinterpret_cast<uintptr_t>(p_);
    uintptr_t v;
    switch (enc & 0x0f) {
      case 0x00:
        v = fixed<uint64_t>();
        break;
      case 0x01:
        v = uleb();
        break;
      case 0x02:
        v = fixed<uint16_t>();
        break;
      case 0x03:
        v = fixed<uint32_t>();
        break;
      case 0x04:
        v = fixed<uint64_t>();
        break;
      case 0x09:
        v = static_cast<uintptr_t>(sleb());
        break;
      case 0x0a:
        v = static_cast<uintptr_t>(static_cast<intptr_t>(fixed<int16_t>()));
        break;
      case 0x0b:
        v = static_cast<uintptr_t>(static_cast<intptr_t>(fixed<int32_t>()));
        break;
      case 0x0c:
        v = static_cast<uintptr_t>(fixed<int64_t>());
        break;
      default:
        ok_ = false;
        return 0;
    }
    switch (enc & 0x70) {
      case 0x00:
        break;
      case 0x10:
        v += field;
        break;
      case 0x30:
        v += datarel;
        break;
      default:
        ok_ = false;
        return 0;
    }
    if (enc & 0x80) ok_ = false;  // indirect
    return v;
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
  bool ok_ = true;
};

// A length-prefixed .eh_frame entry: [start, end) after the length; false
// for the 64-bit form.
bool entry_bounds(const uint8_t* at, const uint8_t** body, const uint8_t** end) {
  uint32_t length;
  __builtin_memcpy(&length, at, 4);
  if (length == 0 || length == 0xffffffffu) return false;
  *body = at + 4;
  *end = at + 4 + length;
  return true;
}

struct Cie {
  uint64_t code_align;
  int64_t data_align;
  uint64_t ra_register;
  uint8_t fde_encoding = 0;
  bool augmented = false;  // 'z': FDEs carry augmentation data
  const uint8_t* insns;
  const uint8_t* end;
};

bool parse_cie(const uint8_t* at, Cie* c) {
  const uint8_t *body, *end;
  if (!entry_bounds(at, &body, &end)) return false;
  Reader r(body, end);
  if (r.fixed<uint32_t>() != 0) return false;  // a CIE's id
  uint8_t version = r.fixed<uint8_t>();
  if (version != 1 && version != 3) return false;
  const char* aug = reinterpret_cast<const char*>(r.at());
  size_t aug_len = 0;
  while (r.at() + aug_len < end && aug[aug_len] != 0) aug_len++;
  r.skip(aug_len + 1);
  c->code_align = r.uleb();
  c->data_align = r.sleb();
  c->ra_register = version == 1 ? r.fixed<uint8_t>() : r.uleb();
  if (aug_len > 0) {
    if (aug[0] != 'z') return false;
    c->augmented = true;
    uint64_t data_len = r.uleb();
    const uint8_t* data_end = r.at() + data_len;
    for (size_t i = 1; i < aug_len && r.ok(); i++) {
      switch (aug[i]) {
        case 'R':
          c->fde_encoding = r.fixed<uint8_t>();
          break;
        case 'P': {
          uint8_t enc = r.fixed<uint8_t>();
          r.encoded(static_cast<uint8_t>(enc & 0x7f), 0);  // (skipped, never followed)
          break;
        }
        case 'L':
          r.fixed<uint8_t>();
          break;
        default:
          return false;  // 'S' (a signal frame) or unknown
      }
    }
    if (!r.ok() || data_end > end) return false;
    r = Reader(data_end, end);
  }
  c->insns = r.at();
  c->end = end;
  return r.ok();
}

// The state of the columns that matter while a frame's instructions run.
struct State {
  uint8_t cfa_register;
  int64_t cfa_offset;
  // For rbp and the return address: 0 unset (same value), 1 offset(N), 2 undefined.
  uint8_t rbp_how, ra_how;
  int64_t rbp_offset, ra_offset;
};

// Runs call-frame instructions [r) from location `loc` while loc < `ra`.
// False for anything this walk does not read.
bool run(Reader r, const Cie& c, uintptr_t loc, uintptr_t ra, const State& initial, State* s) {
  constexpr int kMaxRemembered = 8;
  State remembered[kMaxRemembered];
  int depth = 0;
  auto set_offset = [s](uint64_t reg, int64_t off) {
    if (reg == kRbp) {
      s->rbp_how = 1;
      s->rbp_offset = off;
    } else if (reg == kReturnAddress) {
      s->ra_how = 1;
      s->ra_offset = off;
    }
  };
  auto restore = [s, &initial](uint64_t reg) {
    if (reg == kRbp) {
      s->rbp_how = initial.rbp_how;
      s->rbp_offset = initial.rbp_offset;
    } else if (reg == kReturnAddress) {
      s->ra_how = initial.ra_how;
      s->ra_offset = initial.ra_offset;
    }
  };
  auto tracked = [](uint64_t reg) { return reg == kRbp || reg == kReturnAddress; };
  while (r.ok() && r.at() < r.end() && loc < ra) {
    uint8_t op = r.fixed<uint8_t>();
    switch (op & 0xc0) {
      case 0x40:
        loc += (op & 0x3f) * c.code_align;
        continue;
      case 0x80:
        set_offset(op & 0x3f, static_cast<int64_t>(r.uleb()) * c.data_align);
        continue;
      case 0xc0:
        restore(op & 0x3f);
        continue;
    }
    switch (op) {
      case 0x00:
        break;  // nop
      case 0x01:
        loc = r.encoded(c.fde_encoding, 0);
        break;
      case 0x02:
        loc += r.fixed<uint8_t>() * c.code_align;
        break;
      case 0x03:
        loc += r.fixed<uint16_t>() * c.code_align;
        break;
      case 0x04:
        loc += r.fixed<uint32_t>() * c.code_align;
        break;
      case 0x05: {
        uint64_t reg = r.uleb();
        set_offset(reg, static_cast<int64_t>(r.uleb()) * c.data_align);
        break;
      }
      case 0x06:
        restore(r.uleb());
        break;
      case 0x07: {  // undefined
        uint64_t reg = r.uleb();
        if (reg == kReturnAddress) s->ra_how = 2;
        if (reg == kRbp) s->rbp_how = 2;
        break;
      }
      case 0x08: {  // same value
        uint64_t reg = r.uleb();
        if (reg == kRbp) s->rbp_how = 0;
        if (reg == kReturnAddress) return false;
        break;
      }
      case 0x09: {  // register: kept in another register
        uint64_t reg = r.uleb();
        r.uleb();
        if (tracked(reg)) return false;
        break;
      }
      case 0x0a:
        if (depth == kMaxRemembered) return false;
        remembered[depth++] = *s;
        break;
      case 0x0b:  // the whole row back, the CFA's rule too (as GCC's unwinder does)
        if (depth == 0) return false;
        *s = remembered[--depth];
        break;
      case 0x0c:
        s->cfa_register = static_cast<uint8_t>(r.uleb());
        s->cfa_offset = static_cast<int64_t>(r.uleb());
        break;
      case 0x0d:
        s->cfa_register = static_cast<uint8_t>(r.uleb());
        break;
      case 0x0e:
        s->cfa_offset = static_cast<int64_t>(r.uleb());
        break;
      case 0x10:    // expression
      case 0x16: {  // val_expression
        uint64_t reg = r.uleb();
        r.skip(r.uleb());
        if (tracked(reg)) return false;
        break;
      }
      case 0x11: {
        uint64_t reg = r.uleb();
        set_offset(reg, r.sleb() * c.data_align);
        break;
      }
      case 0x12:
        s->cfa_register = static_cast<uint8_t>(r.uleb());
        s->cfa_offset = r.sleb() * c.data_align;
        break;
      case 0x13:
        s->cfa_offset = r.sleb() * c.data_align;
        break;
      case 0x14:    // val_offset
      case 0x15: {  // val_offset_sf
        uint64_t reg = r.uleb();
        if (op == 0x14)
          r.uleb();
        else
          r.sleb();
        if (tracked(reg)) return false;
        break;
      }
      case 0x2e:
        r.uleb();
        break;      // GNU_args_size
      case 0x2f: {  // GNU_negative_offset_extended
        uint64_t reg = r.uleb();
        set_offset(reg, -static_cast<int64_t>(r.uleb()) * c.data_align);
        break;
      }
      default:
        return false;  // def_cfa_expression and anything else
    }
  }
  return r.ok();
}

// The rule of the frame stopped at return address `ra`, from the tables.
Rule compute(uintptr_t ra) {
  Rule end{Rule::kEnd, 0, false, 0, 0, 0};
  Rule unknown{Rule::kUnknown, 0, false, 0, 0, 0};
  // The call is before the return address: its location finds the frame's
  // entry (a call may be a function's last instruction).
  uintptr_t call = ra - 1;
  dl_find_object found;
  if (_dl_find_object(reinterpret_cast<void*>(call), &found) != 0 || found.dlfo_eh_frame == nullptr)
    return end;
  const auto* hdr = static_cast<const uint8_t*>(found.dlfo_eh_frame);
  uintptr_t hdr_base = reinterpret_cast<uintptr_t>(hdr);
  // version, eh_frame_ptr encoding, fde_count encoding, table encoding.
  if (hdr[0] != 1 || hdr[3] != 0x3b) return unknown;  // table: datarel sdata4
  Reader r(hdr + 4, hdr + 4 + 16);
  r.encoded(hdr[1], hdr_base);
  uint64_t count = r.encoded(hdr[2], hdr_base);
  if (!r.ok() || count == 0) return end;
  const auto* table = reinterpret_cast<const int32_t*>(r.at());
  // The last entry whose function starts at or below the call.
  uint64_t lo = 0, hi = count;
  while (hi - lo > 1) {
    uint64_t mid = (lo + hi) / 2;
    if (hdr_base + static_cast<intptr_t>(table[2 * mid]) <= call)
      lo = mid;
    else
      hi = mid;
  }
  if (hdr_base + static_cast<intptr_t>(table[2 * lo]) > call) return end;
  const uint8_t* fde = hdr + table[2 * lo + 1];
  const uint8_t *body, *fde_end;
  if (!entry_bounds(fde, &body, &fde_end)) return unknown;
  Reader f(body, fde_end);
  const uint8_t* cie_field = f.at();
  uint32_t cie_offset = f.fixed<uint32_t>();
  Cie cie;
  if (cie_offset == 0 || !parse_cie(cie_field - cie_offset, &cie)) return unknown;
  if (cie.ra_register != kReturnAddress) return unknown;
  uintptr_t pc_begin = f.encoded(cie.fde_encoding, 0);
  uintptr_t pc_range = f.encoded(static_cast<uint8_t>(cie.fde_encoding & 0x0f), 0);
  if (!f.ok()) return unknown;
  if (call < pc_begin || call - pc_begin >= pc_range) return end;  // no frame info here
  if (cie.augmented) f.skip(f.uleb());
  State initial{kRsp, 8, 0, 0, 0, 0};
  // The CIE's instructions set the state every FDE of it starts from.
  if (!run(Reader(cie.insns, cie.end), cie, 0, UINTPTR_MAX, initial, &initial)) return unknown;
  State s = initial;
  if (!f.ok() || !run(Reader(f.at(), fde_end), cie, pc_begin, ra, initial, &s)) return unknown;
  if (s.ra_how == 2) return end;  // a thread's first frame
  if (s.ra_how != 1 || (s.cfa_register != kRsp && s.cfa_register != kRbp)) return unknown;
  if (s.cfa_offset < 0 || s.cfa_offset > (int64_t{1} << 30)) return unknown;
  Rule rule{Rule::kStep,
            s.cfa_register,
            s.rbp_how == 1,
            static_cast<int32_t>(s.cfa_offset),
            static_cast<int32_t>(s.ra_offset),
            static_cast<int32_t>(s.rbp_offset)};
  return rule;
}

// ---- the cache: a rule per return address ----
//
// Every sampling thread reads it, a dozen slots a stack, so it takes no
// lock: each slot is a sequence lock, odd while its one writer writes it.
// A reader that finds a slot odd, or changed under it, computes the rule
// itself; a writer that finds the slot taken does not cache its rule.  The
// slot's words are stored with release and loaded with acquire (plain
// moves on x86-64), so no fence is needed (ThreadSanitizer models none).

constexpr size_t kSlots = 4096;  // a power of two
constexpr size_t kRuleWords = (sizeof(Rule) + 7) / 8;
struct Slot {
  std::atomic<uint64_t> sequence{0};
  std::atomic<uintptr_t> ra{0};
  std::atomic<uint64_t> rule[kRuleWords] = {};
};
Slot g_slots[kSlots];

size_t slot_of(uintptr_t ra) { return (ra * 0x9e3779b97f4a7c15ull) >> 52 & (kSlots - 1); }

bool cached(const Slot& slot, uintptr_t ra, Rule* out) {
  // acquire, each load: the sequence is read before the words, the words
  // before the sequence again; a word a writer stored (release) brings the
  // odd sequence it stored first.
  uint64_t sequence = slot.sequence.load(std::memory_order_acquire);
  if ((sequence & 1) != 0 || slot.ra.load(std::memory_order_acquire) != ra) return false;
  uint64_t words[kRuleWords];
  for (size_t i = 0; i < kRuleWords; i++) words[i] = slot.rule[i].load(std::memory_order_acquire);
  // Relaxed: the acquire loads above keep it after them.
  if (slot.sequence.load(std::memory_order_relaxed) != sequence) return false;
  __builtin_memcpy(out, words, sizeof(Rule));
  return true;
}

void cache(Slot& slot, uintptr_t ra, const Rule& rule) {
  uint64_t sequence = slot.sequence.load(std::memory_order_relaxed);
  // Relaxed: the release stores below carry the odd sequence out before
  // any word.
  if ((sequence & 1) != 0 ||
      !slot.sequence.compare_exchange_strong(sequence, sequence + 1, std::memory_order_relaxed))
    return;  // another writer's
  uint64_t words[kRuleWords] = {};
  __builtin_memcpy(words, &rule, sizeof(Rule));
  // release, each store: after the odd sequence.
  slot.ra.store(ra, std::memory_order_release);
  for (size_t i = 0; i < kRuleWords; i++) slot.rule[i].store(words[i], std::memory_order_release);
  // release: the words go out before the slot reads even again.
  slot.sequence.store(sequence + 2, std::memory_order_release);
}

Rule rule_of(uintptr_t ra) {
  Slot& slot = g_slots[slot_of(ra)];
  Rule rule;
  if (cached(slot, ra, &rule)) return rule;
  rule = compute(ra);  // (the tables are read-only)
  cache(slot, ra, rule);
  return rule;
}

}  // namespace

bool available() { return true; }

// Not inlined, with a frame pointer (which __builtin_frame_address asks
// for): the caller's registers at the call are then at known places.  The
// frames' saved words are read as they are (no sanitizer's view of them).
__attribute__((noinline, no_sanitize("address", "thread"))) long capture(uintptr_t* pcs,
                                                                         size_t max) {
  auto* frame = static_cast<uintptr_t*>(__builtin_frame_address(0));
  uintptr_t rbp = frame[0];
  uintptr_t ra = frame[1];
  uintptr_t rsp = reinterpret_cast<uintptr_t>(frame + 2);
  size_t n = 0;
  while (n < max && ra != 0) {
    pcs[n++] = ra;
    Rule rule = rule_of(ra);
    if (rule.kind == Rule::kEnd) break;
    if (rule.kind != Rule::kStep) return -1;
    uintptr_t cfa =
        (rule.cfa_register == kRsp ? rsp : rbp) + static_cast<intptr_t>(rule.cfa_offset);
    // A frame's CFA lies above its stack pointer, within reach.
    if (cfa <= rsp || cfa - rsp > (uintptr_t{1} << 30) || (cfa & 7) != 0) return -1;
    ra = *reinterpret_cast<const uintptr_t*>(cfa + rule.ra_offset);
    if (rule.rbp_saved) rbp = *reinterpret_cast<const uintptr_t*>(cfa + rule.rbp_offset);
    rsp = cfa;
  }
  return static_cast<long>(n);
}

#else

bool available() { return false; }
long capture(uintptr_t*, size_t) { return -1; }

#endif

}  // namespace roost::unwind
