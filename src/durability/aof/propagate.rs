//! What a write puts in the log, decided in one place for the network, EXEC and
//! redis.call (`commands::run` calls `before` and `after` around every WRITE command
//! while the log is on).
//!
//! The keys a command names (`Spec::keys`) are classed before and after it runs:
//! absent, memory-only (a TTL at most `--memory-only-ttl`) or durable. Nothing is
//! logged when no key was or became durable: the short lock's `SET NX PX` and its
//! release do no disk work. Otherwise, in Redis's spirit of propagating commands and
//! not values:
//!
//! - a deterministic command (`as_is`) none of whose keys was memory-only is logged as
//!   sent (RPUSH to a long queue logs the push, not the queue), with XADD's `*` replaced
//!   by the ID it made and a blocking pop as the non-blocking pop it did;
//! - EXPIRE-family and PERSIST on a key durable before and after: `PEXPIREAT key
//!   <unix ms>` or `PERSIST key`;
//! - everything else (a relative TTL, randomness, time-dependent effects such as
//!   XREADGROUP's delivery times, a key becoming durable from memory-only, a command
//!   reading a memory-only key): the whole state of each key after it, `SET key value
//!   [PXAT ms]` for a string, else `RESTORE key <unix ms|0> <DUMP payload> ABSTTL
//!   REPLACE`, or `DEL key` for a durable key that became absent or memory-only.
//!
//! Deadlines are logged as Unix-time milliseconds (the node's wall clock when logged).

use super::Entry;
use crate::commands::{eq_ignore_case, Ctx, Spec};
use crate::node::Shared;
use crate::protocol::Reply;
use crate::store::{Db, ValueRef};
use bytes::Bytes;

/// A key's class, for the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Absent,
    MemoryOnly,
    Durable,
}

/// The classes of a write's keys before it ran.
pub struct Before {
    keys: Vec<(Bytes, Class)>,
}

/// The class of `key` at `now`.
pub fn class_of(db: &Db, key: &[u8], now: u64, threshold_ms: u64) -> Class {
    match db.peek(key, now) {
        None => Class::Absent,
        Some(e) => match e.deadline_ms() {
            Some(d) if d.saturating_sub(now) <= threshold_ms => Class::MemoryOnly,
            _ => Class::Durable,
        },
    }
}

/// Classes the keys of `args` before the command runs.
pub fn before(ctx: &Ctx, spec: &Spec, args: &[Bytes]) -> Before {
    let db = ctx.db();
    let threshold = ctx.shared.aof.threshold_ms();
    Before {
        keys: spec
            .keys(args)
            .map(|k| (k.clone(), class_of(db, k, ctx.now_ms, threshold)))
            .collect(),
    }
}

/// Whether a write is the short lock's grant, `SET key value NX PX|EX ttl` with a TTL
/// at most the threshold: it changes nothing or makes an absent key memory-only, so it
/// is decided from its arguments alone, with no lookup and no log (the grant path
/// stays as without the log).
#[inline]
pub fn is_memory_only_grant(spec: &Spec, args: &[Bytes], threshold_ms: u64) -> bool {
    if spec.name != "set" || args.len() < 6 {
        return false;
    }
    let (mut nx, mut ttl_ms) = (false, None);
    let mut i = 3;
    while i < args.len() {
        let a = &args[i];
        if eq_ignore_case(a, "nx") {
            nx = true;
        } else if eq_ignore_case(a, "px") || eq_ignore_case(a, "ex") {
            let Some(n) = args.get(i + 1).and_then(|n| crate::commands::parse_i64(n)) else {
                return false;
            };
            let scale = if eq_ignore_case(a, "ex") { 1000 } else { 1 };
            ttl_ms = Some(n.saturating_mul(scale));
            i += 1;
        } else if !eq_ignore_case(a, "get") {
            return false;
        }
        i += 1;
    }
    nx && ttl_ms.is_some_and(|t| t > 0 && t as u64 <= threshold_ms)
}

/// Deterministic commands replayed as sent when none of their keys was memory-only.
fn as_is(name: &str) -> bool {
    matches!(
        name,
        "del"
            | "unlink"
            | "rename"
            | "renamenx"
            | "move"
            | "copy"
            | "mset"
            | "msetnx"
            | "setnx"
            | "append"
            | "setrange"
            | "incr"
            | "decr"
            | "incrby"
            | "decrby"
            | "setbit"
            | "bitfield"
            | "bitop"
            | "pfadd"
            | "pfmerge"
            | "lpush"
            | "rpush"
            | "lpushx"
            | "rpushx"
            | "lpop"
            | "rpop"
            | "lrem"
            | "lset"
            | "linsert"
            | "ltrim"
            | "lmove"
            | "rpoplpush"
            | "lmpop"
            | "hset"
            | "hsetnx"
            | "hmset"
            | "hdel"
            | "hincrby"
            | "hincrbyfloat"
            | "sadd"
            | "srem"
            | "smove"
            | "sinterstore"
            | "sunionstore"
            | "sdiffstore"
            | "zadd"
            | "zincrby"
            | "zrem"
            | "zremrangebyscore"
            | "zremrangebyrank"
            | "zremrangebylex"
            | "zpopmin"
            | "zpopmax"
            | "zmpop"
            | "zunionstore"
            | "zinterstore"
            | "zdiffstore"
            | "zrangestore"
            | "geoadd"
            | "geosearchstore"
            | "georadius"
            | "georadiusbymember"
            | "xadd"
            | "xdel"
            | "xtrim"
            | "xack"
            | "xsetid"
            | "xgroup"
            | "blpop"
            | "brpop"
            | "brpoplpush"
            | "blmove"
            | "blmpop"
            | "bzpopmin"
            | "bzpopmax"
            | "bzmpop"
    )
}

/// What a logging write adds to its request's entries (`ClientState::aof_pending`),
/// from the classes before and after it ran.
pub fn after(ctx: &mut Ctx, spec: &Spec, args: &[Bytes], reply: &Reply, before: Before) {
    // An error changed nothing; a command that blocked has not run yet (the pop it
    // does when served is logged by `log_key_states`).
    if reply.is_error() || ctx.client.blocked.is_some() {
        return;
    }
    let dbi = ctx.client.db;
    if before.keys.is_empty() {
        // FLUSHALL, FLUSHDB, FUNCTION LOAD / DELETE / FLUSH / RESTORE.
        ctx.client.aof_pending.push((dbi, args.to_vec()));
        return;
    }
    let db = ctx.db();
    let now = ctx.now_ms;
    let threshold = ctx.shared.aof.threshold_ms();
    let post: Vec<Class> = (before.keys.iter())
        .map(|(k, _)| class_of(db, k, now, threshold))
        .collect();
    let was = |c: Class| before.keys.iter().any(|(_, b)| *b == c);
    let any_post_durable = post.contains(&Class::Durable);
    if !was(Class::Durable) && !any_post_durable {
        return;
    }
    if !was(Class::MemoryOnly) && as_is(spec.name) {
        if let Some(e) = as_sent(spec.name, args, reply) {
            ctx.client.aof_pending.push((dbi, e));
            return;
        }
    }
    let deadline_only = matches!(
        spec.name,
        "expire" | "pexpire" | "expireat" | "pexpireat" | "persist"
    );
    if deadline_only && !was(Class::MemoryOnly) && !was(Class::Absent) && any_post_durable {
        if let Some(e) = db.peek(&args[1], now) {
            let entry = match e.deadline_ms() {
                Some(d) => vec![
                    Bytes::from_static(b"PEXPIREAT"),
                    args[1].clone(),
                    wall(ctx.shared, d),
                ],
                None => vec![Bytes::from_static(b"PERSIST"), args[1].clone()],
            };
            drop(e);
            ctx.client.aof_pending.push((dbi, entry));
            return;
        }
    }
    let mut seen: Vec<&Bytes> = Vec::new();
    for ((key, pre), post) in before.keys.iter().zip(&post) {
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        if let Some(e) = state_entry(ctx.shared, db, key, now, *post, *pre) {
            ctx.client.aof_pending.push((dbi, e));
        }
    }
}

/// The entry restoring `key`'s whole state: it if is durable now, `DEL` if it was
/// durable and is not any more, else nothing.
fn state_entry(
    shared: &Shared,
    db: &Db,
    key: &Bytes,
    now: u64,
    post: Class,
    pre: Class,
) -> Option<Vec<Bytes>> {
    if post != Class::Durable {
        return (pre == Class::Durable).then(|| vec![Bytes::from_static(b"DEL"), key.clone()]);
    }
    let e = db.peek(key, now)?;
    let deadline = e.deadline_ms();
    Some(match e.value() {
        ValueRef::Str(s) => {
            let mut v = vec![
                Bytes::from_static(b"SET"),
                key.clone(),
                Bytes::copy_from_slice(s),
            ];
            if let Some(d) = deadline {
                v.push(Bytes::from_static(b"PXAT"));
                v.push(wall(shared, d));
            }
            v
        }
        value => {
            let payload = crate::store::rdb::dump_value(value);
            vec![
                Bytes::from_static(b"RESTORE"),
                key.clone(),
                deadline.map_or(Bytes::from_static(b"0"), |d| wall(shared, d)),
                Bytes::from(payload),
                Bytes::from_static(b"ABSTTL"),
                Bytes::from_static(b"REPLACE"),
            ]
        }
    })
}

/// A monotonic deadline as Unix-time ms.
fn wall(shared: &Shared, deadline_ms: u64) -> Bytes {
    Bytes::from(shared.clock.mono_to_wall(deadline_ms).max(1).to_string())
}

/// A deterministic command as the log replays it: as sent, XADD with the ID it made, a
/// blocking pop as the pop it did. `None`: it did nothing, or cannot be replayed as
/// sent (the caller logs whole states).
fn as_sent(name: &str, args: &[Bytes], reply: &Reply) -> Option<Vec<Bytes>> {
    let word = |w: &'static [u8]| Bytes::from_static(w);
    match name {
        "xadd" => {
            let Reply::Bulk(id) = reply else {
                return None;
            };
            let at = xadd_id_index(args)?;
            let mut v = args.to_vec();
            v[at] = id.clone();
            Some(v)
        }
        "blpop" | "brpop" => {
            let Reply::Array(kv) = reply else { return None };
            let Some(Reply::Bulk(key)) = kv.first() else {
                return None;
            };
            let pop: &'static [u8] = if name == "blpop" { b"LPOP" } else { b"RPOP" };
            Some(vec![word(pop), key.clone()])
        }
        "brpoplpush" => matches!(reply, Reply::Bulk(_))
            .then(|| vec![word(b"RPOPLPUSH"), args[1].clone(), args[2].clone()]),
        "blmove" => matches!(reply, Reply::Bulk(_)).then(|| {
            let mut v = vec![word(b"LMOVE")];
            v.extend_from_slice(&args[1..5]);
            v
        }),
        "bzpopmin" | "bzpopmax" => {
            let Reply::Array(kv) = reply else { return None };
            let Some(Reply::Bulk(key)) = kv.first() else {
                return None;
            };
            let pop: &'static [u8] = if name == "bzpopmin" {
                b"ZPOPMIN"
            } else {
                b"ZPOPMAX"
            };
            Some(vec![word(pop), key.clone()])
        }
        "blmpop" | "bzmpop" => {
            let Reply::Array(kv) = reply else { return None };
            let (Some(Reply::Bulk(key)), Some(Reply::Array(items))) = (kv.first(), kv.get(1))
            else {
                return None;
            };
            // BLMPOP timeout numkeys key... LEFT|RIGHT / BZMPOP ... MIN|MAX.
            let numkeys = crate::commands::parse_i64(args.get(2)?)? as usize;
            let side = args.get(3 + numkeys)?;
            let pop: &'static [u8] = match (
                name,
                eq_ignore_case(side, "left") || eq_ignore_case(side, "min"),
            ) {
                ("blmpop", true) => b"LPOP",
                ("blmpop", false) => b"RPOP",
                (_, true) => b"ZPOPMIN",
                (_, false) => b"ZPOPMAX",
            };
            Some(vec![
                word(pop),
                key.clone(),
                Bytes::from(items.len().to_string()),
            ])
        }
        _ => Some(args.to_vec()),
    }
}

/// Where XADD's ID argument is: after the key and the options.
fn xadd_id_index(args: &[Bytes]) -> Option<usize> {
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        if eq_ignore_case(a, "nomkstream") {
            i += 1;
        } else if eq_ignore_case(a, "maxlen") || eq_ignore_case(a, "minid") {
            i += 1;
            if args
                .get(i)
                .is_some_and(|x| &x[..] == b"=" || &x[..] == b"~")
            {
                i += 1;
            }
            i += 1;
        } else if eq_ignore_case(a, "limit") {
            i += 2;
        } else {
            return Some(i);
        }
    }
    None
}

/// Logs the whole state of `keys` in database `db` (a blocked pop served after
/// another client's push, outside any command): the key's state if it is durable,
/// else `DEL` (which changes nothing for a key the log never had). Appended at once.
pub fn log_key_states(shared: &Shared, db_index: usize, keys: &[&Bytes]) {
    if !shared.aof.logging() {
        return;
    }
    let db = shared.keyspace.db(db_index);
    let now = shared.clock.now_ms();
    let threshold = shared.aof.threshold_ms();
    let entries: Vec<Entry> = keys
        .iter()
        .filter_map(|k| {
            let post = class_of(db, k, now, threshold);
            state_entry(shared, db, k, now, post, Class::Durable).map(|e| (db_index, e))
        })
        .collect();
    if !entries.is_empty() {
        shared.aof.append(&entries);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(words: &[&str]) -> bool {
        let args: Vec<Bytes> = words
            .iter()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect();
        let spec = crate::commands::lookup(&args[0]).unwrap();
        is_memory_only_grant(spec, &args, 60_000)
    }

    #[test]
    fn only_a_short_set_nx_skips_the_log() {
        assert!(grant(&["SET", "lock", "t", "NX", "PX", "30000"]));
        assert!(grant(&["set", "lock", "t", "px", "60000", "nx"]));
        assert!(grant(&["SET", "lock", "t", "NX", "EX", "60", "GET"]));
        assert!(!grant(&["SET", "lock", "t", "NX", "PX", "60001"]));
        assert!(
            !grant(&["SET", "lock", "t", "PX", "3000"]),
            "may replace a durable key"
        );
        assert!(!grant(&["SET", "lock", "t", "NX"]));
        assert!(!grant(&["SET", "lock", "t", "NX", "PX", "3000", "KEEPTTL"]));
        assert!(!grant(&["SET", "lock", "t", "NX", "PXAT", "3000"]));
        assert!(!grant(&["SET", "lock", "t", "NX", "PX", "x"]));
        assert!(!grant(&["SETNX", "lock", "t"]));
    }

    #[test]
    fn xadd_s_id_is_found_after_its_options() {
        let args = |w: &[&str]| -> Vec<Bytes> {
            w.iter()
                .map(|w| Bytes::copy_from_slice(w.as_bytes()))
                .collect()
        };
        assert_eq!(xadd_id_index(&args(&["XADD", "s", "*", "f", "v"])), Some(2));
        assert_eq!(
            xadd_id_index(&args(&[
                "XADD",
                "s",
                "NOMKSTREAM",
                "MAXLEN",
                "~",
                "10",
                "LIMIT",
                "5",
                "*",
                "f",
                "v"
            ])),
            Some(8)
        );
        assert_eq!(
            xadd_id_index(&args(&["XADD", "s", "MINID", "0-1", "1-1", "f", "v"])),
            Some(4)
        );
    }
}
