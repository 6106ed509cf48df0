//! EVALSHA of the compare-and-delete release script through the in-memory door
//! (dispatch, gate, lookup, Lua run, conversions, encoding), without the network.

use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, Criterion};
use redlockd::inmem::Session;
use redlockd::Config;
use std::hint::black_box;

const RELEASE: &str =
    "if redis.call(\"get\",KEYS[1]) == ARGV[1] then\n    return redis.call(\"del\",KEYS[1])\nelse\n    return 0\nend";

fn evalsha_compare_and_delete(c: &mut Criterion) {
    let mut session = Session::new(Config::for_tests());
    let mut out = BytesMut::new();
    session.call(&["SCRIPT", "LOAD", RELEASE], &mut out);
    // "$40\r\n<sha>\r\n"
    let sha = String::from_utf8(out[5..45].to_vec()).expect("SCRIPT LOAD replies a sha");
    let release = ["EVALSHA", &sha, "1", "lock:x", "token"];
    c.bench_function("evalsha_compare_and_delete_miss", |b| {
        b.iter(|| {
            out.clear();
            session.call(black_box(&release), &mut out);
            debug_assert_eq!(&out[..], b":0\r\n");
        })
    });
    let set = ["SET", "lock:x", "token", "PX", "10000"];
    c.bench_function("set_then_evalsha_compare_and_delete_hit", |b| {
        b.iter(|| {
            out.clear();
            session.call(&set, &mut out);
            session.call(black_box(&release), &mut out);
            debug_assert_eq!(&out[..], b"+OK\r\n:1\r\n");
        })
    });
}

criterion_group!(benches, evalsha_compare_and_delete);
criterion_main!(benches);
