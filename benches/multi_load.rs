//! Load generator for MULTI / SET key v NX PX 30000 / EXEC at P=1, for any server that
//! speaks RESP2 (benches/load.sh runs it against redlockd and redis-server in the same
//! run). redis-benchmark sends one command per request, so it cannot time a transaction.
//!
//! Each of `--clients` connections sends the three commands in one write, as redis-py's
//! `pipeline()` (transaction=True) sends a transaction, then reads the three replies
//! (`+OK`, `+QUEUED`, a one-element array holding `+OK` or a nil) before the next one:
//! one transaction in flight per connection. Keys are `lock:<random below --keyspace>`.
//! Prints one line: `transactions=N seconds=S rps=R p50_ms=.. p99_ms=.. max_ms=..`.
//!
//! Run: cargo bench --bench multi_load -- --addr 127.0.0.1:6379 [--clients 50]
//!      [--requests 200000] [--keyspace 100000]
//! Without `--addr` (as `cargo test --benches` runs it) it starts an in-process redlockd
//! and runs a short load against it, checking every reply.

use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Options {
    addr: Option<SocketAddr>,
    clients: usize,
    requests: u64,
    keyspace: u64,
}

fn options() -> Options {
    let mut o = Options {
        addr: None,
        clients: 50,
        requests: 200_000,
        keyspace: 100_000,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .unwrap_or_else(|| panic!("{name} needs a value"))
        };
        match flag.as_str() {
            "--addr" => o.addr = Some(value("--addr").parse().expect("--addr host:port")),
            "--clients" => o.clients = value("--clients").parse().expect("--clients N"),
            "--requests" => o.requests = value("--requests").parse().expect("--requests N"),
            "--keyspace" => o.keyspace = value("--keyspace").parse().expect("--keyspace N"),
            // cargo bench passes --bench; cargo test --benches passes nothing.
            "--bench" => {}
            other => panic!("unknown argument {other}"),
        }
    }
    assert!(
        o.clients > 0 && o.keyspace > 0,
        "--clients and --keyspace must be > 0"
    );
    o
}

/// Length of the complete RESP2 reply at the start of `buf`, or None if it is not all
/// there yet. Panics on an error reply or a reply of another shape than the three this
/// load expects, so a server that answers wrongly cannot look fast.
fn reply_len(buf: &[u8]) -> Option<usize> {
    let line_end = buf.windows(2).position(|w| w == b"\r\n")?;
    let line = &buf[..line_end];
    let rest = line_end + 2;
    match line.first() {
        Some(b'+') => Some(rest),
        Some(b'$') if line == b"$-1" => Some(rest),
        Some(b'*') => {
            let n: usize = std::str::from_utf8(&line[1..])
                .ok()?
                .parse()
                .expect("array length");
            let mut at = rest;
            for _ in 0..n {
                at += reply_len(&buf[at..])?;
            }
            Some(at)
        }
        _ => panic!(
            "unexpected reply: {:?}",
            String::from_utf8_lossy(&buf[..line_end])
        ),
    }
}

/// Checks one transaction's three replies and returns their length, or None if more
/// bytes are needed.
fn transaction_len(buf: &[u8]) -> Option<usize> {
    let ok = reply_len(buf)?;
    assert_eq!(&buf[..ok], b"+OK\r\n", "MULTI's reply");
    let queued = reply_len(&buf[ok..])?;
    assert_eq!(
        &buf[ok..ok + queued],
        b"+QUEUED\r\n",
        "SET's reply inside MULTI"
    );
    let exec = &buf[ok + queued..];
    let len = reply_len(exec)?;
    assert!(
        &exec[..len] == b"*1\r\n+OK\r\n" || &exec[..len] == b"*1\r\n$-1\r\n",
        "EXEC's reply: {:?}",
        String::from_utf8_lossy(&exec[..len])
    );
    Some(ok + queued + len)
}

fn push_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// One connection: transactions until the shared counter runs out. Returns each one's
/// latency in microseconds.
async fn client(addr: SocketAddr, left: Arc<AtomicU64>, keyspace: u64, seed: u64) -> Vec<u32> {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(128);
    let mut inbuf = Vec::with_capacity(256);
    let mut chunk = [0u8; 4096];
    let mut latencies = Vec::new();
    while left
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok()
    {
        let key = format!("lock:{}", rng.random_range(0..keyspace));
        out.clear();
        push_command(&mut out, &[b"MULTI"]);
        push_command(
            &mut out,
            &[b"SET", key.as_bytes(), b"v", b"NX", b"PX", b"30000"],
        );
        push_command(&mut out, &[b"EXEC"]);
        let start = Instant::now();
        stream.write_all(&out).await.expect("write");
        loop {
            if let Some(len) = transaction_len(&inbuf) {
                inbuf.drain(..len);
                break;
            }
            let n = stream.read(&mut chunk).await.expect("read");
            assert!(n > 0, "server closed the connection");
            inbuf.extend_from_slice(&chunk[..n]);
        }
        latencies.push(start.elapsed().as_micros().min(u32::MAX as u128) as u32);
    }
    latencies
}

async fn run(addr: SocketAddr, o: &Options) -> String {
    let left = Arc::new(AtomicU64::new(o.requests));
    let start = Instant::now();
    let tasks: Vec<_> = (0..o.clients)
        .map(|i| tokio::spawn(client(addr, left.clone(), o.keyspace, i as u64)))
        .collect();
    let mut all = Vec::with_capacity(o.requests as usize);
    for t in tasks {
        all.extend(t.await.expect("client task"));
    }
    let seconds = start.elapsed().as_secs_f64();
    all.sort_unstable();
    let pct = |p: f64| all[((all.len() as f64 * p) as usize).min(all.len() - 1)] as f64 / 1000.0;
    format!(
        "transactions={} seconds={seconds:.3} rps={:.0} p50_ms={:.3} p99_ms={:.3} max_ms={:.3}",
        all.len(),
        all.len() as f64 / seconds,
        pct(0.50),
        pct(0.99),
        pct(1.0)
    )
}

fn main() {
    let mut o = options();
    // The load generator must not be the bottleneck: one thread drives every connection
    // (as redis-benchmark does), leaving the other core to the server.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let line = match o.addr {
        Some(addr) => rt.block_on(run(addr, &o)),
        None => {
            // Test mode: a short run against an in-process server, every reply checked.
            o.requests = o.requests.min(2_000);
            o.clients = o.clients.min(8);
            let server_rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("server runtime");
            let server = server_rt.block_on(redlockd::testing::TestServer::start());
            let line = rt.block_on(async {
                tokio::time::timeout(Duration::from_secs(60), run(server.addr(), &o))
                    .await
                    .expect("the load finishes")
            });
            server_rt.block_on(server.shutdown());
            line
        }
    };
    println!("{line}");
}
