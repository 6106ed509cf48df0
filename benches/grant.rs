//! A lock grant's cost with and without a data directory: SET key token NX PX 1000 on
//! a new key each time, on the real clock, through `inmem::Session` (no network); the
//! difference is what the durable record of granted deadlines costs a grant. Prints how
//! many fsyncs that record took per million grants (INFO fencing `grant_reach_fsyncs`).
//!
//!   cargo bench --bench grant

use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, Criterion};
use redlockd::inmem::Session;
use redlockd::{Clock, Config};
use std::time::Duration;

fn session(dir: Option<&std::path::Path>) -> Session {
    Session::new(Config {
        dir: dir.map(|d| d.to_path_buf()),
        clock: Some(Clock::real()),
        restart_delay: Some(Duration::ZERO),
        ..Config::for_tests()
    })
}

fn info_field(s: &mut Session, name: &str) -> Option<u64> {
    let mut out = BytesMut::new();
    s.call(&["INFO", "fencing"], &mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    text.split("\r\n")
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.parse().ok())
}

fn grants(c: &mut Criterion) {
    let mut memory_only = session(None);
    let mut out = BytesMut::new();
    let mut n: u64 = 0;
    c.bench_function("SET NX PX 1000, new key, no data directory", |b| {
        b.iter(|| {
            n += 1;
            let key = format!("lock:{n}");
            out.clear();
            memory_only.call(&["SET", &key, "token", "NX", "PX", "1000"], &mut out);
            assert_eq!(&out[..], b"+OK\r\n");
        })
    });
    drop(memory_only);

    let dir = std::env::temp_dir().join(format!("redlockd-bench-grant-{}", std::process::id()));
    let mut s = session(Some(&dir));
    n = 0;
    c.bench_function("SET NX PX 1000, new key, data directory", |b| {
        b.iter(|| {
            n += 1;
            let key = format!("lock:{n}");
            out.clear();
            s.call(&["SET", &key, "token", "NX", "PX", "1000"], &mut out);
            assert_eq!(&out[..], b"+OK\r\n");
        })
    });
    match info_field(&mut s, "grant_reach_fsyncs:") {
        Some(fsyncs) => eprintln!(
            "grants: {n}, deadline-record fsyncs: {fsyncs}, per million grants: {:.1}",
            fsyncs as f64 * 1e6 / n as f64
        ),
        None => eprintln!("grants: {n}, no deadline record in this build"),
    }
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, grants);
criterion_main!(benches);
