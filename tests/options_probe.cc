// A small program that tests/options_env_test.cc runs under controlled
// environments, reading what roost writes on stderr.  It writes nothing on
// stderr itself.  Modes (argv[1]):
//   alloc   allocates and frees a little (roost reads its options)
//   remote  a second thread frees 1000 same-size objects the first allocated
//           (a run of frees into one or two slabs); then writes
//           "remote_frees=N messages_sent=N slab_batches_sent=N" on stdout
//   print   calls roost_print_options()
//   stats   allocates 1000 objects of 100 bytes and keeps them, then writes
//           roost_stats() on stdout, "name=value" a line, and returns (the
//           report at exit follows; stdout has a static buffer, so nothing
//           but roost_stats() runs in roost from there on)
//   in-flight  a second thread frees 1000 objects of 48 bytes the first
//           allocated (fewer bytes than the outbox holds before it posts),
//           then waits for the end of the process without posting them
//   fork    forks a child that allocates and exits (with its own report at
//           exit, if any), waits for it, and writes "child=PID" on stdout
// Built linked to roost::prefixed (ROOST_TEST_PREFIXED: roost_malloc and
// roost_free), and unlinked for LD_PRELOAD=libroost.so (malloc and free,
// roost's own entry points looked up with dlsym).
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "roost.h"

namespace {

#if defined(ROOST_TEST_PREFIXED)
void* t_malloc(size_t n) { return roost_malloc(n); }
void t_free(void* p) { roost_free(p); }
template <class F>
F* roost_entry(F* linked, const char*) {
  return linked;
}
#else
void* t_malloc(size_t n) { return malloc(n); }
void t_free(void* p) { free(p); }
template <class F>
F* roost_entry(F*, const char* name) {
  return reinterpret_cast<F*>(dlsym(RTLD_DEFAULT, name));
}
#endif

int alloc() {
  void* p = t_malloc(100);
  if (p == nullptr) return 2;
  memset(p, 1, 100);
  t_free(p);
  return 0;
}

// roost_stats, or nullptr (saying so on stdout) when roost does not serve
// this process.
auto* find_roost_stats() {
  auto* stats = roost_entry(&roost_stats, "roost_stats");
  if (stats == nullptr) printf("roost_stats not found: roost is not serving this process\n");
  return stats;
}

int remote() {
  auto* stats = find_roost_stats();
  if (stats == nullptr) return 2;
  constexpr size_t kObjects = 1000, kSize = 48;
  std::vector<void*> objects(kObjects);
  for (void*& p : objects) {
    p = t_malloc(kSize);
    if (p == nullptr) return 2;
    memset(p, 2, kSize);
  }
  struct roost_stats before {};
  stats(&before);
  std::thread freer([&] {
    for (void* p : objects) t_free(p);
  });
  freer.join();  // the freer's outbox is posted at its exit
  struct roost_stats after {};
  stats(&after);
  printf("remote_frees=%llu messages_sent=%llu slab_batches_sent=%llu\n",
         static_cast<unsigned long long>(after.remote_frees - before.remote_frees),
         static_cast<unsigned long long>(after.messages_sent - before.messages_sent),
         static_cast<unsigned long long>(after.slab_batches_sent - before.slab_batches_sent));
  return 0;
}

int print() {
  auto* print_options = roost_entry(&roost_print_options, "roost_print_options");
  if (print_options == nullptr) {
    printf("roost_print_options not found: roost is not serving this process\n");
    return 2;
  }
  print_options();
  return 0;
}

int stats() {
  auto* stats = find_roost_stats();
  if (stats == nullptr) return 2;
  static char out_buf[8192];
  setvbuf(stdout, out_buf, _IOFBF, sizeof(out_buf));
  static void* kept[1000];
  for (void*& p : kept) {
    p = t_malloc(100);
    if (p == nullptr) return 2;
    memset(p, 3, 100);
  }
  struct roost_stats s {};
  stats(&s);
#define ROOST_STAT(name, source, description) \
  printf("%s=%llu\n", #name, static_cast<unsigned long long>(s.name));
#include "roost_stats.def"
#undef ROOST_STAT
  return 0;
}

int in_flight() {
  constexpr size_t kObjects = 1000, kSize = 48;
  static void* objects[kObjects];
  for (void*& p : objects) {
    p = t_malloc(kSize);
    if (p == nullptr) return 2;
    memset(p, 4, kSize);
  }
  static std::atomic<bool> freed{false};
  std::thread freer([] {
    for (void* p : objects) t_free(p);
    freed.store(true);
    for (;;) pause();  // the process ends around it
  });
  freer.detach();
  while (!freed.load()) std::this_thread::yield();
  return 0;
}

int fork_child() {
  fflush(stdout);
  pid_t child = fork();
  if (child < 0) return 2;
  if (child == 0) exit(alloc());
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return 2;
  printf("child=%d\n", static_cast<int>(child));
  return alloc();
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "alloc") == 0) return alloc();
  if (strcmp(mode, "remote") == 0) return remote();
  if (strcmp(mode, "print") == 0) return print();
  if (strcmp(mode, "stats") == 0) return stats();
  if (strcmp(mode, "in-flight") == 0) return in_flight();
  if (strcmp(mode, "fork") == 0) return fork_child();
  printf("usage: %s alloc|remote|print|stats|in-flight|fork\n", argv[0]);
  return 2;
}
