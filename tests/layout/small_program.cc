// tests/layout/small_program.cc — a small program's use of the allocator:
// the C family and C++'s operators on small and large objects, a second
// thread that frees some of the first one's objects and exits, then a
// pause long enough for the service thread to purge what was freed (the
// purge delay is 10 ms).  The common-text check (common_text_check.py)
// runs it under callgrind and requires every function of the library it
// runs to lie in the library's common text.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <new>

namespace {

constexpr int kObjects = 3000;
void* objects[kObjects];

void* free_every_other(void*) {
  for (int i = 0; i < kObjects; i += 2) {
    free(objects[i]);
    objects[i] = nullptr;
  }
  void* own = malloc(100);
  memset(own, 1, 100);
  free(own);
  return nullptr;
}

}  // namespace

int main() {
  for (int i = 0; i < kObjects; i++) {
    size_t size = 16 + (i * 7919) % 1000;
    objects[i] = malloc(size);
    memset(objects[i], 1, size);
  }
  void* zeroed = calloc(100, 8);
  void* grown = realloc(malloc(40), 4000);
  void* shrunk = realloc(grown, 20);
  void* aligned = aligned_alloc(64, 256);
  void* posix = nullptr;
  if (posix_memalign(&posix, 4096, 100) != 0) return 1;
  void* large = malloc(1 << 20);
  memset(large, 1, 1 << 20);

  int* array = new int[100];
  array[0] = 1;
  delete[] array;
  long* one = new long(2);
  ::operator delete(one, sizeof(long));
  char* plain = new char;
  delete plain;

  pthread_t thread;
  if (pthread_create(&thread, nullptr, free_every_other, nullptr) != 0) return 1;
  pthread_join(thread, nullptr);

  free(large);
  free(posix);
  free(aligned);
  free(shrunk);
  free(zeroed);
  for (int i = 0; i < kObjects; i++) free(objects[i]);
  usleep(300 * 1000);
  free(malloc(100));
  return 0;
}
