//! Helpers shared by the hashes / lists / pub/sub / Redisson tests: a server with a
//! manual clock, `redis` crate connections, and a raw RESP client for exact frames.
#![allow(dead_code)]

use redlockd::{Config, Server, ServerHandle};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub async fn start() -> ServerHandle {
    start_with(Config::for_tests()).await
}

pub async fn start_with(config: Config) -> ServerHandle {
    Server::start(config).await.expect("server starts")
}

pub fn client(h: &ServerHandle) -> redis::Client {
    redis::Client::open(format!("redis://{}/", h.addr())).unwrap()
}

pub async fn conn(h: &ServerHandle) -> redis::aio::MultiplexedConnection {
    client(h).get_multiplexed_async_connection().await.unwrap()
}

/// Runs one command on `c`, giving its reply as `T` (or the error).
pub async fn q<T: redis::FromRedisValue>(
    c: &mut redis::aio::MultiplexedConnection,
    args: &[&str],
) -> redis::RedisResult<T> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query_async(c).await
}

/// The error text of a command that must fail ("ERR ...", "WRONGTYPE ...").
pub async fn err(c: &mut redis::aio::MultiplexedConnection, args: &[&str]) -> String {
    match q::<redis::Value>(c, args).await {
        Ok(v) => panic!("{args:?} should fail, got {v:?}"),
        Err(e) => {
            let code = e.code().unwrap_or("").to_string();
            let detail = e.detail().unwrap_or("").to_string();
            if detail.is_empty() {
                code
            } else {
                format!("{code} {detail}")
            }
        }
    }
}

/// Waits (a few ms at a time, bounded) until `n` clients are blocked on the server, so
/// a test advances the manual clock only once the BLPOP deadline is fixed.
pub async fn wait_blocked(h: &ServerHandle, n: usize) {
    for _ in 0..2000 {
        if h.blocked_clients() == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("expected {n} blocked clients, have {}", h.blocked_clients());
}

/// A raw connection: hand-written RESP in, exact bytes out.
pub struct Raw {
    pub stream: TcpStream,
}

impl Raw {
    pub async fn connect(h: &ServerHandle) -> Raw {
        let stream = TcpStream::connect(h.addr()).await.unwrap();
        stream.set_nodelay(true).unwrap();
        Raw { stream }
    }

    /// Switches to RESP3 and skips HELLO's map (its last field is `modules => []`).
    pub async fn hello3(&mut self) {
        self.send(&["HELLO", "3"]).await;
        let mut seen = Vec::new();
        let mut byte = [0u8; 1];
        while !seen.ends_with(b"$7\r\nmodules\r\n*0\r\n") {
            tokio::time::timeout(Duration::from_secs(5), self.stream.read_exact(&mut byte))
                .await
                .expect("HELLO 3 reply")
                .unwrap();
            seen.push(byte[0]);
        }
    }

    /// Sends one command as a RESP array of bulk strings.
    pub async fn send(&mut self, args: &[&str]) {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        self.stream.write_all(&out).await.unwrap();
    }

    /// Reads exactly `expected.len()` bytes (5 s at most) and compares.
    pub async fn expect(&mut self, expected: &str) {
        let mut buf = vec![0u8; expected.len()];
        tokio::time::timeout(Duration::from_secs(5), self.stream.read_exact(&mut buf))
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for {expected:?}"))
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&buf), expected, "raw reply differs");
    }

    /// Sends and checks the exact reply.
    pub async fn cmd(&mut self, args: &[&str], expected: &str) {
        self.send(args).await;
        self.expect(expected).await;
    }

    /// Asserts nothing arrives within `ms` milliseconds (real time).
    pub async fn expect_silence(&mut self, ms: u64) {
        let mut buf = [0u8; 256];
        match tokio::time::timeout(Duration::from_millis(ms), self.stream.read(&mut buf)).await {
            Err(_) => {}
            Ok(Ok(0)) => panic!("connection closed"),
            Ok(r) => panic!(
                "unexpected data: {:?}",
                r.map(|n| String::from_utf8_lossy(&buf[..n]).to_string())
            ),
        }
    }

    /// Reads until the server closes the connection (5 s at most); returns what came.
    pub async fn read_to_close(&mut self) -> Vec<u8> {
        let mut all = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), self.stream.read_to_end(&mut all))
            .await
            .expect("server should close the connection")
            .ok();
        all
    }
}
