//! Shared test helpers: start an in-process server with a manual clock, connect the
//! `redis` crate's async client, or a raw TCP client that sends RESP and reads back
//! exact reply frames.
#![allow(dead_code)]

use bytes::BytesMut;
use redlockd::{Config, Server, ServerHandle};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Bound on every network wait in tests.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// A server with `Config::for_tests()`: port 0, manual clock, no fence, DEBUG on.
pub async fn start() -> ServerHandle {
    start_with(|_| {}).await
}

/// A server with `Config::for_tests()` changed by `change`.
pub async fn start_with(change: impl FnOnce(&mut Config)) -> ServerHandle {
    let mut config = Config::for_tests();
    change(&mut config);
    Server::start(config).await.expect("server starts")
}

/// A RESP2 multiplexed connection through the `redis` crate.
pub async fn client(h: &ServerHandle) -> redis::aio::MultiplexedConnection {
    connect_url(&format!("redis://{}/", h.addr())).await
}

/// A RESP3 multiplexed connection (the crate sends HELLO 3).
pub async fn client_resp3(h: &ServerHandle) -> redis::aio::MultiplexedConnection {
    connect_url(&format!("redis://{}/?protocol=resp3", h.addr())).await
}

pub async fn connect_url(url: &str) -> redis::aio::MultiplexedConnection {
    let c = redis::Client::open(url).expect("valid url");
    tokio::time::timeout(TIMEOUT, c.get_multiplexed_async_connection())
        .await
        .expect("connect in time")
        .expect("connect")
}

/// Runs a command through the `redis` crate, returning the reply value or the error.
pub async fn query(
    con: &mut redis::aio::MultiplexedConnection,
    args: &[&str],
) -> redis::RedisResult<redis::Value> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    tokio::time::timeout(TIMEOUT, cmd.query_async(con))
        .await
        .expect("reply in time")
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

pub fn err(text: &str) -> String {
    format!("-{text}\r\n")
}

/// A raw TCP client: writes bytes, reads whole reply frames.
pub struct Raw {
    pub stream: TcpStream,
    buf: BytesMut,
}

impl Raw {
    pub async fn connect(addr: SocketAddr) -> Raw {
        let stream = tokio::time::timeout(TIMEOUT, TcpStream::connect(addr))
            .await
            .expect("connect in time")
            .expect("connect");
        stream.set_nodelay(true).unwrap();
        Raw {
            stream,
            buf: BytesMut::new(),
        }
    }

    pub async fn to(h: &ServerHandle) -> Raw {
        Raw::connect(h.addr()).await
    }

    pub async fn send(&mut self, bytes: &[u8]) {
        tokio::time::timeout(TIMEOUT, self.stream.write_all(bytes))
            .await
            .expect("write in time")
            .expect("write");
    }

    /// Sends one command and returns its reply frame as text (lossy UTF-8).
    pub async fn cmd(&mut self, args: &[&str]) -> String {
        self.send(&resp(args)).await;
        self.reply().await
    }

    /// Sends one binary command and returns its reply frame's bytes.
    pub async fn cmd_bytes(&mut self, args: &[&[u8]]) -> Vec<u8> {
        self.send(&resp(args)).await;
        self.reply_bytes().await
    }

    pub async fn reply(&mut self) -> String {
        String::from_utf8_lossy(&self.reply_bytes().await).into_owned()
    }

    /// Reads exactly one reply frame.
    pub async fn reply_bytes(&mut self) -> Vec<u8> {
        loop {
            if let Some(n) = frame_len(&self.buf) {
                return self.buf.split_to(n).to_vec();
            }
            let n = tokio::time::timeout(TIMEOUT, self.stream.read_buf(&mut self.buf))
                .await
                .expect("reply in time")
                .expect("read");
            assert!(
                n > 0,
                "connection closed before a full reply; have {:?}",
                String::from_utf8_lossy(&self.buf)
            );
        }
    }

    /// True when the server closes the connection (after any pending bytes, which are
    /// discarded) within the timeout.
    pub async fn closed(&mut self) -> bool {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            match tokio::time::timeout_at(deadline, self.stream.read_buf(&mut self.buf)).await {
                Err(_) => return false,
                Ok(Ok(0)) | Ok(Err(_)) => return true,
                Ok(Ok(_)) => {}
            }
        }
    }
}

/// The length of the first complete RESP2/RESP3 frame in `buf`, if it is complete.
pub fn frame_len(buf: &[u8]) -> Option<usize> {
    let eol = buf.windows(2).position(|w| w == b"\r\n")?;
    let line = std::str::from_utf8(&buf[1..eol]).ok()?;
    let head = eol + 2;
    match *buf.first()? {
        b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => Some(head),
        b'$' | b'=' | b'!' => {
            let n: i64 = line.parse().ok()?;
            if n < 0 {
                return Some(head);
            }
            let end = head + n as usize + 2;
            (buf.len() >= end).then_some(end)
        }
        b'*' | b'~' | b'>' | b'%' => {
            let n: i64 = line.parse().ok()?;
            let items = if buf[0] == b'%' { n * 2 } else { n };
            let mut pos = head;
            for _ in 0..items.max(0) {
                pos += frame_len(&buf[pos..])?;
            }
            Some(pos)
        }
        other => panic!("unexpected reply type byte {:?}", other as char),
    }
}
