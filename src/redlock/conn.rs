//! A minimal async RESP2 client for one node: just enough for Redlock (SET, EVALSHA,
//! EVAL, AUTH). Kept in-crate so the library does not depend on a full Redis client.
//!
//! Connections are pooled per node and taken *out* of the pool for the length of one
//! request. A request that is cancelled (its per-node timeout fired) therefore drops its
//! connection together with any reply still in flight, and the next request dials a
//! fresh one: a late reply can never be read as the answer to a later command.

use std::fmt;
use std::io;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use parking_lot::Mutex;
use redis_protocol::resp2::{decode::decode_bytes_mut, types::BytesFrame};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::nodes::Target;

/// Idle connections kept per node; more concurrent requests than this simply dial.
const MAX_IDLE: usize = 16;
/// Replies Redlock expects are tiny; anything this large is a confused peer.
const MAX_REPLY: usize = 1024 * 1024;

/// Why one request to one node did not produce a usable reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeError {
    /// Connecting, writing or reading failed (refused, reset, closed...).
    Io(String),
    /// The per-node timeout fired before a reply arrived.
    Timeout,
    /// The bytes received were not valid RESP2.
    Protocol(String),
    /// The node replied with an error (`-TRYAGAIN ...`, `-NOAUTH ...`, ...).
    Server(String),
}

impl fmt::Display for NodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeError::Io(e) => write!(f, "I/O error: {e}"),
            NodeError::Timeout => f.write_str("timed out"),
            NodeError::Protocol(e) => write!(f, "protocol error: {e}"),
            NodeError::Server(e) => write!(f, "error reply: {e}"),
        }
    }
}

impl std::error::Error for NodeError {}

impl From<io::Error> for NodeError {
    fn from(e: io::Error) -> Self {
        NodeError::Io(e.to_string())
    }
}

/// A connection's byte stream: TCP, or TLS over TCP (`rediss://`).
trait Io: AsyncRead + AsyncWrite + Unpin + Send + Sync {}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + Sync> Io for S {}

/// One open connection: the socket and the bytes read but not yet decoded.
struct Conn {
    stream: Box<dyn Io>,
    rbuf: BytesMut,
    wbuf: Vec<u8>,
}

impl Conn {
    async fn connect(target: &Target) -> Result<Conn, NodeError> {
        let tcp = TcpStream::connect(&target.dial).await?;
        // Lock commands are single small writes waiting for a reply: Nagle only adds delay.
        tcp.set_nodelay(true)?;
        let stream: Box<dyn Io> = match &target.tls {
            None => Box::new(tcp),
            Some((connector, name)) => Box::new(
                connector
                    .connect(name.clone(), tcp)
                    .await
                    .map_err(|e| NodeError::Io(format!("TLS: {e}")))?,
            ),
        };
        let mut conn = Conn {
            stream,
            rbuf: BytesMut::with_capacity(512),
            wbuf: Vec::with_capacity(256),
        };
        if let Some(auth) = &target.auth {
            let pw = auth.password.as_bytes();
            let reply = match &auth.user {
                Some(user) => conn.request(&[b"AUTH", user.as_bytes(), pw]).await?,
                None => conn.request(&[b"AUTH", pw]).await?,
            };
            if let BytesFrame::Error(e) = reply {
                return Err(NodeError::Server(e.to_string()));
            }
        }
        Ok(conn)
    }

    /// Sends one command (a RESP array of bulk strings) and reads one reply. An error
    /// reply is returned as a frame, not as `Err`: the caller decides what it means.
    async fn request(&mut self, args: &[&[u8]]) -> Result<BytesFrame, NodeError> {
        self.wbuf.clear();
        encode_command(&mut self.wbuf, args);
        self.stream.write_all(&self.wbuf).await?;
        // TLS may hold the record in its session buffer until flushed.
        self.stream.flush().await?;
        loop {
            match decode_bytes_mut(&mut self.rbuf) {
                Ok(Some((frame, _, _))) => return Ok(frame),
                Ok(None) => {}
                Err(e) => return Err(NodeError::Protocol(e.to_string())),
            }
            if self.rbuf.len() > MAX_REPLY {
                return Err(NodeError::Protocol("reply too large".into()));
            }
            self.rbuf.reserve(512);
            let n = self.stream.read_buf(&mut self.rbuf).await?;
            if n == 0 {
                return Err(NodeError::Io("connection closed by peer".into()));
            }
        }
    }
}

/// Appends `*N\r\n$len\r\narg\r\n...` to `out`.
fn encode_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    let mut num = itoa::Buffer::new();
    out.put_u8(b'*');
    out.extend_from_slice(num.format(args.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    for arg in args {
        out.put_u8(b'$');
        out.extend_from_slice(num.format(arg.len()).as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// A Lua script and the SHA1 of its exact bytes (what EVALSHA is sent with).
pub(crate) struct Script {
    pub(crate) text: &'static str,
    pub(crate) sha1: String,
}

impl Script {
    pub(crate) fn new(text: &'static str) -> Script {
        Script {
            text,
            sha1: sha1_smol::Sha1::from(text.as_bytes()).digest().to_string(),
        }
    }
}

/// One request as Redlock sends it.
pub(crate) enum Request<'a> {
    /// A plain command, e.g. `SET key value NX PX ttl`.
    Command(&'a [&'a [u8]]),
    /// A script with one key: `EVALSHA sha 1 key args...`, then `EVAL text 1 key args...`
    /// when the node does not have it cached (`-NOSCRIPT ...`).
    Script {
        script: &'a Script,
        key: &'a [u8],
        args: &'a [&'a [u8]],
    },
}

impl Request<'_> {
    /// The request's key: every command Redlock sends names its key first.
    pub(crate) fn key(&self) -> &[u8] {
        match self {
            Request::Command(args) => args.get(1).copied().unwrap_or_default(),
            Request::Script { key, .. } => key,
        }
    }
}

impl Conn {
    /// Runs `req`; an error reply becomes `Err(NodeError::Server)`.
    async fn execute(&mut self, req: &Request<'_>) -> Result<BytesFrame, NodeError> {
        let frame = match req {
            Request::Command(args) => self.request(args).await?,
            Request::Script { script, key, args } => {
                let mut argv: Vec<&[u8]> = Vec::with_capacity(4 + args.len());
                argv.extend_from_slice(&[b"EVALSHA", script.sha1.as_bytes(), b"1", key]);
                argv.extend_from_slice(args);
                match self.request(&argv).await? {
                    BytesFrame::Error(e) if e.starts_with("NOSCRIPT ") => {
                        argv[0] = b"EVAL";
                        argv[1] = script.text.as_bytes();
                        self.request(&argv).await?
                    }
                    other => other,
                }
            }
        };
        match frame {
            BytesFrame::Error(e) => Err(NodeError::Server(e.to_string())),
            other => Ok(other),
        }
    }
}

/// One Redis-compatible node: its address, credentials (in `target`) and idle
/// connections.
pub(crate) struct Node {
    /// As given (`rediss://h:p` or `h:p`): what errors name.
    addr: String,
    target: Target,
    idle: Mutex<Vec<Conn>>,
}

impl Node {
    pub(crate) fn new(addr: String, target: Target) -> Node {
        Node {
            addr,
            target,
            idle: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }

    /// Runs `req` on a connection to this node, all of it (dialling, AUTH, every round
    /// trip) bounded by `timeout`. On success the connection goes back to the pool; on
    /// any failure it is dropped, so the next call reconnects.
    ///
    /// A pooled connection can be stale (the node restarted since it was last used): if
    /// it fails with an I/O error, the request is retried once on a fresh connection
    /// within the same deadline. Redlock's requests are safe to repeat (SET NX with the
    /// same value, compare-and-* scripts).
    pub(crate) async fn run(
        &self,
        timeout: Duration,
        req: &Request<'_>,
    ) -> Result<BytesFrame, NodeError> {
        let work = async {
            let pooled = self.idle.lock().pop();
            if let Some(mut conn) = pooled {
                match conn.execute(req).await {
                    Ok(v) => {
                        self.put_back(conn);
                        return Ok(v);
                    }
                    Err(NodeError::Io(_)) => {} // stale: dial below
                    Err(e) => {
                        // An error reply leaves the connection in sync: keep it.
                        if matches!(e, NodeError::Server(_)) {
                            self.put_back(conn);
                        }
                        return Err(e);
                    }
                }
            }
            let mut conn = Conn::connect(&self.target).await?;
            let result = conn.execute(req).await;
            if matches!(result, Ok(_) | Err(NodeError::Server(_))) {
                self.put_back(conn);
            }
            result
        };
        match tokio::time::timeout(timeout, work).await {
            Ok(r) => r,
            Err(_) => Err(NodeError::Timeout),
        }
    }

    fn put_back(&self, conn: Conn) {
        let mut idle = self.idle.lock();
        if idle.len() < MAX_IDLE {
            idle.push(conn);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_arrays_of_bulk_strings() {
        let mut out = Vec::new();
        encode_command(&mut out, &[b"SET", b"k", b""]);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
    }

    #[test]
    fn script_sha1_is_of_the_exact_bytes() {
        let s = Script::new("return 1");
        assert_eq!(s.sha1, "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
    }
}
