//! Key commands: DEL/UNLINK, EXISTS/TOUCH, TYPE, KEYS, SCAN, RANDOMKEY,
//! RENAME/RENAMENX, COPY, MOVE.

use crate::commands::notify::{self as nt, notify};
use crate::commands::{eq_ignore_case, int_arg, CmdResult, Ctx};
use crate::glob;
use crate::protocol::{errors, Reply};
use crate::store::Entry;
use bytes::Bytes;

/// DEL key... (also UNLINK): how many existed.
pub fn del(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let db = ctx.db();
    let mut n = 0;
    for k in &args[1..] {
        if db.remove(k, ctx.now_ms) {
            crate::commands::families::locks::released(ctx, k);
            notify(ctx, nt::GENERIC, "del", k);
            n += 1;
        }
    }
    Ok(Reply::Integer(n as i64))
}

/// TOUCH key...: the keys that exist, each counted as accessed (OBJECT IDLETIME 0).
pub fn touch(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let db = ctx.db();
    let n = args[1..]
        .iter()
        .filter(|k| db.get(k, ctx.now_ms).is_some())
        .count();
    Ok(Reply::Integer(n as i64))
}

/// EXISTS key...: counts a key once per mention, as Redis does; not an access.
pub fn exists(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let db = ctx.db();
    // Inside a script a delayed lock (`store/lock.rs`) exists: the acquire scripts of
    // lock libraries (node-redlock, Redisson) test EXISTS before they write.
    let n = args[1..]
        .iter()
        .filter(|k| {
            db.contains(k, ctx.now_ms)
                || (ctx.in_script && db.lock_delay_left(k, ctx.now_ms).is_some())
        })
        .count();
    Ok(Reply::Integer(n as i64))
}

/// TYPE key: not an access of the key (as Redis's, which leaves OBJECT IDLETIME alone).
pub fn type_(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let name = match ctx.db().peek(&args[1], ctx.now_ms) {
        Some(e) => e.value().type_name(),
        None => "none",
    };
    Ok(Reply::Status(Bytes::from_static(name.as_bytes())))
}

pub fn keys(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let pattern = &args[1];
    let mut keys = ctx.db().keys(ctx.now_ms);
    keys.retain(|k| glob::matches(pattern, k));
    Ok(Reply::Array(keys.into_iter().map(Reply::Bulk).collect()))
}

/// SCAN cursor [MATCH pattern] [COUNT n] [TYPE type]
pub fn scan(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let cursor = std::str::from_utf8(&args[1])
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| Reply::error("ERR invalid cursor"))?;
    let mut pattern: Option<&[u8]> = None;
    let mut count = 10usize;
    let mut type_filter: Option<&[u8]> = None;
    let mut i = 2;
    while i < args.len() {
        let Some(value) = args.get(i + 1) else {
            return Err(errors::syntax());
        };
        if eq_ignore_case(&args[i], "match") {
            pattern = Some(value);
        } else if eq_ignore_case(&args[i], "count") {
            let n = int_arg(value)?;
            if n < 1 {
                return Err(errors::syntax());
            }
            count = n as usize;
        } else if eq_ignore_case(&args[i], "type") {
            type_filter = Some(value);
        } else {
            return Err(errors::syntax());
        }
        i += 2;
    }
    let db = ctx.db();
    let (next, mut keys) = db.scan(cursor, count, ctx.now_ms);
    if let Some(p) = pattern {
        keys.retain(|k| glob::matches(p, k));
    }
    if let Some(t) = type_filter {
        keys.retain(|k| {
            db.peek(k, ctx.now_ms)
                .is_some_and(|e| eq_ignore_case(t, e.value().type_name()))
        });
    }
    Ok(Reply::Array(vec![
        Reply::Bulk(Bytes::from(next.to_string())),
        Reply::Array(keys.into_iter().map(Reply::Bulk).collect()),
    ]))
}

/// RENAME src dst: moves the value and its TTL; dst is overwritten.
pub fn rename(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    rename_generic(ctx, args, false)
}

/// RENAMENX key newkey: 1 when renamed, 0 when newkey exists (or is key itself).
pub fn renamenx(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    rename_generic(ctx, args, true)
}

/// RENAME and RENAMENX: a missing key is an error even when both names are the same;
/// the entry moves with its TTL.
fn rename_generic(ctx: &mut Ctx, args: &[Bytes], nx: bool) -> CmdResult {
    let db = ctx.db();
    let now = ctx.now_ms;
    let done = |renamed: bool| {
        if nx {
            Reply::Integer(renamed as i64)
        } else {
            Reply::Ok
        }
    };
    if !db.contains(&args[1], now) {
        return Err(Reply::error(errors::NO_SUCH_KEY));
    }
    if args[1] == args[2] || (nx && db.contains(&args[2], now)) {
        return Ok(done(false));
    }
    let entry = db
        .take(&args[1], now)
        .ok_or_else(|| Reply::error(errors::NO_SUCH_KEY))?;
    // Redis deletes an existing destination, then adds the key: `new` either way (and
    // `expired` first for an expired destination).
    db.remove(&args[2], now);
    db.insert(&args[2], entry);
    // A list or sorted set moved into place serves a BLPOP / BZPOPMIN waiting on it,
    // as in Redis (each key a command creates is signalled).
    ctx.shared.blocking.signal(ctx.client.db, &args[2]);
    notify(ctx, nt::GENERIC, "rename_from", &args[1]);
    notify(ctx, nt::GENERIC, "rename_to", &args[2]);
    Ok(done(true))
}

/// RANDOMKEY: a live key at random, or null when the database is empty.
pub fn randomkey(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    Ok(ctx
        .db()
        .random_key(ctx.now_ms, &mut rand::rng())
        .map_or(Reply::Null, Reply::Bulk))
}

const SAME_OBJECT: &str = "ERR source and destination objects are the same";

/// A database number argument (COPY's DB, MOVE's): an integer, then a C int (Redis's
/// getIntFromObjectOrReply), then one of the databases there are.
fn db_index(ctx: &Ctx, arg: &[u8]) -> Result<usize, Reply> {
    let n = int_arg(arg)?;
    if i32::try_from(n).is_err() {
        return Err(Reply::error(
            "ERR value is out of range, value must between -2147483648 and 2147483647",
        ));
    }
    usize::try_from(n)
        .ok()
        .filter(|&n| n < ctx.shared.keyspace.len())
        .ok_or_else(|| Reply::error(errors::DB_INDEX))
}

/// COPY source destination [DB index] [REPLACE]: 1 when copied (value and TTL), 0 when
/// the source is missing or the destination exists (without REPLACE).
pub fn copy(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut target = ctx.client.db;
    let mut replace = false;
    let mut i = 3;
    while i < args.len() {
        if eq_ignore_case(&args[i], "replace") {
            replace = true;
        } else if eq_ignore_case(&args[i], "db") && i + 1 < args.len() {
            i += 1;
            target = db_index(ctx, &args[i])?;
        } else {
            return Err(errors::syntax());
        }
        i += 1;
    }
    if target == ctx.client.db && args[1] == args[2] {
        return Err(Reply::error(SAME_OBJECT));
    }
    let now = ctx.now_ms;
    let Some(entry) = ctx.db().get(&args[1], now).map(|e| Entry {
        value: e.value().to_value(),
        deadline_ms: e.deadline_ms(),
    }) else {
        nt::key_miss(ctx, &args[1]);
        return Ok(Reply::Integer(0));
    };
    let dst = ctx.shared.keyspace.db(target);
    // With REPLACE, Redis deletes the destination, then adds the copy: `new` either way.
    if replace {
        dst.remove(&args[2], now);
    } else if dst.contains(&args[2], now) {
        return Ok(Reply::Integer(0));
    }
    dst.insert(&args[2], entry);
    ctx.shared.blocking.signal(target, &args[2]);
    nt::notify_db(ctx.shared, target, nt::GENERIC, "copy_to", &args[2]);
    Ok(Reply::Integer(1))
}

/// MOVE key db: 1 when the key (with its TTL) moved to db, 0 when it is missing here
/// or already exists there.
pub fn move_(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let target = db_index(ctx, &args[2])?;
    if target == ctx.client.db {
        return Err(Reply::error(SAME_OBJECT));
    }
    let now = ctx.now_ms;
    let src = ctx.db();
    let dst = ctx.shared.keyspace.db(target);
    if !src.contains(&args[1], now) || dst.contains(&args[1], now) {
        return Ok(Reply::Integer(0));
    }
    let Some(entry) = src.take(&args[1], now) else {
        return Ok(Reply::Integer(0));
    };
    dst.insert(&args[1], entry);
    ctx.shared.blocking.signal(target, &args[1]);
    notify(ctx, nt::GENERIC, "move_from", &args[1]);
    nt::notify_db(ctx.shared, target, nt::GENERIC, "move_to", &args[1]);
    Ok(Reply::Integer(1))
}
