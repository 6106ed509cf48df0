//! What the test backend costs a test: starting (and shutting down) a TestServer and a
//! 5-node TestGroup.

use criterion::{criterion_group, criterion_main, Criterion};
use redlockd::testing::{TestGroup, TestServer};

fn startup(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let mut g = c.benchmark_group("test_backend");
    g.bench_function("TestServer start + shutdown", |b| {
        b.iter(|| rt.block_on(async { TestServer::start().await.shutdown().await }))
    });
    g.bench_function("TestGroup(5) start + shutdown", |b| {
        b.iter(|| rt.block_on(async { TestGroup::start(5).await.shutdown().await }))
    });
    g.finish();
}

criterion_group!(benches, startup);
criterion_main!(benches);
