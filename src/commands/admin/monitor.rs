//! MONITOR: every command a client runs, as one line to each monitoring client, in
//! Redis 7.0's format: `+1700000000.123456 [0 127.0.0.1:5555] "SET" "k" "v"` (wall time
//! in seconds and microseconds, the database, the client's address or `lua` for a
//! script's call, then each argument quoted as sdscatrepr quotes it).
//!
//! As Redis 7.0 does: a command is shown once it ran (one refused before running, by
//! arity, ACL, auth or OOM, is not), EVAL / EVALSHA / FCALL before the calls their
//! script makes; commands (and subcommands) flagged `admin` are never shown (CONFIG,
//! ACL, DEBUG, CLIENT KILL, MONITOR itself); secrets are `(redacted)` by the slow log's
//! rules (`acl::redact`: AUTH, HELLO ... AUTH, MIGRATE AUTH / AUTH2). MONITOR needs the
//! `@admin` permission (its row's flags). With nobody monitoring a command costs one
//! atomic load.

use crate::acl::redact;
use crate::commands::command_table::flags;
use crate::commands::families::pubsub::Subscriber;
use crate::commands::{CmdResult, Ctx, Spec};

use crate::protocol::{errors, Reply};
use bytes::Bytes;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

/// The monitoring clients of a node.
#[derive(Default)]
pub struct Monitors {
    /// How many there are: the one load a command pays while none.
    count: AtomicUsize,
    /// Each one's id and delivery end.
    list: Mutex<Vec<(u64, Arc<Subscriber>)>>,
}

impl Monitors {
    /// Whether anyone monitors (one load).
    #[inline]
    pub fn active(&self) -> bool {
        self.count.load(Relaxed) > 0
    }

    /// Client `id` stops monitoring (its connection ended).
    pub fn remove(&self, id: u64) {
        if !self.active() {
            return;
        }
        let mut list = self.list.lock();
        list.retain(|(m, _)| *m != id);
        self.count.store(list.len(), Relaxed);
    }

    fn add(&self, id: u64, sub: Arc<Subscriber>) -> bool {
        let mut list = self.list.lock();
        if list.iter().any(|(m, _)| *m == id) {
            return false;
        }
        list.push((id, sub));
        self.count.store(list.len(), Relaxed);
        true
    }
}

/// MONITOR: +OK, then a line for every command the node runs.
pub fn monitor(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    if ctx.in_exec {
        return Err(Reply::error(
            "ERR MONITOR isn't allowed for DENY BLOCKING client",
        ));
    }
    let Some(sub) = ctx.client.pubsub.handle.clone() else {
        return Err(errors::unknown_command(b"monitor", &[]));
    };
    ctx.shared.monitors.add(ctx.client.id(), sub);
    Ok(Reply::Ok)
}

/// Sends the line of `spec` called with `args` by `ctx`'s client to every monitor
/// (call only while `Monitors::active`).
#[cold]
pub fn feed(ctx: &Ctx, spec: &Spec, args: &[Bytes]) {
    if spec.flags_of(args) & flags::ADMIN != 0 {
        return;
    }
    let us = ctx.shared.clock.wall_us();
    let mut line = format!(
        "{}.{:06} [{} ",
        us.div_euclid(1_000_000),
        us.rem_euclid(1_000_000),
        ctx.client.db
    );
    if ctx.in_script {
        line.push_str("lua]");
    } else {
        line.push_str(&ctx.client.info.addr.to_string());
        line.push(']');
    }
    let mut line = line.into_bytes();
    for (i, arg) in args.iter().enumerate() {
        line.push(b' ');
        if i > 0 && redact::is_secret(spec, args, i) {
            quote(&mut line, redact::REDACTED);
        } else {
            quote(&mut line, arg);
        }
    }
    let line = Bytes::from(line);
    let limit = ctx.shared.config.pubsub_output_limit;
    for (_, sub) in ctx.shared.monitors.list.lock().iter() {
        sub.push(Reply::Status(line.clone()), limit);
    }
}

/// sdscatrepr: `"..."` with `\\`, `\"`, `\n`, `\r`, `\t`, `\a`, `\b` and `\xhh` for
/// other unprintable bytes.
fn quote(out: &mut Vec<u8>, arg: &[u8]) {
    out.push(b'"');
    for &b in arg {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            7 => out.extend_from_slice(b"\\a"),
            8 => out.extend_from_slice(b"\\b"),
            b' '..=b'~' => out.push(b),
            _ => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_quoted_as_sdscatrepr() {
        let mut out = Vec::new();
        quote(&mut out, b"a b\"c\\\n\r\t\x07\x08\x01\xff");
        assert_eq!(out, b"\"a b\\\"c\\\\\\n\\r\\t\\a\\b\\x01\\xff\"".to_vec());
    }
}
