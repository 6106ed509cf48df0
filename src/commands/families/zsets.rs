//! Sorted-set commands that add, remove and read single members: ZADD, ZINCRBY, ZREM,
//! ZCARD, ZSCORE, ZMSCORE, ZRANK, ZREVRANK, ZPOPMIN, ZPOPMAX, ZMPOP, BZPOPMIN, BZPOPMAX,
//! BZMPOP, ZRANDMEMBER, ZSCAN. Ranges live in zranges.rs.
//!
//! Semaphores (redis-semaphore, Redisson) and fair locks keep their holders and
//! waiters in a sorted set scored by time, inside Lua, so replies follow Redis 7's
//! t_zset.c exactly. Like Redis, an empty sorted set is never kept.

use crate::commands::exec::blocking::{blocking_pop, Pop};
use crate::commands::families::typed::{self, parse_multi_pop};
use crate::commands::notify as nt;
use crate::commands::{eq_ignore_case, parse_i64, CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use crate::store::{Entry, Value, ZSet};
use bytes::Bytes;

/// The sorted set at `key` for a read (see `typed::read`).
pub(crate) fn read<T>(
    ctx: &Ctx,
    key: &[u8],
    f: impl FnOnce(&ZSet) -> T,
) -> Result<Option<T>, Reply> {
    typed::read(ctx, key, f)
}

/// `write` with the sorted-set event `f` names (`typed::write_notify`).
fn write_notify<T>(
    ctx: &Ctx,
    key: &[u8],
    f: impl FnOnce(&mut ZSet) -> Result<(T, Option<&'static str>), Reply>,
) -> Result<T, Reply> {
    let out = typed::write_notify(ctx, key, nt::ZSET, f);
    ctx.shared.blocking.signal(ctx.client.db, key);
    out
}

/// `modify` with the sorted-set event `f` names (`typed::modify_notify`).
pub(crate) fn modify_notify<T>(
    ctx: &Ctx,
    key: &[u8],
    f: impl FnOnce(&mut ZSet) -> (T, Option<&'static str>),
) -> Result<Option<T>, Reply> {
    typed::modify_notify(ctx, key, nt::ZSET, f)
}

/// The pop event of an end.
fn pop_event(max: bool) -> &'static str {
    if max {
        "zpopmax"
    } else {
        "zpopmin"
    }
}

/// A score as ZADD and ZINCRBY read it (Redis's getDoubleFromObject): strtod over the
/// whole argument, no leading space, no NaN, no overflow to infinity or underflow to
/// zero; "inf", "+inf" and "-inf" are scores.
pub(crate) fn parse_score(arg: &[u8]) -> Option<f64> {
    if arg.first().is_some_and(u8::is_ascii_whitespace) {
        return None;
    }
    let (value, range_error) = strtod(arg)?;
    (!range_error && !value.is_nan()).then_some(value)
}

/// C's strtod over the whole argument (leading spaces allowed, as strtod skips them):
/// the value and whether it over- or underflowed (ERANGE). Hex floats included.
pub(crate) fn strtod(arg: &[u8]) -> Option<(f64, bool)> {
    let s = std::str::from_utf8(arg).ok()?;
    let s = s.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = body.to_ascii_lowercase();
    let value = if lower == "inf" || lower == "infinity" {
        return Some((
            if neg {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            },
            false,
        ));
    } else if lower == "nan" || lower.starts_with("nan(") {
        return Some((f64::NAN, false));
    } else if let Some(hex) = lower.strip_prefix("0x") {
        parse_hex_float(hex)?
    } else {
        let digits_ok = body
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
        if body.is_empty() || !digits_ok {
            return None;
        }
        body.parse::<f64>().ok()?
    };
    let mantissa_nonzero = lower.split(['e', 'p']).next().is_some_and(|m| {
        m.bytes()
            .any(|b| b.is_ascii_hexdigit() && b != b'0' && b != b'x')
    });
    let range_error = value.is_infinite() || (value == 0.0 && mantissa_nonzero);
    Some((if neg { -value } else { value }, range_error))
}

/// The part after "0x" of a C hex float: hex digits, an optional point, an optional
/// binary exponent (`p-3`).
fn parse_hex_float(s: &str) -> Option<f64> {
    let (mantissa, exp) = match s.split_once('p') {
        Some((m, e)) => (m, e.parse::<i32>().ok()?),
        None => (s, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let mut value = 0f64;
    for c in int.chars() {
        value = value * 16.0 + f64::from(c.to_digit(16)?);
    }
    let mut scale = 1.0 / 16.0;
    for c in frac.chars() {
        value += f64::from(c.to_digit(16)?) * scale;
        scale /= 16.0;
    }
    Some(value * 2f64.powi(exp))
}

fn float_arg(arg: &[u8]) -> Result<f64, Reply> {
    parse_score(arg).ok_or_else(|| Reply::error(errors::NOT_FLOAT))
}

const NAN_SCORE: &str = "ERR resulting score is not a number (NaN)";

#[derive(Default, Clone, Copy)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

/// What one ZADD element did.
enum Added {
    New,
    Updated,
    /// Processed, same score (INCR still replies it).
    Same,
    /// Refused by NX, XX, GT or LT.
    Nothing,
}

/// Redis's zsetAdd for one member: the new score, or None when a flag forbade it.
fn add_one(z: &mut ZSet, member: &[u8], score: f64, f: AddFlags) -> Result<(Added, f64), Reply> {
    match z.score(member) {
        Some(current) => {
            if f.nx {
                return Ok((Added::Nothing, current));
            }
            let score = if f.incr { score + current } else { score };
            if score.is_nan() {
                return Err(Reply::error(NAN_SCORE));
            }
            if (f.lt && score >= current) || (f.gt && score <= current) {
                return Ok((Added::Nothing, current));
            }
            if score != current {
                z.insert(member, score);
                return Ok((Added::Updated, score));
            }
            Ok((Added::Same, score))
        }
        None if f.xx => Ok((Added::Nothing, 0.0)),
        None => {
            z.insert(member, score);
            Ok((Added::New, score))
        }
    }
}

/// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member...]
pub fn zadd(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut f = AddFlags::default();
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        if eq_ignore_case(a, "nx") {
            f.nx = true;
        } else if eq_ignore_case(a, "xx") {
            f.xx = true;
        } else if eq_ignore_case(a, "gt") {
            f.gt = true;
        } else if eq_ignore_case(a, "lt") {
            f.lt = true;
        } else if eq_ignore_case(a, "ch") {
            f.ch = true;
        } else if eq_ignore_case(a, "incr") {
            f.incr = true;
        } else {
            break;
        }
        i += 1;
    }
    let pairs = &args[i..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(errors::syntax());
    }
    if f.nx && f.xx {
        return Err(Reply::error(
            "ERR XX and NX options at the same time are not compatible",
        ));
    }
    if ((f.gt || f.lt) && f.nx) || (f.gt && f.lt) {
        return Err(Reply::error(
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if f.incr && pairs.len() > 2 {
        return Err(Reply::error(
            "ERR INCR option supports a single increment-element pair",
        ));
    }
    let scores = pairs
        .chunks(2)
        .map(|p| float_arg(&p[0]))
        .collect::<Result<Vec<_>, _>>()?;
    let reply_none = if f.incr {
        Reply::Null
    } else {
        Reply::Integer(0)
    };
    if f.xx && read(ctx, &args[1], |_| ())?.is_none() {
        return Ok(reply_none);
    }
    write_notify(ctx, &args[1], |z| {
        let (mut added, mut updated, mut last) = (0, 0, None);
        for (pair, &score) in pairs.chunks(2).zip(&scores) {
            let (what, new_score) = add_one(z, &pair[1], score, f)?;
            match what {
                Added::New => added += 1,
                Added::Updated => updated += 1,
                Added::Same => {}
                Added::Nothing => continue,
            }
            last = Some(new_score);
        }
        let event = (added + updated > 0).then_some(if f.incr { "zincr" } else { "zadd" });
        let reply = if f.incr {
            last.map_or(Reply::Null, Reply::Double)
        } else if f.ch {
            Reply::Integer(added + updated)
        } else {
            Reply::Integer(added)
        };
        Ok((reply, event))
    })
}

/// ZINCRBY key increment member -> the new score.
pub fn zincrby(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let delta = float_arg(&args[2])?;
    let f = AddFlags {
        incr: true,
        ..AddFlags::default()
    };
    write_notify(ctx, &args[1], |z| {
        let (what, score) = add_one(z, &args[3], delta, f)?;
        let changed = matches!(what, Added::New | Added::Updated);
        Ok((Reply::Double(score), changed.then_some("zincr")))
    })
}

/// ZREM key member... -> how many were removed.
pub fn zrem(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let removed = modify_notify(ctx, &args[1], |z| {
        let n = args[2..].iter().filter(|m| z.remove(m)).count();
        (n, (n > 0).then_some("zrem"))
    })?;
    Ok(Reply::Integer(removed.unwrap_or(0) as i64))
}

pub fn zcard(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    Ok(Reply::Integer(
        read(ctx, &args[1], |z| z.len())?.unwrap_or(0) as i64,
    ))
}

pub fn zscore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let score = read(ctx, &args[1], |z| z.score(&args[2]))?.flatten();
    Ok(score.map_or(Reply::Null, Reply::Double))
}

pub fn zmscore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let members = &args[2..];
    let scores = read(ctx, &args[1], |z| {
        members.iter().map(|m| z.score(m)).collect::<Vec<_>>()
    })?
    .unwrap_or_else(|| vec![None; members.len()]);
    Ok(Reply::Array(
        scores
            .into_iter()
            .map(|s| s.map_or(Reply::Null, Reply::Double))
            .collect(),
    ))
}

/// ZRANK / ZREVRANK key member [WITHSCORE] (WITHSCORE as Redis 7.2 added it).
fn rank(ctx: &mut Ctx, args: &[Bytes], rev: bool, name: &str) -> CmdResult {
    if args.len() > 4 {
        return Err(errors::wrong_arity(name));
    }
    let with_score = match args.get(3) {
        None => false,
        Some(a) if eq_ignore_case(a, "withscore") => true,
        Some(_) => return Err(errors::syntax()),
    };
    let found = read(ctx, &args[1], |z| {
        let r = z.rank(&args[2], rev)?;
        Some((r, z.score(&args[2])?))
    })?
    .flatten();
    Ok(match (found, with_score) {
        (None, false) => Reply::Null,
        (None, true) => Reply::NullArray,
        (Some((r, _)), false) => Reply::Integer(r as i64),
        (Some((r, s)), true) => Reply::Array(vec![Reply::Integer(r as i64), Reply::Double(s)]),
    })
}

pub fn zrank(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    rank(ctx, args, false, "zrank")
}

pub fn zrevrank(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    rank(ctx, args, true, "zrevrank")
}

/// (member, score) pairs as Redis replies them: flat [m, s, m, s] in RESP2; in
/// RESP3 nested [[m, s], ...] when `nested`.
/// A range's members, with their scores when asked (RESP3 nests each pair, except
/// inside scripts, which see RESP2 shapes).
/// The STORE commands' end (ZUNIONSTORE..., ZRANGESTORE): `members` replace `dst`,
/// whatever it held and its TTL; none delete it. Answers how many were stored, and
/// wakes a BZPOPMIN waiting on `dst`.
pub(crate) fn store_members(
    ctx: &mut Ctx,
    dst: &[u8],
    members: Vec<(Vec<u8>, f64)>,
    event: &'static str,
) -> CmdResult {
    if members.is_empty() {
        if ctx.db().remove(dst, ctx.now_ms) {
            nt::notify(ctx, nt::GENERIC, "del", dst);
        }
        return Ok(Reply::Integer(0));
    }
    ctx.shared.fence.check_has_ttl()?;
    let z = ZSet::from_members(members);
    let n = z.len();
    ctx.db().insert(dst, Entry::new(Value::ZSet(Box::new(z))));
    ctx.shared.blocking.signal(ctx.client.db, dst);
    nt::notify(ctx, nt::ZSET, event, dst);
    Ok(Reply::Integer(n as i64))
}

pub(crate) fn members_reply(ctx: &Ctx, picked: Vec<(Vec<u8>, f64)>, with_scores: bool) -> Reply {
    if with_scores {
        return pairs_reply(picked, ctx.client.proto >= 3 && !ctx.in_script);
    }
    Reply::Array(
        picked
            .into_iter()
            .map(|(m, _)| Reply::Bulk(Bytes::from(m)))
            .collect(),
    )
}

pub(crate) fn pairs_reply(pairs: Vec<(Vec<u8>, f64)>, nested: bool) -> Reply {
    if nested {
        Reply::Array(
            pairs
                .into_iter()
                .map(|(m, s)| Reply::Array(vec![Reply::Bulk(Bytes::from(m)), Reply::Double(s)]))
                .collect(),
        )
    } else {
        let mut out = Vec::with_capacity(pairs.len() * 2);
        for (m, s) in pairs {
            out.push(Reply::Bulk(Bytes::from(m)));
            out.push(Reply::Double(s));
        }
        Reply::Array(out)
    }
}

/// ZPOPMIN / ZPOPMAX key [count]
fn zpop(ctx: &mut Ctx, args: &[Bytes], max: bool) -> CmdResult {
    if args.len() > 3 {
        return Err(errors::syntax());
    }
    let count = match args.get(2) {
        None => 1,
        Some(c) => match parse_i64(c) {
            Some(n) if n >= 0 => n as usize,
            _ => return Err(Reply::error("ERR value is out of range, must be positive")),
        },
    };
    let popped = modify_notify(ctx, &args[1], |z| {
        let popped = pop_many(z, max, count);
        let event = (!popped.is_empty()).then(|| pop_event(max));
        (popped, event)
    })?
    .unwrap_or_default();
    // RESP3 nests pairs only when a count was given.
    let nested = ctx.client.proto >= 3 && args.len() == 3 && !ctx.in_script;
    Ok(pairs_reply(popped, nested))
}

/// Pops up to `count` of the lowest (or, with `max`, highest) members, in that order.
pub(crate) fn pop_many(z: &mut ZSet, max: bool, count: usize) -> Vec<(Vec<u8>, f64)> {
    (0..count).map_while(|_| z.pop(max)).collect()
}

/// The reply of a pop from one of several keys: `[key, [[member, score]...]]` (ZMPOP,
/// BZMPOP, nested in every protocol and in scripts) when `nested`, else the flat
/// `[key, member, score]` of BZPOPMIN / BZPOPMAX.
pub(crate) fn keyed_reply(key: &Bytes, popped: Vec<(Vec<u8>, f64)>, nested: bool) -> Reply {
    let key = Reply::Bulk(key.clone());
    if nested {
        return Reply::Array(vec![key, pairs_reply(popped, true)]);
    }
    let pairs = popped
        .into_iter()
        .flat_map(|(m, s)| [Reply::Bulk(Bytes::from(m)), Reply::Double(s)]);
    Reply::Array(std::iter::once(key).chain(pairs).collect())
}

/// MIN or MAX (any case): whether it is MAX.
fn parse_min_max(arg: &[u8]) -> Option<bool> {
    if eq_ignore_case(arg, "min") {
        Some(false)
    } else if eq_ignore_case(arg, "max") {
        Some(true)
    } else {
        None
    }
}

/// ZMPOP numkeys key... MIN|MAX [COUNT count]: pops from the first key that exists (a
/// key of another type before it is WRONGTYPE; keys after it are not looked at).
pub fn zmpop(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let pop = parse_multi_pop(args, 1, parse_min_max)?;
    for key in pop.keys {
        let popped = modify_notify(ctx, key, |z| {
            (pop_many(z, pop.end, pop.count), Some(pop_event(pop.end)))
        })?;
        if let Some(popped) = popped {
            return Ok(keyed_reply(key, popped, true));
        }
    }
    Ok(Reply::NullArray)
}

pub fn zpopmin(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    zpop(ctx, args, false)
}

pub fn zpopmax(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    zpop(ctx, args, true)
}

/// The blocking pops (BZPOPMIN, BZPOPMAX, BZMPOP) on sorted sets, waiting in FIFO
/// order with BLPOP's machinery (see `blocking_pop`); `count` None pops one member,
/// replied `[key, member, score]`.
fn bzpop(
    ctx: &mut Ctx,
    keys: &[Bytes],
    max: bool,
    count: Option<usize>,
    timeout_ms: u64,
) -> CmdResult {
    let pop = Pop::ZSet { max, count };
    let pop_n = |z: &mut ZSet, n| pop_many(z, max, n);
    blocking_pop(ctx, keys, pop, count, timeout_ms, pop_n, keyed_reply)
}

/// BZPOPMIN / BZPOPMAX key... timeout
fn bzpop_one(ctx: &mut Ctx, args: &[Bytes], max: bool) -> CmdResult {
    let timeout_ms = crate::commands::families::lists::parse_timeout_ms(&args[args.len() - 1])?;
    bzpop(ctx, &args[1..args.len() - 1], max, None, timeout_ms)
}

pub fn bzpopmin(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    bzpop_one(ctx, args, false)
}

pub fn bzpopmax(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    bzpop_one(ctx, args, true)
}

/// BZMPOP timeout numkeys key... MIN|MAX [COUNT count]. As Redis 7.0, the timeout is
/// read after the other arguments.
pub fn bzmpop(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let pop = parse_multi_pop(args, 2, parse_min_max)?;
    let timeout_ms = crate::commands::families::lists::parse_timeout_ms(&args[1])?;
    bzpop(ctx, pop.keys, pop.end, Some(pop.count), timeout_ms)
}

/// ZRANDMEMBER key [count [WITHSCORES]]
pub fn zrandmember(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    use rand::seq::IteratorRandom;
    let Some((count, with_scores)) = crate::commands::random_count(args, "withscores")? else {
        let picked = read(ctx, &args[1], |z| {
            z.iter()
                .choose(&mut rand::rng())
                .map(|(m, _)| Bytes::copy_from_slice(m))
        })?
        .flatten();
        return Ok(picked.map_or(Reply::Null, Reply::Bulk));
    };
    let picked = read(ctx, &args[1], |z| {
        let all: Vec<(&[u8], f64)> = z.iter().collect();
        crate::commands::random_picks(&all, count)
            .into_iter()
            .map(|(m, s)| (m.to_vec(), s))
            .collect::<Vec<_>>()
    })?
    .unwrap_or_default();
    Ok(members_reply(ctx, picked, with_scores))
}

/// ZSCAN key cursor [MATCH pattern] [COUNT count]
pub fn zscan(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let opts = crate::commands::families::scan::ScanArgs::parse(&args[2..])?;
    let page = read(ctx, &args[1], |z| {
        let all = z.iter();
        opts.page(all, z.encoding() == "listpack")
    })?;
    Ok(crate::commands::families::scan::reply(page))
}
