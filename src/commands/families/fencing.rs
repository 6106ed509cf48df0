//! Fencing tokens for Redlock, in two phases any client (or Lua) can send:
//!
//! - `FENCING.GRANT key value PX ms` (or `EX s`): SET NX PX semantics, and on a grant
//!   the node's token mark, read atomically with it. Null when the key exists.
//! - `FENCING.COMMIT key value token`: raises the mark to `token` only while `key` still
//!   holds `value`: 1, or 0 when it does not (expired, released, taken by another).
//! - `FENCING.MARK`: the node's current mark.
//!
//! The client takes token = max(mark over its granted quorum) + 1 and needs a majority
//! of commits before using it. Why that is enough is in `tokens`.
//!
//! A commit is not bounded by what this node handed out: nodes' marks legitimately
//! differ (a node that was down missed commits), so no node can tell a high token from
//! a forged one. A client allowed to write a key can therefore pin the mark near
//! 2^63-1 (availability, not safety: tokens still never go down); operators restrict
//! FENCING.COMMIT with ACLs (docs/operations.md, "FENCING.COMMIT and who may send it").

use crate::commands::notify::{self as nt, notify};
use crate::commands::{eq_ignore_case, int_arg, CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use crate::store::{Entry, Slot, Value, ValueRef};
use bytes::Bytes;

/// FENCING.GRANT key value PX milliseconds | EX seconds
pub fn grant(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let unit_ms = if eq_ignore_case(&args[3], "px") {
        1
    } else if eq_ignore_case(&args[3], "ex") {
        1000
    } else {
        return Err(errors::syntax());
    };
    let amount = int_arg(&args[4])?;
    let ttl_ms = amount
        .checked_mul(unit_ms)
        .filter(|&ms| amount > 0 && ms.checked_add(ctx.shared.clock.wall_ms()).is_some())
        .ok_or_else(|| errors::invalid_expire("fencing.grant"))?;
    let deadline = ctx.deadline_after(ttl_ms)?;
    let now = ctx.now_ms;
    match ctx.db().entry(&args[1], now) {
        Slot::Occupied(e) => {
            drop(e);
            crate::commands::families::locks::refused(ctx, &args[1]);
            Ok(Reply::Null)
        }
        Slot::Vacant(v) => {
            // A delayed lock (`store/lock.rs`): held elsewhere.
            if v.lock_delay_left(now).is_some() {
                crate::commands::note_lock_delay_refusal(ctx);
                return Ok(Reply::Null);
            }
            // Read while the key's shard is locked: no commit on this key can slip
            // between the grant and the read (a commit needs this key's value).
            let mark = ctx.shared.tokens.get();
            let entry = Entry {
                value: Value::Str(args[2].clone()),
                deadline_ms: Some(deadline),
            };
            // A lock (`store/lock.rs`).
            v.insert_marked(entry, true);
            crate::commands::families::locks::granted(ctx, &args[1], &args[2], deadline, false);
            // SET NX PX's events.
            notify(ctx, nt::STRING, "set", &args[1]);
            notify(ctx, nt::GENERIC, "expire", &args[1]);
            Ok(Reply::Integer(mark as i64))
        }
    }
}

/// FENCING.COMMIT key value token
pub fn commit(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let token = int_arg(&args[3])?;
    if token <= 0 {
        return Err(Reply::error("ERR token must be positive"));
    }
    // The shard stays locked until the mark is raised: a new holder cannot be granted
    // this key (and read the mark) in between.
    let Some(held) = ctx.db().get(&args[1], ctx.now_ms) else {
        return Ok(Reply::Integer(0));
    };
    if !matches!(held.value(), ValueRef::Str(v) if v == args[2].as_ref()) {
        return Ok(Reply::Integer(0));
    }
    ctx.shared.tokens.raise(token as u64).map_err(|e| {
        tracing::error!("cannot persist the fencing-token reservation: {e}");
        Reply::error(format!(
            "ERR cannot persist the fencing-token reservation: {e}"
        ))
    })?;
    drop(held);
    Ok(Reply::Integer(1))
}

/// FENCING.MARK
pub fn mark(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    Ok(Reply::Integer(ctx.shared.tokens.get() as i64))
}

/// The three commands on one in-memory node, reply by reply (RESP2).
#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::inmem::Session;
    use bytes::BytesMut;
    use std::time::Duration;

    fn cmd(s: &mut Session, args: &[&str]) -> String {
        let mut out = BytesMut::new();
        s.call(args, &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn grant_sets_the_key_with_its_ttl_and_answers_the_mark() {
        let mut s = Session::new(Config::for_tests());
        assert_eq!(cmd(&mut s, &["FENCING.MARK"]), ":0\r\n");
        assert_eq!(
            cmd(&mut s, &["FENCING.GRANT", "a", "v1", "PX", "10000"]),
            ":0\r\n"
        );
        assert_eq!(cmd(&mut s, &["GET", "a"]), "$2\r\nv1\r\n");
        assert_eq!(cmd(&mut s, &["PTTL", "a"]), ":10000\r\n");
        // Held: null, and the key keeps its value and TTL.
        assert_eq!(
            cmd(&mut s, &["FENCING.GRANT", "a", "v2", "px", "20000"]),
            "$-1\r\n"
        );
        assert_eq!(cmd(&mut s, &["GET", "a"]), "$2\r\nv1\r\n");
        assert_eq!(cmd(&mut s, &["PTTL", "a"]), ":10000\r\n");
        assert_eq!(
            cmd(&mut s, &["FENCING.GRANT", "b", "v", "ex", "7"]),
            ":0\r\n"
        );
        assert_eq!(cmd(&mut s, &["PTTL", "b"]), ":7000\r\n");
        // Once the TTL has passed, the name is free again.
        s.clock().advance(Duration::from_millis(10_001));
        assert_eq!(
            cmd(&mut s, &["FENCING.GRANT", "a", "v2", "PX", "1"]),
            ":0\r\n"
        );
        assert_eq!(cmd(&mut s, &["GET", "a"]), "$2\r\nv2\r\n");
    }

    #[test]
    fn grant_refuses_a_ttl_that_is_not_positive_or_above_max_ttl() {
        let mut s = Session::new(Config::for_tests());
        let invalid = "-ERR invalid expire time in 'fencing.grant' command\r\n";
        for ttl in [&["PX", "0"][..], &["PX", "-5"], &["EX", "0"], &["EX", "-1"]] {
            let args = [&["FENCING.GRANT", "a", "v"][..], ttl].concat();
            assert_eq!(cmd(&mut s, &args), invalid, "{ttl:?}");
        }
        assert_eq!(
            cmd(
                &mut s,
                &["FENCING.GRANT", "a", "v", "EX", "9223372036854775807"]
            ),
            invalid
        );
        assert_eq!(
            cmd(&mut s, &["FENCING.GRANT", "a", "v", "PX", "30001"]),
            "-ERR TTL of 30001 ms is above this server's max-ttl of 30000 ms (raise --max-ttl)\r\n"
        );
        assert_eq!(
            cmd(&mut s, &["FENCING.GRANT", "a", "v", "XX", "10"]),
            "-ERR syntax error\r\n"
        );
        assert_eq!(
            cmd(&mut s, &["FENCING.GRANT", "a", "v", "PX", "ten"]),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(cmd(&mut s, &["EXISTS", "a"]), ":0\r\n");
    }

    #[test]
    fn commit_raises_the_mark_only_for_the_holder_and_never_lowers_it() {
        let mut s = Session::new(Config::for_tests());
        assert_eq!(
            cmd(&mut s, &["FENCING.GRANT", "a", "me", "PX", "10000"]),
            ":0\r\n"
        );
        assert_eq!(cmd(&mut s, &["FENCING.COMMIT", "a", "me", "5"]), ":1\r\n");
        assert_eq!(cmd(&mut s, &["FENCING.MARK"]), ":5\r\n");
        // A lower token is committed (the holder's) but the mark stays.
        assert_eq!(cmd(&mut s, &["FENCING.COMMIT", "a", "me", "3"]), ":1\r\n");
        assert_eq!(cmd(&mut s, &["FENCING.MARK"]), ":5\r\n");
        // Not the holder's value, no key, a key of another type: 0, mark unchanged.
        assert_eq!(
            cmd(&mut s, &["FENCING.COMMIT", "a", "other", "9"]),
            ":0\r\n"
        );
        assert_eq!(
            cmd(&mut s, &["FENCING.COMMIT", "none", "me", "9"]),
            ":0\r\n"
        );
        assert_eq!(cmd(&mut s, &["HSET", "h", "me", "me"]), ":1\r\n");
        assert_eq!(cmd(&mut s, &["FENCING.COMMIT", "h", "me", "9"]), ":0\r\n");
        assert_eq!(cmd(&mut s, &["FENCING.MARK"]), ":5\r\n");
        // The next grant reads the raised mark.
        assert_eq!(
            cmd(&mut s, &["FENCING.GRANT", "b", "you", "PX", "10000"]),
            ":5\r\n"
        );
        // An expired key is no longer held.
        s.clock().advance(Duration::from_millis(10_001));
        assert_eq!(cmd(&mut s, &["FENCING.COMMIT", "a", "me", "9"]), ":0\r\n");
        assert_eq!(cmd(&mut s, &["FENCING.MARK"]), ":5\r\n");
    }

    #[test]
    fn commit_refuses_a_token_that_is_not_positive() {
        let mut s = Session::new(Config::for_tests());
        assert_eq!(
            cmd(&mut s, &["FENCING.GRANT", "a", "me", "PX", "10000"]),
            ":0\r\n"
        );
        for token in ["0", "-1"] {
            assert_eq!(
                cmd(&mut s, &["FENCING.COMMIT", "a", "me", token]),
                "-ERR token must be positive\r\n"
            );
        }
        assert_eq!(cmd(&mut s, &["FENCING.COMMIT", "a", "me", "1"]), ":1\r\n");
        assert_eq!(cmd(&mut s, &["FENCING.MARK"]), ":1\r\n");
    }
}
