//! Consumer groups and introspection: XGROUP (CREATE, SETID, DESTROY,
//! CREATECONSUMER, DELCONSUMER, HELP), XACK, XPENDING (summary and extended forms),
//! XCLAIM, XAUTOCLAIM and XINFO (STREAM [FULL], GROUPS, CONSUMERS, HELP: info.rs), with Redis
//! 7.0's replies and errors, checked in t_stream.c's order.

use crate::commands::families::streams::{
    entry_reply, id_reply, modify, parse_end, parse_id_full, parse_start, parse_strict_id, read,
    unix_ms,
};
use crate::commands::families::typed;
use crate::commands::notify as nt;
use crate::commands::{eq_ignore_case, parse_i64, CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use crate::store::stream::Group;
use crate::store::{Stream, StreamId};
use bytes::Bytes;

mod info;
pub use info::xinfo;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Redis's addReplySubcommandSyntaxError.
fn sub_syntax(cmd: &str, sub: &[u8]) -> Reply {
    Reply::error(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
        errors::printable(sub),
        cmd
    ))
}

/// A container's subcommand with its arity (Redis checks it before the handler).
fn check_sub(cmd: &str, args: &[Bytes], table: &[(&str, i32)]) -> Result<&'static str, Reply> {
    let sub = &args[1];
    let Some((name, arity)) = table.iter().find(|(n, _)| eq_ignore_case(sub, n)) else {
        return Err(errors::unknown_subcommand(cmd, sub));
    };
    let n = args.len() as i32;
    let ok = if *arity >= 0 {
        n == *arity
    } else {
        n >= -arity
    };
    if !ok {
        return Err(errors::wrong_arity(&format!("{cmd}|{name}")));
    }
    // The table's names are static; hand back the one found.
    Ok(match *name {
        "create" => "create",
        "setid" => "setid",
        "destroy" => "destroy",
        "createconsumer" => "createconsumer",
        "delconsumer" => "delconsumer",
        "stream" => "stream",
        "groups" => "groups",
        "consumers" => "consumers",
        _ => "help",
    })
}

fn help(lines: &[&str], cmd: &str) -> Reply {
    let mut out = vec![Reply::Status(Bytes::from(format!(
        "{cmd} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    )))];
    out.extend(
        lines
            .iter()
            .map(|l| Reply::Status(Bytes::from(l.to_string()))),
    );
    out.push(Reply::status("HELP"));
    out.push(Reply::status("    Prints this help."));
    Reply::Array(out)
}

fn nogroup_for_key(group: &[u8], key: &[u8]) -> Reply {
    Reply::error(format!(
        "NOGROUP No such consumer group '{}' for key name '{}'",
        text(group),
        text(key)
    ))
}

fn nogroup(key: &[u8], group: &[u8]) -> Reply {
    Reply::error(format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        text(key),
        text(group)
    ))
}

/// XGROUP CREATE|SETID|DESTROY|CREATECONSUMER|DELCONSUMER|HELP ...
pub fn xgroup(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let sub = check_sub(
        "XGROUP",
        args,
        &[
            ("create", -5),
            ("setid", -5),
            ("destroy", 4),
            ("createconsumer", 5),
            ("delconsumer", 5),
            ("help", 2),
        ],
    )?;
    if sub == "help" {
        return Ok(help(
            &[
                "CREATE <key> <groupname> <id|$> [option]",
                "    Create a new consumer group. Options are:",
                "    * MKSTREAM",
                "      Create the empty stream if it does not exist.",
                "    * ENTRIESREAD entries_read",
                "      Set the group's entries_read counter (internal use).",
                "CREATECONSUMER <key> <groupname> <consumer>",
                "    Create a new consumer in the specified group.",
                "DELCONSUMER <key> <groupname> <consumer>",
                "    Remove the specified consumer.",
                "DESTROY <key> <groupname>",
                "    Remove the specified group.",
                "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
                "    Set the current group ID and entries_read counter.",
            ],
            "XGROUP",
        ));
    }
    let (key, name) = (&args[2], &args[3]);
    let mut mkstream = false;
    let mut entries_read: Option<u64> = None;
    let mut i = 5;
    while i < args.len() {
        if sub == "create" && eq_ignore_case(&args[i], "mkstream") {
            mkstream = true;
            i += 1;
        } else if (sub == "create" || sub == "setid")
            && eq_ignore_case(&args[i], "entriesread")
            && i + 1 < args.len()
        {
            let n = parse_i64(&args[i + 1]).ok_or_else(errors::not_integer)?;
            if n < 0 && n != -1 {
                return Err(Reply::error(
                    "ERR value for ENTRIESREAD must be positive or -1",
                ));
            }
            entries_read = (n >= 0).then_some(n as u64);
            i += 2;
        } else {
            return Err(sub_syntax("XGROUP", &args[1]));
        }
    }
    let found = read(ctx, key, |s| (s.last_id, s.groups.contains_key(&name[..])))?;
    if !mkstream {
        let Some((_, has_group)) = found else {
            return Err(Reply::error("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically."));
        };
        if !has_group && matches!(sub, "setid" | "createconsumer" | "delconsumer") {
            return Err(nogroup_for_key(name, key));
        }
    }
    let now = unix_ms(ctx);
    match sub {
        "create" if args.len() <= 8 => {
            let id = if args[4][..] == b"$"[..] {
                found.map_or(StreamId::MIN, |(last, _)| last)
            } else {
                parse_strict_id(&args[4])?
            };
            let created = typed::write(ctx, key, |s: &mut Stream| {
                if s.groups.contains_key(&name[..]) {
                    return Err(Reply::error("BUSYGROUP Consumer Group name already exists"));
                }
                s.groups.insert(name.clone(), Group::new(id, entries_read));
                Ok(Reply::Ok)
            })?;
            nt::notify(ctx, nt::STREAM, "xgroup-create", key);
            Ok(created)
        }
        "setid" if args.len() == 5 || args.len() == 7 => {
            let id = if args[4][..] == b"$"[..] {
                found.map_or(StreamId::MIN, |(last, _)| last)
            } else {
                parse_id_full(&args[4], 0, false, false)?.0
            };
            modify(ctx, key, |s| {
                if let Some(g) = s.groups.get_mut(&name[..]) {
                    g.last_id = id;
                    g.entries_read = entries_read;
                }
            })?;
            nt::notify(ctx, nt::STREAM, "xgroup-setid", key);
            Ok(Reply::Ok)
        }
        "destroy" => {
            let gone = modify(ctx, key, |s| s.groups.remove(&name[..]).is_some())?;
            let gone = gone.unwrap_or(false);
            if gone {
                // Readers blocked on the group get NOGROUP.
                ctx.shared.blocking.signal(ctx.client.db, key);
                nt::notify(ctx, nt::STREAM, "xgroup-destroy", key);
            }
            Ok(Reply::Integer(gone as i64))
        }
        "createconsumer" => {
            let made = modify(ctx, key, |s| {
                s.groups
                    .get_mut(&name[..])
                    .is_some_and(|g| g.create_consumer(&args[4], now))
            })?
            .unwrap_or(false);
            if made {
                nt::notify(ctx, nt::STREAM, "xgroup-createconsumer", key);
            }
            Ok(Reply::Integer(made as i64))
        }
        "delconsumer" => {
            let pending = modify(ctx, key, |s| {
                s.groups
                    .get_mut(&name[..])
                    .and_then(|g| g.delete_consumer(&args[4]))
            })?
            .flatten();
            if pending.is_some() {
                nt::notify(ctx, nt::STREAM, "xgroup-delconsumer", key);
            }
            Ok(Reply::Integer(pending.unwrap_or(0) as i64))
        }
        _ => Err(sub_syntax("XGROUP", &args[1])),
    }
}

/// XACK key group id [id ...]
pub fn xack(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let has_group = read(ctx, &args[1], |s| s.groups.contains_key(&args[2][..]))?;
    if has_group.is_none() {
        nt::key_miss(ctx, &args[1]);
    }
    if has_group != Some(true) {
        return Ok(Reply::Integer(0));
    }
    let ids = args[3..]
        .iter()
        .map(|a| parse_strict_id(a))
        .collect::<Result<Vec<_>, _>>()?;
    let acked = modify(ctx, &args[1], |s| {
        let g = s.groups.get_mut(&args[2][..]).expect("checked above");
        ids.iter().filter(|id| g.ack(**id)).count()
    })?;
    Ok(Reply::Integer(acked.unwrap_or(0) as i64))
}

/// XPENDING key group [[IDLE min-idle-time] start end count [consumer]]
pub fn xpending(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let argc = args.len();
    if argc != 3 && !(6..=9).contains(&argc) {
        return Err(errors::syntax());
    }
    let mut range = None;
    if argc >= 6 {
        let mut at = 3;
        let mut min_idle = 0i64;
        if eq_ignore_case(&args[3], "idle") {
            min_idle = parse_i64(&args[4]).ok_or_else(errors::not_integer)?;
            if argc < 8 {
                return Err(errors::syntax());
            }
            at += 2;
        }
        let count = parse_i64(&args[at + 2])
            .ok_or_else(errors::not_integer)?
            .max(0);
        let start = parse_start(&args[at])?;
        let end = parse_end(&args[at + 1])?;
        let consumer = args.get(at + 3).cloned();
        range = Some((min_idle, start, end, count as u64, consumer));
    }
    let now = unix_ms(ctx);
    let reply = read(ctx, &args[1], |s| {
        let g = s.groups.get(&args[2][..])?;
        let Some((min_idle, start, end, count, consumer)) = range else {
            return Some(pending_summary(g));
        };
        let ids: Box<dyn Iterator<Item = &StreamId>> = match &consumer {
            Some(c) => match g.consumers.get(&c[..]) {
                Some(c) => Box::new(c.pel.range(start..)),
                None => return Some(Reply::Array(Vec::new())),
            },
            None => Box::new(g.pel.keys().filter(move |id| **id >= start)),
        };
        let mut out = Vec::new();
        let mut left = count;
        for id in ids {
            if left == 0 || *id > end {
                break;
            }
            let n = &g.pel[id];
            let idle = now - n.delivery_time;
            if min_idle > 0 && idle < min_idle {
                continue;
            }
            left -= 1;
            out.push(Reply::Array(vec![
                id_reply(*id),
                Reply::Bulk(n.consumer.clone()),
                Reply::Integer(idle.max(0)),
                Reply::Integer(n.delivery_count as i64),
            ]));
        }
        Some(Reply::Array(out))
    })?;
    reply.flatten().ok_or_else(|| nogroup(&args[1], &args[2]))
}

fn pending_summary(g: &Group) -> Reply {
    let (Some((first, _)), Some((last, _))) = (g.pel.first_key_value(), g.pel.last_key_value())
    else {
        return Reply::Array(vec![
            Reply::Integer(0),
            Reply::Null,
            Reply::Null,
            Reply::NullArray,
        ]);
    };
    let consumers = g
        .consumers
        .iter()
        .filter(|(_, c)| !c.pel.is_empty())
        .map(|(name, c)| {
            Reply::Array(vec![
                Reply::Bulk(name.clone()),
                Reply::Bulk(Bytes::from(c.pel.len().to_string())),
            ])
        })
        .collect();
    Reply::Array(vec![
        Reply::Integer(g.pel.len() as i64),
        id_reply(*first),
        id_reply(*last),
        Reply::Array(consumers),
    ])
}

/// Makes sure the consumer exists and refreshes its seen time; its stored name, and
/// whether it was created (XCLAIM and XAUTOCLAIM then send `xgroup-createconsumer`).
fn touch_consumer(g: &mut Group, name: &[u8], now: i64) -> (Bytes, bool) {
    let created = g.create_consumer(name, now);
    if !created {
        if let Some(c) = g.consumers.get_mut(name) {
            c.seen_time = now;
        }
    }
    (g.consumer_key(name).expect("exists now"), created)
}

/// XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME unix-ms]
/// [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID lastid]
pub fn xclaim(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let has_group = read(ctx, &args[1], |s| s.groups.contains_key(&args[2][..]))?;
    if has_group.is_none() {
        nt::key_miss(ctx, &args[1]);
    }
    if has_group != Some(true) {
        return Err(nogroup(&args[1], &args[2]));
    }
    let min_idle = parse_i64(&args[4])
        .ok_or_else(|| Reply::error("ERR Invalid min-idle-time argument for XCLAIM"))?
        .max(0);
    let mut ids = Vec::new();
    let mut j = 5;
    while j < args.len() {
        match parse_strict_id(&args[j]) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let now = unix_ms(ctx);
    let (mut force, mut justid) = (false, false);
    let mut delivery: Option<i64> = None;
    let mut retry: Option<i64> = None;
    let mut last_id = StreamId::MIN;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let opt = &args[j];
        let int = |arg: &[u8], what: &str| {
            parse_i64(arg).ok_or_else(|| {
                Reply::error(format!("ERR Invalid {what} option argument for XCLAIM"))
            })
        };
        if eq_ignore_case(opt, "force") {
            force = true;
        } else if eq_ignore_case(opt, "justid") {
            justid = true;
        } else if eq_ignore_case(opt, "idle") && more > 0 {
            j += 1;
            delivery = Some(now.wrapping_sub(int(&args[j], "IDLE")?));
        } else if eq_ignore_case(opt, "time") && more > 0 {
            j += 1;
            delivery = Some(int(&args[j], "TIME")?);
        } else if eq_ignore_case(opt, "retrycount") && more > 0 {
            j += 1;
            retry = Some(int(&args[j], "RETRYCOUNT")?);
        } else if eq_ignore_case(opt, "lastid") && more > 0 {
            j += 1;
            last_id = parse_strict_id(&args[j])?;
        } else {
            return Err(Reply::error(format!(
                "ERR Unrecognized XCLAIM option '{}'",
                text(opt)
            )));
        }
        j += 1;
    }
    let delivery = match delivery {
        Some(t) if (0..=now).contains(&t) => t,
        _ => now,
    };
    let reply = modify(ctx, &args[1], |s| {
        let mut g = s.groups.remove(&args[2][..]).expect("checked above");
        if last_id > g.last_id {
            g.last_id = last_id;
        }
        let mut out = Vec::new();
        let mut name = None;
        for id in ids {
            let existing = g.pel.get(&id).map(|n| (n.delivery_time, n.delivery_count));
            if !s.contains(id) {
                if existing.is_some() {
                    g.ack(id);
                }
                continue;
            }
            let old_count = match existing {
                Some((time, count)) => {
                    if min_idle > 0 && now - time < min_idle {
                        continue;
                    }
                    count
                }
                None if force => 1,
                None => continue,
            };
            let (owner, _) = name.get_or_insert_with(|| touch_consumer(&mut g, &args[3], now));
            let count = match retry {
                Some(r) if r >= 0 => r as u64,
                _ if !justid => old_count + 1,
                _ => old_count,
            };
            g.assign(id, owner, delivery, count);
            if justid {
                out.push(id_reply(id));
            } else {
                let pairs = s.get(id).expect("checked above");
                out.push(entry_reply(&(id, pairs)));
            }
        }
        s.groups.insert(args[2].clone(), g);
        (Reply::Array(out), name.is_some_and(|(_, created)| created))
    })?;
    let Some((reply, created)) = reply else {
        return Ok(Reply::Array(Vec::new()));
    };
    if created {
        nt::notify(ctx, nt::STREAM, "xgroup-createconsumer", &args[1]);
    }
    Ok(reply)
}

/// XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]
pub fn xautoclaim(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let min_idle = parse_i64(&args[4])
        .ok_or_else(|| Reply::error("ERR Invalid min-idle-time argument for XAUTOCLAIM"))?
        .max(0);
    let start = parse_start(&args[5])?;
    let mut count: u64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if eq_ignore_case(&args[j], "count") && more > 0 {
            // Redis's bound: LONG_MAX / max(sizeof(streamID), attempts factor 10).
            count = parse_i64(&args[j + 1])
                .filter(|n| (1..=i64::MAX / 16).contains(n))
                .ok_or_else(|| Reply::error("ERR COUNT must be > 0"))? as u64;
            j += 1;
        } else if eq_ignore_case(&args[j], "justid") {
            justid = true;
        } else {
            return Err(errors::syntax());
        }
        j += 1;
    }
    let has_group = read(ctx, &args[1], |s| s.groups.contains_key(&args[2][..]))?;
    if has_group.is_none() {
        nt::key_miss(ctx, &args[1]);
    }
    if has_group != Some(true) {
        return Err(nogroup(&args[1], &args[2]));
    }
    let now = unix_ms(ctx);
    let reply = modify(ctx, &args[1], |s| {
        let mut g = s.groups.remove(&args[2][..]).expect("checked above");
        let mut attempts = count.saturating_mul(10);
        let mut left = count;
        let mut claimed = Vec::new();
        let mut deleted = Vec::new();
        let mut name = None;
        let mut cursor = start;
        let mut next = StreamId::MIN;
        loop {
            if attempts == 0 || left == 0 {
                next = g
                    .pel
                    .range(cursor..)
                    .next()
                    .map_or(StreamId::MIN, |(id, _)| *id);
                break;
            }
            attempts -= 1;
            let Some((&id, n)) = g.pel.range(cursor..).next() else {
                break;
            };
            let (time, delivered) = (n.delivery_time, n.delivery_count);
            cursor = match id.next() {
                Some(c) => c,
                None => {
                    // The last possible ID: nothing can follow it.
                    attempts = 0;
                    StreamId::MAX
                }
            };
            if !s.contains(id) {
                g.ack(id);
                deleted.push(id_reply(id));
                left -= 1;
                continue;
            }
            if min_idle > 0 && now - time < min_idle {
                continue;
            }
            let (owner, _) = name.get_or_insert_with(|| touch_consumer(&mut g, &args[3], now));
            let count = if justid { delivered } else { delivered + 1 };
            g.assign(id, owner, now, count);
            if justid {
                claimed.push(id_reply(id));
            } else {
                let pairs = s.get(id).expect("checked above");
                claimed.push(entry_reply(&(id, pairs)));
            }
            left -= 1;
            if cursor == StreamId::MAX && id == StreamId::MAX {
                break;
            }
        }
        s.groups.insert(args[2].clone(), g);
        let reply = Reply::Array(vec![
            id_reply(next),
            Reply::Array(claimed),
            Reply::Array(deleted),
        ]);
        (reply, name.is_some_and(|(_, created)| created))
    })?;
    let (reply, created) = reply.expect("the key exists");
    if created {
        nt::notify(ctx, nt::STREAM, "xgroup-createconsumer", &args[1]);
    }
    Ok(reply)
}
