//! What lock introspection and keyspace notifications cost a lock's life: SET key
//! token NX PX 1000 on a new key, then DELIFEQ key token, through `inmem::Session` (no
//! network), with each of them off and on (notifications `KEA` with nobody
//! subscribed: the events are built and published to no one). Off, each hook is one
//! atomic load.
//!
//!   cargo bench --bench introspection

use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, Criterion};
use redlockd::inmem::Session;
use redlockd::{Clock, Config};
use std::time::Duration;

fn session(notify: &str, introspection: bool) -> Session {
    Session::new(Config {
        clock: Some(Clock::real()),
        restart_delay: Some(Duration::ZERO),
        notify_keyspace_events: notify.to_string(),
        lock_introspection: introspection,
        ..Config::for_tests()
    })
}

fn grant_and_release(c: &mut Criterion) {
    let mut g = c.benchmark_group("SET NX PX + DELIFEQ");
    for (name, notify, introspection) in [
        ("introspection off, notifications off", "", false),
        ("introspection on, notifications off", "", true),
        ("introspection off, notifications KEA", "KEA", false),
        ("introspection on, notifications KEA", "KEA", true),
    ] {
        let mut s = session(notify, introspection);
        let mut out = BytesMut::new();
        let mut n: u64 = 0;
        g.bench_function(name, |b| {
            b.iter(|| {
                n += 1;
                let key = format!("lock:{n}");
                out.clear();
                s.call(&["SET", &key, "token", "NX", "PX", "1000"], &mut out);
                s.call(&["DELIFEQ", &key, "token"], &mut out);
                assert_eq!(&out[..], b"+OK\r\n:1\r\n");
            })
        });
    }
    g.finish();
}

criterion_group!(benches, grant_and_release);
criterion_main!(benches);
