// backend/meta_arena.h — memory for allocator metadata.
//
// Owns: a bump allocator over reserved metadata space, separate from every
// address range that user objects come from.  Used for region tables,
// allocator records and huge-object records.  Memory is zeroed and is never
// returned (records are recycled by their owners).  Must never: hand out
// memory to users.
#pragma once

#include <cstddef>

namespace roost::meta_arena {

// `size` bytes aligned to `align` (<= 4096), zeroed; nullptr when the OS
// refuses.  Thread-safe (takes a lock: slow paths only).
void* alloc(size_t size, size_t align);

// Bytes of metadata space reserved so far.
size_t reserved_bytes();

void lock_for_fork();
void unlock_after_fork(bool child);

}  // namespace roost::meta_arena
