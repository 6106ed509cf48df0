//! Hash commands: HSET, HSETNX, HMSET, HGET, HMGET, HDEL, HEXISTS, HINCRBY,
//! HINCRBYFLOAT, HLEN, HSTRLEN, HGETALL, HKEYS, HVALS, HSCAN, HRANDFIELD.
//!
//! Redisson keeps its lock as a hash (field = client id, value = hold count), so these
//! follow Redis's t_hash.c replies exactly. Like Redis, an empty hash is never kept:
//! removing the last field removes the key.

use crate::commands::families::long_double::LongDouble;
use crate::commands::families::typed::{self, copy};
use crate::commands::notify as nt;
use crate::commands::{int_arg, parse_i64, CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use bytes::Bytes;
use std::collections::HashMap;

type Hash = HashMap<Bytes, Bytes>;

/// The hash at `key` for a read (see `typed::read`).
fn read<T>(ctx: &Ctx, key: &[u8], f: impl FnOnce(&Hash) -> T) -> Result<Option<T>, Reply> {
    typed::read(ctx, key, f)
}

/// `write` with the hash event `f` names (`typed::write_notify`).
fn write_notify<T>(
    ctx: &Ctx,
    key: &[u8],
    f: impl FnOnce(&mut Hash) -> Result<(T, Option<&'static str>), Reply>,
) -> Result<T, Reply> {
    typed::write_notify(ctx, key, nt::HASH, f)
}

/// Stores field/value pairs; returns how many fields are new.
fn set_pairs(ctx: &Ctx, args: &[Bytes], cmd: &str) -> Result<i64, Reply> {
    if !args.len().is_multiple_of(2) {
        return Err(errors::wrong_arity(cmd));
    }
    write_notify(ctx, &args[1], |h| {
        let mut added = 0;
        for pair in args[2..].chunks(2) {
            if h.insert(copy(&pair[0]), copy(&pair[1])).is_none() {
                added += 1;
            }
        }
        Ok((added, Some("hset")))
    })
}

/// HSET key field value [field value...] -> number of new fields.
pub fn hset(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    set_pairs(ctx, args, "hset").map(Reply::Integer)
}

/// HMSET key field value [field value...] -> OK (deprecated, still sent by clients).
pub fn hmset(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    set_pairs(ctx, args, "hmset").map(|_| Reply::Ok)
}

/// HSETNX key field value -> 1 if set, 0 if the field existed.
pub fn hsetnx(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    write_notify(ctx, &args[1], |h| {
        if h.contains_key(&args[2][..]) {
            return Ok((Reply::Integer(0), None));
        }
        h.insert(copy(&args[2]), copy(&args[3]));
        Ok((Reply::Integer(1), Some("hset")))
    })
}

pub fn hget(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    Ok(read(ctx, &args[1], |h| h.get(&args[2][..]).cloned())?
        .flatten()
        .map_or(Reply::Null, Reply::Bulk))
}

pub fn hmget(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let fields = &args[2..];
    let values = read(ctx, &args[1], |h| {
        fields
            .iter()
            .map(|f| h.get(&f[..]).cloned().map_or(Reply::Null, Reply::Bulk))
            .collect::<Vec<_>>()
    })?;
    Ok(Reply::Array(
        values.unwrap_or_else(|| vec![Reply::Null; fields.len()]),
    ))
}

/// HDEL key field... -> how many were removed; the key goes with its last field.
pub fn hdel(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let removed = typed::modify_notify(ctx, &args[1], nt::HASH, |h: &mut Hash| {
        let removed = args[2..]
            .iter()
            .filter(|f| h.remove(&f[..]).is_some())
            .count();
        (removed, (removed > 0).then_some("hdel"))
    })?;
    Ok(Reply::Integer(removed.unwrap_or(0) as i64))
}

pub fn hexists(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let found = read(ctx, &args[1], |h| h.contains_key(&args[2][..]))?;
    Ok(Reply::from(found.unwrap_or(false)))
}

/// HINCRBY key field increment: Redisson's hold count. Errors as Redis: a field that
/// is not an integer, and overflow, each with their own text.
pub fn hincrby(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let delta = int_arg(&args[3])?;
    write_notify(ctx, &args[1], |h| {
        let current = match h.get(&args[2][..]) {
            Some(v) => {
                parse_i64(v).ok_or_else(|| Reply::error("ERR hash value is not an integer"))?
            }
            None => 0,
        };
        let next = current
            .checked_add(delta)
            .ok_or_else(|| Reply::error(errors::OVERFLOW))?;
        h.insert(copy(&args[2]), Bytes::from(next.to_string()));
        Ok((Reply::Integer(next), Some("hincrby")))
    })
}

/// HINCRBYFLOAT key field increment: computed and printed as Redis does, in C's long
/// double (long_double.rs). An infinite increment is refused before the key is read.
pub fn hincrbyfloat(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let delta = LongDouble::parse(&args[3]).ok_or_else(|| Reply::error(errors::NOT_FLOAT))?;
    if !delta.is_finite() {
        return Err(Reply::error("ERR value is NaN or Infinity"));
    }
    write_notify(ctx, &args[1], |h| {
        let current = match h.get(&args[2][..]) {
            Some(v) => {
                LongDouble::parse(v).ok_or_else(|| Reply::error("ERR hash value is not a float"))?
            }
            None => LongDouble::zero(),
        };
        let text = current
            .add(&delta)
            .ok_or_else(|| Reply::error("ERR increment would produce NaN or Infinity"))?;
        h.insert(copy(&args[2]), text.clone());
        Ok((Reply::Bulk(text), Some("hincrbyfloat")))
    })
}

pub fn hlen(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let n = read(ctx, &args[1], |h| h.len())?.unwrap_or(0);
    Ok(Reply::Integer(n as i64))
}

/// HSTRLEN key field: the length of the field's value, 0 when missing.
pub fn hstrlen(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let n = read(ctx, &args[1], |h| {
        h.get(&args[2][..]).map_or(0, |v| v.len())
    })?;
    Ok(Reply::Integer(n.unwrap_or(0) as i64))
}

/// HSCAN key cursor [MATCH pattern] [COUNT n]: field/value pairs (see scan.rs; a hash
/// Redis keeps as a listpack comes whole, with cursor 0).
pub fn hscan(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let opts = crate::commands::families::scan::ScanArgs::parse(&args[2..])?;
    let page = read(ctx, &args[1], |h| {
        let small = crate::store::ValueRef::Hash(h).encoding() == "listpack";
        opts.page(h.iter().map(|(f, v)| (&f[..], v.clone())), small)
    })?;
    Ok(crate::commands::families::scan::reply(page))
}

/// HRANDFIELD key [count [WITHVALUES]]: one field (or null), or `count` distinct
/// fields (a negative count: that many, repeats allowed), as ZRANDMEMBER picks
/// members. With values: [field, value] pairs in RESP3, a flat array in RESP2.
pub fn hrandfield(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    use rand::seq::IteratorRandom;
    let Some((count, with_values)) = crate::commands::random_count(args, "withvalues")? else {
        let picked = read(ctx, &args[1], |h| {
            h.keys().choose(&mut rand::rng()).cloned()
        })?
        .flatten();
        return Ok(picked.map_or(Reply::Null, Reply::Bulk));
    };
    let picked = read(ctx, &args[1], |h| {
        let all: Vec<(&Bytes, &Bytes)> = h.iter().collect();
        crate::commands::random_picks(&all, count)
            .into_iter()
            .map(|(f, v)| (f.clone(), v.clone()))
            .collect::<Vec<_>>()
    })?
    .unwrap_or_default();
    if !with_values {
        return Ok(Reply::Array(
            picked.into_iter().map(|(f, _)| Reply::Bulk(f)).collect(),
        ));
    }
    if ctx.client.proto >= 3 && !ctx.in_script {
        return Ok(Reply::Array(
            picked
                .into_iter()
                .map(|(f, v)| Reply::Array(vec![Reply::Bulk(f), Reply::Bulk(v)]))
                .collect(),
        ));
    }
    Ok(Reply::Array(
        picked
            .into_iter()
            .flat_map(|(f, v)| [Reply::Bulk(f), Reply::Bulk(v)])
            .collect(),
    ))
}

/// HGETALL key: a map in RESP3, a flat field/value array in RESP2.
pub fn hgetall(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let pairs = read(ctx, &args[1], |h| {
        h.iter()
            .map(|(k, v)| (Reply::Bulk(k.clone()), Reply::Bulk(v.clone())))
            .collect()
    })?;
    Ok(Reply::Map(pairs.unwrap_or_default()))
}

pub fn hkeys(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let keys = read(ctx, &args[1], |h| {
        h.keys().cloned().map(Reply::Bulk).collect()
    })?;
    Ok(Reply::Array(keys.unwrap_or_default()))
}

pub fn hvals(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let vals = read(ctx, &args[1], |h| {
        h.values().cloned().map(Reply::Bulk).collect()
    })?;
    Ok(Reply::Array(vals.unwrap_or_default()))
}
