// tests/unit/remote_free.h — what the API's free does with another
// allocator's object that its fast paths leave to the slow path: the free
// mark's check, then the remote free's slow path of the freeing thread's
// allocator.
#pragma once

#include "backend/pagemap.h"
#include "frontend/allocator.h"
#include "frontend/checks.h"

namespace roost::test {

inline void free_remote(Allocator* by, void* p) {
  ChunkMeta* m = pagemap::lookup(p);
  checks::note_free(m, p, "free");
  by->send_remote(m, p);
}

}  // namespace roost::test
