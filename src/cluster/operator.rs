//! The operator's slot move (`redlockd slots move`, docs/cluster.md): reads the
//! cluster's map from a node, then for each node that loses slots, sends that node the
//! next map version (CLUSTER SETMAP): the node moves the slots' keys to the new owner,
//! installs the map, drops the keys and pushes the map to the new owner
//! (`cluster::migrate`). Last, every other node of the map gets the final map.

use super::map::{MapNode, SlotMap, UNASSIGNED};
use super::peer::{Peer, Resp};
use super::slot::SLOTS;
use std::time::{Duration, Instant};

/// What `redlockd slots move` was asked.
pub struct MoveRequest {
    /// The slots: ranges and single slots, comma-separated (0-100,200).
    pub slots: String,
    /// The node that gets them (HOST:PORT, as clients reach it).
    pub to: String,
    /// A node to read the current map from (default: `to`).
    pub seed: Option<String>,
    /// USER:PASSWORD sent (AUTH) to every node.
    pub auth: Option<String>,
}

const TIMEOUT: Duration = Duration::from_secs(30);

/// Performs the whole move in the safe order; prints each step.
pub fn move_slots(args: &MoveRequest) -> Result<(), String> {
    let auth = match &args.auth {
        Some(a) => Some(
            a.split_once(':')
                .map(|(u, p)| (u.to_string(), p.to_string()))
                .ok_or("--auth: expected USER:PASSWORD")?,
        ),
        None => None,
    };
    let call = |addr: &str, words: &[&[u8]]| -> Result<Resp, String> {
        let mut p = Peer::connect(addr, TIMEOUT, auth.as_ref())?;
        p.call(words)
    };
    let text = |r: Resp, addr: &str| -> Result<Vec<u8>, String> {
        match r {
            Resp::Bulk(Some(b)) => Ok(b),
            Resp::Status(s) => Ok(s.into_bytes()),
            Resp::Error(e) => Err(format!("{addr}: {e}")),
            other => Err(format!("{addr}: unexpected reply {other:?}")),
        }
    };
    let moving = parse_slots(&args.slots)?;
    let seed = args.seed.clone().unwrap_or_else(|| args.to.clone());
    let map_text = text(call(&seed, &[b"CLUSTER", b"GETMAP"])?, &seed)?;
    let mut map = SlotMap::parse(&map_text, true).map_err(|e| format!("{seed}'s map: {e}"))?;
    let to_id = String::from_utf8_lossy(&text(call(&args.to, &[b"CLUSTER", b"MYID"])?, &args.to)?)
        .to_string();
    let (host, port) = args
        .to
        .rsplit_once(':')
        .and_then(|(h, p)| Some((h.to_string(), p.parse::<u16>().ok()?)))
        .ok_or("--to: expected HOST:PORT")?;
    if map.position(&to_id).is_none() {
        let mut nodes = map.nodes.clone();
        nodes.push(MapNode {
            id: to_id.clone(),
            host,
            port,
            slots: Vec::new(),
            max_ttl_ms: None,
            token_bound: None,
        });
        map = SlotMap::from_nodes(map.version, nodes)?;
    }
    let to = map.position(&to_id).expect("added above");
    // One step per node that loses slots: it moves them (keys first) at a new version.
    let mut sources: Vec<u16> = Vec::new();
    for (&o, &m) in map.owner.iter().zip(&moving) {
        if m && o != to && o != UNASSIGNED && !sources.contains(&o) {
            sources.push(o);
        }
    }
    for src in sources {
        let mut owner = map.owner.clone();
        for (o, &m) in owner.iter_mut().zip(&moving) {
            if m && *o == src {
                *o = to;
            }
        }
        let next = with_owners(&map, &owner, map.version + 1)?;
        let addr = map.nodes[usize::from(src)].addr();
        let started = Instant::now();
        let json = next.to_json();
        text(
            call(&addr, &[b"CLUSTER", b"SETMAP", json.as_bytes(), b"FORCE"])?,
            &addr,
        )?;
        let took = started.elapsed();
        let info = text(call(&addr, &[b"INFO", b"cluster"])?, &addr).unwrap_or_default();
        let field = |name: &str| {
            String::from_utf8_lossy(&info)
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name}:")).map(str::to_string))
                .unwrap_or_default()
        };
        println!(
            "moved slots {} from {addr} to {} at map version {}: {} keys ({} bytes), writes paused {} ms on {addr}, {} ms in all",
            ranges_of(&owner, to, &map.owner),
            args.to,
            next.version,
            field("cluster_last_move_keys"),
            field("cluster_last_move_bytes"),
            field("cluster_last_move_pause_ms"),
            took.as_millis()
        );
        map = next;
    }
    // Slots nobody served: assigned to the target (nothing to move, nothing to fence).
    if (map.owner.iter().zip(&moving)).any(|(&o, &m)| m && o == UNASSIGNED) {
        let mut owner = map.owner.clone();
        for (o, &m) in owner.iter_mut().zip(&moving) {
            if m && *o == UNASSIGNED {
                *o = to;
            }
        }
        map = with_owners(&map, &owner, map.version + 1)?;
    }
    let json = map.to_json();
    let mut failed = Vec::new();
    for n in &map.nodes {
        let addr = n.addr();
        let reply = call(&addr, &[b"CLUSTER", b"SETMAP", json.as_bytes(), b"FORCE"])
            .and_then(|r| text(r, &addr));
        if let Err(e) = reply {
            failed.push(e);
        }
    }
    println!("map version {} on every node of the map", map.version);
    if !failed.is_empty() {
        return Err(format!(
            "some nodes did not take map version {} (they must get it before they serve again: they confirm their map with the others at start): {}",
            map.version,
            failed.join("; ")
        ));
    }
    Ok(())
}

/// `0-100,200` as a slot set.
fn parse_slots(text: &str) -> Result<Vec<bool>, String> {
    let mut set = vec![false; SLOTS];
    for part in text.split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = (
            a.trim()
                .parse()
                .map_err(|_| format!("--slots: bad slot {a:?}"))?,
            b.trim()
                .parse()
                .map_err(|_| format!("--slots: bad slot {b:?}"))?,
        );
        if a > b || b >= SLOTS {
            return Err(format!(
                "--slots: {part} is not a range within 0-{}",
                SLOTS - 1
            ));
        }
        set[a..=b].iter_mut().for_each(|s| *s = true);
    }
    Ok(set)
}

/// `map` with the slot owners `owner`, at `version`.
fn with_owners(map: &SlotMap, owner: &[u16], version: u64) -> Result<SlotMap, String> {
    let mut nodes = map.nodes.clone();
    for (i, n) in nodes.iter_mut().enumerate() {
        n.slots = runs(owner, |o| o == i as u16);
    }
    SlotMap::from_nodes(version, nodes)
}

/// The slot ranges where `pick` holds.
fn runs(owner: &[u16], pick: impl Fn(u16) -> bool) -> Vec<(u16, u16)> {
    let mut out: Vec<(u16, u16)> = Vec::new();
    for (s, &o) in owner.iter().enumerate() {
        if pick(o) {
            let s = s as u16;
            match out.last_mut() {
                Some(last) if last.1 + 1 == s => last.1 = s,
                _ => out.push((s, s)),
            }
        }
    }
    out
}

/// The slots that changed to `to`, as text.
fn ranges_of(owner: &[u16], to: u16, before: &[u16]) -> String {
    let changed: Vec<u16> = owner
        .iter()
        .zip(before)
        .map(|(&o, &b)| if o == to && b != to { to } else { UNASSIGNED })
        .collect();
    let parts: Vec<String> = runs(&changed, |o| o == to)
        .iter()
        .map(|(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect();
    parts.join(",")
}
