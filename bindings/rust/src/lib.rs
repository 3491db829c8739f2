// src/lib.rs — the `roost` crate: `Roost`, a `GlobalAlloc` over roost's
// prefixed C API (include/roost.h), and thin helpers for its statistics,
// usable sizes and trimming.
//
// Owns: the mapping of Rust's allocation requests (size + alignment) onto
// roost_malloc / roost_aligned_alloc / roost_calloc / roost_realloc /
// roost_free.  Must never: allocate through the system allocator, hand a
// pointer from one allocator to another, or add allocation logic of its own
// beyond what alignment above 16 bytes requires.

//! roost, a message-passing `malloc`, as Rust's global allocator.
//!
//! ```
//! #[global_allocator]
//! static A: roost::Roost = roost::Roost;
//!
//! fn main() {
//!     let v: Vec<u64> = (0..1000).collect(); // allocated by roost
//!     std::thread::spawn(move || drop(v)).join().unwrap(); // freed by a message home
//!     println!("{:?}", roost::stats().remote_frees);
//! }
//! ```
//!
//! The crate compiles roost's C++ sources (the repository's, which its
//! `roost/` folder links to or its `.crate` carries; `build.rs`) into a
//! static library with only the prefixed entry points (`roost_malloc`,
//! `roost_free`, ...): Rust's allocations go to roost, while C and C++ code
//! in the same process keeps the system `malloc`.
//!
//! Every object roost returns is aligned to at least 16 bytes
//! ([`MIN_ALIGN`]); larger alignments go through `roost_aligned_alloc`.
//! Frees go to `roost_free` without the size: the prefixed API has no sized
//! free, and roost finds an object's size from its own metadata (the
//! pagemap) in any case.

#![warn(missing_docs)]

use std::alloc::{GlobalAlloc, Layout};
use std::ptr;

include!(concat!(env!("OUT_DIR"), "/stats.rs"));

/// The alignment of every object roost hands out (config::kMinAlloc in
/// src/config.h: 16-byte minimum size and alignment).  Layouts aligned to at
/// most this take the plain entry points.
pub const MIN_ALIGN: usize = 16;

/// The raw C API of include/roost.h, as the static library exports it.
pub mod ffi {
    use super::Stats;
    use std::os::raw::{c_int, c_void};

    extern "C" {
        /// `malloc` by another name: at least `size` bytes, 16-byte aligned;
        /// NULL (errno ENOMEM) on failure.  `size` 0 gives a unique object.
        pub fn roost_malloc(size: usize) -> *mut c_void;
        /// Frees an object of roost's (any thread's); NULL is ignored.
        /// Misuse roost can see (a foreign or interior pointer) aborts.
        pub fn roost_free(ptr: *mut c_void);
        /// `calloc`: zeroed memory; NULL on overflow of `count * size`.
        pub fn roost_calloc(count: usize, size: usize) -> *mut c_void;
        /// glibc `realloc`: `ptr` NULL allocates; `size` 0 frees and returns
        /// NULL; on failure NULL with `ptr` untouched.  Keeps only 16-byte
        /// alignment.
        pub fn roost_realloc(ptr: *mut c_void, size: usize) -> *mut c_void;
        /// C17 `aligned_alloc`: `alignment` must be a power of two (else NULL,
        /// EINVAL); any `size`, not only multiples of it.
        pub fn roost_aligned_alloc(alignment: usize, size: usize) -> *mut c_void;
        /// Usable bytes of a live object; 0 for NULL; misuse aborts.
        pub fn roost_usable_size(ptr: *const c_void) -> usize;
        /// `malloc_trim(0)`: 1 if memory went back to the OS, else 0.
        pub fn roost_trim() -> c_int;
        /// Fills `*out` with the process-wide counters; -1 if `out` is NULL.
        pub fn roost_stats(out: *mut Stats) -> c_int;
        /// Writes the counters to stderr, one line each.
        pub fn roost_print_stats();
        /// Writes the run-time options in force (ROOST_* variables) to stderr.
        pub fn roost_print_options();
    }
}

/// roost as a [`GlobalAlloc`]: put it in a `#[global_allocator]` static.
///
/// Layouts aligned to at most [`MIN_ALIGN`] (16) bytes use `roost_malloc`,
/// `roost_calloc` and `roost_realloc`; larger alignments use
/// `roost_aligned_alloc` (a reallocation then allocates, copies and frees,
/// since `roost_realloc` keeps only 16-byte alignment).  Every free is
/// `roost_free`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Roost;

unsafe impl GlobalAlloc for Roost {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= MIN_ALIGN {
            ffi::roost_malloc(layout.size()) as *mut u8
        } else {
            ffi::roost_aligned_alloc(layout.align(), layout.size()) as *mut u8
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        ffi::roost_free(ptr as *mut _)
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= MIN_ALIGN {
            // Memory fresh from the OS is not written twice.
            ffi::roost_calloc(1, layout.size()) as *mut u8
        } else {
            let p = self.alloc(layout);
            if !p.is_null() {
                ptr::write_bytes(p, 0, layout.size());
            }
            p
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= MIN_ALIGN {
            // GlobalAlloc promises new_size > 0; roost_realloc(p, 0) would
            // free p, so 0 is asked as 1 all the same.
            let size = if new_size == 0 { 1 } else { new_size };
            return ffi::roost_realloc(ptr as *mut _, size) as *mut u8;
        }
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        let q = self.alloc(new_layout);
        if !q.is_null() {
            let keep = if layout.size() < new_size {
                layout.size()
            } else {
                new_size
            };
            ptr::copy_nonoverlapping(ptr, q, keep);
            ffi::roost_free(ptr as *mut _);
        }
        q
    }
}

/// Usable bytes of an object roost allocated (at least the size asked for);
/// 0 for a null pointer.
///
/// # Safety
///
/// `ptr` must be null or the start of a live allocation made through
/// [`Roost`].  roost aborts the process on a pointer it never handed out or
/// one inside an object; other misuse (a freed pointer) gives a meaningless
/// figure.
pub unsafe fn usable_size(ptr: *const u8) -> usize {
    ffi::roost_usable_size(ptr as *const _)
}

/// A snapshot of roost's process-wide counters (see [`Stats`]).  Counters of
/// running threads are read as they are: the figures are exact only while
/// the other threads rest.
pub fn stats() -> Stats {
    let mut s = Stats::default();
    // SAFETY: `s` is a `#[repr(C)]` mirror of struct roost_stats, generated
    // from the same roost_stats.def.
    let rc = unsafe { ffi::roost_stats(&mut s) };
    debug_assert_eq!(rc, 0);
    s
}

/// Writes roost's counters to stderr, one line each (`roost_print_stats`).
pub fn print_stats() {
    unsafe { ffi::roost_print_stats() }
}

/// `malloc_trim(0)` for roost's heap: delivers the frees still in flight to
/// allocators of exited threads and returns cached memory to the OS.
/// Returns whether any memory was released.
pub fn trim() -> bool {
    unsafe { ffi::roost_trim() != 0 }
}
