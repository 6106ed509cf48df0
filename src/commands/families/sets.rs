//! Set commands: SADD, SREM, SCARD, SISMEMBER, SMISMEMBER, SMEMBERS, SPOP,
//! SRANDMEMBER, SMOVE, SSCAN, SINTER, SUNION, SDIFF and their STORE forms, with
//! Redis 7's t_set.c replies. Like Redis, an empty set is never kept.

use crate::commands::families::typed;
use crate::commands::notify::{self as nt, notify};
use crate::commands::{eq_ignore_case, int_arg, parse_i64, random_repeats, CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use crate::store::{Entry, Set, Value};
use bytes::Bytes;
use rand::seq::{IndexedRandom, IteratorRandom};

/// The set at `key` for a read (see `typed::read`).
fn read<T>(ctx: &Ctx, key: &[u8], f: impl FnOnce(&Set) -> T) -> Result<Option<T>, Reply> {
    typed::read(ctx, key, f)
}

/// Runs `f` on an existing set (see `typed::modify`).
fn modify<T>(
    ctx: &Ctx,
    key: &[u8],
    f: impl FnOnce(&mut Set) -> (T, Option<&'static str>),
) -> Result<Option<T>, Reply> {
    typed::modify_notify(ctx, key, nt::SET, f)
}

/// Adds `members` to the set at `key`, creating it; returns how many were new.
fn add(ctx: &Ctx, key: &[u8], members: &[Bytes]) -> Result<usize, Reply> {
    typed::write_notify(ctx, key, nt::SET, |s: &mut Set| {
        let n = members.iter().filter(|m| s.insert(m)).count();
        Ok((n, (n > 0).then_some("sadd")))
    })
}

fn set_reply(members: impl IntoIterator<Item = Bytes>) -> Reply {
    Reply::Set(members.into_iter().map(Reply::Bulk).collect())
}

pub fn sadd(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    Ok(Reply::Integer(add(ctx, &args[1], &args[2..])? as i64))
}

pub fn srem(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let removed = modify(ctx, &args[1], |s| {
        let n = args[2..].iter().filter(|m| s.remove(m)).count();
        (n, (n > 0).then_some("srem"))
    })?;
    Ok(Reply::Integer(removed.unwrap_or(0) as i64))
}

pub fn scard(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    Ok(Reply::Integer(
        read(ctx, &args[1], |s| s.len())?.unwrap_or(0) as i64,
    ))
}

pub fn sismember(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let found = read(ctx, &args[1], |s| s.contains(&args[2]))?;
    Ok(Reply::from(found.unwrap_or(false)))
}

pub fn smismember(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let members = &args[2..];
    let found = read(ctx, &args[1], |s| {
        members.iter().map(|m| s.contains(m)).collect::<Vec<_>>()
    })?
    .unwrap_or_else(|| vec![false; members.len()]);
    Ok(Reply::Array(found.into_iter().map(Reply::from).collect()))
}

pub fn smembers(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let members = read(ctx, &args[1], |s| s.members())?.unwrap_or_default();
    Ok(set_reply(members))
}

/// A count argument that must not be negative (SPOP).
fn positive_count(arg: &[u8]) -> Result<usize, Reply> {
    match parse_i64(arg) {
        Some(n) if n >= 0 => Ok(n as usize),
        _ => Err(Reply::error("ERR value is out of range, must be positive")),
    }
}

/// SPOP key [count]
pub fn spop(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if args.len() > 3 {
        return Err(errors::syntax());
    }
    let Some(count_arg) = args.get(2) else {
        let popped = modify(ctx, &args[1], |s| {
            let m = s.iter().choose(&mut rand::rng()).cloned();
            if let Some(m) = &m {
                s.remove(m);
            }
            let event = m.is_some().then_some("spop");
            (m, event)
        })?
        .flatten();
        return Ok(popped.map_or(Reply::Null, Reply::Bulk));
    };
    let count = positive_count(count_arg)?;
    let popped = modify(ctx, &args[1], |s| {
        let count = count.min(s.len());
        let chosen: Vec<Bytes> = s.iter().cloned().choose_multiple(&mut rand::rng(), count);
        for m in &chosen {
            s.remove(m);
        }
        let event = (!chosen.is_empty()).then_some("spop");
        (chosen, event)
    })?
    .unwrap_or_default();
    Ok(set_reply(popped))
}

/// SRANDMEMBER key [count]: distinct members for a positive count, repeats allowed
/// for a negative one.
pub fn srandmember(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if args.len() > 3 {
        return Err(errors::syntax());
    }
    let mut rng = rand::rng();
    let Some(count_arg) = args.get(2) else {
        let picked = read(ctx, &args[1], |s| s.iter().choose(&mut rng).cloned())?.flatten();
        return Ok(picked.map_or(Reply::Null, Reply::Bulk));
    };
    let count = int_arg(count_arg)?;
    let repeats = if count < 0 { random_repeats(count)? } else { 0 };
    let picked = read(ctx, &args[1], |s| {
        if count >= 0 {
            let distinct = (count as u64).min(s.len() as u64) as usize;
            s.iter().cloned().choose_multiple(&mut rng, distinct)
        } else {
            let all: Vec<&Bytes> = s.iter().collect();
            (0..repeats)
                .filter_map(|_| all.choose(&mut rng).map(|m| (*m).clone()))
                .collect()
        }
    })?
    .unwrap_or_default();
    Ok(Reply::Array(picked.into_iter().map(Reply::Bulk).collect()))
}

/// SMOVE source destination member: runs holding the gate exclusively (table flag).
pub fn smove(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (src, dst, member) = (&args[1], &args[2], &args[3]);
    let Some(present) = read(ctx, src, |s| s.contains(member))? else {
        // As Redis: a missing source is checked before the destination's type.
        return Ok(Reply::Integer(0));
    };
    read(ctx, dst, |_| ())?;
    if src == dst {
        return Ok(Reply::from(present));
    }
    if !present {
        return Ok(Reply::Integer(0));
    }
    if !ctx.db().contains(dst, ctx.now_ms) {
        ctx.shared.fence.check_has_ttl()?;
    }
    modify(ctx, src, |s| ((), s.remove(member).then_some("srem")))?;
    // As Redis: a member the destination already has leaves it untouched (no WATCH
    // signal, no keyspace change).
    if read(ctx, dst, |s| s.contains(member))? != Some(true) {
        add(ctx, dst, std::slice::from_ref(member))?;
    }
    Ok(Reply::Integer(1))
}

/// SSCAN key cursor [MATCH pattern] [COUNT count]
pub fn sscan(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let opts = crate::commands::families::scan::ScanArgs::parse(&args[2..])?;
    let page = read(ctx, &args[1], |s| {
        let members = s.members();
        opts.page(
            members.iter().map(|m| (&m[..], ())),
            s.encoding() == "intset",
        )
    })?;
    Ok(crate::commands::families::scan::reply(page))
}

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Inter,
    Union,
    Diff,
}

/// The result of `op` over the sets at `keys` (a missing key is an empty set; every
/// key is type-checked first, as Redis does). With `misses` (the STORE forms, write
/// commands), each missing key read sends `keymiss` as it is read.
fn combine(ctx: &Ctx, keys: &[Bytes], op: Op, misses: bool) -> Result<Vec<Bytes>, Reply> {
    let mut sets = Vec::with_capacity(keys.len());
    for k in keys {
        let set = read(ctx, k, |s| s.clone())?;
        if misses && set.is_none() {
            nt::key_miss(ctx, k);
        }
        sets.push(set);
    }
    let out: Vec<Bytes> = match op {
        Op::Inter => {
            if sets.iter().any(Option::is_none) {
                return Ok(Vec::new());
            }
            let sets: Vec<Set> = sets.into_iter().flatten().collect();
            let Some(smallest) = sets.iter().min_by_key(|s| s.len()) else {
                return Ok(Vec::new());
            };
            smallest
                .iter()
                .filter(|m| sets.iter().all(|s| s.contains(m)))
                .cloned()
                .collect()
        }
        Op::Union => {
            let mut all = Set::new();
            for s in sets.iter().flatten() {
                for m in s.iter() {
                    all.insert(m);
                }
            }
            return Ok(all.members());
        }
        Op::Diff => {
            let Some(Some(first)) = sets.first() else {
                return Ok(Vec::new());
            };
            first
                .iter()
                .filter(|m| !sets[1..].iter().flatten().any(|s| s.contains(m)))
                .cloned()
                .collect()
        }
    };
    // Built as a set, so an all-integer result lists in intset order as in Redis.
    let mut result = Set::new();
    for m in &out {
        result.insert(m);
    }
    Ok(result.members())
}

fn combine_reply(ctx: &mut Ctx, args: &[Bytes], op: Op) -> CmdResult {
    Ok(set_reply(combine(ctx, &args[1..], op, false)?))
}

/// The STORE forms: the result replaces `destination` whatever it held; an empty
/// result deletes it. Run holding the gate exclusively (table flag).
fn combine_store(ctx: &mut Ctx, args: &[Bytes], op: Op) -> CmdResult {
    let members = combine(ctx, &args[2..], op, true)?;
    let dst = &args[1];
    if members.is_empty() {
        if ctx.db().remove(dst, ctx.now_ms) {
            notify(ctx, nt::GENERIC, "del", dst);
        }
        return Ok(Reply::Integer(0));
    }
    ctx.shared.fence.check_has_ttl()?;
    let mut s = Set::new();
    for m in &members {
        s.insert(m);
    }
    let n = s.len();
    ctx.db().insert(dst, Entry::new(Value::Set(Box::new(s))));
    let event = match op {
        Op::Inter => "sinterstore",
        Op::Union => "sunionstore",
        Op::Diff => "sdiffstore",
    };
    notify(ctx, nt::SET, event, dst);
    Ok(Reply::Integer(n as i64))
}

pub fn sinter(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    combine_reply(ctx, args, Op::Inter)
}

/// SINTERCARD numkeys key... [LIMIT limit]: the intersection's size, counting no
/// further than a non-zero limit. Every key is type-checked, as in SINTER.
pub fn sintercard(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let numkeys = parse_i64(&args[1])
        .filter(|&n| n >= 1)
        .ok_or_else(|| Reply::error("ERR numkeys should be greater than 0"))?;
    if numkeys as u64 > (args.len() - 2) as u64 {
        return Err(Reply::error(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    let end = 2 + numkeys as usize;
    let mut limit = usize::MAX;
    let mut i = end;
    while i < args.len() {
        if eq_ignore_case(&args[i], "limit") && i + 1 < args.len() {
            limit = match parse_i64(&args[i + 1]) {
                Some(0) => usize::MAX,
                Some(n) if n > 0 => n as usize,
                _ => return Err(Reply::error("ERR LIMIT can't be negative")),
            };
            i += 2;
        } else {
            return Err(errors::syntax());
        }
    }
    let n = combine(ctx, &args[2..end], Op::Inter, false)?
        .len()
        .min(limit);
    Ok(Reply::Integer(n as i64))
}

pub fn sunion(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    combine_reply(ctx, args, Op::Union)
}

pub fn sdiff(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    combine_reply(ctx, args, Op::Diff)
}

pub fn sinterstore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    combine_store(ctx, args, Op::Inter)
}

pub fn sunionstore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    combine_store(ctx, args, Op::Union)
}

pub fn sdiffstore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    combine_store(ctx, args, Op::Diff)
}
