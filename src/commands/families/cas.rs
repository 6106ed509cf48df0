//! Native compare-and-set / compare-and-delete for locks, without Lua: DELEX (Redis
//! 8.4), DIGEST (8.4), DELIFEQ (Valkey 9), and the IFEQ / IFNE / IFDEQ / IFDNE
//! conditions SET takes (parsed in strings.rs with SET's other options).
//!
//! A digest is XXH3-64 (seed 0) of the value as 16 lowercase hex digits, the digest
//! Redis 8.4 returns, so a digest taken from Redis is valid here and the other way
//! round. A digest argument is compared without regard to case; anything that is not
//! the value's digest (a malformed one included) simply does not match.

use crate::commands::families::locks;
use crate::commands::notify::{self as nt, notify};
use crate::commands::{eq_ignore_case, CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use crate::store::{Slot, ValueRef};
use bytes::Bytes;

/// A value condition: IFEQ / IFNE compare the value, IFDEQ / IFDNE its digest.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Cond<'a> {
    Eq(&'a [u8]),
    Ne(&'a [u8]),
    DigestEq(&'a [u8]),
    DigestNe(&'a [u8]),
}

impl<'a> Cond<'a> {
    /// The condition named by `word` with its argument, or None if `word` is not one.
    pub fn parse(word: &[u8], arg: &'a [u8]) -> Option<Cond<'a>> {
        if eq_ignore_case(word, "ifeq") {
            Some(Cond::Eq(arg))
        } else if eq_ignore_case(word, "ifne") {
            Some(Cond::Ne(arg))
        } else if eq_ignore_case(word, "ifdeq") {
            Some(Cond::DigestEq(arg))
        } else if eq_ignore_case(word, "ifdne") {
            Some(Cond::DigestNe(arg))
        } else {
            None
        }
    }

    pub fn is_keyword(word: &[u8]) -> bool {
        ["ifeq", "ifne", "ifdeq", "ifdne"]
            .iter()
            .any(|w| eq_ignore_case(word, w))
    }

    /// Whether the condition holds for an existing string `value`.
    pub fn holds(&self, value: &[u8]) -> bool {
        match *self {
            Cond::Eq(v) => value == v,
            Cond::Ne(v) => value != v,
            Cond::DigestEq(d) => digest(value).as_bytes().eq_ignore_ascii_case(d),
            Cond::DigestNe(d) => !digest(value).as_bytes().eq_ignore_ascii_case(d),
        }
    }

    /// Whether the condition holds for a missing key: only the "not equal" ones (so
    /// SET IFNE creates the key, SET IFEQ does not).
    pub fn holds_when_missing(&self) -> bool {
        matches!(self, Cond::Ne(_) | Cond::DigestNe(_))
    }
}

/// XXH3-64 of `value`, as Redis 8.4's DIGEST prints it.
pub fn digest(value: &[u8]) -> String {
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(value))
}

/// DIGEST key -> the value's digest, null for a missing key, WRONGTYPE otherwise.
pub fn digest_cmd(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    match ctx.db().get(&args[1], ctx.now_ms) {
        None => Ok(Reply::Null),
        Some(e) => match e.value() {
            ValueRef::Str(s) => Ok(Reply::Bulk(Bytes::from(digest(s)))),
            _ => Err(errors::wrongtype()),
        },
    }
}

/// Deletes `key` when `cond` holds (any type when there is no condition; a condition
/// needs a string). 1 when deleted, else 0.
fn delete_if(ctx: &Ctx, key: &[u8], cond: Option<Cond>) -> CmdResult {
    let Some(cond) = cond else {
        // As DEL (which also ends a lock's delay, `store/lock.rs`).
        let deleted = ctx.db().remove(key, ctx.now_ms);
        if deleted {
            locks::released(ctx, key);
            notify(ctx, nt::GENERIC, "del", key);
        }
        return Ok(Reply::Integer(deleted as i64));
    };
    let Slot::Occupied(e) = ctx.db().entry(key, ctx.now_ms) else {
        if let Cond::Eq(token) = cond {
            // The holder's release of a lock that expired first: an overrun.
            locks::late_release(ctx, key, &[Bytes::copy_from_slice(token)]);
        }
        return Ok(Reply::Integer(0));
    };
    let delete = match e.value() {
        ValueRef::Str(s) => cond.holds(s),
        _ => return Err(errors::wrongtype()),
    };
    if delete {
        e.remove();
        locks::released(ctx, key);
        notify(ctx, nt::GENERIC, "del", key);
    }
    Ok(Reply::Integer(delete as i64))
}

/// DELEX key [IFEQ value | IFNE value | IFDEQ digest | IFDNE digest]
pub fn delex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let cond = match &args[2..] {
        [] => None,
        [word, arg] => Some(Cond::parse(word, arg).ok_or_else(errors::syntax)?),
        _ => return Err(errors::syntax()),
    };
    delete_if(ctx, &args[1], cond)
}

/// DELIFEQ key value (Valkey 9): DELEX key IFEQ value.
pub fn delifeq(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    delete_if(ctx, &args[1], Some(Cond::Eq(&args[2])))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_is_redis_84s_xxh3_hex() {
        // The example on redis.io's DIGEST page.
        assert_eq!(digest(b"Hello world"), "b6acb9d84a38ff74");
        assert_eq!(digest(b"").len(), 16);
    }

    #[test]
    fn digest_conditions_ignore_case() {
        assert!(Cond::DigestEq(b"B6ACB9D84A38FF74").holds(b"Hello world"));
        assert!(!Cond::DigestNe(b"b6acb9d84a38ff74").holds(b"Hello world"));
        assert!(!Cond::DigestEq(b"nothex").holds(b"Hello world"));
        assert!(Cond::Ne(b"x").holds_when_missing());
        assert!(!Cond::Eq(b"x").holds_when_missing());
    }
}
