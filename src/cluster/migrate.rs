//! Live slot moves: a slot moves with its keys. The node that loses slots in a new
//! map (`CLUSTER SETMAP` on it, as `redlockd slots move` sends it) does the whole
//! move in the safe order while commands on the moving slots wait (the write pause,
//! bounded by the transfer):
//!
//! 1. every key of the moving slots (every type, delayed locks included) is sent to
//!    the new owner with `CLUSTER IMPORT`: its DUMP payload (`store::rdb`), its
//!    remaining TTL in ms (so a clock difference or the transfer's time can only
//!    lengthen a lock) and whether it is a lock (`ttl_field`), which the receiver
//!    logs (durable keys) and fsyncs before it answers,
//!    this node's fencing-token mark (the receiver raises its own past it, durably),
//!    and how long this node is still fenced for the slots (its restart fence, or a
//!    slot's own move fence: locks it may have granted and lost), which the receiver
//!    keeps for as long;
//! 2. this node installs the map (it answers MOVED for the slots from now on) and
//!    pushes it to the new owner, which serves the slots at once: it has every key,
//!    so it fences them only for what was left of this node's fence
//!    (`Cluster::install`);
//! 3. it drops the keys it sent.
//!
//! From the network the steps run with only the moving slots paused (`moving.rs`,
//! `commands::exec::gate`); inside a transaction, all under the exclusive gate.
//!
//! A failure before step 2 refuses the map: this node keeps serving the slots, with
//! every key. The receiver keeps keys of a slot it does not own unserved.

use super::peer::{Peer, Resp};
use super::slot::{key_slot, SLOTS};
use crate::commands::Ctx;
use crate::store::Carried;
use bytes::Bytes;
use std::time::{Duration, Instant};

/// Keys per `CLUSTER IMPORT` call.
const BATCH: usize = 1000;

/// How long the receiver may take to answer one batch.
const IMPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Slots this node serves that `next` gives to another node: (that node's address,
/// its id, the slots).
pub fn handovers(
    view: &super::View,
    next: &super::map::SlotMap,
    my_id: &str,
) -> Vec<(String, String, Vec<bool>)> {
    let mut out: Vec<(String, String, Vec<bool>)> = Vec::new();
    for s in 0..SLOTS {
        let o = next.owner[s];
        if !view.owns(s as u16) || o == super::map::UNASSIGNED {
            continue;
        }
        let node = &next.nodes[usize::from(o)];
        if node.id == my_id {
            continue;
        }
        match out.iter_mut().find(|(_, id, _)| *id == node.id) {
            Some((_, _, slots)) => slots[s] = true,
            None => {
                let mut slots = vec![false; SLOTS];
                slots[s] = true;
                out.push((node.addr(), node.id.clone(), slots));
            }
        }
    }
    out
}

/// Ranges of the slots set in `slots`, as `a-b,c-d`.
pub fn ranges_text(slots: &[bool]) -> String {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for (s, _) in slots.iter().enumerate().filter(|(_, &on)| on) {
        match out.last_mut() {
            Some(last) if last.1 + 1 == s => last.1 = s,
            _ => out.push((s, s)),
        }
    }
    let parts: Vec<String> = out.iter().map(|(a, b)| format!("{a}-{b}")).collect();
    parts.join(",")
}

/// Parses `ranges_text`'s form into a slot set.
pub fn parse_ranges(text: &[u8]) -> Option<Vec<bool>> {
    let mut slots = vec![false; SLOTS];
    let text = std::str::from_utf8(text).ok()?;
    if text.is_empty() {
        return Some(slots);
    }
    for part in text.split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
        if a > b || b >= SLOTS {
            return None;
        }
        slots[a..=b].iter_mut().for_each(|s| *s = true);
    }
    Some(slots)
}

/// What one move did.
pub struct Moved {
    pub keys: usize,
    pub bytes: usize,
    pub elapsed: Duration,
}

/// Step 1: sends every key of `slots` to the node at `addr` (see the module doc).
pub fn send_keys(ctx: &Ctx, addr: &str, slots: &[bool], version: u64) -> Result<Moved, String> {
    let started = Instant::now();
    let now = ctx.now_ms;
    let mut batch: Vec<(Bytes, String, Vec<u8>)> = Vec::new();
    ctx.shared
        .keyspace
        .db(0)
        .for_each_carried(now, |k, v, how| {
            if slots[usize::from(key_slot(k))] {
                batch.push((
                    Bytes::copy_from_slice(k),
                    ttl_field(how, now),
                    crate::store::rdb::dump_value(v),
                ));
            }
        });
    let cluster = &ctx.shared.cluster;
    let mut peer = Peer::connect(addr, super::PEER_TIMEOUT, cluster.peer_auth())?;
    peer.set_timeout(IMPORT_TIMEOUT);
    let mark = ctx.shared.tokens.get().to_string();
    let max_ttl = cluster.max_ttl_ms().to_string();
    let fence = fence_left(ctx, slots).to_string();
    let version = version.to_string();
    let ranges = ranges_text(slots);
    let mut bytes = 0;
    let keys = batch.len();
    let mut chunks = batch.chunks(BATCH).peekable();
    // One call even with no key: the receiver learns the slots and the mark.
    let empty: [(Bytes, String, Vec<u8>); 0] = [];
    if chunks.peek().is_none() {
        import(
            &mut peer,
            cluster.my_id(),
            [&version, &mark, &max_ttl, &fence, &ranges],
            &empty,
        )?;
    }
    for chunk in chunks {
        bytes += import(
            &mut peer,
            cluster.my_id(),
            [&version, &mark, &max_ttl, &fence, &ranges],
            chunk,
        )?;
    }
    Ok(Moved {
        keys,
        bytes,
        elapsed: started.elapsed(),
    })
}

/// A carried key's TTL field in `CLUSTER IMPORT`: `-1` (no TTL), the remaining
/// milliseconds (rounded up, at least 1: never shorter than here), with `L` after
/// them for a lock, or `D` and the milliseconds left of a delayed lock's delay
/// (`store/lock.rs`: the lock-delay moves with the slot).
pub fn ttl_field(how: Carried, now_ms: u64) -> String {
    match how {
        Carried::Live {
            deadline_ms: None, ..
        } => "-1".to_string(),
        Carried::Live {
            deadline_ms: Some(d),
            lock,
        } => {
            let left = d.saturating_sub(now_ms).max(1);
            if lock {
                format!("{left}L")
            } else {
                left.to_string()
            }
        }
        Carried::Delayed { left_ms } => format!("D{left_ms}"),
    }
}

/// `ttl_field`'s form back, with deadlines on this node's clock; None if malformed.
pub fn parse_ttl_field(field: &[u8], now_ms: u64) -> Option<Carried> {
    let text = std::str::from_utf8(field).ok()?;
    let ms = |t: &str| {
        t.parse::<u64>()
            .ok()
            .filter(|&n| n > 0 && t.bytes().all(|b| b.is_ascii_digit()))
    };
    if text == "-1" {
        return Some(Carried::Live {
            deadline_ms: None,
            lock: false,
        });
    }
    if let Some(left) = text.strip_prefix('D') {
        return Some(Carried::Delayed { left_ms: ms(left)? });
    }
    let (left, lock) = match text.strip_suffix('L') {
        Some(t) => (t, true),
        None => (text, false),
    };
    Some(Carried::Live {
        deadline_ms: Some(now_ms.saturating_add(ms(left)?)),
        lock,
    })
}

/// How long this node is still fenced for any of `slots`, in ms: the restart fence
/// (it may have granted locks before it restarted, and lost them), or a slot's move
/// fence (its previous owner may still hold locks in it). The keys it sends do not
/// carry those locks: the receiver must refuse grants as long.
fn fence_left(ctx: &Ctx, slots: &[bool]) -> u64 {
    let now = ctx.now_ms;
    let view = ctx.shared.cluster.view();
    let slot_fence = (0..SLOTS)
        .filter(|&s| slots[s])
        .map(|s| view.fenced_until[s].saturating_sub(now))
        .max()
        .unwrap_or(0);
    ctx.shared.fence.remaining_ms(now).max(slot_fence)
}

/// One `CLUSTER IMPORT` call: `head` is the map version, the mark, the max-ttl, how
/// long the slots are still fenced, and the slot ranges.
fn import(
    peer: &mut Peer,
    my_id: &str,
    head: [&str; 5],
    keys: &[(Bytes, String, Vec<u8>)],
) -> Result<usize, String> {
    let mut args: Vec<&[u8]> = vec![b"CLUSTER", b"IMPORT", my_id.as_bytes()];
    args.extend(head.iter().map(|h| h.as_bytes()));
    let mut bytes = 0;
    for (k, ttl, payload) in keys {
        args.extend([&k[..], ttl.as_bytes(), &payload[..]]);
        bytes += k.len() + payload.len();
    }
    match peer.call(&args)? {
        Resp::Status(_) => Ok(bytes),
        Resp::Error(e) => Err(format!("the new owner refused the keys: {e}")),
        other => Err(format!("unexpected reply to CLUSTER IMPORT: {other:?}")),
    }
}

/// Step 2's end: drops this node's keys of `slots` (after the map that gives them
/// away is installed), delayed locks included; the durable ones' deletions go to the
/// append-only log (the new owner logged them before it answered the import), so a
/// restart does not bring back keys this node gave away. Returns how many.
pub fn drop_keys(ctx: &Ctx, slots: &[bool]) -> usize {
    let shared = ctx.shared;
    let db = shared.keyspace.db(0);
    let mut keys: Vec<Bytes> = Vec::new();
    db.for_each_carried(ctx.now_ms, |k, _, _| {
        if slots[usize::from(key_slot(k))] {
            keys.push(Bytes::copy_from_slice(k));
        }
    });
    let threshold = shared.aof.threshold_ms();
    let logged: Vec<&Bytes> = keys
        .iter()
        .filter(|k| {
            let class = crate::durability::aof::propagate::class_of(db, k, ctx.now_ms, threshold);
            db.remove(k, ctx.now_ms);
            class == crate::durability::aof::propagate::Class::Durable
        })
        .collect();
    crate::durability::aof::propagate::log_key_states(shared, 0, &logged);
    keys.len()
}
