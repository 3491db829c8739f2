// platform/stack_trace.cc — implementation of platform/stack_trace.h.
#include "platform/stack_trace.h"

#include <atomic>

#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <unistd.h>

#include "platform/unwind.h"

namespace roost::stack_trace {

namespace {

// roost's executable segments where it is a shared object (none where it is
// part of the program), set once by prime().
struct Range {
  uintptr_t begin, end;
};
constexpr size_t kMaxRanges = 8;
Range g_own[kMaxRanges];
std::atomic<size_t> g_own_count{0};

// The program's path (/proc/self/exe), for report lines: dl_iterate_phdr
// names the program "".
char g_program[512];

bool holds(const dl_phdr_info* info, uintptr_t pc) {
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
    if (pc >= begin && pc - begin < ph.p_memsz) return true;
  }
  return false;
}

bool is_program(const dl_phdr_info* info) {
  return info->dlpi_name == nullptr || info->dlpi_name[0] == '\0';
}

int find_own(dl_phdr_info* info, size_t, void* data) {
  if (!holds(info, reinterpret_cast<uintptr_t>(data))) return 0;
  if (is_program(info)) return 1;  // linked into the program: no range of its own
  size_t n = 0;
  for (int i = 0; i < info->dlpi_phnum && n < kMaxRanges; i++) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_X) == 0) continue;
    g_own[n].begin = info->dlpi_addr + ph.p_vaddr;
    g_own[n].end = g_own[n].begin + ph.p_memsz;
    n++;
  }
  g_own_count.store(n, std::memory_order_release);
  return 1;
}

struct Lookup {
  uintptr_t pc;
  Place* out;
  bool found;
};

int find_place(dl_phdr_info* info, size_t, void* data) {
  auto* l = static_cast<Lookup*>(data);
  if (!holds(info, l->pc)) return 0;
  l->out->object = is_program(info) ? g_program : info->dlpi_name;
  l->out->file_address = l->pc - info->dlpi_addr;
  l->found = true;
  return 1;
}

}  // namespace

size_t capture(uintptr_t* pcs, size_t max) {
  static_assert(sizeof(uintptr_t) == sizeof(void*));
  // The fast walk where it is built and the frames are ordinary ones...
  long fast = unwind::capture(pcs, max);
  if (fast >= 0) return static_cast<size_t>(fast);
  // ...else libgcc's, which reads every kind of frame.
  int n = backtrace(reinterpret_cast<void**>(pcs), static_cast<int>(max));
  return n > 0 ? static_cast<size_t>(n) : 0;
}

void prime() {
  void* pcs[4];
  backtrace(pcs, 4);  // loads libgcc_s's unwinder (the slow walk) now
  ssize_t n = readlink("/proc/self/exe", g_program, sizeof(g_program) - 1);
  g_program[n > 0 ? n : 0] = '\0';
  dl_iterate_phdr(find_own, reinterpret_cast<void*>(&prime));
}

bool in_roost(uintptr_t pc) {
  size_t n = g_own_count.load(std::memory_order_acquire);
  for (size_t i = 0; i < n; i++)
    if (pc >= g_own[i].begin && pc < g_own[i].end) return true;
  return false;
}

bool locate(uintptr_t pc, Place* out) {
  Lookup l{pc, out, false};
  dl_iterate_phdr(find_place, &l);
  if (!l.found) return false;
  out->symbol = nullptr;
  out->symbol_offset = 0;
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(pc), &info) != 0 && info.dli_sname != nullptr &&
      info.dli_saddr != nullptr) {
    out->symbol = info.dli_sname;
    out->symbol_offset = pc - reinterpret_cast<uintptr_t>(info.dli_saddr);
  }
  return true;
}

}  // namespace roost::stack_trace
