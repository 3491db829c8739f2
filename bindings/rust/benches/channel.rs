// benches/channel.rs — roost against the system allocator on a channel
// workload: one producer thread allocates boxed messages and sends them in
// batches, one consumer thread checks and drops them (every free remote).
//
// Owns: the comparison's method.  The parent process runs each allocator in
// a child process of this same binary, interleaved, several repetitions;
// a child picks its allocator (ROOSTBENCH_ALLOC=roost|system) at its very
// first allocation, so every pointer of a process belongs to one allocator.
// Must never: switch allocators inside a process, or time process start-up.
//
//   cargo bench --bench channel [-- --messages N --batch B --reps R]

use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::CStr;
use std::os::raw::c_char;
use std::process::Command;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::mpsc::sync_channel;
use std::thread;
use std::time::Instant;

use roost::Roost;

const UNDECIDED: u8 = 0;
const ROOST: u8 = 1;
const SYSTEM: u8 = 2;
static CHOICE: AtomicU8 = AtomicU8::new(UNDECIDED);

extern "C" {
    fn getenv(name: *const c_char) -> *const c_char;
}

/// Roost or System, fixed for the process at its first allocation (from
/// getenv, which does not allocate).  Both arms pay the same branch.
struct Chosen;

#[cold]
fn decide() -> u8 {
    let v = unsafe { getenv(b"ROOSTBENCH_ALLOC\0".as_ptr() as *const c_char) };
    let system = !v.is_null() && unsafe { CStr::from_ptr(v) }.to_bytes() == b"system";
    let c = if system { SYSTEM } else { ROOST };
    CHOICE.store(c, Ordering::Relaxed);
    c
}

#[inline]
fn choice() -> u8 {
    let c = CHOICE.load(Ordering::Relaxed);
    if c != UNDECIDED {
        c
    } else {
        decide()
    }
}

unsafe impl GlobalAlloc for Chosen {
    #[inline]
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if choice() == SYSTEM {
            System.alloc(l)
        } else {
            Roost.alloc(l)
        }
    }
    #[inline]
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        if choice() == SYSTEM {
            System.dealloc(p, l)
        } else {
            Roost.dealloc(p, l)
        }
    }
    #[inline]
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if choice() == SYSTEM {
            System.alloc_zeroed(l)
        } else {
            Roost.alloc_zeroed(l)
        }
    }
    #[inline]
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if choice() == SYSTEM {
            System.realloc(p, l, n)
        } else {
            Roost.realloc(p, l, n)
        }
    }
}

#[global_allocator]
static A: Chosen = Chosen;

struct Message {
    id: u64,
    body: Vec<u8>,
}

/// One run: `messages` boxed messages (two objects each: the box and a body
/// of 16 to 511 bytes), sent in batches of `batch`.  Returns (seconds,
/// checksum).
fn run(messages: u64, batch: usize) -> (f64, u64) {
    let (tx, rx) = sync_channel::<Vec<Box<Message>>>(64);
    let start = Instant::now();
    let producer = thread::spawn(move || {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut out = Vec::with_capacity(batch);
        for id in 0..messages {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = 16 + (seed % 496) as usize;
            out.push(Box::new(Message {
                id,
                body: vec![id as u8; len],
            }));
            if out.len() == batch {
                tx.send(std::mem::replace(&mut out, Vec::with_capacity(batch)))
                    .unwrap();
            }
        }
        if !out.is_empty() {
            tx.send(out).unwrap();
        }
    });
    let consumer = thread::spawn(move || {
        let mut sum = 0u64;
        for batch in rx {
            for m in batch {
                sum =
                    sum.wrapping_add(m.id ^ m.body.len() as u64 ^ m.body[m.body.len() - 1] as u64);
            }
        }
        sum
    });
    producer.join().unwrap();
    let sum = consumer.join().unwrap();
    (start.elapsed().as_secs_f64(), sum)
}

fn arg(args: &[String], name: &str, default: u64) -> u64 {
    match args.iter().position(|a| a == name) {
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{} needs a number", name)),
        None => default,
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let messages = arg(&args, "--messages", 2_000_000);
    let batch = arg(&args, "--batch", 64).max(1) as usize;
    let reps = arg(&args, "--reps", 5).max(1);

    if args.iter().any(|a| a == "--child") {
        // Warm-up (threads, first slabs), then the timed run.
        run(messages / 20 + 1, batch);
        let (secs, sum) = run(messages, batch);
        let which = if choice() == SYSTEM {
            "system"
        } else {
            "roost"
        };
        if which == "roost" {
            // Proof that the run went through roost: its frees were remote.
            assert!(roost::stats().remote_frees >= 2 * messages);
        }
        println!("{} {:.3} {}", which, secs * 1e9 / messages as f64, sum);
        return;
    }

    let exe = std::env::current_exe().expect("current_exe");
    println!(
        "channel pipeline: 1 producer -> 1 consumer, {} messages (box + 16..511-byte body), \
         batches of {}, {} interleaved repetitions",
        messages, batch, reps
    );
    println!(
        "{:>4} {:>14} {:>14} {:>14}",
        "rep", "roost ns/msg", "system ns/msg", "roost/system"
    );
    let (mut roost_ns, mut system_ns) = (Vec::new(), Vec::new());
    let mut checksum = None;
    for rep in 0..reps {
        let mut ns = [0.0f64; 2];
        // Alternate which allocator goes first.
        let order: [usize; 2] = if rep % 2 == 0 { [0, 1] } else { [1, 0] };
        for &k in &order {
            let name = ["roost", "system"][k];
            let out = Command::new(&exe)
                .args([
                    "--child",
                    "--messages",
                    &messages.to_string(),
                    "--batch",
                    &batch.to_string(),
                ])
                .env("ROOSTBENCH_ALLOC", name)
                .output()
                .expect("running the child");
            let text = String::from_utf8_lossy(&out.stdout);
            if !out.status.success() {
                panic!(
                    "{} child failed: {}\n{}",
                    name,
                    text,
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            let fields: Vec<&str> = text.split_whitespace().collect();
            assert!(
                fields.len() == 3 && fields[0] == name,
                "unexpected child output: {:?}",
                text
            );
            ns[k] = fields[1].parse().unwrap();
            let sum: u64 = fields[2].parse().unwrap();
            assert_eq!(
                *checksum.get_or_insert(sum),
                sum,
                "the allocators computed different checksums"
            );
        }
        println!(
            "{:>4} {:>14.1} {:>14.1} {:>14.3}",
            rep + 1,
            ns[0],
            ns[1],
            ns[0] / ns[1]
        );
        roost_ns.push(ns[0]);
        system_ns.push(ns[1]);
    }
    let (r, s) = (median(&mut roost_ns), median(&mut system_ns));
    println!("{:>4} {:>14.1} {:>14.1} {:>14.3}", "med", r, s, r / s);
    println!(
        "median time per message: roost {:.1} ns, system {:.1} ns; roost takes {:.2}x the system allocator's time",
        r, s, r / s
    );
}
