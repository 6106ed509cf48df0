//! `Shared`: everything one server shares between its connections (keyspace, fence,
//! clock, client registry, scripts, stats, ...), how it is built and booted, and the
//! server-wide controls (crash-restart, shutdown, disconnecting clients).

use super::clients::ClientInfo;
use super::stats::Stats;
use crate::clock::Clock;
use crate::commands::command_table;
use crate::config::Config;
use crate::durability::fence::Fence;
use crate::store::Keyspace;
use dashmap::DashMap;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

/// One node's state: everything its connections share (config, clock, keyspace, the
/// restart fence, clients, ACL, pub/sub, scripts, the data directory, the test
/// backend's faults, stats). One per running node (`Server::start` makes it; an
/// in-process group has one per node); every command sees it through `Ctx`.
pub struct Shared {
    pub config: Config,
    pub clock: Clock,
    pub keyspace: Keyspace,
    pub fence: Fence,
    pub clients: DashMap<u64, Arc<ClientInfo>>,
    /// Network connections open now (the in-memory session is none): a connection
    /// with company writes its replies after the others' (`server::connection`).
    pub connections: AtomicUsize,
    pub stats: Stats,
    pub next_client_id: AtomicU64,
    /// `--maxclients`, changed by CONFIG SET.
    maxclients: AtomicUsize,
    /// `--maxmemory` in bytes (0: no limit), changed by CONFIG SET.
    maxmemory: AtomicU64,
    /// Whether used memory was above maxmemory at the last check (logged on change).
    over_maxmemory: AtomicBool,
    /// `hll-sparse-max-bytes` (CONFIG SET): the longest sparse HyperLogLog.
    pub hll_sparse_max_bytes: AtomicU64,
    /// Monotonic ms at boot (or at the last crash-restart).
    pub started_ms: AtomicU64,
    pub run_id: String,
    /// Set by DEBUG SET-ACTIVE-EXPIRE; the sweeper skips its passes while false.
    pub active_expire: AtomicBool,
    /// Set by DEBUG SET-DISABLE-DENY-SCRIPTS: scripts may call NOSCRIPT commands.
    pub scripts_may_call_anything: AtomicBool,
    /// Woken to stop the server (SHUTDOWN, a signal, `ServerHandle::shutdown`).
    pub shutdown: Notify,
    pub shutting_down: AtomicBool,
    /// The test backend's network faults (pause, isolate, stop): see `faults`.
    pub faults: super::faults::Faults,
    /// Clients blocked in BLPOP/BRPOP and the keys ready to serve them.
    pub blocking: crate::commands::exec::blocking::Blocking,
    /// Stream node sizes (CONFIG SET stream-node-max-entries / -bytes).
    pub streams: crate::commands::families::streams::StreamConfig,
    /// Channel and pattern subscriptions.
    pub pubsub: crate::commands::families::pubsub::PubSub,
    /// Script cache, Lua VM and the running script.
    pub scripts: crate::scripting::Scripts,
    /// The data directory (`--dir`), locked while the node runs; `None`: memory only.
    pub node_dir: Option<Arc<crate::durability::data_dir::NodeDir>>,
    /// The append-only log of durable keys (`durability::aof`); off without
    /// `appendonly` or a data directory.
    pub aof: crate::durability::aof::Aof,
    /// The fencing-token high-water mark (FENCING.GRANT / FENCING.COMMIT).
    pub tokens: crate::durability::tokens::TokenMark,
    /// How far granted locks reach, recorded before each grant (the restart fence's
    /// measure).
    pub reach: crate::durability::reach::Reach,
    /// How the node last booted (restored a snapshot, or raised the fence).
    pub last_boot: Mutex<crate::durability::restart::BootKind>,
    /// Cleared by SHUTDOWN NOSAVE: the next boot then raises the fence.
    pub save_on_shutdown: AtomicBool,
    /// The keyspace gate: taken only through `commands::exec::gate`.
    pub gate: crate::commands::exec::gate::Gate,
    /// ACL users (the default user's password from requirepass) and the ACL log.
    pub acl: crate::acl::Acl,
    /// Redis Cluster's protocol: the slot map and the routing check (`cluster`).
    pub cluster: crate::cluster::Cluster,
    /// `notify-keyspace-events` (`commands::notify`).
    pub notify: crate::commands::notify::Notify,
    /// Lock introspection's side table and counters (`commands::families::locks`).
    pub locks: crate::commands::families::locks::Locks,
    /// The clients in MONITOR mode (`commands::admin::monitor`).
    pub monitors: crate::commands::admin::monitor::Monitors,
    /// The Redis settings CONFIG SET stores without applying them.
    pub redis_settings: crate::commands::admin::redis_settings::Stored,
}

impl Shared {
    /// `open`, for configs that cannot fail to open (no data directory, as in benches).
    /// Panics with the reason when the data directory cannot be used.
    pub fn new(config: Config) -> Shared {
        Shared::open(config).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Opens the data directory (if any) and boots: a clean-shutdown snapshot is
    /// restored, or the restart fence raised (see `restart`).
    pub fn open(config: Config) -> std::io::Result<Shared> {
        let node_dir = match &config.dir {
            Some(path) => Some(Arc::new(crate::durability::data_dir::NodeDir::open(path)?)),
            None => None,
        };
        let shared = Shared::build(config, node_dir);
        let notify = crate::commands::notify::parse(&shared.config.notify_keyspace_events);
        crate::commands::notify::configure(&shared, notify.unwrap_or(0));
        crate::durability::restart::boot(&shared, true)?;
        shared
            .cluster
            .load(
                shared.node_dir.as_ref().map(|d| d.path()),
                shared.config.cluster.map_file.as_deref(),
                shared.clock.now_ms(),
                &shared.tokens,
            )
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        Ok(shared)
    }

    fn build(
        config: Config,
        node_dir: Option<Arc<crate::durability::data_dir::NodeDir>>,
    ) -> Shared {
        let clock = config.clock.clone().unwrap_or_else(Clock::real);
        let now = clock.now_ms();
        let fence = Fence::new(
            now,
            config.effective_restart_delay().as_millis() as u64,
            config.max_ttl.as_millis() as u64,
            config.require_ttl,
        );
        if config.aof_enabled() {
            fence.set_durable_above(config.aof.memory_only_ttl.as_millis() as u64);
        }
        let seed = config.seed.unwrap_or_else(rand::random);
        let run_id: String = {
            use rand::{Rng, SeedableRng};
            let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
            (0..40)
                .map(|_| char::from(b"0123456789abcdef"[rng.random_range(0..16)]))
                .collect()
        };
        let cluster_id = config
            .cluster
            .node_id
            .clone()
            .unwrap_or_else(|| match &node_dir {
                Some(dir) => crate::scripting::sha1hex(&dir.state().node_id),
                None => run_id.clone(),
            });
        let cluster = crate::cluster::Cluster::new(
            &config.cluster,
            cluster_id,
            config.bind,
            config.port,
            config.max_ttl.as_millis() as u64,
            crate::config::RESTART_MARGIN.as_millis() as u64,
            clock.clone(),
        );
        let keyspace = Keyspace::new(config.databases, seed);
        keyspace.lock_delay().set(
            config.lock_delay.as_millis() as u64,
            (config.lock_delay_prefixes.iter())
                .map(|p| bytes::Bytes::copy_from_slice(p.as_bytes()))
                .collect(),
        );
        Shared {
            cluster,
            notify: Default::default(),
            monitors: Default::default(),
            locks: crate::commands::families::locks::Locks::new(config.lock_introspection),
            redis_settings: Default::default(),
            keyspace,
            fence,
            clients: DashMap::new(),
            connections: AtomicUsize::new(0),
            stats: Stats::new(command_table::COMMANDS.len()),
            next_client_id: AtomicU64::new(1),
            maxclients: AtomicUsize::new(config.maxclients),
            maxmemory: AtomicU64::new(config.maxmemory),
            over_maxmemory: AtomicBool::new(false),
            hll_sparse_max_bytes: AtomicU64::new(3000),
            started_ms: AtomicU64::new(now),
            run_id,
            active_expire: AtomicBool::new(true),
            scripts_may_call_anything: AtomicBool::new(false),
            shutdown: Notify::new(),
            shutting_down: AtomicBool::new(false),
            faults: super::faults::Faults::new(),
            blocking: crate::commands::exec::blocking::Blocking::new(),
            streams: Default::default(),
            pubsub: crate::commands::families::pubsub::PubSub::new(),
            scripts: crate::scripting::Scripts::new(
                config.busy_script_time.as_millis() as u64,
                config.seed,
            ),
            aof: crate::durability::aof::Aof::new(&config),
            tokens: crate::durability::tokens::TokenMark::new(node_dir.clone()),
            reach: crate::durability::reach::Reach::new(&clock, node_dir.clone()),
            node_dir,
            last_boot: Mutex::new(crate::durability::restart::BootKind::Fresh),
            save_on_shutdown: AtomicBool::new(true),
            gate: crate::commands::exec::gate::Gate::new(),
            acl: crate::acl::Acl::new(config.requirepass.as_deref()),
            clock,
            config,
        }
    }

    /// Most clients connected at once (`--maxclients`, CONFIG SET maxclients).
    pub fn maxclients(&self) -> usize {
        self.maxclients.load(Ordering::Relaxed)
    }

    pub fn set_maxclients(&self, n: usize) {
        self.maxclients.store(n, Ordering::Relaxed);
    }

    /// `--maxmemory` in bytes; 0: no limit.
    pub fn maxmemory(&self) -> u64 {
        self.maxmemory.load(Ordering::Relaxed)
    }

    pub fn set_maxmemory(&self, bytes: u64) {
        self.maxmemory.store(bytes, Ordering::Relaxed);
    }

    /// Whether used memory is above --maxmemory now: commands that may grow memory
    /// are refused with OOM, and nothing is evicted. Logs when the state changes.
    pub fn over_maxmemory(&self) -> bool {
        let max = self.maxmemory();
        if max == 0 {
            return false;
        }
        let used = crate::alloc::used_memory() as u64;
        let over = used > max;
        if self.over_maxmemory.swap(over, Ordering::Relaxed) != over {
            if over {
                tracing::warn!(
                    used_bytes = used,
                    maxmemory = max,
                    "used memory is above maxmemory: writes that may grow memory get OOM (nothing is evicted)"
                );
            } else {
                tracing::info!(
                    used_bytes = used,
                    maxmemory = max,
                    "used memory is back under maxmemory"
                );
            }
        }
        over
    }

    /// What a crash and restart would do: every key forgotten, every client
    /// disconnected, and the restart fence started again on the same clock.
    pub fn crash_restart(&self) {
        self.boot();
        self.kill_clients_except(None);
    }

    /// What a fresh process starts with: an empty keyspace and the restart fence, or
    /// the keys of a clean-shutdown snapshot if one was just written (`restart`).
    /// If this boot cannot be recorded durably, the node stays up (a test's or a
    /// DEBUG restart's process keeps running) but fenced for max-ttl and refusing every
    /// grant: a process start fails instead (`open`).
    pub fn boot(&self) -> crate::durability::restart::BootKind {
        use crate::durability::{fence::FenceRule, restart::BootKind};
        match crate::durability::restart::boot(self, false) {
            Ok(kind) => kind,
            Err(e) => {
                tracing::error!("{e}");
                self.reach.set_broken();
                if let Some(dir) = &self.node_dir {
                    if let Err(e) = dir.remove_snapshot() {
                        tracing::error!("cannot remove the snapshot either: {e}");
                    }
                }
                let len = (self.fence.max_ttl_ms()
                    + crate::config::RESTART_MARGIN.as_millis() as u64)
                    .max(self.fence.delay_ms());
                self.fence
                    .raise(self.clock.now_ms(), len, FenceRule::NoHistory);
                *self.last_boot.lock() = BootKind::Fenced;
                BootKind::Fenced
            }
        }
    }

    pub fn kill_clients(&self) {
        self.kill_clients_except(None);
    }

    /// Disconnects every client but `keep` (which the caller closes after its reply).
    pub fn kill_clients_except(&self, keep: Option<u64>) {
        for c in self.clients.iter() {
            if Some(c.id) != keep {
                c.kill();
            }
        }
    }

    /// Asks the server to stop.
    pub fn request_shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        // A script looping forever would otherwise keep its thread busy past shutdown.
        self.scripts.kill_for_shutdown();
        self.shutdown.notify_waiters();
    }
}
