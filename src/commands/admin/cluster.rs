//! CLUSTER and READONLY / READWRITE / ASKING, with Redis 7.0's replies (the map comes
//! from `crate::cluster`). CLUSTER SETMAP and CLUSTER GETMAP are redlockd's own: a
//! configured map replaces Redis's gossip and its slot-moving subcommands.

use crate::cluster::slot::{key_slot, SLOTS};
use crate::cluster::{Mode, View};
use crate::commands::{eq_ignore_case, parse_i64, CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use bytes::Bytes;
use std::fmt::Write as _;

const DISABLED: &str = "ERR This instance has cluster support disabled";

/// The subcommands and their arity (Redis's, with the command name): the ones served,
/// then Redis's gossip and slot-moving ones, which a configured map replaces.
const SERVED: &[(&str, i32)] = &[
    ("slots", 2),
    ("shards", 2),
    ("nodes", 2),
    ("info", 2),
    ("myid", 2),
    ("keyslot", 3),
    ("countkeysinslot", 3),
    ("getkeysinslot", 4),
    ("links", 2),
    ("help", 2),
    ("setmap", -3),
    ("getmap", 2),
];

const NOT_SERVED: &[(&str, i32)] = &[
    ("addslots", -3),
    ("addslotsrange", -4),
    ("bumpepoch", 2),
    ("count-failure-reports", 3),
    ("delslots", -3),
    ("delslotsrange", -4),
    ("failover", -2),
    ("flushslots", 2),
    ("forget", 3),
    ("meet", -4),
    ("replicas", 3),
    ("replicate", 3),
    ("reset", -2),
    ("saveconfig", 2),
    ("set-config-epoch", 3),
    ("setslot", -4),
    ("slaves", 3),
];

/// READONLY, READWRITE, ASKING: +OK in cluster mode (there are no replicas and no
/// ASK redirections, so there is no state to keep).
pub fn ok_in_cluster(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    if !ctx.shared.cluster.enabled() {
        return Err(Reply::error(DISABLED));
    }
    Ok(Reply::Ok)
}

pub fn cluster(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    let Some(&(name, arity)) = SERVED
        .iter()
        .chain(NOT_SERVED)
        .find(|(name, _)| *name == sub)
    else {
        return Err(errors::unknown_subcommand("cluster", &args[1]));
    };
    let n = args.len() as i32;
    if (arity >= 0 && n != arity) || (arity < 0 && n < -arity) {
        return Err(errors::wrong_arity(&format!("cluster|{name}")));
    }
    if name == "help" {
        return Ok(Reply::Array(
            HELP.iter().map(|l| Reply::status(l)).collect(),
        ));
    }
    let cluster = &ctx.shared.cluster;
    if !cluster.enabled() {
        return Err(Reply::error(DISABLED));
    }
    if NOT_SERVED.iter().any(|(n, _)| *n == name) {
        return Err(Reply::error(format!(
            "ERR CLUSTER {} is not supported: redlockd's slot map is configured, not gossiped (CLUSTER SETMAP replaces it; docs/cluster.md)",
            name.to_ascii_uppercase()
        )));
    }
    let view = cluster.view();
    match name {
        "slots" => Ok(slots(&view)),
        "shards" => Ok(shards(ctx, &view)),
        "nodes" => Ok(Reply::Verbatim("txt", Bytes::from(nodes(ctx, &view)))),
        "info" => Ok(Reply::Verbatim("txt", Bytes::from(info(&view)))),
        "myid" => Ok(Reply::bulk_str(cluster.my_id())),
        "keyslot" => Ok(Reply::Integer(i64::from(key_slot(&args[2])))),
        "countkeysinslot" => {
            let slot = parse_i64(&args[2]).ok_or_else(errors::not_integer)?;
            if !(0..SLOTS as i64).contains(&slot) {
                return Err(Reply::error("ERR Invalid slot"));
            }
            let mut n = 0;
            // Keys of a slot this node gave up are never served again (they wait for
            // their TTLs): they are not the slot's keys any more.
            if !view.owns(slot as u16) {
                return Ok(Reply::Integer(0));
            }
            ctx.shared
                .keyspace
                .db(0)
                .for_each_live(ctx.now_ms, |k, _, _| {
                    n += i64::from(i64::from(key_slot(k)) == slot)
                });
            Ok(Reply::Integer(n))
        }
        "getkeysinslot" => {
            let slot = parse_i64(&args[2]).ok_or_else(errors::not_integer)?;
            let max = parse_i64(&args[3]).ok_or_else(errors::not_integer)?;
            if !(0..SLOTS as i64).contains(&slot) || max < 0 {
                return Err(Reply::error("ERR Invalid slot or number of keys"));
            }
            let mut keys = Vec::new();
            if !view.owns(slot as u16) {
                return Ok(Reply::Array(keys));
            }
            ctx.shared
                .keyspace
                .db(0)
                .for_each_live(ctx.now_ms, |k, _, _| {
                    if (keys.len() as i64) < max && i64::from(key_slot(k)) == slot {
                        keys.push(Reply::Bulk(Bytes::copy_from_slice(k)));
                    }
                });
            Ok(Reply::Array(keys))
        }
        "links" => Ok(Reply::Array(Vec::new())),
        "getmap" => {
            if cluster.mode() != Mode::Map {
                return Err(Reply::error(
                    "ERR CLUSTER GETMAP needs --cluster-mode map (this node serves every slot)",
                ));
            }
            Ok(Reply::Bulk(Bytes::from(view.map.to_json())))
        }
        "setmap" => setmap(ctx, args),
        _ => unreachable!("every served subcommand is handled"),
    }
}

/// `CLUSTER SETMAP <json> [FORCE]`: a newer map, checked, persisted, then served.
fn setmap(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let force = match args.get(3) {
        None => false,
        Some(a) if args.len() == 4 && eq_ignore_case(a, "force") => true,
        Some(_) => return Err(errors::syntax()),
    };
    let shared = ctx.shared;
    shared
        .cluster
        .set_map_text(
            &args[2],
            force,
            shared.node_dir.as_ref().map(|d| d.path()),
            ctx.now_ms,
            &shared.tokens,
        )
        .map_err(|e| Reply::error(format!("ERR {e}")))?;
    Ok(Reply::Ok)
}

/// One node's entry in CLUSTER SLOTS: host, port, id and an empty metadata map.
fn node_entry(host: &str, port: u16, id: &str) -> Reply {
    Reply::Array(vec![
        Reply::bulk_str(host),
        Reply::Integer(i64::from(port)),
        Reply::bulk_str(id),
        Reply::Map(Vec::new()),
    ])
}

fn slots(view: &View) -> Reply {
    let ranges = view.map.ranges();
    Reply::Array(
        ranges
            .into_iter()
            .map(|(i, a, b)| {
                let n = &view.map.nodes[usize::from(i)];
                Reply::Array(vec![
                    Reply::Integer(i64::from(a)),
                    Reply::Integer(i64::from(b)),
                    node_entry(&n.host, n.port, &n.id),
                ])
            })
            .collect(),
    )
}

fn shards(ctx: &Ctx, view: &View) -> Reply {
    let ranges = view.map.ranges();
    let shard = |i: u16, host: &str, port: u16, id: &str| {
        let slots: Vec<Reply> = ranges
            .iter()
            .filter(|r| r.0 == i)
            .flat_map(|&(_, a, b)| [Reply::Integer(i64::from(a)), Reply::Integer(i64::from(b))])
            .collect();
        let node = Reply::Map(vec![
            (Reply::bulk_str("id"), Reply::bulk_str(id)),
            (Reply::bulk_str("port"), Reply::Integer(i64::from(port))),
            (Reply::bulk_str("ip"), Reply::bulk_str(host)),
            (Reply::bulk_str("endpoint"), Reply::bulk_str(host)),
            (Reply::bulk_str("role"), Reply::bulk_str("master")),
            (Reply::bulk_str("replication-offset"), Reply::Integer(0)),
            (Reply::bulk_str("health"), Reply::bulk_str("online")),
        ]);
        Reply::Map(vec![
            (Reply::bulk_str("slots"), Reply::Array(slots)),
            (Reply::bulk_str("nodes"), Reply::Array(vec![node])),
        ])
    };
    let mut out: Vec<Reply> = (0u16..)
        .zip(&view.map.nodes)
        .map(|(i, n)| shard(i, &n.host, n.port, &n.id))
        .collect();
    if view.me.is_none() {
        let (host, port) = ctx.shared.cluster.announce();
        out.push(shard(u16::MAX, host, port, ctx.shared.cluster.my_id()));
    }
    Reply::Array(out)
}

/// CLUSTER NODES: one `\n`-ended line per node, this one flagged `myself` (listed even
/// when the map does not name it).
fn nodes(ctx: &Ctx, view: &View) -> String {
    let mut out = String::new();
    let line = |out: &mut String, id: &str, host: &str, port: u16, me: bool, slots: &str| {
        let bus = u32::from(port) + 10000;
        let bus = if bus > 65535 { 0 } else { bus };
        let flags = if me { "myself,master" } else { "master" };
        let _ = write!(
            out,
            "{id} {host}:{port}@{bus} {flags} - 0 0 {} connected",
            view.map.version
        );
        if !slots.is_empty() {
            out.push(' ');
            out.push_str(slots);
        }
        out.push('\n');
    };
    for (i, n) in (0u16..).zip(&view.map.nodes) {
        let ranges = view.map.ranges_text(i);
        line(
            &mut out,
            &n.id,
            &n.host,
            n.port,
            view.me == Some(i),
            &ranges,
        );
    }
    if view.me.is_none() {
        let (host, port) = ctx.shared.cluster.announce();
        line(&mut out, ctx.shared.cluster.my_id(), host, port, true, "");
    }
    out
}

/// CLUSTER INFO. `cluster_state` is ok once the node has a map (slots nobody serves
/// get CLUSTERDOWN, as Redis with `cluster-require-full-coverage no`).
fn info(view: &View) -> String {
    let assigned = view.map.assigned();
    let state = if view.map.nodes.is_empty() {
        "fail"
    } else {
        "ok"
    };
    let size = (0..view.map.nodes.len() as u16)
        .filter(|&i| view.map.owner.contains(&i))
        .count();
    let known = view.map.nodes.len() + usize::from(view.me.is_none());
    format!(
        "cluster_state:{state}\r\ncluster_slots_assigned:{assigned}\r\ncluster_slots_ok:{assigned}\r\ncluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:{known}\r\ncluster_size:{size}\r\ncluster_current_epoch:{v}\r\ncluster_my_epoch:{v}\r\ncluster_stats_messages_sent:0\r\ncluster_stats_messages_received:0\r\ntotal_cluster_links_buffer_limit_exceeded:0\r\n",
        v = view.map.version
    )
}

/// INFO's cluster section.
pub fn info_section(ctx: &Ctx, out: &mut String) {
    let c = &ctx.shared.cluster;
    let _ = write!(out, "cluster_enabled:{}\r\n", u8::from(c.enabled()));
    if c.enabled() {
        use std::sync::atomic::Ordering::Relaxed;
        let view = c.view();
        let _ = write!(
            out,
            "cluster_mode:{}\r\ncluster_map_version:{}\r\ncluster_slots_served:{}\r\ncluster_slots_fenced:{}\r\ncluster_moved_replies:{}\r\ncluster_crossslot_replies:{}\r\ncluster_clusterdown_replies:{}\r\n",
            c.mode().name(),
            view.map.version,
            view.me.map_or(0, |me| view.map.owner.iter().filter(|&&o| o == me).count()),
            view.fenced_slots(ctx.now_ms),
            c.moved.load(Relaxed),
            c.crossslot.load(Relaxed),
            c.clusterdown.load(Relaxed),
        );
    }
}

const HELP: &[&str] = &[
    "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "COUNTKEYSINSLOT <slot>",
    "    Return the number of keys in <slot>.",
    "GETKEYSINSLOT <slot> <count>",
    "    Return key names stored by current node in a slot.",
    "INFO",
    "    Return information about the cluster.",
    "KEYSLOT <key>",
    "    Return the hash slot for <key>.",
    "MYID",
    "    Return the node id.",
    "NODES",
    "    Return cluster configuration seen by node. Output format:",
    "    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
    "SLOTS",
    "    Return information about slots range mappings. Each range is made of:",
    "    start, end, master and replicas IP addresses, ports and ids",
    "SHARDS",
    "    Return information about slot range mappings and the nodes associated with them.",
    "LINKS",
    "    Return information about all network links between this node and its peers.",
    "    Output format is an array where each array element is a map containing attributes of a link",
    "SETMAP <json> [FORCE]",
    "    Replace the slot map with a newer version (redlockd; FORCE accepts unassigned slots).",
    "GETMAP",
    "    Return the slot map as JSON (redlockd).",
    "HELP",
    "    Prints this help.",
];
