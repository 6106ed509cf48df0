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
        Slot::Occupied(_) => Ok(Reply::Null),
        Slot::Vacant(v) => {
            // Read while the key's shard is locked: no commit on this key can slip
            // between the grant and the read (a commit needs this key's value).
            let mark = ctx.shared.tokens.get();
            v.insert(Entry {
                value: Value::Str(args[2].clone()),
                deadline_ms: Some(deadline),
            });
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
