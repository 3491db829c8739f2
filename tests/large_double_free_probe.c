// tests/large_double_free_probe.c — a double free of a large or huge object
// in a fresh process, where the catalog's forked children cannot go (their
// parent's heap has held large objects before).
//
//   roost_large_double_free_probe <state> <bytes>
//   roost_large_double_free_probe all
//
// The first forks before its first allocation; the child makes the misuse in
// <state>, and the parent checks that it died of SIGABRT after exactly one
// line, "roost: free: double free 0x<addr> (size class <usable> bytes)",
// where <usable> is what malloc_usable_size said of the object (<bytes>
// rounded up to whole pages; the secure build: <bytes>).  States:
//   first         the process's first large object: malloc, free, free
//   after_others  another object of the size allocated and freed first
//   other_thread  the first free on another thread, the second here
//   both_threads  both frees on other threads, one after the other
// Exit 0 when caught as wanted; 1, saying what happened, otherwise.  The
// parent allocates nothing (the pipe is read into a stack buffer).  `all`
// runs every state at 300 000 bytes, 1 MiB, 64 MiB (large objects) and
// 1.5 GiB (huge: mapped alone), each in a fresh process (this program run
// again), and fails if any fails.  Those processes run without
// ROOST_OFFLOAD: its service thread allocates for the rings all the time,
// and may reuse a freed object's memory before its second free.
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void* (*volatile g_malloc)(size_t) = malloc;
static void (*volatile g_free)(void*) = free;

static void* free_it(void* p) {
  g_free(p);
  return NULL;
}

static void free_on_another_thread(void* p) {
  pthread_t t;
  if (pthread_create(&t, NULL, free_it, p) != 0 || pthread_join(t, NULL) != 0) _exit(3);
}

// The child: the object's address and usable size go to the parent first
// (one line on `addr_fd`), then the misuse.
static void misuse(const char* state, size_t bytes, int addr_fd) {
  if (strcmp(state, "after_others") == 0) {
    char* q = g_malloc(bytes);
    if (q == NULL) _exit(3);
    q[0] = 1;
    g_free(q);
  }
  char* p = g_malloc(bytes);
  if (p == NULL) _exit(3);
  p[0] = 1;
  char line[64];
  int n = snprintf(line, sizeof(line), "%" PRIxPTR " %zu\n", (uintptr_t)p, malloc_usable_size(p));
  if (write(addr_fd, line, (size_t)n) != n) _exit(3);
  if (strcmp(state, "first") == 0 || strcmp(state, "after_others") == 0) {
    g_free(p);
    g_free(p);
  } else if (strcmp(state, "other_thread") == 0) {
    free_on_another_thread(p);
    g_free(p);
  } else if (strcmp(state, "both_threads") == 0) {
    free_on_another_thread(p);
    free_on_another_thread(p);
  } else {
    _exit(2);
  }
  _exit(0);  // not caught
}

// Reads `fd` to its end into buf (NUL-terminated); returns the length.
static size_t read_all(int fd, char* buf, size_t cap) {
  size_t len = 0;
  ssize_t r;
  while (len + 1 < cap && (r = read(fd, buf + len, cap - 1 - len)) > 0) len += (size_t)r;
  buf[len] = '\0';
  return len;
}

static int run_all(const char* self) {
  unsetenv("ROOST_OFFLOAD");
  static const char* const kStates[] = {"first", "after_others", "other_thread", "both_threads"};
  static const char* const kSizes[] = {"300000", "1048576", "67108864", "1610612736"};
  int failed = 0;
  for (size_t s = 0; s < sizeof(kStates) / sizeof(kStates[0]); s++) {
    for (size_t z = 0; z < sizeof(kSizes) / sizeof(kSizes[0]); z++) {
      fflush(stdout);
      pid_t pid = fork();
      if (pid < 0) return 3;
      if (pid == 0) {
        execl(self, self, kStates[s], kSizes[z], (char*)NULL);
        _exit(3);
      }
      int status;
      if (waitpid(pid, &status, 0) != pid) return 3;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed++;
    }
  }
  return failed == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "all") == 0) return run_all("/proc/self/exe");
  if (argc != 3) {
    fprintf(stderr, "usage: %s first|after_others|other_thread|both_threads <bytes>\n", argv[0]);
    return 2;
  }
  const char* state = argv[1];
  size_t bytes = strtoull(argv[2], NULL, 0);
  int err_pipe[2], addr_pipe[2];
  if (pipe(err_pipe) != 0 || pipe(addr_pipe) != 0) return 3;
  pid_t pid = fork();
  if (pid < 0) return 3;
  if (pid == 0) {
    dup2(err_pipe[1], 2);
    close(err_pipe[0]);
    close(addr_pipe[0]);
    misuse(state, bytes, addr_pipe[1]);
  }
  close(err_pipe[1]);
  close(addr_pipe[1]);
  char err[1024], addr[64];
  read_all(err_pipe[0], err, sizeof(err));
  read_all(addr_pipe[0], addr, sizeof(addr));
  int status;
  if (waitpid(pid, &status, 0) != pid) return 3;

  size_t addr_len = strcspn(addr, " \n");
  size_t usable = addr[addr_len] == ' ' ? strtoull(addr + addr_len + 1, NULL, 10) : 0;
  char want[160];
  snprintf(want, sizeof(want), "roost: free: double free 0x%.*s (size class %zu bytes)\n",
           (int)addr_len, addr, usable);
  int aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  if (usable < bytes || usable >= bytes + page) {
    printf("%s %zu bytes: malloc_usable_size said %zu\n", state, bytes, usable);
    return 1;
  }
  if (aborted && strcmp(err, want) == 0) {
    printf("%s %zu bytes: caught: %s", state, bytes, err);
    return 0;
  }
  printf("%s %zu bytes: wanted SIGABRT after \"%.*s\", got ", state, bytes,
         (int)strcspn(want, "\n"), want);
  if (WIFSIGNALED(status))
    printf("signal %d", WTERMSIG(status));
  else
    printf("exit %d", WEXITSTATUS(status));
  printf(" and stderr \"%s\"\n", err);
  return 1;
}
