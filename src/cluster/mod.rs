//! Redis Cluster's protocol, served without gossip: which hash slots this node serves,
//! the routing check every keyed command passes (`route`: MOVED, CROSSSLOT,
//! CLUSTERDOWN), and the fence on slots a node has just taken over.
//!
//! Modes (`--cluster-mode`): `off` (a plain node, no check at all), `emulated` (this
//! node serves all 16384 slots: cluster clients work against one node, and CROSSSLOT
//! is enforced), `map` (a configured slot map over several nodes, `map.rs`).
//!
//! A slot this node takes over from another (a map of a newer version gives it to this
//! node) is fenced for max-ttl + the restart margin: writes that could grant a lock in
//! it get TRYAGAIN, so a lock the old owner granted just before the move has expired
//! before this node grants the same key to someone else. The old owner stops serving
//! the slot (MOVED) as soon as it has the new map: a map is pushed to the nodes that
//! lose slots first. The node's fencing-token mark is raised to `version << 40` when it
//! takes slots, so tokens never go backwards across a move.

pub mod confirm;
pub mod lease;
pub mod map;
pub mod migrate;
pub mod moving;
pub mod operator;
pub mod peer;
pub use crate::slot;

use crate::protocol::Reply;
use map::{SlotMap, UNASSIGNED};
use parking_lot::{Mutex, RwLock};
use slot::{key_slot, SLOTS};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// `--cluster-mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// A plain node: no slot check at all.
    #[default]
    Off,
    /// This node serves all 16384 slots: cluster clients work against one node, and
    /// CROSSSLOT is enforced.
    Emulated,
    /// A configured slot map over several nodes.
    Map,
}

impl Mode {
    /// The mode's name, as `--cluster-mode` and INFO spell it.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::Emulated => "emulated",
            Mode::Map => "map",
        }
    }
}

/// The cluster settings of a node.
#[derive(Clone, Debug, Default)]
pub struct ClusterConfig {
    /// Off, emulated or map.
    pub mode: Mode,
    /// This node's id in the map (40 hex digits); `None`: derived from the data
    /// directory's node id (or random without one).
    pub node_id: Option<String>,
    /// The address this node gives for itself where the map does not name it
    /// (emulated mode, or a node outside the map); `None`: the bind address, or an
    /// empty host (clients then use the address they dialled) when bound to all.
    pub announce_host: Option<String>,
    /// A map file read at start (map mode); a newer map persisted in the data
    /// directory wins over it.
    pub map_file: Option<PathBuf>,
    /// The user and password this node sends (AUTH) on its calls to the other nodes
    /// of its map (`--cluster-auth`); `None`: no AUTH.
    pub peer_auth: Option<(String, String)>,
    /// How long a node of a map may go without reaching a majority of the map's
    /// nodes before it stops serving slots (`--cluster-node-timeout`, `lease.rs`);
    /// `None`: `lease::DEFAULT_NODE_TIMEOUT`.
    pub node_timeout: Option<std::time::Duration>,
}

impl ClusterConfig {
    /// Refuses settings that cannot work: a node id that is not 40 lowercase hex
    /// digits, a map file without map mode.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(id) = &self.node_id {
            if !map::valid_id(id) {
                return Err(format!(
                    "cluster-node-id {id:?} must be 40 lowercase hex digits"
                ));
            }
        }
        if self.map_file.is_some() && self.mode != Mode::Map {
            return Err("cluster-map needs --cluster-mode map".into());
        }
        Ok(())
    }
}

/// The file in the data directory that holds the last map installed.
pub const MAP_FILE: &str = "cluster-map.json";

/// The file in the data directory that records the cluster mode the node last ran
/// in, and the slots a mode change released (`Cluster::change_mode`).
pub const MODE_FILE: &str = "cluster-mode.json";

/// What the node serves now: the map, its own place in it, and the slots it fences.
#[derive(Clone)]
pub struct View {
    pub map: SlotMap,
    /// This node's index in `map.nodes`.
    pub me: Option<u16>,
    /// Per slot: the monotonic ms until which writes to it are refused (0: none).
    fenced_until: Box<[u64]>,
}

impl View {
    fn new(map: SlotMap, my_id: &str) -> View {
        View {
            me: map.position(my_id),
            map,
            fenced_until: vec![0; SLOTS].into_boxed_slice(),
        }
    }

    pub fn owns(&self, slot: u16) -> bool {
        self.me
            .is_some_and(|me| self.map.owner[usize::from(slot)] == me)
    }

    /// How many slots are fenced at `now_ms`.
    pub fn fenced_slots(&self, now_ms: u64) -> usize {
        self.fenced_until.iter().filter(|&&t| t > now_ms).count()
    }
}

/// One node's cluster state.
pub struct Cluster {
    mode: Mode,
    my_id: String,
    /// Our own address where the map has none: (host, port).
    announce: (String, u16),
    view: RwLock<Arc<View>>,
    /// Whether any slot may be fenced now (checked before computing slots).
    any_fenced: AtomicBool,
    /// Serialises map installs (check the version, persist, swap).
    installing: Mutex<()>,
    /// This node's `--max-ttl` in ms: published to the others (CLUSTER PEERSTATE,
    /// its entry in GETMAP) as the fence they keep on slots they take from it.
    max_ttl_ms: u64,
    /// Added to the old owner's max-ttl (`config::RESTART_MARGIN`).
    margin_ms: u64,
    /// `--cluster-auth`: sent on calls to other nodes.
    peer_auth: Option<(String, String)>,
    /// Whether this node may serve the slots of its map: false from a start with a
    /// map until enough nodes of the map have confirmed it is current (`confirm`).
    confirmed: AtomicBool,
    /// The lease (`lease.rs`): how long without a majority before serving stops, when
    /// a majority last answered, and whether serving stopped for that.
    node_timeout_ms: u64,
    renewed_at: Mutex<std::time::Instant>,
    lease_lost: AtomicBool,
    /// Nodes that said they stopped cleanly (`CLUSTER LEAVING`) and have not asked
    /// this node anything since (`lease.rs`).
    left: Mutex<HashSet<String>>,
    /// Why the map is not confirmed yet (the CLUSTERDOWN text and INFO's).
    unconfirmed_why: Mutex<String>,
    /// Ids of the nodes that asked this node for its state with a map no newer than
    /// ours since it started: each one confirms the map as an answer would.
    heard: Mutex<HashSet<String>>,
    /// What other nodes published (max-ttl, token bound), by id, as last heard.
    facts: Mutex<HashMap<String, Facts>>,
    /// Per slot: the map version whose move sent this node the slot's keys
    /// (`CLUSTER IMPORT`, `migrate`), 0: none; and until when (this node's clock, ms)
    /// the sender was still fenced for it (its restart fence, or the slot's own move
    /// fence): the locks it may have granted and lost. A slot gained at that version
    /// has every key and is fenced only that long.
    imported: Mutex<Box<[(u64, u64)]>>,
    /// Slots this node served under its previous mode and no longer serves (a mode
    /// change is a move: `load`), until when (Unix ms): published in PEERSTATE, so
    /// the nodes that now serve them fence them that long.
    released: Mutex<(Vec<(u16, u16)>, i64)>,
    clock: crate::clock::Clock,
    /// The last move this node sent: keys, bytes, ms the writes were paused.
    pub last_move: Mutex<(usize, usize, u64)>,
    /// The slots a live move has in flight (`moving.rs`).
    pub moving: moving::Moving,
    /// Test hook: the move fence off (the mutual-exclusion checker must then find
    /// overlaps).
    fence_off: AtomicBool,
    /// Test hook: a move sends no keys (the checker must then find overlaps).
    keys_off: AtomicBool,
    /// Test hook: a node started with a saved map serves it at once, unconfirmed.
    confirm_off: AtomicBool,
    pub moved: AtomicU64,
    pub crossslot: AtomicU64,
    pub clusterdown: AtomicU64,
}

/// Why a command may not run here.
pub enum Refusal {
    CrossSlot,
    Moved(u16, String),
    Unassigned,
    /// The node started with a map it has not confirmed yet (`confirm`).
    Unconfirmed(String),
}

/// What a peer published about itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct Facts {
    pub max_ttl_ms: Option<u64>,
    pub token_bound: Option<u64>,
}

/// A peer's answer to CLUSTER PEERSTATE.
#[derive(Debug)]
pub struct PeerState {
    pub id: String,
    pub version: u64,
    pub map: Option<SlotMap>,
    pub max_ttl_ms: u64,
    pub mark: u64,
    pub token_bound: u64,
    /// Slots the peer released by a mode change, and for how many more ms its locks
    /// in them may live.
    pub released: Vec<(u16, u16)>,
    pub released_ms: u64,
}

impl PeerState {
    fn parse(text: &[u8]) -> Result<PeerState, String> {
        let v: serde_json::Value =
            serde_json::from_slice(text).map_err(|e| format!("not JSON: {e}"))?;
        let num = |k: &str| {
            v.get(k)
                .and_then(serde_json::Value::as_u64)
                .ok_or(format!("no {k}"))
        };
        let map = match v.get("map") {
            Some(m) if !m.is_null() => Some(SlotMap::parse(m.to_string().as_bytes(), true)?),
            _ => None,
        };
        Ok(PeerState {
            id: v
                .get("id")
                .and_then(|i| i.as_str())
                .ok_or("no id")?
                .to_string(),
            version: num("version")?,
            map,
            max_ttl_ms: num("max_ttl_ms")?,
            mark: num("mark")?,
            token_bound: num("token_bound")?,
            released: v
                .get("released")
                .and_then(|r| r.as_array())
                .map(|l| {
                    l.iter()
                        .filter_map(|r| {
                            let (a, b) = (r.get(0)?.as_u64()?, r.get(1)?.as_u64()?);
                            (a <= b && b < SLOTS as u64).then_some((a as u16, b as u16))
                        })
                        .collect()
                })
                .unwrap_or_default(),
            released_ms: v.get("released_ms").and_then(|m| m.as_u64()).unwrap_or(0),
        })
    }
}

/// How long a call to a peer may take (connect, each write, each read).
pub const PEER_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(300);

/// The environment variable that turns protections off in a running binary, for the
/// network-fault battery's checkers (tests/netfault/, docs/netfault.md): a
/// comma-separated list of `keys` (slots given away move without their keys),
/// `fence` (no fence on slots gained from another node) and `confirm` (a node
/// started with a saved map serves it at once). Read once, at start, only when set;
/// the node logs an error saying which are off. Never set it on a real node.
pub const UNSAFE_TEST_ENV: &str = "REDLOCKD_TEST_CLUSTER_UNSAFE";

/// The protections `UNSAFE_TEST_ENV` turns off (none when it is unset).
fn unsafe_test_switches() -> Vec<&'static str> {
    let Ok(v) = std::env::var(UNSAFE_TEST_ENV) else {
        return Vec::new();
    };
    let off: Vec<&'static str> = ["keys", "fence", "confirm"]
        .into_iter()
        .filter(|w| v.split(',').any(|x| x.trim() == *w))
        .collect();
    tracing::error!(
        off = ?off,
        "{UNSAFE_TEST_ENV} is set: cluster protections are off (a test setting: locks are not safe)"
    );
    off
}

/// Runs blocking peer calls from a handler: off the async worker when on a
/// multi-thread runtime (`block_in_place`), directly otherwise.
pub fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

impl Refusal {
    pub fn reply(&self) -> Reply {
        match self {
            Refusal::CrossSlot => {
                Reply::error("CROSSSLOT Keys in request don't hash to the same slot")
            }
            Refusal::Moved(slot, addr) => Reply::error(format!("MOVED {slot} {addr}")),
            Refusal::Unassigned => Reply::error("CLUSTERDOWN Hash slot not served"),
            Refusal::Unconfirmed(why) => {
                Reply::error(format!("CLUSTERDOWN The slot map is not confirmed: {why}"))
            }
        }
    }
}

impl Cluster {
    /// `port` is the bound port; `max_ttl_ms` this node's max-ttl (published to the
    /// others), `margin_ms` what a fence adds to an old owner's max-ttl.
    pub fn new(
        config: &ClusterConfig,
        my_id: String,
        bind: std::net::IpAddr,
        port: u16,
        max_ttl_ms: u64,
        margin_ms: u64,
        clock: crate::clock::Clock,
    ) -> Cluster {
        let host = config.announce_host.clone().unwrap_or_else(|| {
            if bind.is_unspecified() {
                String::new()
            } else {
                bind.to_string()
            }
        });
        let map = match config.mode {
            Mode::Emulated => SlotMap::single(my_id.clone(), host.clone(), port),
            _ => SlotMap::empty(),
        };
        let unsafe_off = unsafe_test_switches();
        Cluster {
            mode: config.mode,
            view: RwLock::new(Arc::new(View::new(map, &my_id))),
            my_id,
            announce: (host, port),
            any_fenced: AtomicBool::new(false),
            installing: Mutex::new(()),
            max_ttl_ms,
            margin_ms,
            peer_auth: config.peer_auth.clone(),
            confirmed: AtomicBool::new(true),
            node_timeout_ms: config
                .node_timeout
                .unwrap_or(lease::DEFAULT_NODE_TIMEOUT)
                .as_millis() as u64,
            renewed_at: Mutex::new(std::time::Instant::now()),
            lease_lost: AtomicBool::new(false),
            left: Mutex::new(HashSet::new()),
            unconfirmed_why: Mutex::new(String::new()),
            heard: Mutex::new(HashSet::new()),
            facts: Mutex::new(HashMap::new()),
            imported: Mutex::new(vec![(0, 0); SLOTS].into_boxed_slice()),
            last_move: Mutex::new((0, 0, 0)),
            moving: moving::Moving::default(),
            released: Mutex::new((Vec::new(), 0)),
            clock,
            fence_off: AtomicBool::new(unsafe_off.contains(&"fence")),
            keys_off: AtomicBool::new(unsafe_off.contains(&"keys")),
            confirm_off: AtomicBool::new(unsafe_off.contains(&"confirm")),
            moved: AtomicU64::new(0),
            crossslot: AtomicU64::new(0),
            clusterdown: AtomicU64::new(0),
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Whether the node speaks the cluster protocol (emulated or map).
    pub fn enabled(&self) -> bool {
        self.mode != Mode::Off
    }

    pub fn my_id(&self) -> &str {
        &self.my_id
    }

    pub fn announce(&self) -> (&str, u16) {
        (&self.announce.0, self.announce.1)
    }

    pub fn view(&self) -> Arc<View> {
        self.view.read().clone()
    }

    /// The routing check: every key must hash to one slot that this node serves.
    /// Returns the slot (`None` for no keys). Redis's order: the first key's slot must
    /// be assigned, every other key must share it, then it must be ours.
    pub fn route<'a>(&self, keys: impl Iterator<Item = &'a [u8]>) -> Result<Option<u16>, Refusal> {
        let mut slot = None;
        if !self.confirmed.load(Ordering::Acquire) {
            let mut keys = keys.peekable();
            if keys.peek().is_some() {
                self.clusterdown.fetch_add(1, Ordering::Relaxed);
                return Err(Refusal::Unconfirmed(self.unconfirmed_why.lock().clone()));
            }
            return Ok(None);
        }
        let view = self.view.read();
        for key in keys {
            let s = key_slot(key);
            match slot {
                None => {
                    if view.map.owner[usize::from(s)] == UNASSIGNED {
                        self.clusterdown.fetch_add(1, Ordering::Relaxed);
                        return Err(Refusal::Unassigned);
                    }
                    slot = Some(s);
                }
                Some(first) if first != s => {
                    self.crossslot.fetch_add(1, Ordering::Relaxed);
                    return Err(Refusal::CrossSlot);
                }
                Some(_) => {}
            }
        }
        if let Some(s) = slot {
            if !view.owns(s) {
                let owner = &view.map.nodes[usize::from(view.map.owner[usize::from(s)])];
                self.moved.fetch_add(1, Ordering::Relaxed);
                return Err(Refusal::Moved(s, owner.addr()));
            }
        }
        Ok(slot)
    }

    /// Refuses a write (a FENCED command) to a slot this node took over less than
    /// the fence's length ago.
    pub fn check_fence<'a>(
        &self,
        keys: impl Iterator<Item = &'a [u8]>,
        now_ms: u64,
    ) -> Result<(), Reply> {
        if !self.any_fenced.load(Ordering::Relaxed) {
            return Ok(());
        }
        let view = self.view.read();
        let mut any = false;
        for key in keys {
            let s = key_slot(key);
            let until = view.fenced_until[usize::from(s)];
            if until > now_ms {
                return Err(Reply::error(format!(
                    "TRYAGAIN slot {s} moved to this node at map version {}: its previous owner may still hold locks in it; writes to it are refused for another {} ms",
                    view.map.version,
                    until - now_ms
                )));
            }
            any |= until != 0;
        }
        if !any && view.fenced_slots(now_ms) == 0 {
            self.any_fenced.store(false, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Test hook: turns the move fence off (or back on) for maps installed later.
    #[doc(hidden)]
    pub fn set_move_fence(&self, on: bool) {
        self.fence_off.store(!on, Ordering::Relaxed);
    }

    /// Test hook: slots given away move without their keys (or with them again).
    #[doc(hidden)]
    pub fn set_move_keys(&self, on: bool) {
        self.keys_off.store(!on, Ordering::Relaxed);
    }

    /// Whether slots given away move with their keys (`migrate`).
    pub fn moves_keys(&self) -> bool {
        !self.keys_off.load(Ordering::Relaxed)
    }

    /// Installs a map: refused unless it is newer than the current one (the same map
    /// again is accepted and changes nothing: a retried push). Slots this node gains
    /// are fenced for their old owner's published max-ttl + the margin (unless this is
    /// the cluster's first map, version 1, on a node that had none: nobody served them
    /// before), and the token mark is raised above every token the old owner can have
    /// given: its mark when it answers now, else the bound it published.
    /// The old owners are asked (CLUSTER PEERSTATE) when they are reachable; an old
    /// owner that neither answers nor ever published its max-ttl refuses the map.
    /// `persist` writes the map (durably) before it takes effect. Returns the number
    /// of slots fenced.
    pub fn install(
        &self,
        mut map: SlotMap,
        now_ms: u64,
        tokens: &crate::durability::tokens::TokenMark,
        persist: impl FnOnce(&str) -> std::io::Result<()>,
    ) -> Result<usize, String> {
        if self.mode != Mode::Map {
            return Err(format!(
                "this node runs with --cluster-mode {}: its slot map is fixed",
                self.mode.name()
            ));
        }
        let _one = self.installing.lock();
        let old = self.view();
        self.fill_facts(&mut map, &old.map, tokens);
        if map.version == old.map.version && same_layout(&map, &old.map) {
            return Ok(0);
        }
        if map.version <= old.map.version {
            return Err(format!(
                "map version {} is not newer than this node's {}",
                map.version, old.map.version
            ));
        }
        let mut next = View::new(map, &self.my_id);
        let first = old.map.nodes.is_empty() && next.map.version == 1;
        let fence_off = self.fence_off.load(Ordering::Relaxed);
        // The old owners of the slots this node gains, asked now where they answer.
        let mut gained_from: Vec<u16> = Vec::new();
        let imported = self.imported.lock().clone();
        let version = next.map.version;
        let with_keys = |s: usize| imported[s].0 == version;
        if let Some(me) = next.me {
            for s in 0..SLOTS {
                if next.map.owner[s] == me && !old.owns(s as u16) && !with_keys(s) {
                    let o = old.map.owner[s];
                    if !gained_from.contains(&o) {
                        gained_from.push(o);
                    }
                }
            }
        }
        let mut fence_of: HashMap<u16, u64> = HashMap::new();
        let mut token_floor = next.map.version << map::TOKEN_SHIFT;
        if !first && !fence_off && !gained_from.is_empty() {
            let unknown_owner_ms = next
                .map
                .nodes
                .iter()
                .filter_map(|n| n.max_ttl_ms)
                .max()
                .unwrap_or(self.max_ttl_ms);
            for &o in &gained_from {
                let Some(owner) = old.map.nodes.get(usize::from(o)) else {
                    // No known previous owner (the slot was unassigned, or this node
                    // had no map): the longest max-ttl any node of the map published.
                    fence_of.insert(o, unknown_owner_ms + self.takeover_margin_ms());
                    continue;
                };
                let known = self
                    .facts
                    .lock()
                    .get(&owner.id)
                    .copied()
                    .unwrap_or_default();
                // What the new map says it published, else what the old map said.
                let in_next = next.map.nodes.iter().find(|n| n.id == owner.id);
                let published =
                    |f: fn(&map::MapNode) -> Option<u64>| in_next.and_then(f).or(f(owner));
                let asked = blocking(|| self.ask(&owner.addr(), old.map.version));
                let (ttl, floor) = match asked {
                    Ok(st) => (Some(st.max_ttl_ms), Some(st.mark)),
                    Err(e) => {
                        tracing::warn!(node = %owner.id, addr = %owner.addr(), error = %e, "the old owner of slots this node takes did not answer: fencing them from what it published");
                        (
                            known.max_ttl_ms.or(published(|n| n.max_ttl_ms)),
                            known.token_bound.or(published(|n| n.token_bound)),
                        )
                    }
                };
                let ttl = ttl.ok_or(format!(
                    "node {} ({}), the old owner of slots this map gives to this node, did not answer and never published its max-ttl: give \"max_ttl_ms\" in its entry of the map",
                    owner.id,
                    owner.addr()
                ))?;
                fence_of.insert(o, ttl + self.takeover_margin_for(&owner.id));
                token_floor = token_floor.max(floor.unwrap_or(0));
            }
        }
        // What the old owners answered is in the map this node serves and persists.
        self.fill_facts(&mut next.map, &old.map, tokens);
        let mut fenced = 0;
        if let Some(me) = next.me {
            for s in 0..SLOTS {
                let carried = old.fenced_until[s];
                if next.map.owner[s] != me {
                    continue;
                }
                match fence_of.get(&old.map.owner[s]) {
                    Some(&ms) if !old.owns(s as u16) && !with_keys(s) => {
                        next.fenced_until[s] = now_ms + ms;
                        fenced += 1;
                    }
                    // Moved here with its keys while the sender was still fenced.
                    _ if with_keys(s) && !fence_off && imported[s].1 > now_ms => {
                        next.fenced_until[s] = imported[s].1.max(carried);
                        fenced += 1;
                    }
                    _ if carried > now_ms => next.fenced_until[s] = carried,
                    _ => {}
                }
            }
        }
        if !gained_from.is_empty() && !first {
            tokens
                .raise(token_floor)
                .map_err(|e| format!("cannot raise the token mark durably: {e}"))?;
        }
        let text = persisted_text(&next.map, &ranges_of(&next.fenced_until, now_ms));
        persist(&text).map_err(|e| format!("cannot persist the map: {e}"))?;
        if next.fenced_until.iter().any(|&t| t > now_ms) {
            self.any_fenced.store(true, Ordering::Relaxed);
        }
        *self.view.write() = Arc::new(next);
        Ok(fenced)
    }

    /// Fills the facts a map leaves out: this node's own entry gets its max-ttl and
    /// token bound; another node's, what it published before (an older map's entry,
    /// or what it answered).
    fn fill_facts(
        &self,
        map: &mut SlotMap,
        old: &SlotMap,
        tokens: &crate::durability::tokens::TokenMark,
    ) {
        let facts = self.facts.lock();
        for n in &mut map.nodes {
            if n.id == self.my_id {
                n.max_ttl_ms = Some(self.max_ttl_ms);
                n.token_bound = Some(own_token_bound(tokens));
                continue;
            }
            let before = old.nodes.iter().find(|m| m.id == n.id);
            let known = facts.get(&n.id);
            n.max_ttl_ms = n
                .max_ttl_ms
                .or(known.and_then(|f| f.max_ttl_ms))
                .or(before.and_then(|m| m.max_ttl_ms));
            n.token_bound = n
                .token_bound
                .or(known.and_then(|f| f.token_bound))
                .or(before.and_then(|m| m.token_bound));
        }
    }

    /// Asks the node at `addr` for its state (CLUSTER PEERSTATE), saying this node's
    /// id and map version; remembers what it published.
    pub fn ask(&self, addr: &str, my_version: u64) -> Result<PeerState, String> {
        let version = my_version.to_string();
        let text = peer::call_once(
            addr,
            PEER_TIMEOUT,
            self.peer_auth.as_ref(),
            &[
                b"CLUSTER",
                b"PEERSTATE",
                self.my_id.as_bytes(),
                version.as_bytes(),
            ],
        )?;
        let st =
            PeerState::parse(&text).map_err(|e| format!("{addr}: bad PEERSTATE reply: {e}"))?;

        self.facts.lock().insert(
            st.id.clone(),
            Facts {
                max_ttl_ms: Some(st.max_ttl_ms),
                token_bound: Some(st.token_bound),
            },
        );
        Ok(st)
    }

    /// CLUSTER PEERSTATE <asker id> <asker's map version>: this node's state as JSON
    /// (id, map version, map, max-ttl, token mark and bound). An asker whose map is no
    /// newer than ours counts as one confirmation of it (`confirm`).
    pub fn peer_state(
        &self,
        asker: &str,
        asker_version: u64,
        tokens: &crate::durability::tokens::TokenMark,
    ) -> String {
        let view = self.view();
        if asker_version <= view.map.version && asker != self.my_id {
            self.heard.lock().insert(asker.to_string());
        }
        // It runs again (its restart confirms its map first).
        self.left.lock().remove(asker);
        let released = self.released.lock().clone();
        let released_ms = (released.1 - self.clock.wall_ms()).max(0);
        let map = if view.map.nodes.is_empty() {
            serde_json::Value::Null
        } else {
            let mut m = view.map.clone();
            self.fill_facts(&mut m, &view.map, tokens);
            serde_json::from_str(&m.to_json()).unwrap_or_default()
        };
        serde_json::json!({
            "id": self.my_id,
            "version": view.map.version,
            "map": map,
            "max_ttl_ms": self.max_ttl_ms,
            "mark": tokens.get(),
            "token_bound": own_token_bound(tokens),
            "released": released.0.iter().map(|&(a, b)| vec![a, b]).collect::<Vec<_>>(),
            "released_ms": released_ms,
        })
        .to_string()
    }

    /// Fences the slots of `ranges` this node serves for `ms` (from now), unless
    /// already fenced longer: another node served them under its previous mode.
    /// Returns whether this node serves any of them.
    fn fence_released(&self, ranges: &[(u16, u16)], ms: u64) -> bool {
        let _one = self.installing.lock();
        let now = self.clock.now_ms();
        let mut view = (*self.view()).clone();
        let mut changed = 0;
        let mut serves_any = false;
        for &(a, b) in ranges {
            for s in a..=b {
                let serves = self.mode != Mode::Map || view.owns(s);
                serves_any |= serves;
                let until = &mut view.fenced_until[usize::from(s)];
                if serves && *until < now + ms {
                    *until = now + ms;
                    changed += 1;
                }
            }
        }
        if changed > 0 {
            tracing::warn!(
                slots = changed,
                fence_ms = ms,
                "another node served these slots under its previous cluster mode: fenced"
            );
            self.any_fenced.store(true, Ordering::Relaxed);
            *self.view.write() = Arc::new(view);
        }
        serves_any
    }

    /// Every mode change is a move (`load`): what the previous mode served that this
    /// one does not is released (published until the node's own locks there have
    /// expired), and what this one serves that the previous did not is fenced for
    /// the longest max-ttl the previous map published, as are the slots the saved map
    /// still fenced, and the token mark is raised as a newer map's would be. The fences are recorded with the mode and raised again by a restart
    /// before they end (in any mode). A node without a record (new: `redlockd init`,
    /// or no --dir) changes nothing.
    fn change_mode(
        &self,
        dir: &Path,
        now_ms: u64,
        tokens: &crate::durability::tokens::TokenMark,
    ) -> Result<(), String> {
        let path = dir.join(MODE_FILE);
        let wall = self.clock.wall_ms();
        let prev: Option<serde_json::Value> = match std::fs::read(&path) {
            Ok(b) => {
                Some(serde_json::from_slice(&b).map_err(|e| format!("{}: {e}", path.display()))?)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let prev_mode = prev
            .as_ref()
            .and_then(|v| v["mode"].as_str().map(str::to_string));
        let ranges = |v: &serde_json::Value| -> Vec<(u16, u16, u64)> {
            v.as_array()
                .map(|l| {
                    l.iter()
                        .filter_map(|r| {
                            let (a, b) = (r.get(0)?.as_u64()?, r.get(1)?.as_u64()?);
                            let ms = r.get(2).and_then(|m| m.as_u64()).unwrap_or(0);
                            (a <= b && b < SLOTS as u64).then_some((a as u16, b as u16, ms))
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut released: (Vec<(u16, u16)>, i64) = prev
            .as_ref()
            .map(|v| {
                let until = v["released_until_unix_ms"].as_i64().unwrap_or(0);
                let r = ranges(&v["released"])
                    .iter()
                    .map(|&(a, b, _)| (a, b))
                    .collect();
                (r, until)
            })
            .filter(|(_, until)| *until > wall)
            .unwrap_or_default();
        let mut next = (*self.view()).clone();
        // The fences the last start recorded, for what is left of them.
        let mut fences = 0;
        if let Some(v) = &prev {
            let written = v["written_unix_ms"].as_i64().unwrap_or(wall);
            let passed = (wall - written).max(0) as u64;
            for (a, b, ms) in ranges(&v["fenced"]) {
                let left = ms.saturating_sub(passed);
                for s in a..=b {
                    let serves = self.mode != Mode::Map || next.owns(s);
                    let until = &mut next.fenced_until[usize::from(s)];
                    if serves && left > 0 && *until < now_ms + left {
                        *until = now_ms + left;
                        fences += 1;
                    }
                }
            }
        }
        let served_all_before = matches!(prev_mode.as_deref(), Some("off" | "emulated"));
        let serves_all_now = self.mode != Mode::Map;
        if served_all_before && !serves_all_now {
            let mut gone: Vec<(u16, u16)> = Vec::new();
            for s in 0..SLOTS as u16 {
                if !next.owns(s) {
                    match gone.last_mut() {
                        Some(last) if last.1 + 1 == s => last.1 = s,
                        _ => gone.push((s, s)),
                    }
                }
            }
            if !gone.is_empty() {
                tracing::warn!(from = prev_mode.as_deref().unwrap_or(""), to = self.mode.name(), "cluster mode changed: the slots this node no longer serves are published as released for max-ttl + margin, and fenced by the nodes that serve them");
                released = (gone, wall + (self.max_ttl_ms + self.margin_ms) as i64);
            }
        }
        if prev_mode.as_deref() == Some("map") && serves_all_now {
            // The saved map says which slots others served, and which were fenced.
            if let Ok(bytes) = std::fs::read(dir.join(MAP_FILE)) {
                let (old, pending) =
                    parse_persisted(&bytes).map_err(|e| format!("{MAP_FILE}: {e}"))?;
                let me = old.position(&self.my_id);
                let others = || old.nodes.iter().filter(|n| n.id != self.my_id);
                let ttl = others()
                    .filter_map(|n| n.max_ttl_ms)
                    .max()
                    .unwrap_or(self.max_ttl_ms);
                let mut fenced = 0;
                for s in 0..SLOTS {
                    if old.owner[s] != UNASSIGNED && Some(old.owner[s]) != me {
                        next.fenced_until[s] = now_ms + ttl + self.margin_ms;
                        fenced += 1;
                    }
                }
                for (a, b, ms) in pending {
                    let ms = if ms == 0 {
                        self.max_ttl_ms + self.margin_ms
                    } else {
                        ms
                    };
                    for s in a..=b {
                        let until = &mut next.fenced_until[usize::from(s)];
                        *until = (*until).max(now_ms + ms);
                        fenced += 1;
                    }
                }
                // As a map giving this node the others' slots would (`install`): past
                // the marks of those that answer now, what the others published, and
                // `version << 40` of a newer map (a node that took slots since it
                // published jumped to its map's).
                let peers: Vec<(String, String)> =
                    others().map(|n| (n.id.clone(), n.addr())).collect();
                let answered = blocking(|| self.ask_many(&peers, old.version));
                let bound = others()
                    .zip(&answered)
                    .map(|(n, a)| match a {
                        Ok(st) => st.mark.max(st.token_bound),
                        Err(_) => n.token_bound.unwrap_or(0),
                    })
                    .max()
                    .unwrap_or(0);
                tokens
                    .raise(bound.max((old.version + 1) << map::TOKEN_SHIFT))
                    .map_err(|e| format!("cannot raise the token mark durably: {e}"))?;
                if fenced > 0 {
                    tracing::warn!(
                        slots = fenced,
                        fence_ms = ttl + self.margin_ms,
                        "cluster mode changed from map: the slots other nodes served are fenced"
                    );
                    fences += fenced;
                }
            }
        }
        if fences > 0 {
            self.any_fenced.store(true, Ordering::Relaxed);
            *self.view.write() = Arc::new(next.clone());
        }
        let record = serde_json::json!({
            "mode": self.mode.name(),
            "released": released.0.iter().map(|&(a, b)| vec![a, b]).collect::<Vec<_>>(),
            "released_until_unix_ms": released.1,
            "fenced": ranges_of(&next.fenced_until, now_ms)
                .iter()
                .map(|&(a, b, ms)| vec![u64::from(a), u64::from(b), ms])
                .collect::<Vec<_>>(),
            "written_unix_ms": wall,
        });
        crate::durability::atomic_write(&path, record.to_string().as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        *self.released.lock() = released;
        Ok(())
    }

    /// This node's `--max-ttl` in ms, as it publishes it.
    pub fn max_ttl_ms(&self) -> u64 {
        self.max_ttl_ms
    }

    /// `--cluster-auth`, for calls to other nodes.
    pub fn peer_auth(&self) -> Option<&(String, String)> {
        self.peer_auth.as_ref()
    }

    /// `CLUSTER IMPORT`'s bookkeeping: `slots` arrive with their keys for the map of
    /// `version` (which must be newer than ours: an older move is stale); the sender
    /// is still fenced for them until `fence_until_ms` (this node's clock), and so
    /// will this node be once it serves them.
    pub fn note_import(
        &self,
        from: &str,
        max_ttl_ms: u64,
        slots: &[bool],
        version: u64,
        fence_until_ms: u64,
    ) -> Result<(), String> {
        let mut facts = self.facts.lock();
        let f = facts.entry(from.to_string()).or_default();
        f.max_ttl_ms = Some(max_ttl_ms);
        drop(facts);
        let current = self.view().map.version;
        if self.mode != Mode::Map {
            return Err("this node does not run with --cluster-mode map".into());
        }
        if version <= current {
            return Err(format!(
                "map version {version} is not newer than this node's {current}"
            ));
        }
        let mut imported = self.imported.lock();
        for (s, &on) in slots.iter().enumerate() {
            if on {
                let until = match imported[s] {
                    (v, until) if v == version => until.max(fence_until_ms),
                    _ => fence_until_ms,
                };
                imported[s] = (version, until);
            }
        }
        Ok(())
    }

    /// Asks each of `others` (id, address) at once; the answers in their order.
    /// Slots a peer released by a mode change that this node serves are fenced, and
    /// the token mark raised past the bound that peer publishes (a mode change is a
    /// move: tokens never go backwards across it).
    pub fn ask_all(
        &self,
        others: &[(String, String)],
        version: u64,
        tokens: &crate::durability::tokens::TokenMark,
    ) -> Vec<Result<PeerState, String>> {
        let answers = self.ask_many(others, version);
        // Not from `ask`: `install` calls it holding the install lock.
        for st in answers.iter().flatten() {
            if st.released_ms > 0
                && !st.released.is_empty()
                && st.id != self.my_id
                && self.fence_released(&st.released, st.released_ms + self.margin_ms)
            {
                if let Err(e) = tokens.raise(st.token_bound) {
                    tracing::error!(error = %e, "cannot raise the token mark durably past a node that released slots this node serves");
                }
            }
        }
        answers
    }

    /// Asks each of `others` at once, learning what they publish; nothing more.
    fn ask_many(
        &self,
        others: &[(String, String)],
        version: u64,
    ) -> Vec<Result<PeerState, String>> {
        std::thread::scope(|scope| {
            let calls: Vec<_> = others
                .iter()
                .map(|(_, addr)| scope.spawn(|| self.ask(addr, version)))
                .collect();
            calls
                .into_iter()
                .map(|c| c.join().unwrap_or_else(|_| Err("panicked".into())))
                .collect()
        })
    }

    /// The other nodes of the map: (id, address).
    pub fn others(&self) -> Vec<(String, String)> {
        (self.view().map.nodes.iter())
            .filter(|n| n.id != self.my_id)
            .map(|n| (n.id.clone(), n.addr()))
            .collect()
    }

    /// At boot: the map persisted in the data directory, served as it was, except that
    /// a fence the map file records as pending is raised again for its full length
    /// (the monotonic clock does not survive a restart).
    pub fn restore(&self, map: SlotMap, fenced: &[(u16, u16, u64)], now_ms: u64) {
        let mut view = View::new(map, &self.my_id);
        for &(a, b, ms) in fenced {
            let ms = if ms == 0 {
                self.max_ttl_ms + self.margin_ms
            } else {
                ms
            };
            for s in a..=b {
                if view.owns(s) {
                    view.fenced_until[usize::from(s)] = now_ms + ms;
                    self.any_fenced.store(true, Ordering::Relaxed);
                }
            }
        }
        *self.view.write() = Arc::new(view);
    }

    /// `CLUSTER SETMAP`: parses `text` (`force`: slots may stay unassigned), installs
    /// it and persists it in `dir`. Returns the version and how many slots are fenced.
    pub fn set_map_text(
        &self,
        text: &[u8],
        force: bool,
        dir: Option<&Path>,
        now_ms: u64,
        tokens: &crate::durability::tokens::TokenMark,
    ) -> Result<(u64, usize), String> {
        let map = SlotMap::parse(text, force).map_err(|e| format!("invalid map: {e}"))?;
        let version = map.version;
        // Nodes whose max-ttl this node has never heard are asked now (best effort):
        // a later takeover of their slots needs it.
        let unknown: Vec<(String, String)> = {
            let facts = self.facts.lock();
            (map.nodes.iter())
                .filter(|n| n.id != self.my_id && n.max_ttl_ms.is_none())
                .filter(|n| facts.get(&n.id).is_none_or(|f| f.max_ttl_ms.is_none()))
                .map(|n| (n.id.clone(), n.addr()))
                .collect()
        };
        if !unknown.is_empty() {
            blocking(|| self.ask_many(&unknown, self.view().map.version));
        }
        let fenced = self
            .install(map, now_ms, tokens, |text| match dir {
                Some(dir) => write_durably(dir, text),
                None => Ok(()),
            })
            .map_err(|e| format!("map refused: {e}"))?;
        tracing::info!(version, fenced_slots = fenced, "new cluster map installed");
        // A map pushed by the operator is their word that it is current: a node
        // waiting to confirm its saved map serves this one.
        if !self.confirmed() {
            tracing::info!(
                version,
                "the map was pushed with CLUSTER SETMAP: serving it"
            );
            self.set_confirmed();
        }
        Ok((version, fenced))
    }

    /// At boot (map mode): the map persisted in `dir`, and the `map_file` given at
    /// start when it is newer (installed as `CLUSTER SETMAP` would: fenced, then
    /// persisted). A map that does not parse stops the start.
    pub fn load(
        &self,
        dir: Option<&Path>,
        map_file: Option<&Path>,
        now_ms: u64,
        tokens: &crate::durability::tokens::TokenMark,
    ) -> Result<(), String> {
        if self.mode != Mode::Map {
            if let Some(dir) = dir {
                self.change_mode(dir, now_ms, tokens)?;
            }
            return Ok(());
        }
        if let Some(dir) = dir {
            let path = dir.join(MAP_FILE);
            match std::fs::read(&path) {
                Ok(bytes) => {
                    let (map, fenced) =
                        parse_persisted(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
                    self.restore(map, &fenced, now_ms);
                    // A saved map may have been replaced while this node was down: it
                    // serves no slot until the other nodes confirm it (`confirm`).
                    *self.unconfirmed_why.lock() = format!(
                        "this node started with its saved map (version {}) and has not heard from the other nodes of the map yet",
                        self.view().map.version
                    );
                    (self.confirmed)
                        .store(self.confirm_off.load(Ordering::SeqCst), Ordering::Release);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
            }
        }
        if let Some(file) = map_file {
            let bytes =
                std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            let map =
                SlotMap::parse(&bytes, false).map_err(|e| format!("{}: {e}", file.display()))?;
            if map.version <= self.view().map.version {
                tracing::info!(
                    file = %file.display(),
                    version = map.version,
                    serving = self.view().map.version,
                    "the map file is not newer than the map persisted in the data directory: serving the persisted one"
                );
            } else {
                self.install(map, now_ms, tokens, |text| match dir {
                    Some(dir) => write_durably(dir, text),
                    None => Ok(()),
                })?;
            }
        }
        if let Some(dir) = dir {
            self.change_mode(dir, now_ms, tokens)?;
        }
        // One round before serving: a saved map is confirmed (or replaced by a newer
        // one) now if the other nodes answer, and what they publish is learned.
        if !self.confirm_round(now_ms, tokens, dir) {
            tracing::warn!("{}", self.unconfirmed_why());
        } else {
            let others = self.others();
            self.ask_all(&others, self.view().map.version, tokens);
        }
        Ok(())
    }
}

/// The same version, nodes, addresses and slots (what the nodes published aside).
fn same_layout(a: &SlotMap, b: &SlotMap) -> bool {
    a.version == b.version
        && a.nodes.len() == b.nodes.len()
        && a.nodes.iter().zip(&b.nodes).all(|(x, y)| {
            x.id == y.id && x.host == y.host && x.port == y.port && x.slots == y.slots
        })
}

/// Slots whose deadline is past `now_ms`, as ranges with the ms left.
fn ranges_of(until: &[u64], now_ms: u64) -> Vec<(u16, u16, u64)> {
    let mut out: Vec<(u16, u16, u64)> = Vec::new();
    for (s, &t) in until.iter().enumerate() {
        let s = s as u16;
        if t > now_ms {
            let left = t - now_ms;
            match out.last_mut() {
                Some(last) if last.1 + 1 == s && last.2 == left => last.1 = s,
                _ => out.push((s, s, left)),
            }
        }
    }
    out
}

/// The bound this node publishes above every token it can have handed out: its
/// durable reservation plus `RESTORE_LEAD` (a node restarted after a crash resumes
/// at its reservation, and hands out far fewer than 2^32 tokens between the times its
/// peers hear from it).
pub fn own_token_bound(tokens: &crate::durability::tokens::TokenMark) -> u64 {
    tokens
        .reserved()
        .max(tokens.get())
        .saturating_add(crate::durability::tokens::RESTORE_LEAD)
        .min(crate::durability::tokens::MAX_TOKEN)
}

/// Writes the map file in `dir` atomically (`durability::atomic_write`).
pub fn write_durably(dir: &Path, text: &str) -> std::io::Result<()> {
    crate::durability::atomic_write(&dir.join(MAP_FILE), text.as_bytes())
}

/// A pending fence as persisted: first slot, last slot, ms left.
pub type FencedRange = (u16, u16, u64);

/// The text persisted in the data directory: the map and its pending fences
/// (`[first, last, ms]`).
pub fn persisted_text(map: &SlotMap, fenced: &[(u16, u16, u64)]) -> String {
    let mut v: serde_json::Value = serde_json::from_str(&map.to_json()).unwrap_or_default();
    v["fenced_slots"] = serde_json::json!(fenced
        .iter()
        .map(|&(a, b, ms)| vec![u64::from(a), u64::from(b), ms])
        .collect::<Vec<_>>());
    v.to_string()
}

/// Reads what `persisted_text` wrote: the map (forced: it was accepted once) and its
/// pending fences.
pub fn parse_persisted(text: &[u8]) -> Result<(SlotMap, Vec<FencedRange>), String> {
    let mut v: serde_json::Value =
        serde_json::from_slice(text).map_err(|e| format!("not JSON: {e}"))?;
    let fenced = v
        .as_object_mut()
        .and_then(|o| o.remove("fenced_slots"))
        .and_then(|f| {
            f.as_array().map(|l| {
                l.iter()
                    .filter_map(|r| {
                        let a = r.get(0)?.as_u64()?;
                        let b = r.get(1)?.as_u64()?;
                        // 0: written before fences had their own length (restore
                        // then uses this node's max-ttl + margin).
                        let ms = r.get(2).and_then(|m| m.as_u64()).unwrap_or(0);
                        (a <= b && b < SLOTS as u64).then_some((a as u16, b as u16, ms))
                    })
                    .collect()
            })
        })
        .unwrap_or_default();
    let map = SlotMap::parse(v.to_string().as_bytes(), true)?;
    Ok((map, fenced))
}
