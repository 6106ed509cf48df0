//! Reading and changing the collection at a key, shared by the hash, list, set and
//! sorted-set commands: a missing key, a key of another type (WRONGTYPE), creating a
//! new key (a new key has no TTL, so `--require-ttl` is checked), and removing a key
//! whose collection became empty (Redis never keeps an empty one).

use crate::commands::notify::{self as nt, notify};
use crate::commands::{eq_ignore_case, parse_i64, Ctx};
use crate::protocol::{errors, Reply};
use crate::store::{Entry, Set, Slot, Value, ValueMut, ValueRef, ZSet};
use bytes::Bytes;
use std::collections::{HashMap, VecDeque};

/// A collection a key can hold.
pub(crate) trait Collection: Default {
    fn of(value: ValueRef<'_>) -> Option<&Self>;
    fn of_mut(value: ValueMut<'_>) -> Option<&mut Self>;
    fn into_value(self) -> Value;
    fn is_empty(&self) -> bool;
}

/// `$wrap` builds the value from the collection: `Box::new` for the types `Value`
/// boxes (so a string entry stays small), the identity for lists.
macro_rules! collection {
    ($ty:ty, $variant:ident, $wrap:expr) => {
        impl Collection for $ty {
            fn of(value: ValueRef<'_>) -> Option<&Self> {
                match value {
                    ValueRef::$variant(c) => Some(c),
                    _ => None,
                }
            }
            fn of_mut(value: ValueMut<'_>) -> Option<&mut Self> {
                match value {
                    ValueMut::$variant(c) => Some(c),
                    _ => None,
                }
            }
            fn into_value(self) -> Value {
                Value::$variant($wrap(self))
            }
            fn is_empty(&self) -> bool {
                <$ty>::is_empty(self)
            }
        }
    };
}

collection!(HashMap<Bytes, Bytes>, Hash, Box::new);
collection!(VecDeque<Bytes>, List, std::convert::identity);
collection!(Set, Set, Box::new);
collection!(ZSet, ZSet, Box::new);

/// The collection at `key` for a read: `None` when the key is missing, WRONGTYPE when
/// it holds something else.
pub(crate) fn read<C: Collection, T>(
    ctx: &Ctx,
    key: &[u8],
    f: impl FnOnce(&C) -> T,
) -> Result<Option<T>, Reply> {
    match ctx.db().get(key, ctx.now_ms) {
        None => Ok(None),
        Some(e) => C::of(e.value())
            .map(f)
            .map(Some)
            .ok_or_else(errors::wrongtype),
    }
}

/// Runs `f` on the existing collection at `key` (`None` when missing); the key is
/// removed if `f` leaves the collection empty.
pub(crate) fn modify<C: Collection, T>(
    ctx: &Ctx,
    key: &[u8],
    f: impl FnOnce(&mut C) -> T,
) -> Result<Option<T>, Reply> {
    let Slot::Occupied(mut e) = ctx.db().entry(key, ctx.now_ms) else {
        return Ok(None);
    };
    let c = C::of_mut(e.value_mut()).ok_or_else(errors::wrongtype)?;
    let out = f(c);
    if c.is_empty() {
        e.remove();
    }
    Ok(Some(out))
}

/// `modify` with keyspace notifications: `f` also names the event of class `class`
/// its change makes (`None`: it changed nothing), sent after the change, then `del`
/// if the collection became empty and the key went (Redis's order).
pub(crate) fn modify_notify<C: Collection, T>(
    ctx: &Ctx,
    key: &[u8],
    class: u32,
    f: impl FnOnce(&mut C) -> (T, Option<&'static str>),
) -> Result<Option<T>, Reply> {
    let Slot::Occupied(mut e) = ctx.db().entry(key, ctx.now_ms) else {
        return Ok(None);
    };
    let c = C::of_mut(e.value_mut()).ok_or_else(errors::wrongtype)?;
    let (out, event) = f(c);
    let gone = c.is_empty();
    if gone {
        e.remove();
    } else {
        drop(e);
    }
    if let Some(event) = event {
        notify(ctx, class, event, key);
    }
    if gone {
        notify(ctx, nt::GENERIC, "del", key);
    }
    Ok(Some(out))
}

/// `write` with keyspace notifications, as `modify_notify` (a new key's `f` that
/// fails or leaves it empty makes no event).
pub(crate) fn write_notify<C: Collection, T>(
    ctx: &Ctx,
    key: &[u8],
    class: u32,
    f: impl FnOnce(&mut C) -> Result<(T, Option<&'static str>), Reply>,
) -> Result<T, Reply> {
    let mut event = None;
    let mut emptied = false;
    let out = match ctx.db().entry(key, ctx.now_ms) {
        Slot::Occupied(mut e) => {
            let c = C::of_mut(e.value_mut()).ok_or_else(errors::wrongtype)?;
            let out = f(c);
            if c.is_empty() {
                e.remove();
                emptied = true;
            }
            out.map(|(out, ev)| {
                event = ev;
                out
            })
        }
        Slot::Vacant(v) => {
            ctx.shared.fence.check_has_ttl()?;
            let mut c = C::default();
            let (out, ev) = f(&mut c)?;
            if !c.is_empty() {
                v.insert(Entry::new(c.into_value()));
                event = ev;
            }
            Ok(out)
        }
    };
    if let Some(event) = event {
        notify(ctx, class, event, key);
    }
    if emptied {
        notify(ctx, nt::GENERIC, "del", key);
    }
    out
}

/// Runs `f` on the collection at `key`, creating it when missing. Nothing empty is
/// left behind (a failed `f` on a new key leaves no key).
pub(crate) fn write<C: Collection, T>(
    ctx: &Ctx,
    key: &[u8],
    f: impl FnOnce(&mut C) -> Result<T, Reply>,
) -> Result<T, Reply> {
    match ctx.db().entry(key, ctx.now_ms) {
        Slot::Occupied(mut e) => {
            let c = C::of_mut(e.value_mut()).ok_or_else(errors::wrongtype)?;
            let out = f(c);
            if c.is_empty() {
                e.remove();
            }
            out
        }
        Slot::Vacant(v) => {
            ctx.shared.fence.check_has_ttl()?;
            let mut c = C::default();
            let out = f(&mut c)?;
            if !c.is_empty() {
                v.insert(Entry::new(c.into_value()));
            }
            Ok(out)
        }
    }
}

/// An argument copied out of the request (members and values outlive it).
pub(crate) fn copy(b: &[u8]) -> Bytes {
    Bytes::copy_from_slice(b)
}

/// Redis's index normalisation (LRANGE, LTRIM, ZRANGE by rank): negative indexes count
/// from the end, the range is clipped to the collection; `None` when it is empty.
pub(crate) fn index_range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let stop = if stop < 0 {
        len + stop
    } else {
        stop.min(len - 1)
    };
    (start <= stop && start < len).then_some((start as usize, stop as usize))
}

/// The arguments of LMPOP / ZMPOP and their blocking forms, from `numkeys` on:
/// `numkeys key... end [COUNT count]`.
pub(crate) struct MultiPop<'a, E> {
    pub keys: &'a [Bytes],
    /// Which end to pop from (LEFT|RIGHT, MIN|MAX).
    pub end: E,
    /// COUNT, 1 when not given.
    pub count: usize,
}

/// Parses `args[at..]` as `numkeys key... end [COUNT count]` in Redis 7.0's order:
/// numkeys, then the end word (`end` reads it; a numkeys past the arguments leaves no
/// end word: a syntax error), then the options. Nothing is type-checked here.
pub(crate) fn parse_multi_pop<E>(
    args: &[Bytes],
    at: usize,
    end: impl FnOnce(&[u8]) -> Option<E>,
) -> Result<MultiPop<'_, E>, Reply> {
    let numkeys = parse_i64(&args[at])
        .filter(|&n| n > 0)
        .ok_or_else(|| Reply::error("ERR numkeys should be greater than 0"))?;
    let end_at = usize::try_from(numkeys)
        .ok()
        .and_then(|n| n.checked_add(at + 1))
        .filter(|&i| i < args.len())
        .ok_or_else(errors::syntax)?;
    let end = end(&args[end_at]).ok_or_else(errors::syntax)?;
    let mut count = None;
    let mut i = end_at + 1;
    while i < args.len() {
        if count.is_some() || !eq_ignore_case(&args[i], "count") || i + 1 == args.len() {
            return Err(errors::syntax());
        }
        let n = parse_i64(&args[i + 1])
            .filter(|&n| n > 0)
            .ok_or_else(|| Reply::error("ERR count should be greater than 0"))?;
        count = Some(usize::try_from(n).unwrap_or(usize::MAX));
        i += 2;
    }
    Ok(MultiPop {
        keys: &args[at + 1..end_at],
        end,
        count: count.unwrap_or(1),
    })
}
