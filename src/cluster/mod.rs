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

pub mod map;
pub use crate::slot;

use crate::protocol::Reply;
use map::{SlotMap, UNASSIGNED};
use parking_lot::{Mutex, RwLock};
use slot::{key_slot, SLOTS};
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

/// What the node serves now: the map, its own place in it, and the slots it fences.
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
    /// How long a taken-over slot is fenced.
    fence_ms: u64,
    /// Test hook: the move fence off (the mutual-exclusion checker must then find
    /// overlaps).
    fence_off: AtomicBool,
    pub moved: AtomicU64,
    pub crossslot: AtomicU64,
    pub clusterdown: AtomicU64,
}

/// Why a command may not run here.
pub enum Refusal {
    CrossSlot,
    Moved(u16, String),
    Unassigned,
}

impl Refusal {
    pub fn reply(&self) -> Reply {
        match self {
            Refusal::CrossSlot => {
                Reply::error("CROSSSLOT Keys in request don't hash to the same slot")
            }
            Refusal::Moved(slot, addr) => Reply::error(format!("MOVED {slot} {addr}")),
            Refusal::Unassigned => Reply::error("CLUSTERDOWN Hash slot not served"),
        }
    }
}

impl Cluster {
    /// `port` is the bound port; `fence_ms` the move fence's length.
    pub fn new(
        config: &ClusterConfig,
        my_id: String,
        bind: std::net::IpAddr,
        port: u16,
        fence_ms: u64,
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
        Cluster {
            mode: config.mode,
            view: RwLock::new(Arc::new(View::new(map, &my_id))),
            my_id,
            announce: (host, port),
            any_fenced: AtomicBool::new(false),
            installing: Mutex::new(()),
            fence_ms,
            fence_off: AtomicBool::new(false),
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

    /// Installs a map: refused unless it is newer than the current one. Slots this
    /// node gains are fenced (unless this is the cluster's first map, version 1, on a
    /// node that had none: nobody served them before), and the token mark is raised
    /// above every token a node of an older map can have given. `persist` writes the
    /// map (durably) before it takes effect. Returns the number of slots fenced.
    pub fn install(
        &self,
        map: SlotMap,
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
        if map.version <= old.map.version {
            return Err(format!(
                "map version {} is not newer than this node's {}",
                map.version, old.map.version
            ));
        }
        let mut next = View::new(map, &self.my_id);
        let first = old.map.nodes.is_empty() && next.map.version == 1;
        let mut fenced = 0;
        if let Some(me) = next.me {
            for s in 0..SLOTS {
                let carried = old.fenced_until[s];
                if next.map.owner[s] != me {
                    continue;
                }
                if !old.owns(s as u16) && !first && !self.fence_off.load(Ordering::Relaxed) {
                    next.fenced_until[s] = now_ms + self.fence_ms;
                    fenced += 1;
                } else if carried > now_ms {
                    next.fenced_until[s] = carried;
                }
            }
        }
        if fenced > 0 {
            tokens
                .raise(next.map.version << map::TOKEN_SHIFT)
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

    /// At boot: the map persisted in the data directory, served as it was, except that
    /// a fence the map file records as pending is raised again for its full length
    /// (the monotonic clock does not survive a restart).
    pub fn restore(&self, map: SlotMap, fenced: &[(u16, u16)], now_ms: u64) {
        let mut view = View::new(map, &self.my_id);
        for &(a, b) in fenced {
            for s in a..=b {
                if view.owns(s) {
                    view.fenced_until[usize::from(s)] = now_ms + self.fence_ms;
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
        let fenced = self
            .install(map, now_ms, tokens, |text| match dir {
                Some(dir) => write_durably(dir, text),
                None => Ok(()),
            })
            .map_err(|e| format!("map refused: {e}"))?;
        tracing::info!(version, fenced_slots = fenced, "new cluster map installed");
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
            return Ok(());
        }
        if let Some(dir) = dir {
            let path = dir.join(MAP_FILE);
            match std::fs::read(&path) {
                Ok(bytes) => {
                    let (map, fenced) =
                        parse_persisted(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
                    self.restore(map, &fenced, now_ms);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
            }
        }
        let Some(file) = map_file else {
            return Ok(());
        };
        let bytes =
            std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let map = SlotMap::parse(&bytes, false).map_err(|e| format!("{}: {e}", file.display()))?;
        if map.version <= self.view().map.version {
            tracing::info!(
                file = %file.display(),
                version = map.version,
                serving = self.view().map.version,
                "the map file is not newer than the map persisted in the data directory: serving the persisted one"
            );
            return Ok(());
        }
        self.install(map, now_ms, tokens, |text| match dir {
            Some(dir) => write_durably(dir, text),
            None => Ok(()),
        })?;
        Ok(())
    }
}

/// Slots whose deadline is past `now_ms`, as ranges.
fn ranges_of(until: &[u64], now_ms: u64) -> Vec<(u16, u16)> {
    let mut out: Vec<(u16, u16)> = Vec::new();
    for (s, &t) in until.iter().enumerate() {
        let s = s as u16;
        if t > now_ms {
            match out.last_mut() {
                Some(last) if last.1 + 1 == s => last.1 = s,
                _ => out.push((s, s)),
            }
        }
    }
    out
}

/// Writes the map file in `dir` atomically (`durability::atomic_write`).
pub fn write_durably(dir: &Path, text: &str) -> std::io::Result<()> {
    crate::durability::atomic_write(&dir.join(MAP_FILE), text.as_bytes())
}

/// The text persisted in the data directory: the map and its pending fences.
pub fn persisted_text(map: &SlotMap, fenced: &[(u16, u16)]) -> String {
    let mut v: serde_json::Value = serde_json::from_str(&map.to_json()).unwrap_or_default();
    v["fenced_slots"] =
        serde_json::json!(fenced.iter().map(|&(a, b)| vec![a, b]).collect::<Vec<_>>());
    v.to_string()
}

/// Reads what `persisted_text` wrote: the map (forced: it was accepted once) and its
/// pending fences.
pub fn parse_persisted(text: &[u8]) -> Result<(SlotMap, Vec<(u16, u16)>), String> {
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
                        (a <= b && b < SLOTS as u64).then_some((a as u16, b as u16))
                    })
                    .collect()
            })
        })
        .unwrap_or_default();
    let map = SlotMap::parse(v.to_string().as_bytes(), true)?;
    Ok((map, fenced))
}
