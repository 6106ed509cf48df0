//! Commands: the table (name -> spec), the context a handler runs in, and dispatch.
//! The network, Lua's redis.call and the in-memory door all reach a command through
//! `run`: one implementation of every command.

pub mod cas;
pub mod connection;
pub mod context;
pub mod debug;
pub mod expire;
pub mod fencing;
pub mod functions;
pub mod keys;
pub mod ops;
pub mod scripting;
pub mod server;
pub mod stats;
pub mod strings;
pub mod table;

pub mod blocking;
pub mod hashes;
pub mod lists;
pub mod pubsub;
mod scan;
pub mod sets;
pub mod zranges;
pub mod zsets;

pub use context::{ClientInfo, ClientState, Ctx, NetState, Shared};
pub use table::{lookup, Spec};

use crate::protocol::{errors, Reply};
use bytes::Bytes;
use std::time::Instant;
use table::flags;

/// What a handler returns: `Err` carries an error reply, so handlers can use `?`.
pub type CmdResult = Result<Reply, Reply>;

/// Runs one request from a network client: the checks only the network makes (auth,
/// subscribed mode), then `execute` under the keyspace gate's shared side.
pub fn dispatch(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let Some(spec) = lookup(&args[0]) else {
        return errors::unknown_command(&args[0], &args[1..]);
    };
    if let Some(err) = check_arity(spec, args) {
        return err;
    }
    if ctx.shared.config.requirepass.is_some()
        && !ctx.client.authed
        && spec.flags & flags::NO_AUTH == 0
    {
        return Reply::error(errors::NOAUTH);
    }
    if ctx.client.resp2_subscribed() && spec.flags & flags::PUBSUB == 0 {
        return Reply::error(format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            spec.name
        ));
    }
    // The gate, and BUSY while a script runs past its limit.
    if spec.flags & flags::ALLOW_BUSY != 0 && scripting::bypasses_gate(spec.name, args) {
        ctx.restart_clock();
        return run(ctx, spec, args);
    }
    let gate = &ctx.shared.keyspace.gate;
    if spec.flags & flags::EXCLUSIVE != 0 {
        // Scripts can run long: off the async workers, so they stay free to answer BUSY.
        off_runtime(|| {
            let _exclusive = match wait_gate(ctx.shared, |d| gate.try_write_for(d)) {
                Ok(g) => g,
                Err(busy) => return busy,
            };
            ctx.restart_clock();
            run(ctx, spec, args)
        })
    } else {
        // Uncontended (the common case), the time `Ctx::new` read a moment ago stands:
        // no second clock read. After a wait, the command's time is read again.
        let _shared = match gate.try_read() {
            Some(g) => g,
            None => match off_runtime(|| wait_gate(ctx.shared, |d| gate.try_read_for(d))) {
                Ok(g) => {
                    ctx.restart_clock();
                    g
                }
                Err(busy) => return busy,
            },
        };
        run(ctx, spec, args)
    }
}

/// How long a waiter sleeps on the gate between checks for a script past its limit.
const GATE_SLICE: std::time::Duration = std::time::Duration::from_millis(5);

/// Waits for the keyspace gate, or gives up with BUSY once the script holding it has
/// run past `busy_script_time` (measured on the server's clock, so a manual clock
/// drives it in tests).
fn wait_gate<G>(
    shared: &Shared,
    mut try_for: impl FnMut(std::time::Duration) -> Option<G>,
) -> Result<G, Reply> {
    loop {
        if let Some(g) = try_for(GATE_SLICE) {
            return Ok(g);
        }
        if shared.scripts.is_busy(shared.clock.now_ms()) {
            return Err(Reply::error(errors::BUSY));
        }
    }
}

/// Runs blocking work on a multi-thread runtime's worker without starving the other
/// tasks (tokio hands the worker's queue to another thread). On a current-thread
/// runtime, or outside tokio (benches), it just runs: block_in_place would panic there.
fn off_runtime<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}
// -- end gate + BUSY --

fn check_arity(spec: &Spec, args: &[Bytes]) -> Option<Reply> {
    let n = args.len() as i32;
    let ok = if spec.arity >= 0 {
        n == spec.arity
    } else {
        n >= -spec.arity
    };
    (!ok).then(|| errors::wrong_arity(spec.name))
}

/// Runs a command already looked up and arity-checked: the script rule, the fence, then
/// the handler, with its stats.
pub fn run(ctx: &mut Ctx, spec: &'static Spec, args: &[Bytes]) -> Reply {
    if ctx.in_script && spec.flags & flags::NOSCRIPT != 0 {
        return Reply::error("ERR This Redis command is not allowed from script");
    }
    if spec.flags & flags::FENCED != 0 {
        if let Err(e) = ctx.shared.fence.check_write(ctx.now_ms) {
            ctx.shared.stats.record_rejected(spec.index);
            return e;
        }
    }
    ctx.client.info.touch(spec, ctx.now_ms);
    // A network command's duration starts at the clock reading its context already
    // holds; a command called from a script times itself.
    let started = if ctx.in_script {
        Instant::now()
    } else {
        ctx.started()
    };
    let reply = match (spec.handler)(ctx, args) {
        Ok(r) => r,
        Err(e) => e,
    };
    let failed = reply.is_error();
    let usec = started.elapsed().as_micros() as u64;
    let stats = &ctx.shared.stats;
    stats.record(spec.index, usec, failed);
    if !ctx.in_script {
        stats.observe(spec, args, usec, &ctx.client.info, &ctx.shared.clock);
    }
    reply
}

/// Case-insensitive comparison of an argument with an ASCII keyword.
pub fn eq_ignore_case(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// Parses an argument as Redis's string2ll does: an optional '-', digits, no spaces,
/// no '+', no leading zeros beyond "0".
pub fn parse_i64(arg: &[u8]) -> Option<i64> {
    if arg.len() > 20 {
        return None;
    }
    crate::protocol::parse_int(arg)
}

/// `parse_i64` with Redis's error reply.
pub fn int_arg(arg: &[u8]) -> Result<i64, Reply> {
    parse_i64(arg).ok_or_else(errors::not_integer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_parse_like_redis() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-15"), Some(-15));
        assert_eq!(parse_i64(b"15000"), Some(15000));
        assert_eq!(parse_i64(b"015"), None);
        assert_eq!(parse_i64(b"+1"), None);
        assert_eq!(parse_i64(b" 1"), None);
        assert_eq!(parse_i64(b"1.0"), None);
        assert_eq!(parse_i64(b"-"), None);
        assert_eq!(parse_i64(b"-0"), None);
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
    }
}
