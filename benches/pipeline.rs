//! decode -> dispatch -> execute -> encode for pipelined batches of lock commands, in
//! memory (no sockets): what one connection task does per read.
//!
//! Run: cargo bench --bench pipeline -- --warm-up-time 1 --measurement-time 3

use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use redlockd::commands::{dispatch, ClientInfo, ClientState, Ctx, Shared};
use redlockd::protocol::{encode, parse_request, Limits};
use redlockd::Config;
use std::hint::black_box;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

fn resp(args: &[&str], out: &mut Vec<u8>) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
}

/// `n` commands cycling acquire / check / release on lock:0, lock:1, ...
fn batch(n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for j in 0..n {
        let key = format!("lock:{}", j / 3);
        match j % 3 {
            0 => resp(&["SET", &key, "token", "NX", "PX", "30000"], &mut out),
            1 => resp(&["GET", &key], &mut out),
            _ => resp(&["DEL", &key], &mut out),
        }
    }
    out
}

fn pipeline(c: &mut Criterion) {
    let shared = Shared::new(Config {
        restart_delay: Some(Duration::ZERO),
        ..Config::default()
    });
    let addr: SocketAddr = ([127, 0, 0, 1], 6379).into();
    let info = Arc::new(ClientInfo::new(1, addr, addr, 0));
    let mut client = ClientState::new(info, true);
    let limits = Limits::default();
    let mut group = c.benchmark_group("pipeline");
    for n in [16usize, 128] {
        let input = batch(n);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("set_get_del", n), &input, |b, input| {
            let mut out = BytesMut::with_capacity(64 * n);
            b.iter(|| {
                let mut buf = BytesMut::from(&input[..]);
                out.clear();
                let mut count = 0;
                while let Some(args) = parse_request(&mut buf, &limits).expect("valid input") {
                    let mut ctx = Ctx::new(&shared, &mut client);
                    let reply = dispatch(&mut ctx, &args);
                    encode(&reply, client.proto, &mut out);
                    count += 1;
                }
                assert_eq!(count, n);
                black_box(&out);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, pipeline);
criterion_main!(benches);
