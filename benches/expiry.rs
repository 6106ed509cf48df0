//! Active expiry: how long one sweep of a million keys takes (half of them expired),
//! which bounds how soon the sweeper reclaims expired memory.

use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use redlockd::inmem::Session;
use redlockd::Config;
use std::time::Duration;

const KEYS: usize = 1_000_000;

/// A million locks, the even ones expiring in 100 ms, the odd ones in 10 s, loaded
/// through the door in pipelined batches; then the clock moves past the first TTL.
fn filled() -> Session {
    let mut session = Session::new(Config::for_tests());
    let mut input = BytesMut::new();
    let mut out = BytesMut::new();
    for i in 0..KEYS {
        let key = format!("lock:{i}");
        let ttl = if i % 2 == 0 { "100" } else { "10000" };
        input.extend_from_slice(
            format!(
                "*5\r\n$3\r\nSET\r\n${}\r\n{key}\r\n$5\r\ntoken\r\n$2\r\nPX\r\n${}\r\n{ttl}\r\n",
                key.len(),
                ttl.len()
            )
            .as_bytes(),
        );
        if input.len() > 1 << 20 {
            session.feed(&mut input, &mut out).expect("valid input");
            out.clear();
        }
    }
    session.feed(&mut input, &mut out).expect("valid input");
    session.clock().advance(Duration::from_millis(101));
    session
}

fn sweep(c: &mut Criterion) {
    let mut g = c.benchmark_group("expiry");
    g.sample_size(10);
    g.bench_function("sweep 1M keys, half expired", |b| {
        b.iter_batched(
            filled,
            |session| {
                assert_eq!(session.sweep_expired(), KEYS / 2);
                session
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

criterion_group!(benches, sweep);
criterion_main!(benches);
