//! The stream reads XREAD and XREADGROUP, with BLOCK: a read that finds nothing waits
//! with the waiter machinery of BLPOP (`exec::blocking`), which calls `serve_blocked`
//! when a write reaches one of its keys.

use crate::commands::exec::blocking::{Pop, StreamRead};
use crate::commands::families::streams::{
    entries_reply, entry_reply, id_reply, ll_arg, modify, parse_strict_id, read, unix_ms,
};
use crate::commands::notify as nt;
use crate::commands::{eq_ignore_case, parse_i64, CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use crate::store::stream::Group;
use crate::store::{Db, Stream, StreamId, ValueMut};
use bytes::Bytes;
use std::sync::atomic::Ordering::Relaxed;

/// Where a read starts for one key: after this ID, or the group's new entries (`>`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ReadFrom {
    After(StreamId),
    New,
}

/// The XREAD / XREADGROUP reply of several keys: a map in RESP3, an array of
/// `[key, entries]` pairs in RESP2.
pub(crate) fn keyed_reply(items: Vec<(Bytes, Reply)>, resp3: bool) -> Reply {
    if resp3 {
        Reply::Map(
            items
                .into_iter()
                .map(|(k, v)| (Reply::Bulk(k), v))
                .collect(),
        )
    } else {
        Reply::Array(
            items
                .into_iter()
                .map(|(k, v)| Reply::Array(vec![Reply::Bulk(k), v]))
                .collect(),
        )
    }
}

/// Whether the caller reads RESP3 (in a script: the script's redis.setresp).
pub(crate) fn resp3(ctx: &Ctx) -> bool {
    if ctx.in_script {
        return crate::scripting::script_resp3();
    }
    ctx.client.info.resp.load(Relaxed) >= 3
}

/// What a group read delivers: new entries after `start` (updating the group and,
/// unless `noack`, the PEL), or (`history`) the consumer's own pending entries from
/// `start` on; and whether the read created the consumer (`xgroup-createconsumer`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn group_read(
    s: &mut Stream,
    group_name: &[u8],
    consumer: &[u8],
    start: StreamId,
    count: usize,
    noack: bool,
    history: bool,
    now: i64,
) -> (Reply, bool) {
    let mut group = s
        .groups
        .remove(group_name)
        .expect("the caller found the group");
    let created = !group.consumers.contains_key(consumer);
    if created {
        group.create_consumer(consumer, now);
    }
    let name = group.consumer_key(consumer).expect("created above");
    if let Some(c) = group.consumers.get_mut(consumer) {
        c.seen_time = now;
    }
    let reply = if history {
        history_read(s, &mut group, &name, start, count, now)
    } else {
        let entries = s.range(start, StreamId::MAX, count, false);
        for (id, _) in &entries {
            s.advance_group(&mut group, *id);
            if !noack {
                group.assign(*id, &name, now, 1);
            }
        }
        entries_reply(&entries)
    };
    s.groups.insert(Bytes::copy_from_slice(group_name), group);
    (reply, created)
}

fn history_read(
    s: &Stream,
    group: &mut Group,
    consumer: &Bytes,
    start: StreamId,
    count: usize,
    now: i64,
) -> Reply {
    let ids: Vec<StreamId> = group.consumers[consumer]
        .pel
        .range(start..)
        .take(if count == 0 { usize::MAX } else { count })
        .copied()
        .collect();
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        match s.get(id) {
            Some(pairs) => {
                out.push(entry_reply(&(id, pairs)));
                if let Some(n) = group.pel.get_mut(&id) {
                    n.delivery_time = now;
                    n.delivery_count += 1;
                }
            }
            None => out.push(Reply::Array(vec![id_reply(id), Reply::NullArray])),
        }
    }
    Reply::Array(out)
}

/// XREAD [COUNT n] [BLOCK ms] STREAMS key... id... and
/// XREADGROUP GROUP group consumer [COUNT n] [BLOCK ms] [NOACK] STREAMS key... id...
fn read_command(ctx: &mut Ctx, args: &[Bytes], xreadgroup: bool) -> CmdResult {
    let mut timeout: Option<u64> = None;
    let mut count: i64 = 0;
    let mut streams_at = 0;
    let mut group: Option<(Bytes, Bytes)> = None;
    let mut noack = false;
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let o = &args[i][..];
        if eq_ignore_case(o, "block") && more > 0 {
            if ctx.in_script {
                return Err(Reply::error(format!(
                    "ERR {} command is not allowed with BLOCK option from scripts",
                    String::from_utf8_lossy(&args[0])
                )));
            }
            i += 1;
            let ms = parse_i64(&args[i])
                .ok_or_else(|| Reply::error("ERR timeout is not an integer or out of range"))?;
            if ms < 0 {
                return Err(Reply::error("ERR timeout is negative"));
            }
            timeout = Some(ms as u64);
        } else if eq_ignore_case(o, "count") && more > 0 {
            i += 1;
            count = ll_arg(&args[i])?.max(0);
        } else if eq_ignore_case(o, "streams") && more > 0 {
            streams_at = i + 1;
            if !(args.len() - streams_at).is_multiple_of(2) {
                return Err(Reply::error("ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified."));
            }
            break;
        } else if eq_ignore_case(o, "group") && more >= 2 {
            if !xreadgroup {
                return Err(Reply::error(
                    "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            group = Some((args[i + 1].clone(), args[i + 2].clone()));
            i += 2;
        } else if eq_ignore_case(o, "noack") {
            if !xreadgroup {
                return Err(Reply::error(
                    "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            noack = true;
        } else {
            return Err(errors::syntax());
        }
        i += 1;
    }
    if streams_at == 0 {
        return Err(errors::syntax());
    }
    if xreadgroup && group.is_none() {
        return Err(Reply::error("ERR Missing GROUP option for XREADGROUP"));
    }
    let n = (args.len() - streams_at) / 2;
    let keys = &args[streams_at..streams_at + n];
    let mut from = Vec::with_capacity(n);
    for (key, id_arg) in keys.iter().zip(&args[streams_at + n..]) {
        let last = read(ctx, key, |s| {
            (
                s.last_id,
                group.as_ref().map(|(g, _)| s.groups.contains_key(g)),
            )
        })?;
        if let Some((g, _)) = &group {
            // XREADGROUP is a write command: its read sends `keymiss` itself.
            if last.is_none() {
                nt::key_miss(ctx, key);
            }
            if !matches!(last, Some((_, Some(true)))) {
                return Err(Reply::error(format!(
                    "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                    String::from_utf8_lossy(key),
                    String::from_utf8_lossy(g)
                )));
            }
        }
        if id_arg[..] == b"$"[..] {
            if xreadgroup {
                return Err(Reply::error("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set."));
            }
            from.push(ReadFrom::After(last.map_or(StreamId::MIN, |(l, _)| l)));
        } else if id_arg[..] == b">"[..] {
            if !xreadgroup {
                return Err(Reply::error("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option."));
            }
            from.push(ReadFrom::New);
        } else {
            let id = parse_strict_id(id_arg)?;
            // Redis marks `>` as the greatest ID, so XREADGROUP reads that ID as `>`.
            from.push(if xreadgroup && id == StreamId::MAX {
                ReadFrom::New
            } else {
                ReadFrom::After(id)
            });
        }
    }
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    let now = unix_ms(ctx);
    let mut served = Vec::new();
    for (key, from) in keys.iter().zip(&from) {
        let reply = match &group {
            None => read(ctx, key, |s| {
                let ReadFrom::After(after) = *from else {
                    return None;
                };
                let top = s.edge_id(false)?;
                if top <= after {
                    return None;
                }
                let start = after.next()?;
                Some(entries_reply(&s.range(start, StreamId::MAX, count, false)))
            })?
            .flatten(),
            Some((g, c)) => modify(ctx, key, |s| {
                let (start, history) = match *from {
                    ReadFrom::After(after) => (after.next()?, true),
                    ReadFrom::New => {
                        let last = s.groups.get(&g[..])?.last_id;
                        let top = s.edge_id(false)?;
                        if top <= last {
                            return None;
                        }
                        (last.next()?, false)
                    }
                };
                Some(group_read(s, g, c, start, count, noack, history, now))
            })?
            .flatten()
            .map(|(reply, created)| {
                if created {
                    nt::notify(ctx, nt::STREAM, "xgroup-createconsumer", key);
                }
                reply
            }),
        };
        if let Some(r) = reply {
            served.push((key.clone(), r));
        }
    }
    if !served.is_empty() {
        return Ok(keyed_reply(served, resp3(ctx)));
    }
    let Some(timeout_ms) = timeout else {
        return Ok(Reply::NullArray);
    };
    if !ctx.may_block() {
        return Ok(Reply::NullArray);
    }
    let wait = StreamRead {
        from,
        group: group.map(|(g, c)| (g, c, noack)),
        count: if count == 0 { 1000 } else { count },
        resp3: resp3(ctx),
    };
    let db = ctx.client.db;
    let owned = keys.iter().map(|k| Bytes::copy_from_slice(k)).collect();
    let deadline = (timeout_ms > 0).then(|| ctx.now_ms.saturating_add(timeout_ms));
    let blocked = ctx
        .shared
        .blocking
        .block(db, owned, Pop::Stream(Box::new(wait)), deadline);
    ctx.client.blocked = Some(blocked);
    Ok(Reply::NullArray)
}

pub fn xread(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    read_command(ctx, args, false)
}

pub fn xreadgroup(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    read_command(ctx, args, true)
}

const GROUP_GONE: &str = "NOGROUP the consumer group this client was blocked on no longer exists";

/// Serves a client blocked in XREAD / XREADGROUP on `key` (index `at` of its keys),
/// as Redis's serveClientsBlockedOnStreamKey: `None` while it keeps waiting; and
/// whether the read created the group's consumer (the caller sends
/// `xgroup-createconsumer`).
pub(crate) fn serve_blocked(
    db: &Db,
    key: &Bytes,
    wait: &StreamRead,
    at: usize,
    now_ms: u64,
    unix: i64,
) -> Option<(Reply, bool)> {
    let mut entry = match db.entry(key, now_ms) {
        crate::store::Slot::Occupied(e) => e,
        crate::store::Slot::Vacant(_) => {
            return wait.group.as_ref().map(|_| {
                (
                    Reply::error("UNBLOCKED the stream key no longer exists"),
                    false,
                )
            });
        }
    };
    let ValueMut::Stream(s) = entry.value_mut() else {
        return wait.group.as_ref().map(|_| {
            (
                Reply::error("UNBLOCKED the stream key no longer exists"),
                false,
            )
        });
    };
    let after = match (&wait.group, wait.from[at]) {
        (Some((g, _, _)), _) => match s.groups.get(&g[..]) {
            None => return Some((Reply::error(GROUP_GONE), false)),
            Some(group) => group.last_id,
        },
        (None, ReadFrom::After(id)) => id,
        (None, ReadFrom::New) => return None,
    };
    // Redis answers once the stream's last ID passes the waiter's; an XDEL can leave
    // nothing past it, and then the waiter keeps waiting rather than get an empty
    // reply (only XADD wakes readers in Redis, so they never see one).
    if s.last_id <= after || s.edge_id(false).is_none_or(|top| top <= after) {
        return None;
    }
    let start = after.next()?;
    let (entries, created) = match &wait.group {
        Some((g, c, noack)) => group_read(s, g, c, start, wait.count, *noack, false, unix),
        None => (
            entries_reply(&s.range(start, StreamId::MAX, wait.count, false)),
            false,
        ),
    };
    Some((
        keyed_reply(vec![(key.clone(), entries)], wait.resp3),
        created,
    ))
}
