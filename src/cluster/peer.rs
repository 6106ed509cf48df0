//! Node-to-node calls over the Redis protocol (RESP2): one blocking connection to a
//! peer of the map, bounded by a timeout on connect, each write and each read, and
//! authenticated with `--cluster-auth` when set (AUTH user password, as any client).
//! Used off the async workers (a boot round, a background thread, or a handler
//! inside `block_in_place`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// A peer's reply.
#[derive(Debug, PartialEq)]
pub enum Resp {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Resp>),
}

pub struct Peer {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

/// Replies larger than this are refused (a migration batch stays far below).
const MAX_BULK: usize = 512 << 20;

impl Peer {
    /// Connects to `addr` (host:port) within `timeout`, then sends AUTH when `auth`
    /// (user, password) is given.
    pub fn connect(
        addr: &str,
        timeout: Duration,
        auth: Option<&(String, String)>,
    ) -> Result<Peer, String> {
        let sock = addr
            .to_socket_addrs()
            .map_err(|e| format!("{addr}: {e}"))?
            .next()
            .ok_or_else(|| format!("{addr}: no address"))?;
        let stream =
            TcpStream::connect_timeout(&sock, timeout).map_err(|e| format!("{addr}: {e}"))?;
        stream.set_read_timeout(Some(timeout)).ok();
        stream.set_write_timeout(Some(timeout)).ok();
        stream.set_nodelay(true).ok();
        let writer = stream.try_clone().map_err(|e| format!("{addr}: {e}"))?;
        let mut peer = Peer {
            reader: BufReader::new(stream),
            writer,
        };
        if let Some((user, pass)) = auth {
            if let Resp::Error(e) = peer.call(&[b"AUTH", user.as_bytes(), pass.as_bytes()])? {
                return Err(format!("{addr}: AUTH refused: {e}"));
            }
        }
        Ok(peer)
    }

    /// Sets the read timeout (a long transfer may take longer than a query).
    pub fn set_timeout(&self, timeout: Duration) {
        self.writer.set_read_timeout(Some(timeout)).ok();
    }

    /// Sends one command and reads its reply.
    pub fn call(&mut self, args: &[&[u8]]) -> Result<Resp, String> {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.writer
            .write_all(&out)
            .map_err(|e| format!("write: {e}"))?;
        self.read()
    }

    fn line(&mut self) -> Result<String, String> {
        let mut line = String::new();
        let n = self
            .reader
            .read_line(&mut line)
            .map_err(|e| format!("read: {e}"))?;
        if n == 0 || !line.ends_with("\r\n") {
            return Err("the peer closed the connection".into());
        }
        line.truncate(line.len() - 2);
        Ok(line)
    }

    fn read(&mut self) -> Result<Resp, String> {
        let line = self.line()?;
        let (kind, rest) = line.split_at(line.len().min(1));
        let int = |s: &str| {
            s.parse::<i64>()
                .map_err(|_| format!("bad reply line {line:?}"))
        };
        Ok(match kind {
            "+" => Resp::Status(rest.to_string()),
            "-" => Resp::Error(rest.to_string()),
            ":" => Resp::Int(int(rest)?),
            "$" => {
                let n = int(rest)?;
                if n < 0 {
                    return Ok(Resp::Bulk(None));
                }
                let n = n as usize;
                if n > MAX_BULK {
                    return Err(format!("a reply of {n} bytes is too large"));
                }
                let mut buf = vec![0; n + 2];
                self.reader
                    .read_exact(&mut buf)
                    .map_err(|e| format!("read: {e}"))?;
                buf.truncate(n);
                Resp::Bulk(Some(buf))
            }
            "*" => {
                let n = int(rest)?;
                let mut items = Vec::with_capacity(n.clamp(0, 1024) as usize);
                for _ in 0..n.max(0) {
                    items.push(self.read()?);
                }
                Resp::Array(items)
            }
            _ => return Err(format!("bad reply line {line:?}")),
        })
    }
}

/// One call on a fresh connection: the reply's bulk text, or why not.
pub fn call_once(
    addr: &str,
    timeout: Duration,
    auth: Option<&(String, String)>,
    args: &[&[u8]],
) -> Result<Vec<u8>, String> {
    let mut peer = Peer::connect(addr, timeout, auth)?;
    match peer.call(args)? {
        Resp::Bulk(Some(b)) => Ok(b),
        Resp::Status(s) => Ok(s.into_bytes()),
        Resp::Error(e) => Err(format!("{addr}: {e}")),
        other => Err(format!("{addr}: unexpected reply {other:?}")),
    }
}
