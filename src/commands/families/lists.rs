//! List commands: LPUSH/RPUSH(X), LPOP/RPOP (with count), LLEN, LRANGE, LINDEX, LREM,
//! LTRIM, LSET, LINSERT, LPOS, LMOVE, RPOPLPUSH, LMPOP, and the blocking BLPOP/BRPOP,
//! BLMPOP, BLMOVE and BRPOPLPUSH.
//!
//! python-redis-lock signals a release by pushing to a list that waiters BLPOP, so the
//! blocking pops follow Redis exactly: FIFO among waiters, a push (also from a script)
//! wakes them after the command ends, timeouts on the server clock, and inside a
//! script they never block. Like Redis, an empty list is never kept.

use crate::commands::exec::blocking::{blocking_pop, pop_or_block, Pop, Side};
use crate::commands::families::typed::{self, copy, index_range, parse_multi_pop};
use crate::commands::notify::{self as nt, notify};
use crate::commands::{eq_ignore_case, int_arg, parse_i64, CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use crate::store::{Entry, Slot, Value, ValueMut};
use bytes::Bytes;
use std::collections::VecDeque;

type List = VecDeque<Bytes>;

fn push_side(list: &mut List, side: Side, value: Bytes) {
    match side {
        Side::Left => list.push_front(value),
        Side::Right => list.push_back(value),
    }
}

fn pop_side(list: &mut List, side: Side) -> Option<Bytes> {
    match side {
        Side::Left => list.pop_front(),
        Side::Right => list.pop_back(),
    }
}

/// Pops up to `count` elements from `side`, in the order they come off.
pub(crate) fn pop_many(list: &mut List, side: Side, count: usize) -> Vec<Bytes> {
    let n = count.min(list.len());
    match side {
        Side::Left => list.drain(..n).collect(),
        Side::Right => list.drain(list.len() - n..).rev().collect(),
    }
}

/// The reply of a pop from one of several keys: `[key, [element...]]` (LMPOP, BLMPOP)
/// when `nested`, else `[key, element]` (BLPOP, BRPOP, which pop one).
pub(crate) fn keyed_reply(key: &Bytes, popped: Vec<Bytes>, nested: bool) -> Reply {
    let key = Reply::Bulk(key.clone());
    let elements = popped.into_iter().map(Reply::Bulk);
    if nested {
        Reply::Array(vec![key, Reply::Array(elements.collect())])
    } else {
        Reply::Array(std::iter::once(key).chain(elements).collect())
    }
}

/// The list at `key` for a read (see `typed::read`).
fn read<T>(ctx: &Ctx, key: &[u8], f: impl FnOnce(&List) -> T) -> Result<Option<T>, Reply> {
    typed::read(ctx, key, f)
}

/// Runs `f` on an existing list (see `typed::modify`).
fn modify<T>(ctx: &Ctx, key: &[u8], f: impl FnOnce(&mut List) -> T) -> Result<Option<T>, Reply> {
    typed::modify(ctx, key, f)
}

/// `modify`, with the list event `f` names (and `del` if the list went).
fn modify_notify<T>(
    ctx: &Ctx,
    key: &[u8],
    f: impl FnOnce(&mut List) -> (T, Option<&'static str>),
) -> Result<Option<T>, Reply> {
    typed::modify_notify(ctx, key, nt::LIST, f)
}

/// The pop event of a side.
fn pop_event(side: Side) -> &'static str {
    match side {
        Side::Left => "lpop",
        Side::Right => "rpop",
    }
}

/// The push event of a side.
fn push_event(side: Side) -> &'static str {
    match side {
        Side::Left => "lpush",
        Side::Right => "rpush",
    }
}

/// Pushes `values` one by one at `side`; creates the list unless `only_existing`.
/// Returns the new length (0 when X-pushing to a missing key), then wakes waiters.
fn push(ctx: &Ctx, key: &[u8], values: &[Bytes], side: Side, only_existing: bool) -> CmdResult {
    let len = match ctx.db().entry(key, ctx.now_ms) {
        Slot::Occupied(mut e) => {
            let ValueMut::List(list) = e.value_mut() else {
                return Err(errors::wrongtype());
            };
            for v in values {
                push_side(list, side, copy(v));
            }
            list.len()
        }
        Slot::Vacant(_) if only_existing => return Ok(Reply::Integer(0)),
        Slot::Vacant(v) => {
            ctx.shared.fence.check_has_ttl()?;
            let mut list = List::with_capacity(values.len());
            for value in values {
                push_side(&mut list, side, copy(value));
            }
            let len = list.len();
            v.insert(Entry::new(Value::List(list)));
            len
        }
    };
    // After the shard lock is released (see blocking.rs for the lock order).
    ctx.shared.blocking.signal(ctx.client.db, key);
    notify(ctx, nt::LIST, push_event(side), key);
    Ok(Reply::Integer(len as i64))
}

pub fn lpush(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    push(ctx, &args[1], &args[2..], Side::Left, false)
}

pub fn rpush(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    push(ctx, &args[1], &args[2..], Side::Right, false)
}

pub fn lpushx(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    push(ctx, &args[1], &args[2..], Side::Left, true)
}

pub fn rpushx(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    push(ctx, &args[1], &args[2..], Side::Right, true)
}

/// LPOP/RPOP key [count]. Without count: the element or null. With count: an array
/// (empty for count 0 on an existing key), or a null array when the key is missing.
fn pop(ctx: &Ctx, args: &[Bytes], side: Side, name: &str) -> CmdResult {
    if args.len() > 3 {
        return Err(errors::wrong_arity(name));
    }
    let count = match args.get(2) {
        None => None,
        Some(c) => match parse_i64(c) {
            Some(n) if n >= 0 => Some(n as usize),
            _ => return Err(Reply::error("ERR value is out of range, must be positive")),
        },
    };
    let popped = modify_notify(ctx, &args[1], |list| {
        let reply = match count {
            None => pop_side(list, side).map_or(Reply::Null, Reply::Bulk),
            Some(n) => Reply::Array(
                pop_many(list, side, n)
                    .into_iter()
                    .map(Reply::Bulk)
                    .collect(),
            ),
        };
        let popped = !matches!(&reply, Reply::Array(a) if a.is_empty());
        (reply, popped.then(|| pop_event(side)))
    })?;
    Ok(popped.unwrap_or(if count.is_some() {
        Reply::NullArray
    } else {
        Reply::Null
    }))
}

pub fn lpop(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    pop(ctx, args, Side::Left, "lpop")
}

pub fn rpop(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    pop(ctx, args, Side::Right, "rpop")
}

pub fn llen(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    Ok(Reply::Integer(
        read(ctx, &args[1], |l| l.len())?.unwrap_or(0) as i64,
    ))
}

pub fn lrange(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let start = int_arg(&args[2])?;
    let stop = int_arg(&args[3])?;
    let items = read(ctx, &args[1], |l| match index_range(start, stop, l.len()) {
        Some((a, b)) => l.range(a..=b).cloned().map(Reply::Bulk).collect(),
        None => Vec::new(),
    })?;
    Ok(Reply::Array(items.unwrap_or_default()))
}

pub fn lindex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let index = int_arg(&args[2])?;
    let found = read(ctx, &args[1], |l| {
        let i = if index < 0 {
            l.len() as i64 + index
        } else {
            index
        };
        usize::try_from(i).ok().and_then(|i| l.get(i).cloned())
    })?;
    Ok(found.flatten().map_or(Reply::Null, Reply::Bulk))
}

/// LREM key count element: count > 0 from the head, < 0 from the tail, 0 all.
pub fn lrem(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let count = int_arg(&args[2])?;
    let target = &args[3][..];
    let removed = modify_notify(ctx, &args[1], |list| {
        let limit = if count == 0 {
            usize::MAX
        } else {
            count.unsigned_abs().try_into().unwrap_or(usize::MAX)
        };
        let mut removed = 0usize;
        let mut kept = List::with_capacity(list.len());
        if count >= 0 {
            for v in list.drain(..) {
                if removed < limit && v == target {
                    removed += 1;
                } else {
                    kept.push_back(v);
                }
            }
        } else {
            for v in list.drain(..).rev() {
                if removed < limit && v == target {
                    removed += 1;
                } else {
                    kept.push_front(v);
                }
            }
        }
        *list = kept;
        (removed, (removed > 0).then_some("lrem"))
    })?;
    Ok(Reply::Integer(removed.unwrap_or(0) as i64))
}

pub fn ltrim(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let start = int_arg(&args[2])?;
    let stop = int_arg(&args[3])?;
    modify_notify(ctx, &args[1], |list| {
        match index_range(start, stop, list.len()) {
            Some((a, b)) => {
                list.truncate(b + 1);
                list.drain(..a);
            }
            None => list.clear(),
        }
        ((), Some("ltrim"))
    })?;
    Ok(Reply::Ok)
}

/// LMPOP numkeys key... LEFT|RIGHT [COUNT count]: pops from the first key that exists
/// (a key of another type before it is WRONGTYPE; keys after it are not looked at).
pub fn lmpop(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let pop = parse_multi_pop(args, 1, |a| parse_side(a).ok())?;
    for key in pop.keys {
        let popped = modify_notify(ctx, key, |l| {
            (pop_many(l, pop.end, pop.count), Some(pop_event(pop.end)))
        })?;
        if let Some(popped) = popped {
            return Ok(keyed_reply(key, popped, true));
        }
    }
    Ok(Reply::NullArray)
}

fn parse_side(arg: &[u8]) -> Result<Side, Reply> {
    if eq_ignore_case(arg, "left") {
        Ok(Side::Left)
    } else if eq_ignore_case(arg, "right") {
        Ok(Side::Right)
    } else {
        Err(errors::syntax())
    }
}

/// Moves one element from `from` of `src` to `to` of `dst` (both type-checked first,
/// as Redis does); `None` when `src` is missing. Callers hold the gate exclusively
/// (table flag), so nobody sees the element in neither list.
fn move_one(
    ctx: &Ctx,
    src: &[u8],
    dst: &[u8],
    from: Side,
    to: Side,
) -> Result<Option<Bytes>, Reply> {
    if read(ctx, src, |_| ())?.is_none() {
        return Ok(None);
    }
    let dst_exists = read(ctx, dst, |_| ())?.is_some();
    if !dst_exists && src != dst {
        ctx.shared.fence.check_has_ttl()?;
    }
    let Some(Some(value)) = modify(ctx, src, |l| pop_side(l, from))? else {
        return Ok(None);
    };
    // Redis's order: the push's event, then the pop's, then `del` of an emptied source.
    push(ctx, dst, std::slice::from_ref(&value), to, false)?;
    notify(ctx, nt::LIST, pop_event(from), src);
    if ctx.shared.notify.flags() & nt::GENERIC != 0 && read(ctx, src, |_| ())?.is_none() {
        notify(ctx, nt::GENERIC, "del", src);
    }
    Ok(Some(value))
}

/// LMOVE source destination LEFT|RIGHT LEFT|RIGHT
pub fn lmove(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let from = parse_side(&args[3])?;
    let to = parse_side(&args[4])?;
    Ok(move_one(ctx, &args[1], &args[2], from, to)?.map_or(Reply::Null, Reply::Bulk))
}

/// RPOPLPUSH source destination: LMOVE source destination RIGHT LEFT.
pub fn rpoplpush(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let moved = move_one(ctx, &args[1], &args[2], Side::Right, Side::Left)?;
    Ok(moved.map_or(Reply::Null, Reply::Bulk))
}

/// The blocking moves: waits (FIFO, with BLPOP's machinery) for `src` to have an
/// element. In a transaction it answers null at once; on timeout a null array, as
/// Redis 7.0 does.
fn bmove(
    ctx: &mut Ctx,
    src: &Bytes,
    dst: &Bytes,
    from: Side,
    to: Side,
    timeout: &[u8],
) -> CmdResult {
    let timeout_ms = parse_timeout_ms(timeout)?;
    let pop = Pop::Move {
        from,
        to,
        dst: copy(dst),
    };
    pop_or_block(
        ctx,
        std::slice::from_ref(src),
        pop,
        timeout_ms,
        Reply::Null,
        |ctx, key, take| {
            if !take {
                read(ctx, key, |_| ())?;
                read(ctx, dst, |_| ())?;
                return Ok(None);
            }
            Ok(move_one(ctx, key, dst, from, to)?.map(Reply::Bulk))
        },
    )
}

/// BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout
pub fn blmove(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let from = parse_side(&args[3])?;
    let to = parse_side(&args[4])?;
    bmove(ctx, &args[1], &args[2], from, to, &args[5])
}

/// BRPOPLPUSH source destination timeout
pub fn brpoplpush(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    bmove(ctx, &args[1], &args[2], Side::Right, Side::Left, &args[3])
}

/// LSET key index element. As Redis: the key (no such key, WRONGTYPE) is checked
/// before the index.
pub fn lset(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if read(ctx, &args[1], |_| ())?.is_none() {
        return Err(Reply::error(errors::NO_SUCH_KEY));
    }
    let index = int_arg(&args[2])?;
    let done = modify_notify(ctx, &args[1], |l| {
        let i = if index < 0 {
            l.len() as i64 + index
        } else {
            index
        };
        match usize::try_from(i).ok().and_then(|i| l.get_mut(i)) {
            Some(slot) => {
                *slot = copy(&args[3]);
                (true, Some("lset"))
            }
            None => (false, None),
        }
    })?;
    match done {
        None => Err(Reply::error(errors::NO_SUCH_KEY)),
        Some(false) => Err(Reply::error("ERR index out of range")),
        Some(true) => Ok(Reply::Ok),
    }
}

/// LINSERT key BEFORE|AFTER pivot element -> the new length, -1 without the pivot,
/// 0 for a missing key.
pub fn linsert(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let after = if eq_ignore_case(&args[2], "after") {
        true
    } else if eq_ignore_case(&args[2], "before") {
        false
    } else {
        return Err(errors::syntax());
    };
    let len = modify_notify(ctx, &args[1], |l| {
        let Some(at) = l.iter().position(|v| v == &args[3]) else {
            return (-1, None);
        };
        l.insert(at + after as usize, copy(&args[4]));
        (l.len() as i64, Some("linsert"))
    })?;
    Ok(Reply::Integer(len.unwrap_or(0)))
}

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]
pub fn lpos(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (mut rank, mut count, mut maxlen) = (1i64, None, 0usize);
    let mut i = 3;
    while i < args.len() {
        let Some(value) = args.get(i + 1) else {
            return Err(errors::syntax());
        };
        let opt = &args[i];
        if eq_ignore_case(opt, "rank") {
            rank = int_arg(value)?;
            // Redis 7.0 negates the rank in a long: i64::MIN stays itself and ends
            // up acting as -1 (seen against redis-server 7.0.15).
            if rank == i64::MIN {
                rank = -1;
            }
            if rank == 0 {
                return Err(Reply::error("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"));
            }
        } else if eq_ignore_case(opt, "count") {
            let n = int_arg(value)?;
            if n < 0 {
                return Err(Reply::error("ERR COUNT can't be negative"));
            }
            count = Some(n as usize);
        } else if eq_ignore_case(opt, "maxlen") {
            let n = int_arg(value)?;
            if n < 0 {
                return Err(Reply::error("ERR MAXLEN can't be negative"));
            }
            maxlen = n as usize;
        } else {
            return Err(errors::syntax());
        }
        i += 2;
    }
    let target = &args[2][..];
    let found = read(ctx, &args[1], |l| {
        let scan = if maxlen == 0 {
            l.len()
        } else {
            maxlen.min(l.len())
        };
        let wanted = match count {
            None => 1,
            Some(0) => usize::MAX,
            Some(n) => n,
        };
        let skip = (rank.unsigned_abs() - 1) as usize;
        let indexes: Box<dyn Iterator<Item = usize>> = if rank > 0 {
            Box::new(0..scan)
        } else {
            Box::new((l.len() - scan..l.len()).rev())
        };
        indexes
            .filter(|&i| l[i] == target)
            .skip(skip)
            .take(wanted)
            .collect::<Vec<_>>()
    })?
    .unwrap_or_default();
    Ok(match count {
        Some(_) => Reply::Array(
            found
                .into_iter()
                .map(|i| Reply::Integer(i as i64))
                .collect(),
        ),
        None => found
            .first()
            .map_or(Reply::Null, |&i| Reply::Integer(i as i64)),
    })
}

/// A blocking timeout in seconds (fractions allowed) as Redis 7.0 reads it: rounded up
/// to whole milliseconds; 0 means forever. Values too large for a millisecond count
/// are reported as negative, as Redis's overflowing conversion does.
pub(crate) fn parse_timeout_ms(arg: &[u8]) -> Result<u64, Reply> {
    let secs = parse_float(arg)
        .ok_or_else(|| Reply::error("ERR timeout is not a float or out of range"))?;
    let ms = (secs * 1000.0).ceil();
    // 2^63 (i64::MAX rounds up to it as a float): the first value a millisecond
    // count cannot hold.
    if !(0.0..i64::MAX as f64).contains(&ms) {
        return Err(Reply::error("ERR timeout is negative"));
    }
    Ok(ms as u64)
}

/// The blocking pops (BLPOP, BRPOP, BLMPOP) on lists (see `blocking_pop`); `count`
/// None pops one element, replied `[key, element]`.
fn bpop(
    ctx: &mut Ctx,
    keys: &[Bytes],
    side: Side,
    count: Option<usize>,
    timeout_ms: u64,
) -> CmdResult {
    let pop = Pop::List { side, count };
    let pop_n = |list: &mut List, n| pop_many(list, side, n);
    blocking_pop(ctx, keys, pop, count, timeout_ms, pop_n, keyed_reply)
}

/// BLPOP / BRPOP key... timeout
fn bpop_one(ctx: &mut Ctx, args: &[Bytes], side: Side) -> CmdResult {
    let timeout_ms = parse_timeout_ms(&args[args.len() - 1])?;
    bpop(ctx, &args[1..args.len() - 1], side, None, timeout_ms)
}

pub fn blpop(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    bpop_one(ctx, args, Side::Left)
}

pub fn brpop(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    bpop_one(ctx, args, Side::Right)
}

/// BLMPOP timeout numkeys key... LEFT|RIGHT [COUNT count]. As Redis 7.0, the timeout
/// is read after the other arguments.
pub fn blmpop(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let pop = parse_multi_pop(args, 2, |a| parse_side(a).ok())?;
    let timeout_ms = parse_timeout_ms(&args[1])?;
    bpop(ctx, pop.keys, pop.end, Some(pop.count), timeout_ms)
}

/// A float argument as Redis's string2ld accepts it: no surrounding spaces, no NaN.
fn parse_float(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty() || s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) {
        return None;
    }
    s.parse::<f64>().ok().filter(|f| !f.is_nan())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_normalise_like_redis() {
        assert_eq!(index_range(0, -1, 5), Some((0, 4)));
        assert_eq!(index_range(-100, 100, 5), Some((0, 4)));
        assert_eq!(index_range(5, 2, 6), None);
        assert_eq!(index_range(-2, -1, 6), Some((4, 5)));
        assert_eq!(index_range(0, -1, 0), None);
        assert_eq!(index_range(7, 9, 5), None);
    }

    #[test]
    fn timeouts_round_up_to_milliseconds() {
        assert_eq!(parse_timeout_ms(b"0"), Ok(0));
        assert_eq!(parse_timeout_ms(b"0.0001"), Ok(1));
        assert_eq!(parse_timeout_ms(b"1.5"), Ok(1500));
        assert_eq!(parse_timeout_ms(b"-0.0001"), Ok(0));
        assert!(parse_timeout_ms(b"-1").is_err());
        assert!(parse_timeout_ms(b"abc").is_err());
        assert!(parse_timeout_ms(b" 1").is_err());
        assert!(parse_timeout_ms(b"nan").is_err());
        assert!(parse_timeout_ms(b"1e30").is_err());
    }
}
