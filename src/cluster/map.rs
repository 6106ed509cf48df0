//! The slot map: which node serves which hash slots, with a version. Configured, not
//! gossiped: read from a file at start, replaced by `CLUSTER SETMAP` (a newer version
//! only), persisted in the data directory.
//!
//! The JSON shape:
//! ```json
//! {"version": 3,
//!  "nodes": [{"id": "<40 hex>", "host": "127.0.0.1", "port": 7001,
//!             "slots": [[0, 5460]]}, ...]}
//! ```

use super::slot::SLOTS;
use serde_json::Value;
use std::fmt::Write as _;

/// The largest map version: the version is shifted into the fencing-token mark's high
/// bits when a node takes slots (`Cluster::install`), and that must stay an i64.
pub const MAX_VERSION: u64 = (1 << 23) - 1;

/// Where the version sits in the token mark: a node that takes slots at version V
/// raises its mark to at least `V << TOKEN_SHIFT`.
pub const TOKEN_SHIFT: u32 = 40;

/// "No node": a slot nobody serves.
pub const UNASSIGNED: u16 = u16::MAX;

#[derive(Clone, Debug, PartialEq)]
pub struct MapNode {
    pub id: String,
    pub host: String,
    pub port: u16,
    /// Inclusive ranges, as given.
    pub slots: Vec<(u16, u16)>,
    /// What the node published: its `--max-ttl` in ms (no lock it granted lives
    /// longer), so a node taking its slots fences them that long, whatever its own
    /// setting. `None` until the node (or the operator) has said.
    pub max_ttl_ms: Option<u64>,
    /// What the node published: a bound above every fencing token it can have handed
    /// out (its durable reservation plus `durability::tokens::RESTORE_LEAD`), so a node
    /// taking its slots while it is unreachable raises its own mark past it.
    pub token_bound: Option<u64>,
}

impl MapNode {
    /// `host:port`, as MOVED names it.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

#[derive(Clone, Debug)]
pub struct SlotMap {
    pub version: u64,
    pub nodes: Vec<MapNode>,
    /// Slot -> index in `nodes`, or `UNASSIGNED`.
    pub owner: Box<[u16]>,
}

impl SlotMap {
    /// One node owning every slot (emulated mode), version 0.
    pub fn single(id: String, host: String, port: u16) -> SlotMap {
        SlotMap {
            version: 0,
            nodes: vec![MapNode {
                id,
                host,
                port,
                slots: vec![(0, SLOTS as u16 - 1)],
                max_ttl_ms: None,
                token_bound: None,
            }],
            owner: vec![0; SLOTS].into_boxed_slice(),
        }
    }

    /// No node, no slot: a map-mode node before its first map.
    pub fn empty() -> SlotMap {
        SlotMap {
            version: 0,
            nodes: Vec::new(),
            owner: vec![UNASSIGNED; SLOTS].into_boxed_slice(),
        }
    }

    /// Parses and checks a map. `force` accepts a map that leaves slots unassigned.
    pub fn parse(text: &[u8], force: bool) -> Result<SlotMap, String> {
        let value: Value =
            serde_json::from_slice(text).map_err(|e| format!("the map is not JSON: {e}"))?;
        let obj = value
            .as_object()
            .ok_or("the map must be a JSON object with \"version\" and \"nodes\"")?;
        if let Some(k) = obj.keys().find(|k| *k != "version" && *k != "nodes") {
            return Err(format!("unknown field {k:?} in the map"));
        }
        let version = obj
            .get("version")
            .and_then(Value::as_u64)
            .filter(|v| (1..=MAX_VERSION).contains(v))
            .ok_or(format!(
                "\"version\" must be an integer from 1 to {MAX_VERSION}"
            ))?;
        let list = obj
            .get("nodes")
            .and_then(Value::as_array)
            .filter(|l| !l.is_empty())
            .ok_or("\"nodes\" must be a non-empty array")?;
        let mut nodes = Vec::with_capacity(list.len());
        for (i, n) in list.iter().enumerate() {
            nodes.push(parse_node(n).map_err(|e| format!("node {i}: {e}"))?);
        }
        let map = SlotMap::from_nodes(version, nodes)?;
        let unassigned = map.owner.iter().filter(|&&o| o == UNASSIGNED).count();
        if unassigned > 0 && !force {
            return Err(format!(
                "{unassigned} slots are not assigned to any node (first: {}); add FORCE to accept a map with slots nobody serves",
                map.owner.iter().position(|&o| o == UNASSIGNED).unwrap_or(0)
            ));
        }
        Ok(map)
    }

    /// Builds the owner table, refusing duplicate ids, addresses and slots.
    pub fn from_nodes(version: u64, nodes: Vec<MapNode>) -> Result<SlotMap, String> {
        if nodes.len() >= usize::from(UNASSIGNED) {
            return Err("too many nodes".into());
        }
        let mut owner = vec![UNASSIGNED; SLOTS].into_boxed_slice();
        for (i, n) in nodes.iter().enumerate() {
            if let Some(j) = nodes[..i].iter().position(|m| m.id == n.id) {
                return Err(format!("nodes {j} and {i} have the same id {}", n.id));
            }
            if let Some(j) = nodes[..i].iter().position(|m| m.addr() == n.addr()) {
                return Err(format!(
                    "nodes {j} and {i} have the same address {}",
                    n.addr()
                ));
            }
            for &(a, b) in &n.slots {
                for slot in a..=b {
                    let o = &mut owner[usize::from(slot)];
                    if *o != UNASSIGNED {
                        return Err(format!(
                            "slot {slot} is assigned twice (nodes {} and {i})",
                            *o
                        ));
                    }
                    *o = i as u16;
                }
            }
        }
        Ok(SlotMap {
            version,
            nodes,
            owner,
        })
    }

    /// The map as JSON (the shape `parse` reads).
    pub fn to_json(&self) -> String {
        let nodes: Vec<Value> = self
            .nodes
            .iter()
            .map(|n| {
                let mut v = serde_json::json!({
                    "id": n.id,
                    "host": n.host,
                    "port": n.port,
                    "slots": n.slots.iter().map(|&(a, b)| vec![a, b]).collect::<Vec<_>>(),
                });
                if let Some(ms) = n.max_ttl_ms {
                    v["max_ttl_ms"] = ms.into();
                }
                if let Some(t) = n.token_bound {
                    v["token_bound"] = t.into();
                }
                v
            })
            .collect();
        serde_json::json!({ "version": self.version, "nodes": nodes }).to_string()
    }

    /// The slot ranges each node serves, merged and sorted: (node index, first, last),
    /// by first slot (CLUSTER SLOTS's order).
    pub fn ranges(&self) -> Vec<(u16, u16, u16)> {
        let mut out: Vec<(u16, u16, u16)> = Vec::new();
        for (slot, &o) in self.owner.iter().enumerate() {
            if o == UNASSIGNED {
                continue;
            }
            let slot = slot as u16;
            match out.last_mut() {
                Some(last) if last.0 == o && last.2 + 1 == slot => last.2 = slot,
                _ => out.push((o, slot, slot)),
            }
        }
        out
    }

    /// Node `i`'s ranges, merged, as CLUSTER NODES lists them (`0-5460 5461`).
    pub fn ranges_text(&self, i: u16) -> String {
        let mut out = String::new();
        for (_, a, b) in self.ranges().into_iter().filter(|r| r.0 == i) {
            if !out.is_empty() {
                out.push(' ');
            }
            if a == b {
                let _ = write!(out, "{a}");
            } else {
                let _ = write!(out, "{a}-{b}");
            }
        }
        out
    }

    /// How many slots are assigned.
    pub fn assigned(&self) -> usize {
        self.owner.iter().filter(|&&o| o != UNASSIGNED).count()
    }

    pub fn position(&self, id: &str) -> Option<u16> {
        self.nodes.iter().position(|n| n.id == id).map(|i| i as u16)
    }
}

/// A node id: 40 lowercase hex digits, as Redis's.
pub fn valid_id(id: &str) -> bool {
    id.len() == 40
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn parse_node(v: &Value) -> Result<MapNode, String> {
    let obj = v.as_object().ok_or("must be an object")?;
    if let Some(k) = obj.keys().find(|k| {
        !["id", "host", "port", "slots", "max_ttl_ms", "token_bound"].contains(&k.as_str())
    }) {
        return Err(format!("unknown field {k:?}"));
    }
    let id = obj
        .get("id")
        .and_then(Value::as_str)
        .filter(|s| valid_id(s))
        .ok_or("\"id\" must be 40 lowercase hex digits")?
        .to_string();
    let host = obj
        .get("host")
        .and_then(Value::as_str)
        .filter(|s| {
            !s.is_empty()
                && s.len() <= 255
                && s.bytes()
                    .all(|b| b.is_ascii_graphic() && b != b',' && b != b'@')
        })
        .ok_or("\"host\" must be a non-empty address without spaces, ',' or '@'")?
        .to_string();
    let port = obj
        .get("port")
        .and_then(Value::as_u64)
        .filter(|p| (1..=65535).contains(p))
        .ok_or("\"port\" must be an integer from 1 to 65535")? as u16;
    let mut slots = Vec::new();
    let list = obj
        .get("slots")
        .and_then(Value::as_array)
        .ok_or("\"slots\" must be an array of [first, last] ranges")?;
    for r in list {
        let pair = r
            .as_array()
            .filter(|p| p.len() == 2)
            .and_then(|p| Some((p[0].as_u64()?, p[1].as_u64()?)))
            .filter(|&(a, b)| a <= b && b < SLOTS as u64)
            .ok_or(format!(
                "slot range {r} must be [first, last] with 0 <= first <= last <= {}",
                SLOTS - 1
            ))?;
        slots.push((pair.0 as u16, pair.1 as u16));
    }
    let count = |name: &str| -> Result<Option<u64>, String> {
        match obj.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .filter(|&n| n <= i64::MAX as u64)
                .map(Some)
                .ok_or(format!("\"{name}\" must be a non-negative integer")),
        }
    };
    Ok(MapNode {
        id,
        host,
        port,
        slots,
        max_ttl_ms: count("max_ttl_ms")?,
        token_bound: count("token_bound")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(c: char) -> String {
        std::iter::repeat_n(c, 40).collect()
    }

    fn three(version: u64) -> String {
        format!(
            r#"{{"version":{version},"nodes":[
            {{"id":"{}","host":"127.0.0.1","port":7001,"slots":[[0,5460]]}},
            {{"id":"{}","host":"127.0.0.1","port":7002,"slots":[[5461,10922]]}},
            {{"id":"{}","host":"127.0.0.1","port":7003,"slots":[[10923,16383]]}}]}}"#,
            id('a'),
            id('b'),
            id('c')
        )
    }

    #[test]
    fn a_full_map_parses_and_round_trips() {
        let m = SlotMap::parse(three(4).as_bytes(), false).unwrap();
        assert_eq!(m.version, 4);
        assert_eq!(m.owner[0], 0);
        assert_eq!(m.owner[5461], 1);
        assert_eq!(m.owner[16383], 2);
        assert_eq!(
            m.ranges(),
            vec![(0, 0, 5460), (1, 5461, 10922), (2, 10923, 16383)]
        );
        let again = SlotMap::parse(m.to_json().as_bytes(), false).unwrap();
        assert_eq!(again.nodes, m.nodes);
    }

    #[test]
    fn bad_maps_are_refused_with_the_reason() {
        let refuse = |text: &str| SlotMap::parse(text.as_bytes(), false).unwrap_err();
        assert!(refuse("{").contains("not JSON"));
        assert!(refuse(r#"{"version":0,"nodes":[]}"#).contains("version"));
        assert!(refuse(r#"{"version":1,"nodes":[]}"#).contains("nodes"));
        assert!(refuse(&three(1).replace("5461,", "5460,")).contains("slot 5460 is assigned twice"));
        assert!(refuse(&three(1).replace("16383", "16384")).contains("slot range"));
        assert!(refuse(&three(1).replace("7002", "7001")).contains("same address"));
        assert!(refuse(&three(1).replace(&id('b'), &id('a'))).contains("same id"));
        assert!(refuse(&three(1).replace(&id('b'), "xyz")).contains("40 lowercase hex"));
        assert!(refuse(&three(1).replace("\"port\"", "\"prot\"")).contains("unknown field"));
        let gap = three(1).replace("[[10923,16383]]", "[[10923,16382]]");
        assert!(refuse(&gap).contains("1 slots are not assigned to any node (first: 16383)"));
        let forced = SlotMap::parse(gap.as_bytes(), true).unwrap();
        assert_eq!(forced.owner[16383], UNASSIGNED);
        assert_eq!(forced.assigned(), 16383);
    }
}
