//! Active expiry: how long one sweep of a million keys takes (half of them expired),
//! which bounds how soon the sweeper (every 250 ms) reclaims expired memory, and how
//! long it holds any one shard's lock (a sixty-fourth of the sweep).

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use redlockd::store::{Db, Entry, Value};

const KEYS: u32 = 1_000_000;

fn filled() -> Db {
    let db = Db::new(1);
    for i in 0..KEYS {
        let deadline = if i % 2 == 0 { Some(100) } else { Some(10_000) };
        db.insert(
            format!("lock:{i}").as_bytes(),
            Entry {
                value: Value::Str(Bytes::from_static(b"token")),
                deadline_ms: deadline,
            },
        );
    }
    db
}

fn sweep(c: &mut Criterion) {
    let mut g = c.benchmark_group("expiry");
    g.sample_size(10);
    g.bench_function("sweep 1M keys, half expired", |b| {
        b.iter_batched(
            filled,
            |db| {
                assert_eq!(db.sweep(101), KEYS as usize / 2);
                db
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

criterion_group!(benches, sweep);
criterion_main!(benches);
