//! The one test support of the integration tests. Each test file says `mod support;`.
//!
//! - here: in-process nodes (the crate's own `TestServer`), `redis` crate connections
//!   and queries, expected RESP frames, bounded waits;
//! - `raw`: the one raw RESP client (`Raw`), exact reply frames;
//! - `redis_server`: real redis-server processes and misbehaving fake nodes;
//! - `process`: the `redlockd` binary as a child process, free ports;
//! - `checker`: what the mutual-exclusion checkers share (grant windows and their
//!   overlap check; the fenced storage and its token-history check);
//! - `nodes`: one way to run a Redlock scenario against in-process nodes or real
//!   redis-servers (`Nodes`).
#![allow(dead_code, unused_imports)]

pub mod checker;
pub mod nodes;
pub mod process;
pub mod raw;
pub mod redis_server;

pub use raw::{frame_len, Addressed, Raw};
pub use redlockd::testing::{TestGroup, TestServer};
pub use redlockd::Config;

use redis::aio::MultiplexedConnection;
use std::time::Duration;

/// Bound on every network wait in tests.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// A node with `Config::for_tests()` (manual clock, no fence at boot nor on restarts,
/// DEBUG on, seed 1), a temporary data directory.
pub async fn start() -> TestServer {
    start_with(|_| {}).await
}

/// A node with `Config::for_tests()` changed by `change`.
pub async fn start_with(change: impl FnOnce(&mut Config)) -> TestServer {
    let mut config = Config::for_tests();
    change(&mut config);
    TestServer::start_with(config).await
}

/// A node that requires `password` (AUTH / HELLO AUTH).
pub async fn start_with_password(password: &str) -> TestServer {
    start_with(|c| c.requirepass = Some(password.into())).await
}

/// A `redis` crate client for `node` (for pub/sub or several connections).
pub fn client(node: &impl Addressed) -> redis::Client {
    redis::Client::open(format!("redis://{}/", node.addr())).expect("valid url")
}

/// A RESP2 multiplexed connection through the `redis` crate.
pub async fn conn(node: &impl Addressed) -> MultiplexedConnection {
    connect_url(&format!("redis://{}/", node.addr())).await
}

/// A RESP3 multiplexed connection (the crate sends HELLO 3).
pub async fn conn_resp3(node: &impl Addressed) -> MultiplexedConnection {
    connect_url(&format!("redis://{}/?protocol=resp3", node.addr())).await
}

/// A multiplexed connection whose replies may take up to `SLOW_REPLY` (long scripts on
/// a loaded machine); `q` bounds each query by `TIMEOUT` too.
pub async fn connect_url(url: &str) -> MultiplexedConnection {
    let c = redis::Client::open(url).expect("valid url");
    multiplexed(&c).await
}

/// A multiplexed connection of `client`, bounded by `TIMEOUT` to connect and
/// `SLOW_REPLY` per reply: the crate's defaults (1 s to connect, 500 ms per reply, its
/// handshake included) are met by a loaded machine.
pub async fn multiplexed(client: &redis::Client) -> MultiplexedConnection {
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(TIMEOUT))
        .set_response_timeout(Some(SLOW_REPLY));
    tokio::time::timeout(
        TIMEOUT,
        client.get_multiplexed_async_connection_with_config(&config),
    )
    .await
    .expect("connect in time")
    .expect("connect")
}

/// The longest a reply may take on a `redis` crate connection.
pub const SLOW_REPLY: Duration = Duration::from_secs(30);

/// Runs one command through the `redis` crate, giving its reply as `T` (or the error).
pub async fn q<T: redis::FromRedisValue>(
    con: &mut MultiplexedConnection,
    args: &[&str],
) -> redis::RedisResult<T> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    tokio::time::timeout(TIMEOUT, cmd.query_async(con))
        .await
        .expect("reply in time")
}

/// `q` giving the reply as a `redis::Value`.
pub async fn query(
    con: &mut MultiplexedConnection,
    args: &[&str],
) -> redis::RedisResult<redis::Value> {
    q(con, args).await
}

/// An error as Redis sends it: "CODE detail" ("ERR ...", "WRONGTYPE ...").
pub fn error_text(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(c), Some(d)) if !d.is_empty() => format!("{c} {d}"),
        (Some(c), _) => c.to_string(),
        _ => e.to_string(),
    }
}

/// The error text of a command that must fail.
pub async fn query_err(con: &mut MultiplexedConnection, args: &[&str]) -> String {
    match q::<redis::Value>(con, args).await {
        Ok(v) => panic!("{args:?} should fail, got {v:?}"),
        Err(e) => error_text(&e),
    }
}

/// The multibulk encoding of a command.
pub fn resp<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Expected frames, for exact comparisons.
pub const OK: &str = "+OK\r\n";
pub const NIL: &str = "$-1\r\n";

pub fn bulk(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}

pub fn int(i: i64) -> String {
    format!(":{i}\r\n")
}

/// An error frame: `-text\r\n`.
pub fn err(text: &str) -> String {
    format!("-{text}\r\n")
}

/// A script error (a frame or its text) with the script's sha1 after "script: "
/// replaced by SHA, so expectations stay readable.
pub fn unsha(error: &str) -> String {
    match error.find("script: ") {
        Some(i) if error.len() >= i + 48 => {
            format!("{}script: SHA{}", &error[..i], &error[i + 48..])
        }
        _ => error.to_string(),
    }
}

/// Waits (bounded) until `done` holds, polling every millisecond; returns how long it
/// took.
pub async fn wait_until(what: &str, bound: Duration, mut done: impl FnMut() -> bool) -> Duration {
    let started = std::time::Instant::now();
    while !done() {
        assert!(started.elapsed() < bound, "{what}: not within {bound:?}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    started.elapsed()
}

/// Waits (bounded) until `n` clients are blocked on the node, so a test advances the
/// manual clock only once the BLPOP deadline is fixed.
pub async fn wait_blocked(node: &TestServer, n: usize) {
    wait_until(&format!("{n} blocked clients"), TIMEOUT, || {
        node.blocked_clients() == n
    })
    .await;
}

/// A unique path under the temp dir (a file or a directory), removed on drop.
pub struct TempPath(pub std::path::PathBuf);

impl TempPath {
    pub fn new(tag: &str) -> TempPath {
        TempPath(process::data_dir(tag))
    }

    /// The file's text, empty if it does not exist (yet).
    pub fn read(&self) -> String {
        std::fs::read_to_string(&self.0).unwrap_or_default()
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The bulk strings of an array frame (nested arrays flattened, nulls skipped),
/// sorted: for replies whose order is unspecified (KEYS, SMEMBERS).
pub fn sorted_bulks(frame: &str) -> Vec<String> {
    let parts: Vec<&str> = frame.split("\r\n").collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < parts.len() {
        if parts[i].starts_with('$') && parts[i] != "$-1" {
            out.push(parts[i + 1].to_string());
            i += 2;
        } else {
            i += 1;
        }
    }
    out.sort();
    out
}

/// GET /metrics over plain HTTP; returns the body.
pub async fn scrape(addr: std::net::SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(TIMEOUT, s.read_to_end(&mut out))
        .await
        .expect("metrics in time")
        .unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    text.split_once("\r\n\r\n").unwrap().1.to_string()
}

/// A DUMP payload made by hand: `body` (a type byte and the value) with a footer of RDB
/// `version` and Redis's CRC-64 (Jones) of both.
pub fn dump_payload(body: &[u8], version: u16) -> Vec<u8> {
    let mut p = body.to_vec();
    p.extend_from_slice(&version.to_le_bytes());
    let mut crc = 0u64;
    for &byte in &p {
        crc ^= byte as u64;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x95ac_9329_ac4b_c9b5
            } else {
                crc >> 1
            };
        }
    }
    p.extend_from_slice(&crc.to_le_bytes());
    p
}
