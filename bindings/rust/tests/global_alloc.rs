// tests/global_alloc.rs — `Roost` as this test binary's global allocator:
// collections, over-aligned layouts, zero sizes, zeroed and reallocated
// memory, and the statistics mirror.
//
// Must never: assert on counters other tests of this binary could move the
// wrong way (tests run in parallel threads; only lower bounds on monotonic
// counters are safe), or pass a pointer from one allocator to another.

use std::alloc::{alloc, alloc_zeroed, dealloc, realloc, GlobalAlloc, Layout};
use std::collections::HashMap;

use roost::Roost;

#[global_allocator]
static A: Roost = Roost;

/// A byte that depends on the position and a seed.
fn pattern(i: usize, seed: usize) -> u8 {
    (i.wrapping_mul(31) ^ seed.wrapping_mul(131) ^ (i >> 8)) as u8
}

unsafe fn fill(p: *mut u8, n: usize, seed: usize) {
    for i in 0..n {
        *p.add(i) = pattern(i, seed);
    }
}

unsafe fn check(p: *const u8, n: usize, seed: usize) {
    for i in 0..n {
        assert_eq!(*p.add(i), pattern(i, seed), "byte {} of {}", i, n);
    }
}

#[test]
fn allocations_come_from_roost() {
    let before = roost::stats().allocations;
    let boxes: Vec<Box<[u8; 100]>> = (0..1000).map(|i| Box::new([i as u8; 100])).collect();
    let after = roost::stats().allocations;
    assert!(
        after - before >= 1000,
        "allocations grew by {} only",
        after - before
    );
    for (i, b) in boxes.iter().enumerate() {
        assert!(b.iter().all(|&x| x == i as u8));
        // roost_usable_size aborts on a pointer roost never handed out.
        let usable = unsafe { roost::usable_size(b.as_ptr()) };
        assert!((100..=128).contains(&usable), "usable size {}", usable);
    }
    assert!(roost::stats().bytes_in_use >= 100 * 1000);
}

#[test]
fn collections_grow() {
    let mut v: Vec<u64> = Vec::new();
    for i in 0..200_000u64 {
        v.push(i * 3);
    }
    assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64 * 3));
    assert!(unsafe { roost::usable_size(v.as_ptr() as *const u8) } >= v.capacity() * 8);

    let mut s = String::new();
    for i in 0..100_000 {
        s.push_str(&i.to_string());
        s.push(',');
    }
    let parsed: Vec<usize> = s
        .split(',')
        .filter(|x| !x.is_empty())
        .map(|x| x.parse().unwrap())
        .collect();
    assert_eq!(parsed.len(), 100_000);
    assert!(parsed.iter().enumerate().all(|(i, &x)| x == i));

    let mut m: HashMap<u64, String> = HashMap::new();
    for i in 0..50_000u64 {
        m.insert(i, format!("value-{}", i));
    }
    for i in (0..50_000u64).step_by(2) {
        assert_eq!(m.remove(&i), Some(format!("value-{}", i)));
    }
    m.shrink_to_fit();
    assert_eq!(m.len(), 25_000);
    for i in 0..50_000u64 {
        assert_eq!(
            m.get(&i).cloned(),
            if i % 2 == 1 {
                Some(format!("value-{}", i))
            } else {
                None
            }
        );
    }
}

#[test]
fn over_aligned_layouts() {
    for &align in &[32usize, 64, 128, 4096, 65536] {
        let sizes = [
            1,
            8,
            align / 2,
            align - 1,
            align,
            align + 1,
            3 * align + 5,
            100_000,
            300_000,
        ];
        for (k, &size) in sizes.iter().enumerate() {
            let layout = Layout::from_size_align(size, align).unwrap();
            unsafe {
                let p = alloc(layout);
                assert!(!p.is_null());
                assert_eq!(p as usize % align, 0, "align {} size {}", align, size);
                assert!(roost::usable_size(p) >= size);
                fill(p, size, k);
                check(p, size, k);

                // Grow: alignment and content kept.
                let bigger = size * 2 + align;
                let q = realloc(p, layout, bigger);
                assert!(!q.is_null());
                assert_eq!(
                    q as usize % align,
                    0,
                    "realloc up: align {} size {}",
                    align,
                    size
                );
                check(q, size, k);
                fill(q, bigger, k + 1);

                // Shrink: the same.
                let smaller = size / 2 + 1;
                let big_layout = Layout::from_size_align(bigger, align).unwrap();
                let r = realloc(q, big_layout, smaller);
                assert!(!r.is_null());
                assert_eq!(
                    r as usize % align,
                    0,
                    "realloc down: align {} size {}",
                    align,
                    size
                );
                check(r, smaller, k + 1);
                dealloc(r, Layout::from_size_align(smaller, align).unwrap());
            }
        }
    }
}

#[test]
fn over_aligned_objects_live_together() {
    // Many small over-aligned objects at once: each aligned, none overlapping.
    let layout = Layout::from_size_align(24, 64).unwrap();
    let ptrs: Vec<*mut u8> = (0..2000).map(|_| unsafe { alloc(layout) }).collect();
    for (i, &p) in ptrs.iter().enumerate() {
        assert!(!p.is_null());
        assert_eq!(p as usize % 64, 0);
        unsafe { fill(p, 24, i) };
    }
    for (i, &p) in ptrs.iter().enumerate() {
        unsafe {
            check(p, 24, i);
            dealloc(p, layout);
        }
    }

    #[repr(align(256))]
    struct Aligned([u8; 300]);
    let boxes: Vec<Box<Aligned>> = (0..100)
        .map(|i| Box::new(Aligned([i as u8; 300])))
        .collect();
    for (i, b) in boxes.iter().enumerate() {
        assert_eq!(&**b as *const Aligned as usize % 256, 0);
        assert!(b.0.iter().all(|&x| x == i as u8));
    }
}

#[test]
fn zero_sized_types_and_empty_collections() {
    let mut units: Vec<()> = Vec::new();
    for _ in 0..1_000_000 {
        units.push(());
    }
    assert_eq!(units.len(), 1_000_000);
    assert_eq!(units.capacity(), usize::MAX);

    let b: Box<()> = Box::new(());
    assert_eq!(*b, ());
    let e: Box<[u8; 0]> = Box::new([]);
    assert_eq!(e.len(), 0);
    let empty_slice: Box<[u64]> = Vec::new().into_boxed_slice();
    assert!(empty_slice.is_empty());

    let v: Vec<u64> = Vec::with_capacity(0);
    assert_eq!(v.capacity(), 0);
    assert_eq!(v.as_ptr() as usize % std::mem::align_of::<u64>(), 0);
    let mut w: Vec<u8> = vec![1, 2, 3];
    w.clear();
    w.shrink_to_fit(); // frees through dealloc
    assert_eq!(w.capacity(), 0);
    w.push(7); // and allocates again
    assert_eq!(w, [7]);
    let s = String::with_capacity(0);
    assert!(s.is_empty());

    #[derive(Clone, Copy, PartialEq, Debug)]
    struct Nothing;
    let many: Vec<Nothing> = std::iter::repeat(Nothing).take(12345).collect();
    assert_eq!(many.len(), 12345);
    assert!(many.iter().all(|&n| n == Nothing));
}

#[test]
fn zero_size_requests_made_directly() {
    // Rust's collections never ask GlobalAlloc for 0 bytes (the trait's
    // contract forbids it); Roost answers them all the same with a unique
    // minimum object, also over-aligned.
    unsafe {
        let l1 = Layout::from_size_align(0, 1).unwrap();
        let p = Roost.alloc(l1);
        let q = Roost.alloc(l1);
        assert!(!p.is_null() && !q.is_null() && p != q);
        let l64 = Layout::from_size_align(0, 64).unwrap();
        let r = Roost.alloc(l64);
        assert!(!r.is_null());
        assert_eq!(r as usize % 64, 0);
        // realloc to 0 keeps a live object (roost_realloc(p, 0) would free).
        let p2 = Roost.realloc(p, l1, 0);
        assert!(!p2.is_null());
        Roost.dealloc(p2, l1);
        Roost.dealloc(q, l1);
        Roost.dealloc(r, l64);
    }
}

#[test]
fn alloc_zeroed_is_zero_after_reuse() {
    let mut reused = 0;
    for &align in &[8usize, 16, 64] {
        for &size in &[8usize, 16, 24, 100, 1000, 4096, 10_000, 300_000, 2 << 20] {
            let layout = Layout::from_size_align(size, align).unwrap();
            for round in 0..40 {
                unsafe {
                    let p = alloc(layout);
                    assert!(!p.is_null());
                    std::ptr::write_bytes(p, 0xA5, size);
                    dealloc(p, layout);
                    let q = alloc_zeroed(layout);
                    assert!(!q.is_null());
                    assert_eq!(q as usize % align, 0);
                    if q == p {
                        reused += 1;
                    }
                    let block = std::slice::from_raw_parts(q, size);
                    assert!(
                        block.iter().all(|&b| b == 0),
                        "size {} align {} round {}",
                        size,
                        align,
                        round
                    );
                    std::ptr::write_bytes(q, 0x5A, size);
                    dealloc(q, layout);
                }
            }
            // The same through vec! (alloc_zeroed underneath).
            let v = vec![0u8; size];
            assert!(v.iter().all(|&b| b == 0));
        }
    }
    // The test means something only if dirty blocks came back.
    assert!(
        reused > 100,
        "only {} zeroed blocks were reused ones",
        reused
    );
}

#[test]
fn realloc_keeps_content_across_sizes() {
    for &align in &[1usize, 8, 16] {
        unsafe {
            let mut size = 1;
            let mut layout = Layout::from_size_align(size, align).unwrap();
            let mut p = alloc(layout);
            fill(p, size, 0);
            // Grow through the small classes into large objects (> 256 KiB).
            while size < (3 << 20) {
                let next = size * 3 / 2 + 7;
                p = realloc(p, layout, next);
                assert!(!p.is_null());
                check(p, size, 0);
                fill(p, next, 0);
                size = next;
                layout = Layout::from_size_align(size, align).unwrap();
            }
            // And back down.
            while size > 1 {
                let next = size / 3;
                let next = if next == 0 { 1 } else { next };
                p = realloc(p, layout, next);
                assert!(!p.is_null());
                check(p, next, 0);
                size = next;
                layout = Layout::from_size_align(size, align).unwrap();
            }
            dealloc(p, layout);
        }
    }
    let mut s = String::from("roost");
    for _ in 0..16 {
        let t = s.clone();
        s.push_str(&t);
    }
    assert_eq!(s.len(), 5 << 16);
    s.truncate(10);
    s.shrink_to_fit();
    assert_eq!(s, "roostroost");
}

#[test]
fn stats_mirror_the_c_struct() {
    // Drift check from the Rust side: one u64 per ROOST_STAT line.
    let def = include_str!("../roost/include/roost_stats.def");
    let entries = def
        .lines()
        .filter(|l| l.trim_start().starts_with("ROOST_STAT("))
        .count();
    assert_eq!(roost::Stats::FIELDS.len(), entries);
    let size = std::mem::size_of::<roost::Stats>();
    assert_eq!(size, 8 * entries);

    // roost_stats() writes exactly sizeof(struct roost_stats): every byte of
    // the mirror, and none past it.
    let mut buf = [0xEEu8; 1024];
    assert!(size + 64 <= buf.len());
    let rc = unsafe { roost::ffi::roost_stats(buf.as_mut_ptr() as *mut roost::Stats) };
    assert_eq!(rc, 0);
    assert!(
        buf[size..].iter().all(|&b| b == 0xEE),
        "roost_stats wrote past the Rust struct"
    );
    let last = u64::from_ne_bytes(buf[size - 8..size].try_into().unwrap());
    assert_ne!(
        last, 0xEEEE_EEEE_EEEE_EEEE,
        "roost_stats left the last field unwritten"
    );

    let s = roost::stats();
    assert!(s.allocators >= 1);
    assert!(s.bytes_reserved >= s.bytes_committed);
    let pairs = s.to_pairs();
    assert_eq!(pairs[0], ("bytes_in_use", s.bytes_in_use));
    assert_eq!(unsafe { roost::ffi::roost_stats(std::ptr::null_mut()) }, -1);
}

#[test]
fn usable_size_and_trim() {
    assert_eq!(unsafe { roost::usable_size(std::ptr::null()) }, 0);
    let b = Box::new([0u8; 100]);
    // Size classes: 16-byte steps to 64, then four per doubling (..., 112, 128).
    assert_eq!(unsafe { roost::usable_size(b.as_ptr()) }, 112);
    drop(b);

    let mut big = vec![1u8; 64 << 20];
    big[12345] = 2;
    assert_eq!(big.iter().map(|&x| x as u64).sum::<u64>(), (64 << 20) + 1);
    drop(big);
    // The 64 MiB just freed is cached, not yet purged: trim gives it back.
    assert!(roost::trim());
}
