//! XINFO STREAM [FULL [COUNT n]], GROUPS, CONSUMERS and HELP, with Redis 7.0's replies
//! (t_stream.c's xinfoCommand and xinfoReplyWithStreamInfo).

use super::{check_sub, help, nogroup_for_key, sub_syntax};
use crate::commands::families::streams::{entries_reply, entry_reply, id_reply, read, unix_ms};
use crate::commands::{eq_ignore_case, parse_i64, CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use crate::store::{Stream, StreamId};
use bytes::Bytes;

/// XINFO STREAM key [FULL [COUNT count]] | GROUPS key | CONSUMERS key group | HELP
pub fn xinfo(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let sub = check_sub(
        "XINFO",
        args,
        &[("stream", -3), ("groups", 3), ("consumers", 4), ("help", 2)],
    )?;
    if sub == "help" {
        return Ok(help(
            &[
                "CONSUMERS <key> <groupname>",
                "    Show consumers of <groupname>.",
                "GROUPS <key>",
                "    Show the stream consumer groups.",
                "STREAM <key> [FULL [COUNT <count>]",
                "    Show information about the stream.",
            ],
            "XINFO",
        ));
    }
    let key = &args[2];
    let now = unix_ms(ctx);
    let reply = read(ctx, key, |s| match sub {
        "consumers" => {
            let Some(g) = s.groups.get(&args[3][..]) else {
                return Err(nogroup_for_key(&args[3], key));
            };
            Ok(Reply::Array(
                g.consumers
                    .iter()
                    .map(|(name, c)| {
                        Reply::Map(vec![
                            (Reply::bulk_str("name"), Reply::Bulk(name.clone())),
                            (
                                Reply::bulk_str("pending"),
                                Reply::Integer(c.pel.len() as i64),
                            ),
                            (
                                Reply::bulk_str("idle"),
                                Reply::Integer((now - c.seen_time).max(0)),
                            ),
                        ])
                    })
                    .collect(),
            ))
        }
        "groups" => Ok(Reply::Array(
            s.groups
                .iter()
                .map(|(name, g)| {
                    Reply::Map(vec![
                        (Reply::bulk_str("name"), Reply::Bulk(name.clone())),
                        (
                            Reply::bulk_str("consumers"),
                            Reply::Integer(g.consumers.len() as i64),
                        ),
                        (
                            Reply::bulk_str("pending"),
                            Reply::Integer(g.pel.len() as i64),
                        ),
                        (Reply::bulk_str("last-delivered-id"), id_reply(g.last_id)),
                        (Reply::bulk_str("entries-read"), opt_int(g.entries_read)),
                        (
                            Reply::bulk_str("lag"),
                            s.lag(g).map_or(Reply::Null, Reply::Integer),
                        ),
                    ])
                })
                .collect(),
        )),
        _ => stream_info(s, &args[3..], &args[1]),
    })?;
    match reply {
        None => Err(Reply::error(errors::NO_SUCH_KEY)),
        Some(r) => r,
    }
}

fn opt_int(v: Option<u64>) -> Reply {
    v.map_or(Reply::Null, |n| Reply::Integer(n as i64))
}

fn stream_info(s: &Stream, opts: &[Bytes], sub: &[u8]) -> Result<Reply, Reply> {
    let mut count: i64 = 10;
    let full = !opts.is_empty();
    if full {
        if (opts.len() != 1 && opts.len() != 3) || !eq_ignore_case(&opts[0], "full") {
            return Err(sub_syntax("XINFO", sub));
        }
        if opts.len() == 3 {
            if !eq_ignore_case(&opts[1], "count") {
                return Err(sub_syntax("XINFO", sub));
            }
            count = parse_i64(&opts[2]).ok_or_else(errors::not_integer)?;
            if count < 0 {
                count = 10;
            }
        }
    }
    let count = count as usize;
    let k = Reply::bulk_str;
    let mut out = vec![
        (k("length"), Reply::Integer(s.length() as i64)),
        (k("radix-tree-keys"), Reply::Integer(s.node_count() as i64)),
        (
            k("radix-tree-nodes"),
            Reply::Integer(radix_nodes(s.node_count()) as i64),
        ),
        (k("last-generated-id"), id_reply(s.last_id)),
        (k("max-deleted-entry-id"), id_reply(s.max_deleted_id)),
        (k("entries-added"), Reply::Integer(s.entries_added as i64)),
        (k("recorded-first-entry-id"), id_reply(s.first_id)),
    ];
    if !full {
        let edge = |rev| {
            s.range(StreamId::MIN, StreamId::MAX, 1, rev)
                .first()
                .map_or(Reply::Null, entry_reply)
        };
        out.push((k("groups"), Reply::Integer(s.groups.len() as i64)));
        out.push((k("first-entry"), edge(false)));
        out.push((k("last-entry"), edge(true)));
        return Ok(Reply::Map(out));
    }
    out.push((
        k("entries"),
        entries_reply(&s.range(StreamId::MIN, StreamId::MAX, count, false)),
    ));
    let take = if count == 0 { usize::MAX } else { count };
    let groups = s
        .groups
        .iter()
        .map(|(name, g)| {
            let pending = g
                .pel
                .iter()
                .take(take)
                .map(|(id, n)| {
                    Reply::Array(vec![
                        id_reply(*id),
                        Reply::Bulk(n.consumer.clone()),
                        Reply::Integer(n.delivery_time),
                        Reply::Integer(n.delivery_count as i64),
                    ])
                })
                .collect();
            let consumers = g
                .consumers
                .iter()
                .map(|(cname, c)| {
                    let pel = c
                        .pel
                        .iter()
                        .take(take)
                        .map(|id| {
                            let n = &g.pel[id];
                            Reply::Array(vec![
                                id_reply(*id),
                                Reply::Integer(n.delivery_time),
                                Reply::Integer(n.delivery_count as i64),
                            ])
                        })
                        .collect();
                    Reply::Map(vec![
                        (k("name"), Reply::Bulk(cname.clone())),
                        (k("seen-time"), Reply::Integer(c.seen_time)),
                        (k("pel-count"), Reply::Integer(c.pel.len() as i64)),
                        (k("pending"), Reply::Array(pel)),
                    ])
                })
                .collect();
            Reply::Map(vec![
                (k("name"), Reply::Bulk(name.clone())),
                (k("last-delivered-id"), id_reply(g.last_id)),
                (k("entries-read"), opt_int(g.entries_read)),
                (k("lag"), s.lag(g).map_or(Reply::Null, Reply::Integer)),
                (k("pel-count"), Reply::Integer(g.pel.len() as i64)),
                (k("pending"), Reply::Array(pending)),
                (k("consumers"), Reply::Array(consumers)),
            ])
        })
        .collect();
    out.push((k("groups"), Reply::Array(groups)));
    Ok(Reply::Map(out))
}

/// What XINFO reports as radix-tree-nodes: our nodes sit in a B-tree, not a radix
/// tree; this is the count a radix tree of that many 128-bit keys would have at least
/// (one, as Redis's empty tree has).
fn radix_nodes(keys: usize) -> usize {
    keys.max(1)
}
