//! The one raw RESP client of the tests: hand-written bytes in, exact reply frames out.

use super::{resp, TIMEOUT};
use bytes::BytesMut;
use redlockd::testing::TestServer;
use redlockd::ServerHandle;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Something listening on an address: a test node, a server, a real redis-server.
pub trait Addressed {
    fn addr(&self) -> SocketAddr;
}

impl Addressed for TestServer {
    fn addr(&self) -> SocketAddr {
        TestServer::addr(self)
    }
}

impl Addressed for ServerHandle {
    fn addr(&self) -> SocketAddr {
        ServerHandle::addr(self)
    }
}

/// A raw TCP client: writes bytes, reads whole reply frames (RESP2 or RESP3). Every
/// wait is bounded by `TIMEOUT`.
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
        Raw::from_stream(stream)
    }

    /// Wraps a connection the test made itself.
    pub fn from_stream(stream: TcpStream) -> Raw {
        stream.set_nodelay(true).unwrap();
        Raw {
            stream,
            buf: BytesMut::new(),
        }
    }

    pub async fn to(node: &impl Addressed) -> Raw {
        Raw::connect(node.addr()).await
    }

    /// Writes raw bytes (a hand-made frame, an inline command, garbage).
    pub async fn send(&mut self, bytes: &[u8]) {
        tokio::time::timeout(TIMEOUT, self.stream.write_all(bytes))
            .await
            .expect("write in time")
            .expect("write");
    }

    /// Writes one command as a RESP array of bulk strings, without reading the reply.
    pub async fn send_cmd(&mut self, args: &[&str]) {
        self.send(&resp(args)).await;
    }

    /// Sends one command and returns its reply frame as text (lossy UTF-8).
    pub async fn cmd(&mut self, args: &[&str]) -> String {
        self.send_cmd(args).await;
        self.reply().await
    }

    /// For nodes that may be down or paused: sends one command and returns its reply
    /// frame if one arrives within `within`; None if the write fails, the connection is
    /// closed, or nothing complete arrives in time.
    pub async fn try_cmd(&mut self, within: Duration, args: &[&str]) -> Option<String> {
        self.stream.write_all(&resp(args)).await.ok()?;
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(n) = frame_len(&self.buf) {
                let frame = self.buf.split_to(n);
                return Some(String::from_utf8_lossy(&frame).into_owned());
            }
            let read = self.stream.read_buf(&mut self.buf);
            match tokio::time::timeout_at(deadline, read).await {
                Ok(Ok(n)) if n > 0 => {}
                _ => return None,
            }
        }
    }

    /// Sends `requests` (encoded frames, any number) while reading `replies` reply
    /// frames, the whole exchange bounded by `bound` instead of each wait by `TIMEOUT`:
    /// for bulk loads and huge replies, which a debug build on a loaded machine may take
    /// longer than `TIMEOUT` over (the server stalls reading while it inserts).
    pub async fn exchange_within(
        &mut self,
        bound: Duration,
        requests: &[u8],
        replies: usize,
    ) -> Vec<String> {
        let (mut reader, mut writer) = self.stream.split();
        let buf = &mut self.buf;
        let write = async { writer.write_all(requests).await.expect("write") };
        let read = async {
            let mut frames = Vec::with_capacity(replies);
            while frames.len() < replies {
                match frame_len(buf) {
                    Some(n) => frames.push(String::from_utf8_lossy(&buf.split_to(n)).into_owned()),
                    None => assert!(
                        reader.read_buf(buf).await.expect("read") > 0,
                        "connection closed after {} of {replies} replies",
                        frames.len()
                    ),
                }
            }
            frames
        };
        tokio::time::timeout(bound, async { tokio::join!(write, read).1 })
            .await
            .unwrap_or_else(|_| panic!("{replies} replies not within {bound:?}"))
    }

    /// Sends one binary command and returns its reply frame's bytes.
    pub async fn cmd_bytes(&mut self, args: &[&[u8]]) -> Vec<u8> {
        self.send(&resp(args)).await;
        self.reply_bytes().await
    }

    /// Sends one command and asserts its exact reply bytes.
    pub async fn check(&mut self, args: &[&str], expected: &str) {
        self.send_cmd(args).await;
        self.expect(expected).await;
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
            self.fill().await;
        }
    }

    /// Reads exactly `expected.len()` bytes (one frame or several) and compares.
    pub async fn expect(&mut self, expected: &str) {
        while self.buf.len() < expected.len() {
            self.fill().await;
        }
        let got = self.buf.split_to(expected.len());
        assert_eq!(String::from_utf8_lossy(&got), expected, "raw reply differs");
    }

    /// Switches to RESP3 with HELLO 3 and skips HELLO's map.
    pub async fn hello3(&mut self) {
        let reply = self.cmd(&["HELLO", "3"]).await;
        assert!(reply.starts_with('%'), "HELLO 3 gave {reply:?}");
    }

    /// Asserts nothing arrives within `ms` milliseconds (real time).
    pub async fn expect_silence(&mut self, ms: u64) {
        assert!(
            self.buf.is_empty(),
            "unexpected data: {:?}",
            String::from_utf8_lossy(&self.buf)
        );
        let read = self.stream.read_buf(&mut self.buf);
        match tokio::time::timeout(Duration::from_millis(ms), read).await {
            Err(_) => {}
            Ok(Ok(0)) => panic!("connection closed"),
            Ok(r) => panic!(
                "unexpected data: {:?} {:?}",
                r.err(),
                String::from_utf8_lossy(&self.buf)
            ),
        }
    }

    /// Reads until the server closes the connection; returns what came (after what was
    /// already read).
    pub async fn read_to_close(&mut self) -> Vec<u8> {
        let mut all = self.buf.split().to_vec();
        tokio::time::timeout(TIMEOUT, self.stream.read_to_end(&mut all))
            .await
            .expect("server should close the connection")
            .ok();
        all
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

    /// Reads more into the buffer; the connection must stay open.
    async fn fill(&mut self) {
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
