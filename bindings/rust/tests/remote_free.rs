// tests/remote_free.rs — objects allocated on one thread and dropped on
// another, with `Roost` as the global allocator: the frees must travel home
// as messages, and roost's counters must show it.
//
// Must never: assert exact counter values (the test harness's own threads
// allocate too; only lower bounds hold), or leave threads running when it
// reads the counters.

use std::sync::mpsc::{channel, sync_channel};
use std::thread;

#[global_allocator]
static A: roost::Roost = roost::Roost;

struct Message {
    id: u64,
    payload: Vec<u64>,
    label: String,
}

fn make(id: u64) -> Box<Message> {
    let n = (id % 13) as usize + 1;
    Box::new(Message {
        id,
        payload: (0..n as u64).map(|i| id ^ i).collect(),
        label: format!("m{}", id),
    })
}

fn verify(m: &Message) {
    let n = (m.id % 13) as usize + 1;
    assert_eq!(m.payload.len(), n);
    assert!(m
        .payload
        .iter()
        .enumerate()
        .all(|(i, &x)| x == m.id ^ i as u64));
    assert_eq!(m.label, format!("m{}", m.id));
}

#[test]
fn producer_allocates_consumer_frees() {
    const N: u64 = 200_000;
    let before = roost::stats();
    let (tx, rx) = sync_channel::<Box<Message>>(1024);
    let producer = thread::spawn(move || {
        for id in 0..N {
            tx.send(make(id)).unwrap();
        }
    });
    let consumer = thread::spawn(move || {
        let mut count = 0;
        for m in rx {
            verify(&m);
            count += 1;
            // dropped here: three objects of the producer's allocator
        }
        count
    });
    producer.join().unwrap();
    assert_eq!(consumer.join().unwrap(), N);
    // Hand whatever is still in flight to its owners (the producer exited).
    roost::trim();
    let after = roost::stats();

    // Three objects per message, each freed by a thread that does not own it.
    let remote = after.remote_frees - before.remote_frees;
    let sent = after.messages_sent - before.messages_sent;
    let received = after.messages_received - before.messages_received;
    assert!(
        remote >= 3 * N,
        "remote_frees grew by {} for {} messages",
        remote,
        N
    );
    assert!(
        sent >= 3 * N,
        "messages_sent grew by {} for {} messages",
        sent,
        N
    );
    assert!(received >= 3 * N, "messages_received grew by {}", received);
    assert!(after.batches_sent > before.batches_sent);
    assert!(after.allocators >= before.allocators + 2);
    assert!(after.frees - before.frees >= 3 * N);
}

#[test]
fn ring_of_threads_passes_objects_on() {
    // Every thread frees what its predecessor allocated and allocates for
    // its successor: all frees are remote, to several owners.
    const THREADS: usize = 4;
    const ROUNDS: u64 = 20_000;
    let before = roost::stats();
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    for _ in 0..THREADS {
        let (tx, rx) = channel::<Vec<String>>();
        senders.push(tx);
        receivers.push(rx);
    }
    // Thread i receives on receivers[i] and sends to senders[(i + 1) % T].
    senders.rotate_left(1);
    let handles: Vec<_> = receivers
        .into_iter()
        .zip(senders)
        .enumerate()
        .map(|(i, (rx, tx))| {
            thread::spawn(move || {
                let mut seen = 0u64;
                for round in 0..ROUNDS {
                    let batch: Vec<String> =
                        (0..8).map(|k| format!("{}:{}:{}", i, round, k)).collect();
                    tx.send(batch).unwrap();
                    let got = rx.recv().unwrap();
                    assert_eq!(got.len(), 8);
                    let from = (i + THREADS - 1) % THREADS;
                    assert!(got[0].starts_with(&format!("{}:", from)));
                    seen += got.len() as u64;
                }
                seen
            })
        })
        .collect();
    let total: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(total, THREADS as u64 * ROUNDS * 8);
    roost::trim();
    let after = roost::stats();
    let remote = after.remote_frees - before.remote_frees;
    // 8 strings + 1 vector per batch.
    assert!(
        remote >= THREADS as u64 * ROUNDS * 9,
        "remote_frees grew by {}",
        remote
    );
}
