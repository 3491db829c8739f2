// examples/pipeline.rs — a three-stage channel pipeline with roost as the
// global allocator: a reader makes lines, a parser turns each into a record,
// a summer consumes the records.  Every object is freed by a thread other
// than the one that allocated it, so the frees go home as messages.
//
// Must never: share memory between the stages other than through the
// channels (the point is the cross-thread frees), or depend on timing.
//
//   cargo run --release --example pipeline [LINES]

use std::sync::mpsc::sync_channel;
use std::thread;

#[global_allocator]
static A: roost::Roost = roost::Roost;

struct Record {
    key: String,
    values: Vec<u32>,
}

fn main() {
    let lines: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(500_000);
    let (line_tx, line_rx) = sync_channel::<String>(256);
    let (rec_tx, rec_rx) = sync_channel::<Box<Record>>(256);

    let reader = thread::spawn(move || {
        for i in 0..lines {
            let n = i % 7 + 1;
            let mut line = format!("key{}", i % 1000);
            for k in 0..n {
                line.push_str(&format!(" {}", i * k % 997));
            }
            line_tx.send(line).unwrap();
        }
    });
    let parser = thread::spawn(move || {
        for line in line_rx {
            let mut words = line.split(' ');
            let key = words.next().unwrap().to_string();
            let values = words.map(|w| w.parse().unwrap()).collect();
            rec_tx.send(Box::new(Record { key, values })).unwrap();
            // `line` (the reader's) is freed here
        }
    });
    let summer = thread::spawn(move || {
        let (mut records, mut sum, mut key_bytes) = (0u64, 0u64, 0u64);
        for r in rec_rx {
            records += 1;
            key_bytes += r.key.len() as u64;
            sum += r.values.iter().map(|&v| v as u64).sum::<u64>();
            // the record, its key and its values (the parser's) are freed here
        }
        (records, sum, key_bytes)
    });
    reader.join().unwrap();
    parser.join().unwrap();
    let (records, sum, key_bytes) = summer.join().unwrap();
    println!(
        "{} records, value sum {}, key bytes {}",
        records, sum, key_bytes
    );

    roost::trim();
    let s = roost::stats();
    println!(
        "roost: {} allocations, {} remote frees, {} objects sent home in {} batches, {} allocators",
        s.allocations, s.remote_frees, s.messages_sent, s.slab_batches_sent, s.allocators
    );
}
