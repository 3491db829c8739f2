/* A C program that tests/introspection_check.py runs and reads: it
 * allocates 10 MiB of 100-byte objects and keeps them, then writes
 *   stdout: roost_stats_json()'s object on one line, then
 *           "mallinfo2 arena=N uordblks=N fordblks=N hblks=N hblkhd=N keepcost=N"
 *   stderr: malloc_stats()'s text
 *   argv[1]: malloc_info(0, ...)'s document
 * and returns.  Every stdio stream it writes has a static buffer, so that
 * from the snapshot on nothing allocates and the figures of all four agree.
 * Built three ways: unlinked for LD_PRELOAD=libroost.so (roost's entry
 * point looked up with dlsym), linked to libroost.a, and linked with
 * -static (ROOST_TEST_LINKED for both: a static link must take roost's
 * mallinfo2 and malloc_info, and must link at all). */
#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "roost.h"

#ifdef ROOST_TEST_LINKED
#define ROOST_ENTRY(name) (&name)
#else
#define ROOST_ENTRY(name) ((__typeof__(&name))dlsym(RTLD_DEFAULT, #name))
#endif

int main(int argc, char** argv) {
  static char out_buf[16384], file_buf[16384], json[16384];
  static void* kept[(10 << 20) / 100];
  if (argc != 2) {
    fprintf(stderr, "usage: %s MALLOC_INFO_FILE\n", argv[0]);
    return 2;
  }
  int (*stats_json)(char*, size_t) = ROOST_ENTRY(roost_stats_json);
  if (stats_json == NULL) {
    fprintf(stderr, "roost_stats_json not found: roost is not serving this process\n");
    return 2;
  }
  setvbuf(stdout, out_buf, _IOFBF, sizeof(out_buf));
  FILE* info = fopen(argv[1], "w");
  if (info == NULL) {
    perror(argv[1]);
    return 2;
  }
  setvbuf(info, file_buf, _IOFBF, sizeof(file_buf));
  for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
    kept[i] = malloc(100);
    if (kept[i] == NULL) return 2;
    memset(kept[i], 1, 100);
  }
  int n = stats_json(json, sizeof(json));
  if (n < 0 || (size_t)n >= sizeof(json)) return 2;
  struct mallinfo2 mi = mallinfo2();
  if (malloc_info(0, info) != 0) return 2;
  malloc_stats();
  printf("%s\n", json);
  printf("mallinfo2 arena=%zu uordblks=%zu fordblks=%zu hblks=%zu hblkhd=%zu keepcost=%zu\n",
         mi.arena, mi.uordblks, mi.fordblks, mi.hblks, mi.hblkhd, mi.keepcost);
  fclose(info);
  return 0;
}
