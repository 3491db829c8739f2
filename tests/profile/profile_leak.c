/* The leak report's program (profile_check.py runs it with
 * ROOST_PROFILE=leaks):
 *
 *   profile_leak leak    leak_here() leaks 200 objects of 2 KiB; everything
 *                        else is freed
 *   profile_leak clean   allocates, resizes and frees, and keeps nothing
 *
 * C and no stdio, so that nothing but its own objects can still be
 * allocated at exit. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* noipa: not inlined, and no clone of it either. */
#define NOINLINE __attribute__((noipa))

/* Keeps the compiler from dropping an allocation or turning a call into a
 * jump (which would take the calling function's frame off the stack). */
static inline void keep(void* p) { __asm__ volatile("" : : "g"(p) : "memory"); }

enum { kLeaked = 200, kLeakSize = 2048 };

NOINLINE void leak_here(void) {
  for (int i = 0; i < kLeaked; i++) keep(malloc(kLeakSize));
}

NOINLINE void churn(void) {
  void* held[100];
  for (int round = 0; round < 50; round++) {
    for (int i = 0; i < 100; i++) held[i] = malloc(16 + 64 * (size_t)i);
    void* big = calloc(1, 3 << 20);
    keep(big);
    for (int i = 0; i < 100; i++) {
      held[i] = realloc(held[i], 100 + 32 * (size_t)i);
      keep(held[i]);
    }
    for (int i = 0; i < 100; i++) free(held[i]);
    free(big);
  }
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "leak") == 0) {
    churn();
    leak_here();
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "clean") == 0) {
    churn();
    return 0;
  }
  static const char kUsage[] = "usage: profile_leak leak|clean\n";
  (void)!write(2, kUsage, sizeof(kUsage) - 1);
  return 2;
}
