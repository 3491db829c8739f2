/* When roost cannot start (no room for its page map or its first region,
 * or a kernel page size it does not support), it says so in one line on
 * stderr naming the limit, the allocation fails with ENOMEM instead of
 * crashing, and roost starts at a later call once there is room.  Three
 * ways to refuse the room: `limit` lowers RLIMIT_AS (`ulimit -v`) to just
 * above what the process uses (256 KiB more); `inject` has the platform
 * layer refuse every mmap (roost built with -DROOST_FAULT_INJECTION=1);
 * `region` refuses every mmap but the first (the page map's), so roost's
 * first metadata block is what cannot be had.  `page` has the platform
 * layer report 128 KiB pages (beyond config.h's 64 KiB), then the kernel's
 * again.  Linked to a static roost; nothing here allocates before the
 * first malloc under test (stdio would).  Exits 0 when every check holds,
 * else prints the failed one. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

void roost_test_inject_faults(int kind, long first, long count);
void roost_test_set_page_size(size_t bytes);

static char g_err[1024];

/* Runs malloc(64) with stderr captured into g_err; returns its result. */
static void* malloc_capturing_stderr(int* error) {
  char path[] = "/tmp/roost-probe-XXXXXX";
  int fd = mkstemp(path);
  int saved = dup(2);
  if (fd < 0 || saved < 0) return NULL;
  unlink(path);
  dup2(fd, 2);
  errno = 0;
  void* p = malloc(64);
  *error = errno;
  dup2(saved, 2);
  close(saved);
  ssize_t n = pread(fd, g_err, sizeof g_err - 1, 0);
  g_err[n > 0 ? n : 0] = 0;
  close(fd);
  return p;
}

static size_t vm_size(void) {
  char buf[64] = {0};
  int fd = open("/proc/self/statm", O_RDONLY);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  return n > 0 ? strtoull(buf, NULL, 10) * (size_t)sysconf(_SC_PAGESIZE) : 0;
}

#define CHECK(cond)                                   \
  do {                                                \
    if (!(cond)) {                                    \
      fprintf(stderr, "check failed: %s\n", #cond);   \
      fprintf(stderr, "roost's stderr: %s\n", g_err); \
      return 1;                                       \
    }                                                 \
  } while (0)

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  struct rlimit old;
  getrlimit(RLIMIT_AS, &old);
  int limit = strcmp(argv[1], "limit") == 0;
  int region = strcmp(argv[1], "region") == 0;
  int page = strcmp(argv[1], "page") == 0;
  if (limit) {
    /* Less than the page map's first part, which under so small a limit
     * covers the window's first slot from 4 GiB (640 KiB). */
    struct rlimit tight = {vm_size() + (256u << 10), old.rlim_max};
    CHECK(setrlimit(RLIMIT_AS, &tight) == 0);
  } else if (page) {
    roost_test_set_page_size(128 * 1024);
  } else {
    roost_test_inject_faults(0, region ? 1 : 0, -1);
  }
  int error = 0;
  void* p = malloc_capturing_stderr(&error);
  CHECK(p == NULL);
  CHECK(error == ENOMEM);
  CHECK(strncmp(g_err, "roost: cannot start: ", 21) == 0);
  CHECK(strchr(g_err, '\n') == g_err + strlen(g_err) - 1); /* one line */
  if (limit) CHECK(strstr(g_err, "the address-space limit (ulimit -v) is ") != NULL);
  if (page)
    CHECK(strcmp(g_err,
                 "roost: cannot start: the OS's page size is 131072 bytes; roost supports "
                 "4 to 64 KiB pages: allocations fail with ENOMEM\n") == 0);
  else
    CHECK(strstr(g_err, region ? "of address space for its metadata; "
                               : "of address space for the page map; ") != NULL);
  /* Said once: the next failing call is silent. */
  p = malloc_capturing_stderr(&error);
  CHECK(p == NULL && error == ENOMEM && g_err[0] == 0);
  /* Room again: roost starts. */
  if (limit)
    CHECK(setrlimit(RLIMIT_AS, &old) == 0);
  else if (page)
    roost_test_set_page_size(0);
  else
    roost_test_inject_faults(0, 0, 0);
  p = malloc_capturing_stderr(&error);
  CHECK(p != NULL && g_err[0] == 0);
  memset(p, 1, 64);
  free(p);
  char* q = malloc(100000);
  CHECK(q != NULL);
  free(q);
  printf("ok: %s\n", argv[1]);
  return 0;
}
