//! The in-memory door: one client session on a server that has no sockets and needs no
//! runtime. Requests take the path a connection's requests take (framing, dispatch,
//! the command, RESP encoding), so benchmarks and fuzz targets measure and exercise
//! the real thing without reaching into the crate's rooms.
//!
//! ```
//! use bytes::BytesMut;
//! use redlockd::{inmem::Session, Config};
//!
//! let mut session = Session::new(Config::for_tests());
//! let mut input = BytesMut::from(&b"*2\r\n$3\r\nGET\r\n$4\r\nlock\r\nPING\r\n"[..]);
//! let mut out = BytesMut::new();
//! assert_eq!(session.feed(&mut input, &mut out), Ok(2));
//! assert_eq!(&out[..], b"$-1\r\n+PONG\r\n");
//! ```

use crate::commands::{dispatch, Ctx};

use crate::config::Config;
use crate::node::{ClientInfo, ClientState, Shared};
use crate::protocol::{encode, Reply};
use crate::Clock;
use bytes::{Bytes, BytesMut};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

pub use crate::protocol::{parse_request, Limits, ProtocolError};

/// One authenticated client of an in-memory server.
pub struct Session {
    shared: Arc<Shared>,
    client: ClientState,
    limits: Limits,
}

impl Session {
    /// A fresh server state from `config` (its port and bind address are unused) and
    /// one client on it, authenticated, speaking RESP2 until it sends HELLO 3.
    pub fn new(config: Config) -> Session {
        let limits = Limits {
            max_bulk_len: config.proto_max_bulk_len,
            ..Limits::default()
        };
        let shared = Arc::new(Shared::new(config));
        let addr: SocketAddr = ([127, 0, 0, 1], 0).into();
        let id = 1;
        let info = Arc::new(ClientInfo::new(id, addr, addr, shared.clock.now_ms()));
        shared.clients.insert(id, info.clone());
        let mut client = ClientState::new(info, &shared.acl);
        client.authed = true;
        Session {
            shared,
            client,
            limits,
        }
    }

    /// The server's clock (manual with `Config::for_tests`).
    pub fn clock(&self) -> &Clock {
        &self.shared.clock
    }

    /// Runs every complete request in `input` (RESP or inline) and appends the replies
    /// to `out`; an incomplete request stays in `input`. Returns how many ran. On a
    /// protocol error the error reply is appended, as a connection would send it
    /// before closing, and the error returned.
    pub fn feed(
        &mut self,
        input: &mut BytesMut,
        out: &mut BytesMut,
    ) -> Result<usize, ProtocolError> {
        let mut ran = 0;
        loop {
            match parse_request(input, &self.limits) {
                Ok(None) => return Ok(ran),
                Ok(Some(args)) if args.is_empty() => {}
                Ok(Some(mut args)) => {
                    self.run(&mut args, out);
                    ran += 1;
                }
                Err(e) => {
                    encode(&Reply::error(format!("ERR {e}")), self.client.proto, out);
                    return Err(e);
                }
            }
        }
    }

    /// A handle another thread can use to stop the script running in this session
    /// (as SHUTDOWN does: whatever it wrote), for fuzzers and benchmarks that must not
    /// hang on a script that loops.
    pub fn script_killer(&self) -> ScriptKiller {
        ScriptKiller(self.shared.clone())
    }

    /// Runs one command given as its arguments and appends the reply to `out`.
    pub fn call<A: AsRef<[u8]>>(&mut self, args: &[A], out: &mut BytesMut) {
        let mut args: Vec<Bytes> = args
            .iter()
            .map(|a| Bytes::copy_from_slice(a.as_ref()))
            .collect();
        if !args.is_empty() {
            self.run(&mut args, out);
        }
    }

    /// One active-expiry pass now (what the sweeper does on its timer); returns how
    /// many expired keys it reclaimed.
    pub fn sweep_expired(&self) -> usize {
        self.shared.keyspace.sweep(self.shared.clock.now_ms())
    }

    fn run(&mut self, args: &mut Vec<Bytes>, out: &mut BytesMut) {
        // Ready on the first poll: the only client of this server never finds the
        // keyspace gate held by anyone else, so dispatch never waits for it.
        let mut reply = {
            let mut ctx = Ctx::new(&self.shared, &mut self.client);
            let dispatched = std::pin::pin!(dispatch(&mut ctx, args));
            let waker = std::task::Waker::noop();
            match dispatched.poll(&mut std::task::Context::from_waker(waker)) {
                std::task::Poll::Ready(reply) => reply,
                std::task::Poll::Pending => unreachable!("a lone session waited for the gate"),
            }
        };
        crate::commands::exec::gate::try_serve_blocked(&self.shared);
        // Nothing else runs while this session waits: a blocking command that would
        // wait answers as if its timeout had passed at once.
        if let Some(mut blocked) = self.client.blocked.take() {
            reply = if self.shared.blocking.unblock(&blocked.waiter) {
                Reply::NullArray
            } else {
                blocked.rx.try_recv().unwrap_or(Reply::NullArray)
            };
        }
        encode(&reply, self.client.proto, out);
        // A command that would close a connection (QUIT) only ends its reply here.
        self.client.close_after_reply = false;
    }

    #[cfg(test)]
    pub(crate) fn shared(&self) -> &Shared {
        &self.shared
    }
}

/// See `Session::script_killer`.
#[derive(Clone)]
pub struct ScriptKiller(Arc<Shared>);

impl ScriptKiller {
    /// Stops the running script, if any; it ends with the SCRIPT KILL error.
    pub fn kill(&self) {
        self.0.scripts.kill_for_shutdown();
    }
}
