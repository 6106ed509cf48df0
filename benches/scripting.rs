//! EVALSHA of the compare-and-delete release script through `commands::dispatch`
//! (gate, lookup, Lua run, conversions), without the network.

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion};
use redlockd::commands::{dispatch, ClientInfo, ClientState, Ctx, Shared};
use redlockd::protocol::Reply;
use redlockd::Config;
use std::hint::black_box;
use std::sync::Arc;

const RELEASE: &str =
    "if redis.call(\"get\",KEYS[1]) == ARGV[1] then\n    return redis.call(\"del\",KEYS[1])\nelse\n    return 0\nend";

fn args(parts: &[&str]) -> Vec<Bytes> {
    parts
        .iter()
        .map(|p| Bytes::copy_from_slice(p.as_bytes()))
        .collect()
}

fn evalsha_compare_and_delete(c: &mut Criterion) {
    let shared = Shared::new(Config::for_tests());
    let addr = "127.0.0.1:1".parse().expect("address literal");
    let info = Arc::new(ClientInfo::new(1, addr, addr, 0));
    let mut client = ClientState::new(info, true);
    let mut ctx = Ctx::new(&shared, &mut client);
    let Reply::Bulk(sha) = dispatch(&mut ctx, &args(&["SCRIPT", "LOAD", RELEASE])) else {
        panic!("SCRIPT LOAD failed");
    };
    let sha = String::from_utf8_lossy(&sha).into_owned();
    let miss = args(&["EVALSHA", &sha, "1", "lock:x", "token"]);
    c.bench_function("evalsha_compare_and_delete_miss", |b| {
        b.iter(|| black_box(dispatch(&mut ctx, black_box(&miss))))
    });
    let set = args(&["SET", "lock:x", "token", "PX", "10000"]);
    c.bench_function("set_then_evalsha_compare_and_delete_hit", |b| {
        b.iter(|| {
            dispatch(&mut ctx, &set);
            black_box(dispatch(&mut ctx, black_box(&miss)))
        })
    });
}

criterion_group!(benches, evalsha_compare_and_delete);
criterion_main!(benches);
