//! CLUSTER and READONLY / READWRITE / ASKING, with Redis 7.0's replies (the map comes
//! from `crate::cluster`). CLUSTER SETMAP and CLUSTER GETMAP are redlockd's own: a
//! configured map replaces Redis's gossip and its slot-moving subcommands.

use crate::cluster::map::SlotMap;
use crate::cluster::slot::{key_slot, SLOTS};
use crate::cluster::{migrate, Mode, View};
use crate::commands::{eq_ignore_case, parse_i64, CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use crate::store::Carried;
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
    ("peerstate", 4),
    ("leaving", 3),
    ("import", -7),
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
        "info" => Ok(Reply::Verbatim(
            "txt",
            Bytes::from(info(&view, cluster.confirmed())),
        )),
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
        "import" => import(ctx, args),
        "leaving" => {
            cluster.note_leaving(&String::from_utf8_lossy(&args[2]));
            Ok(Reply::Ok)
        }
        "peerstate" => {
            let version = parse_i64(&args[3])
                .filter(|&v| v >= 0)
                .ok_or_else(errors::not_integer)?;
            Ok(Reply::Bulk(Bytes::from(cluster.peer_state(
                &String::from_utf8_lossy(&args[2]),
                version as u64,
                &ctx.shared.tokens,
            ))))
        }
        _ => unreachable!("every served subcommand is handled"),
    }
}

/// `CLUSTER SETMAP <json> [FORCE]`: a newer map, checked, persisted, then served.
/// Slots the map takes from this node move with their keys first
/// (`cluster::migrate`: sent to the new owner, the map installed here, the keys
/// dropped, the map pushed to the new owner). From the network, a map that moves
/// slots runs in steps (`gate::run` calls `plan_move`, `send_moving` and
/// `finish_move`: only the moving slots pause); here, inside a transaction, all of it
/// under the exclusive gate.
fn setmap(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let plan = plan_move(ctx, args)?;
    let started = std::time::Instant::now();
    let sent = send_moving(ctx, args, &plan)?;
    let reply = finish_move(ctx, args, &plan, sent, started);
    drop_moved(ctx, &plan);
    reply
}

/// What a `CLUSTER SETMAP` moves: the slots it gives to each other node.
pub struct MovePlan {
    force: bool,
    handovers: Vec<(String, String, Vec<bool>)>,
}

impl MovePlan {
    /// Whether the map gives away slots this node serves (a live move).
    pub fn moves(&self) -> bool {
        !self.handovers.is_empty()
    }

    /// Every slot the map gives away.
    pub fn slots(&self) -> Vec<bool> {
        let mut all = vec![false; SLOTS];
        for (_, _, slots) in &self.handovers {
            all.iter_mut().zip(slots).for_each(|(a, &s)| *a |= s);
        }
        all
    }
}

/// The slots `CLUSTER SETMAP <json> [FORCE]` takes from this node, by new owner.
pub fn plan_move(ctx: &Ctx, args: &[Bytes]) -> Result<MovePlan, Reply> {
    let force = match args.get(3) {
        None => false,
        Some(a) if args.len() == 4 && eq_ignore_case(a, "force") => true,
        Some(_) => return Err(errors::syntax()),
    };
    let cluster = &ctx.shared.cluster;
    // Where the map gives this node's slots away, the keys go first.
    let handovers = match args.get(2).map(|text| SlotMap::parse(text, force)) {
        Some(Ok(map))
            if cluster.mode() == Mode::Map
                && cluster.moves_keys()
                && map.version > cluster.view().map.version =>
        {
            migrate::handovers(&cluster.view(), &map, cluster.my_id())
        }
        _ => Vec::new(),
    };
    Ok(MovePlan { force, handovers })
}

/// Sends the moving slots' keys to their new owners: keys and bytes sent.
pub fn send_moving(ctx: &Ctx, args: &[Bytes], plan: &MovePlan) -> Result<(usize, usize), Reply> {
    let mut sent = (0, 0);
    for (addr, id, slots) in &plan.handovers {
        let moved = crate::cluster::blocking(|| migrate::send_keys(ctx, addr, slots, map_version(&args[2])))
            .map_err(|e| {
                Reply::error(format!(
                    "ERR map refused: cannot move slots {} to node {id} ({addr}): {e}; this node keeps serving them",
                    migrate::ranges_text(slots)
                ))
            })?;
        tracing::info!(
            node = %id,
            addr = %addr,
            keys = moved.keys,
            bytes = moved.bytes,
            ms = moved.elapsed.as_millis() as u64,
            "sent the moving slots' keys"
        );
        sent.0 += moved.keys;
        sent.1 += moved.bytes;
    }
    Ok(sent)
}

/// Installs the map and pushes it to the new owners (holding the gate exclusively).
/// `started`: when the moving slots' writes paused.
pub fn finish_move(
    ctx: &mut Ctx,
    args: &[Bytes],
    plan: &MovePlan,
    sent: (usize, usize),
    started: std::time::Instant,
) -> CmdResult {
    let shared = ctx.shared;
    let cluster = &shared.cluster;
    let dir = shared.node_dir.as_ref().map(|d| d.path());
    cluster
        .set_map_text(&args[2], plan.force, dir, ctx.now_ms, &shared.tokens)
        .map_err(|e| Reply::error(format!("ERR {e}")))?;
    let mut unpushed = Vec::new();
    for (addr, id, _) in &plan.handovers {
        let mut call: Vec<&[u8]> = vec![b"CLUSTER", b"SETMAP", &args[2]];
        if plan.force {
            call.push(b"FORCE");
        }
        let pushed = crate::cluster::blocking(|| {
            crate::cluster::peer::call_once(
                addr,
                crate::cluster::PEER_TIMEOUT,
                cluster.peer_auth(),
                &call,
            )
        });
        if let Err(e) = pushed {
            tracing::warn!(node = %id, addr = %addr, error = %e, "the new owner did not take the map");
            unpushed.push(format!("{id} ({addr}): {e}"));
        }
    }
    if plan.moves() {
        let ms = started.elapsed().as_millis() as u64;
        *cluster.last_move.lock() = (sent.0, sent.1, ms);
        tracing::info!(
            keys = sent.0,
            bytes = sent.1,
            pause_ms = ms,
            "slots moved with their keys"
        );
    }
    if !unpushed.is_empty() {
        return Err(Reply::error(format!(
            "ERR the map is installed here and the keys were sent, but the new owner did not take the map (push it with CLUSTER SETMAP): {}",
            unpushed.join("; ")
        )));
    }
    Ok(Reply::Ok)
}

/// Drops this node's copies of the keys moved, once the map that gives them away is
/// installed (nothing routes to them any more); nothing if the map was refused.
pub fn drop_moved(ctx: &Ctx, plan: &MovePlan) {
    let view = ctx.shared.cluster.view();
    for (_, _, slots) in &plan.handovers {
        let gone: Vec<bool> = (0..SLOTS)
            .map(|s| slots[s] && !view.owns(s as u16))
            .collect();
        migrate::drop_keys(ctx, &gone);
    }
}

/// The version of a map's JSON (0 when it has none: the install refuses it then).
fn map_version(text: &[u8]) -> u64 {
    serde_json::from_slice::<serde_json::Value>(text)
        .ok()
        .and_then(|v| v.get("version").and_then(|v| v.as_u64()))
        .unwrap_or(0)
}

/// `CLUSTER IMPORT <from-id> <map-version> <token-mark> <max-ttl-ms> <fence-ms>
/// <slot ranges> [key ttl-ms payload]...`: keys of slots a node moves to this one
/// (`cluster::migrate`), for a map newer than ours; the sender is still fenced for
/// them `fence-ms` (it restarted, or took them over, not long ago), and this node
/// fences them that long once it serves them. The mark is raised past the sender's
/// (durably) first; each key is restored with its remaining TTL (`migrate::ttl_field`:
/// -1 none, `L` a lock, `D` a delayed lock), covered by the restart fence's horizon,
/// replacing what was there; durable ones are logged. The slots stay unserved until
/// the map comes.
fn import(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if args.len() < 8 || !(args.len() - 8).is_multiple_of(3) {
        return Err(errors::wrong_arity("cluster|import"));
    }
    let shared = ctx.shared;
    let bad = |what: &str| Reply::error(format!("ERR CLUSTER IMPORT: {what}"));
    let version = parse_i64(&args[3])
        .filter(|&v| v > 0)
        .ok_or_else(|| bad("bad map version"))?;
    let mark = parse_i64(&args[4])
        .filter(|&v| v >= 0)
        .ok_or_else(|| bad("bad token mark"))?;
    let max_ttl = parse_i64(&args[5])
        .filter(|&v| v >= 0)
        .ok_or_else(|| bad("bad max-ttl"))?;
    let fence_ms = parse_i64(&args[6])
        .filter(|&v| v >= 0)
        .ok_or_else(|| bad("bad fence"))?;
    let slots = migrate::parse_ranges(&args[7]).ok_or_else(|| bad("bad slot ranges"))?;
    let from = String::from_utf8_lossy(&args[2]);
    shared
        .cluster
        .note_import(
            &from,
            max_ttl as u64,
            &slots,
            version as u64,
            ctx.now_ms.saturating_add(fence_ms as u64),
        )
        .map_err(|e| bad(&e))?;
    shared
        .tokens
        .raise(mark as u64)
        .map_err(|e| bad(&format!("cannot raise the token mark durably: {e}")))?;
    let db = shared.keyspace.db(0);
    let mut carried = Vec::with_capacity((args.len() - 8) / 3);
    for triple in args[8..].chunks(3) {
        let (key, ttl, payload) = (&triple[0], &triple[1], &triple[2]);
        if !slots[usize::from(key_slot(key))] {
            return Err(bad("a key outside the slots moved"));
        }
        let how = migrate::parse_ttl_field(ttl, ctx.now_ms).ok_or_else(|| bad("bad TTL"))?;
        let value = crate::store::rdb::restore_value(payload).map_err(Reply::error)?;
        carried.push((key, how, value));
    }
    // Durable keys (and memory-only ones replacing a durable key) go to this node's
    // log before the reply, which waits for its fsync: the sender drops its copies
    // only after that.
    let threshold = shared.aof.threshold_ms();
    let mut logged: Vec<&Bytes> = Vec::new();
    for (key, how, value) in carried {
        use crate::durability::aof::propagate::{class_of, Class};
        let durable_before = class_of(db, key, ctx.now_ms, threshold) == Class::Durable;
        match how {
            Carried::Live {
                deadline_ms: Some(d),
                ..
            } => ctx.cover(d)?,
            Carried::Delayed { left_ms } => ctx.cover(ctx.now_ms.saturating_add(left_ms))?,
            Carried::Live { .. } => {}
        }
        db.insert_carried(key, value, how, ctx.now_ms);
        if durable_before || class_of(db, key, ctx.now_ms, threshold) == Class::Durable {
            logged.push(key);
        }
    }
    crate::durability::aof::propagate::log_key_states(shared, 0, &logged);
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
fn info(view: &View, confirmed: bool) -> String {
    let assigned = view.map.assigned();
    let state = if view.map.nodes.is_empty() || !confirmed {
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
        let last_move = *c.last_move.lock();
        let _ = write!(
            out,
            "cluster_mode:{}\r\ncluster_map_version:{}\r\ncluster_map_confirmed:{}\r\ncluster_last_move_keys:{}\r\ncluster_last_move_bytes:{}\r\ncluster_last_move_pause_ms:{}\r\ncluster_slots_moving:{}\r\ncluster_slots_served:{}\r\ncluster_slots_fenced:{}\r\ncluster_moved_replies:{}\r\ncluster_crossslot_replies:{}\r\ncluster_clusterdown_replies:{}\r\n",
            c.mode().name(),
            view.map.version,
            u8::from(c.confirmed()),
            last_move.0,
            last_move.1,
            last_move.2,
            c.moving.count(),
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
    "IMPORT <node-id> <map-version> <token-mark> <max-ttl-ms> <fence-ms> <slot-ranges> [<key> <ttl-ms> <payload> ...]",
    "    Keys of slots another node moves to this one (redlockd, node to node).",
    "PEERSTATE <node-id> <map-version>",
    "    This node's map, max-ttl and token mark as JSON, for the other nodes (redlockd).",
    "LEAVING <node-id>",
    "    That node stopped cleanly and serves nothing until it confirms its map again (redlockd, node to node).",
    "HELP",
    "    Prints this help.",
];
