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
//! - XREADGROUP, XCLAIM and XAUTOCLAIM on durable streams, as Redis propagates them
//!   (`group_changes`): per entry delivered or claimed, `XCLAIM key group consumer 0
//!   id TIME <unix ms> RETRYCOUNT n FORCE JUSTID LASTID <group's last id>` (its whole
//!   PEL state), `XACK key group id...` for pending entries dropped because the entry
//!   is gone, `XGROUP SETID key group id ENTRIESREAD n` when the group's last id or
//!   read counter moved, and `XGROUP CREATECONSUMER` for a consumer created with
//!   nothing claimed to it; the stream itself is not logged again;
//! - everything else (a relative TTL, randomness, a key becoming durable from
//!   memory-only, a command
//!   reading a memory-only key): the whole state of each key after it, `SET key value
//!   [PXAT ms]` for a string, else `RESTORE key <unix ms|0> <DUMP payload> ABSTTL
//!   REPLACE`, or `DEL key` for a durable key that became absent or memory-only.
//!
//! Deadlines are logged as Unix-time milliseconds (the node's wall clock when logged).

use super::Entry;
use crate::commands::{eq_ignore_case, Ctx, Spec};
use crate::node::Shared;
use crate::protocol::Reply;
use crate::store::stream::Group;
use crate::store::{Db, StreamId, ValueRef};
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
    /// XREADGROUP, XCLAIM, XAUTOCLAIM: their group on each key, before.
    groups: Vec<GroupMark>,
}

/// What a group command may change that its reply does not tell: the group's last
/// delivered id and read counter, whether the consumer existed, and (XCLAIM) which of
/// the IDs named were pending.
struct GroupMark {
    last_id: StreamId,
    entries_read: Option<u64>,
    consumer_existed: bool,
    pending: Vec<StreamId>,
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
    let keys: Vec<(Bytes, Class)> = spec
        .keys(args)
        .map(|k| (k.clone(), class_of(db, k, ctx.now_ms, threshold)))
        .collect();
    let groups = match group_names(spec.name, args) {
        Some((group, consumer)) => keys
            .iter()
            .map(|(k, _)| group_mark(db, k, ctx.now_ms, spec.name, args, group, consumer))
            .collect::<Option<Vec<_>>>()
            .unwrap_or_default(),
        None => Vec::new(),
    };
    Before { keys, groups }
}

/// The group and consumer a group command names (XREADGROUP's `GROUP g c`, XCLAIM's
/// and XAUTOCLAIM's second and third arguments).
fn group_names<'a>(name: &str, args: &'a [Bytes]) -> Option<(&'a Bytes, &'a Bytes)> {
    match name {
        "xclaim" | "xautoclaim" => Some((args.get(2)?, args.get(3)?)),
        "xreadgroup" => {
            let at = args.iter().position(|a| eq_ignore_case(a, "group"))?;
            Some((args.get(at + 1)?, args.get(at + 2)?))
        }
        _ => None,
    }
}

/// The group `group` of the stream at `key` before a group command (`None`: no such
/// stream or group: the command fails).
fn group_mark(
    db: &Db,
    key: &[u8],
    now: u64,
    name: &str,
    args: &[Bytes],
    group: &[u8],
    consumer: &[u8],
) -> Option<GroupMark> {
    let e = db.peek(key, now)?;
    let ValueRef::Stream(s) = e.value() else {
        return None;
    };
    let g = s.groups.get(group)?;
    let pending = if name == "xclaim" {
        xclaim_ids(args)
            .filter(|id| g.pel.contains_key(id))
            .collect()
    } else {
        Vec::new()
    };
    Some(GroupMark {
        last_id: g.last_id,
        entries_read: g.entries_read,
        consumer_existed: g.consumers.contains_key(consumer),
        pending,
    })
}

/// XCLAIM's IDs: from its fifth argument up to the first that is not one.
fn xclaim_ids(args: &[Bytes]) -> impl Iterator<Item = StreamId> + '_ {
    args.iter()
        .skip(5)
        .map_while(|a| crate::commands::families::streams::parse_strict_id(a).ok())
}

/// Whether a write is the short lock's grant, `SET key value NX PX|EX ttl [GET]` with
/// a TTL at most the threshold: it changes nothing or makes an absent key memory-only,
/// so it is decided from its arguments alone, with no lookup and no log (the grant path
/// stays as without the log).
///
/// It runs before every write while the log is on, so it reads the options as bytes
/// (callgrind: ~150 instructions a grant with `eq_ignore_case` and `parse_i64`, 2% of
/// the whole request). A TTL it reads that the handler refuses (`030000`) makes the
/// command fail, which changes nothing either; anything it cannot read is logged as
/// usual.
#[inline]
pub fn is_memory_only_grant(spec: &Spec, args: &[Bytes], threshold_ms: u64) -> bool {
    if !(6..=7).contains(&args.len()) || spec.name != "set" {
        return false;
    }
    let (mut nx, mut ttl_ms) = (false, None);
    let mut i = 3;
    while i < args.len() {
        match &args[i][..] {
            [a, b] => match [a | 0x20, b | 0x20] {
                [b'n', b'x'] => nx = true,
                [unit @ (b'p' | b'e'), b'x'] => {
                    let scale = if unit == b'e' { 1000 } else { 1 };
                    let Some(n) = args.get(i + 1).and_then(|n| small_decimal(n)) else {
                        return false;
                    };
                    ttl_ms = Some(n * scale);
                    i += 1;
                }
                _ => return false,
            },
            [a, b, c] if [a | 0x20, b | 0x20, c | 0x20] == *b"get" => {}
            _ => return false,
        }
        i += 1;
    }
    nx && ttl_ms.is_some_and(|t| t > 0 && t <= threshold_ms)
}

/// A decimal of at most 12 digits (no sign), as a TTL argument.
#[inline]
fn small_decimal(arg: &[u8]) -> Option<u64> {
    if arg.is_empty() || arg.len() > 12 {
        return None;
    }
    let mut n = 0u64;
    for &d in arg {
        if !d.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u64::from(d - b'0');
    }
    Some(n)
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
    let all_durable = before.keys.iter().all(|(_, c)| *c == Class::Durable)
        && post.iter().all(|c| *c == Class::Durable);
    if all_durable && before.groups.len() == before.keys.len() {
        let entries = group_command_changes(ctx, spec.name, args, reply, &before);
        ctx.client
            .aof_pending
            .extend(entries.into_iter().map(|e| (dbi, e)));
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

/// What a group command on durable streams logs (see the module docs), from its
/// reply (the entries it delivered or claimed) and the groups before and after.
fn group_command_changes(
    ctx: &Ctx,
    name: &str,
    args: &[Bytes],
    reply: &Reply,
    before: &Before,
) -> Vec<Vec<Bytes>> {
    let db = ctx.db();
    let now = ctx.now_ms;
    let Some((group, consumer)) = group_names(name, args) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut seen: Vec<&Bytes> = Vec::new();
    for ((key, _), mark) in before.keys.iter().zip(&before.groups) {
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let (claimed, dropped) = match (name, reply) {
            ("xreadgroup", _) => (delivered_ids(reply, key), Vec::new()),
            ("xclaim", Reply::Array(items)) => (
                items.iter().filter_map(item_id).collect(),
                mark.pending.clone(),
            ),
            ("xautoclaim", Reply::Array(parts)) => match (parts.get(1), parts.get(2)) {
                (Some(Reply::Array(claimed)), Some(Reply::Array(deleted))) => (
                    claimed.iter().filter_map(item_id).collect(),
                    deleted.iter().filter_map(item_id).collect(),
                ),
                _ => continue,
            },
            _ => continue,
        };
        let created = !mark.consumer_existed;
        let was = Some((mark.last_id, mark.entries_read));
        let change = GroupChange {
            group,
            consumer,
            claimed: &claimed,
            dropped: &dropped,
            created,
            was,
        };
        group_changes(db, now, key, &change, &mut out);
    }
    out
}

/// What one group command did to one key's group.
struct GroupChange<'a> {
    group: &'a Bytes,
    consumer: &'a Bytes,
    /// Entries delivered or claimed: their PEL state is logged.
    claimed: &'a [StreamId],
    /// IDs that may have left the PEL (claims of deleted entries): those no longer
    /// pending are logged as XACK.
    dropped: &'a [StreamId],
    /// The command may have created the consumer.
    created: bool,
    /// The group's last id and read counter before (`None`: moved, log them).
    was: Option<(StreamId, Option<u64>)>,
}

/// Appends to `out` the commands that redo `change` on `key`'s group, from the
/// group's state now.
fn group_changes(
    db: &Db,
    now: u64,
    key: &Bytes,
    change: &GroupChange<'_>,
    out: &mut Vec<Vec<Bytes>>,
) {
    let Some(e) = db.peek(key, now) else { return };
    let ValueRef::Stream(s) = e.value() else {
        return;
    };
    let Some(g) = s.groups.get(&change.group[..]) else {
        return;
    };
    let word = |w: &'static [u8]| Bytes::from_static(w);
    let claimed: Vec<StreamId> = (change.claimed.iter())
        .filter(|id| g.pel.contains_key(id))
        .copied()
        .collect();
    if change.created
        && g.consumers.contains_key(&change.consumer[..])
        && !claimed
            .iter()
            .any(|id| g.pel[id].consumer == change.consumer)
    {
        out.push(vec![
            word(b"XGROUP"),
            word(b"CREATECONSUMER"),
            key.clone(),
            change.group.clone(),
            change.consumer.clone(),
        ]);
    }
    for id in claimed {
        out.push(xclaim_entry(key, change.group, g, id));
    }
    let acked: Vec<Bytes> = (change.dropped.iter())
        .filter(|id| !g.pel.contains_key(id))
        .map(|id| id.to_bytes())
        .collect();
    if !acked.is_empty() {
        let mut v = vec![word(b"XACK"), key.clone(), change.group.clone()];
        v.extend(acked);
        out.push(v);
    }
    if change.was != Some((g.last_id, g.entries_read)) {
        let read = g.entries_read.map_or(-1, |n| n as i64);
        out.push(vec![
            word(b"XGROUP"),
            word(b"SETID"),
            key.clone(),
            change.group.clone(),
            g.last_id.to_bytes(),
            word(b"ENTRIESREAD"),
            Bytes::from(read.to_string()),
        ]);
    }
}

/// The pending entry `id` of `g` as Redis propagates a delivery or claim: `XCLAIM key
/// group consumer 0 id TIME t RETRYCOUNT n FORCE JUSTID LASTID last`.
fn xclaim_entry(key: &Bytes, group: &Bytes, g: &Group, id: StreamId) -> Vec<Bytes> {
    let n = &g.pel[&id];
    let word = |w: &'static [u8]| Bytes::from_static(w);
    vec![
        word(b"XCLAIM"),
        key.clone(),
        group.clone(),
        n.consumer.clone(),
        word(b"0"),
        id.to_bytes(),
        word(b"TIME"),
        Bytes::from(n.delivery_time.to_string()),
        word(b"RETRYCOUNT"),
        Bytes::from(n.delivery_count.to_string()),
        word(b"FORCE"),
        word(b"JUSTID"),
        word(b"LASTID"),
        g.last_id.to_bytes(),
    ]
}

/// The ID of an entry in a reply (`[id, fields]`) or of a JUSTID reply (`id`);
/// `None` for a deleted entry of a history read (`[id, nil]`): nothing was delivered.
fn item_id(item: &Reply) -> Option<StreamId> {
    let id = match item {
        Reply::Bulk(id) => id,
        Reply::Array(pair) => match (pair.first(), pair.get(1)) {
            (Some(Reply::Bulk(id)), Some(Reply::Array(_))) => id,
            _ => return None,
        },
        _ => return None,
    };
    crate::commands::families::streams::parse_strict_id(id).ok()
}

/// The IDs an XREAD-style reply (a RESP3 map or RESP2 `[key, entries]` pairs)
/// delivered for `key`.
fn delivered_ids(reply: &Reply, key: &[u8]) -> Vec<StreamId> {
    let mut ids = Vec::new();
    let mut take = |k: &Reply, entries: &Reply| {
        if let (Reply::Bulk(k), Reply::Array(entries)) = (k, entries) {
            if k[..] == *key {
                ids.extend(entries.iter().filter_map(item_id));
            }
        }
    };
    match reply {
        Reply::Map(pairs) => pairs.iter().for_each(|(k, v)| take(k, v)),
        Reply::Array(pairs) => {
            for p in pairs {
                if let Reply::Array(kv) = p {
                    if let (Some(k), Some(v)) = (kv.first(), kv.get(1)) {
                        take(k, v);
                    }
                }
            }
        }
        _ => {}
    }
    ids
}

/// Logs what a blocked XREADGROUP did when a write served it (outside any command):
/// `reply` is what it delivered from `key`, `created` whether it created the
/// consumer. Nothing for a stream that is not durable. Appended at once.
pub fn log_group_read(
    shared: &Shared,
    db_index: usize,
    key: &Bytes,
    group: &Bytes,
    consumer: &Bytes,
    created: bool,
    reply: &Reply,
) {
    if !shared.aof.logging() {
        return;
    }
    let db = shared.keyspace.db(db_index);
    let now = shared.clock.now_ms();
    if class_of(db, key, now, shared.aof.threshold_ms()) != Class::Durable {
        return;
    }
    let claimed = delivered_ids(reply, key);
    let change = GroupChange {
        group,
        consumer,
        claimed: &claimed,
        dropped: &[],
        created,
        // A served read delivered new entries: the group's last id moved.
        was: None,
    };
    let mut out = Vec::new();
    group_changes(db, now, key, &change, &mut out);
    let entries: Vec<Entry> = out.into_iter().map(|e| (db_index, e)).collect();
    if !entries.is_empty() {
        shared.aof.append(&entries);
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
        assert!(!grant(&["SET", "lock", "t", "NX", "PX", "-1"]));
        assert!(!grant(&["SET", "lock", "t", "NX", "PX", "0"]));
        assert!(!grant(&["SET", "lock", "t", "NX", "PX", "+5"]));
        assert!(!grant(&["SET", "lock", "t", "NX", "PX", "9999999999999"]));
        assert!(!grant(&["SET", "lock", "t", "NX", "EX", "61"]));
        assert!(!grant(&["SET", "lock", "t", "NX", "PX", "5", "XX"]));
        assert!(!grant(&["SET", "lock", "t", "NX", "PX", "5", "GETX"]));
        assert!(!grant(&["SET", "lock", "t", "NX", "PX"]));
        assert!(!grant(&["SET", "lock", "t", "NX", "NX", "PX"]));
        assert!(grant(&["SET", "lock", "t", "nX", "Px", "1"]));
        assert!(grant(&["SET", "lock", "t", "PX", "1", "NX", "gEt"]));
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
