//! decode -> dispatch -> execute -> encode for pipelined batches of lock commands, in
//! memory (no sockets): what one connection task does per read.
//!
//! `set_get_del` is the mixed acquire / check / release cycle; the `cmd` group times
//! one command kind at a time (a batch of 128, reported per command), with the keyspace
//! prepared outside the timed part so every command takes its usual path: SET NX PX on
//! a free key, GET and DEL of a held lock, and EVALSHA of the compare-and-delete release
//! script on a held lock (the hit path: GET + DEL inside Lua).
//!
//! Run: cargo bench --bench pipeline -- --warm-up-time 1 --measurement-time 3

use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use redlockd::inmem::Session;
use redlockd::Config;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// The release script lock clients send (redsync, redis-py's Lock...).
const RELEASE: &str =
    "if redis.call(\"get\",KEYS[1]) == ARGV[1] then return redis.call(\"del\",KEYS[1]) else return 0 end";

/// Commands per batch in the `cmd` group.
const BATCH: usize = 128;

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

/// One command per key lock:0 .. lock:n-1, built by `cmd(key)`.
fn per_key(n: usize, cmd: impl Fn(&str) -> Vec<String>) -> Vec<u8> {
    let mut out = Vec::new();
    for j in 0..n {
        let args = cmd(&format!("lock:{j}"));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        resp(&args, &mut out);
    }
    out
}

/// What the connection task does with one read: every request decoded, dispatched and
/// encoded into the write buffer (`Session::feed`). Returns how many requests ran. Not
/// inlined, and not used for setup (see `prepare`), so `valgrind --tool=callgrind` on
/// this binary gives the exact instructions per timed batch as this function's
/// inclusive cost.
#[inline(never)]
fn run_batch(session: &mut Session, mut buf: BytesMut, out: &mut BytesMut) -> usize {
    out.clear();
    session.feed(&mut buf, out).expect("valid input")
}

/// `run_batch` for the untimed checks, so they do not count in its profile.
#[inline(never)]
fn check_batch(session: &mut Session, mut buf: BytesMut, out: &mut BytesMut) -> usize {
    out.clear();
    session.feed(&mut buf, out).expect("valid input")
}

fn new_session() -> Session {
    Session::new(Config {
        restart_delay: Some(Duration::ZERO),
        ..Config::default()
    })
}

fn pipeline(c: &mut Criterion) {
    let mut session = new_session();
    let mut group = c.benchmark_group("pipeline");
    for n in [16usize, 128] {
        let input = batch(n);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("set_get_del", n), &input, |b, input| {
            let mut out = BytesMut::with_capacity(64 * n);
            b.iter(|| {
                let count = run_batch(&mut session, BytesMut::from(&input[..]), &mut out);
                assert_eq!(count, n);
                black_box(&out);
            })
        });
    }
    group.finish();
}

/// A `cmd` benchmark: its name, the timed batch, and the batch that prepares the
/// keyspace before each run.
type Case<'a> = (&'static str, Vec<u8>, Option<&'a [u8]>);

/// One command kind per benchmark; `setup` puts the keyspace in the state the command
/// expects before each (untimed) batch.
fn commands(c: &mut Criterion) {
    let mut session = new_session();
    let mut out = BytesMut::with_capacity(64 * BATCH);
    let mut scratch = BytesMut::new();
    let mut prepare = |session: &mut Session, input: &[u8]| {
        scratch.clear();
        session
            .feed(&mut BytesMut::from(input), &mut scratch)
            .expect("valid input");
    };
    let mut loaded = BytesMut::new();
    session.call(&["SCRIPT", "LOAD", RELEASE], &mut loaded);
    // "$40\r\n<sha>\r\n"
    let sha = String::from_utf8(loaded[5..45].to_vec()).expect("a hex sha");
    let acquire = per_key(BATCH, |k| {
        ["SET", k, "token", "NX", "PX", "30000"]
            .map(String::from)
            .to_vec()
    });
    let release = per_key(BATCH, |k| vec!["DEL".into(), k.into()]);

    let cases: Vec<Case> = vec![
        ("set_nx_px", acquire.clone(), Some(&release)),
        (
            "get",
            per_key(BATCH, |k| vec!["GET".into(), k.into()]),
            Some(&acquire),
        ),
        ("del", release.clone(), Some(&acquire)),
        (
            "evalsha_release",
            per_key(BATCH, |k| {
                ["EVALSHA", &sha, "1", k, "token"]
                    .map(String::from)
                    .to_vec()
            }),
            Some(&acquire),
        ),
    ];
    // Each case takes the path it is meant to measure (a lock acquired, a hit, a
    // release that finds its token).
    let expected: [&[u8]; 4] = [b"+OK\r\n", b"$5\r\ntoken\r\n", b":1\r\n", b":1\r\n"];
    for ((name, input, before), reply) in cases.iter().zip(expected) {
        if let Some(before) = before {
            prepare(&mut session, before);
        }
        check_batch(&mut session, BytesMut::from(&input[..]), &mut out);
        assert_eq!(&out[..], &reply.repeat(BATCH)[..], "{name}");
    }
    let mut group = c.benchmark_group("cmd");
    group.throughput(Throughput::Elements(BATCH as u64));
    for (name, input, before) in &cases {
        group.bench_function(*name, |b| {
            // Untimed setup before each timed batch, in the same session.
            b.iter_custom(|iters| {
                let mut timed = Duration::ZERO;
                for _ in 0..iters {
                    if let Some(before) = before {
                        prepare(&mut session, before);
                    }
                    let buf = BytesMut::from(&input[..]);
                    let start = Instant::now();
                    let count = run_batch(&mut session, buf, &mut out);
                    timed += start.elapsed();
                    assert_eq!(count, BATCH);
                    black_box(&out);
                }
                timed
            })
        });
    }
    group.finish();
}

criterion_group!(benches, pipeline, commands);
criterion_main!(benches);
