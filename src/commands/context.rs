//! The state a command runs against: the server's `Shared` state, the calling client's
//! `ClientState`, and the time of the call.

use crate::clock::Clock;
use crate::config::Config;
use crate::fence::Fence;
use crate::protocol::Reply;
use crate::store::{Db, Keyspace};
use bytes::Bytes;
use dashmap::DashMap;
use parking_lot::Mutex;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{watch, Notify};

/// Everything one server shares between its connections.
pub struct Shared {
    pub config: Config,
    pub clock: Clock,
    pub keyspace: Keyspace,
    pub fence: Fence,
    pub clients: DashMap<u64, Arc<ClientInfo>>,
    pub stats: Stats,
    pub next_client_id: AtomicU64,
    /// `--maxclients`, changed by CONFIG SET.
    maxclients: AtomicUsize,
    /// Monotonic ms at boot (or at the last crash-restart).
    pub started_ms: AtomicU64,
    pub run_id: String,
    /// Set by DEBUG SET-ACTIVE-EXPIRE; the sweeper skips its passes while false.
    pub active_expire: AtomicBool,
    /// Woken to stop the server (SHUTDOWN, a signal, `ServerHandle::shutdown`).
    pub shutdown: Notify,
    pub shutting_down: AtomicBool,
    /// Whether the node is reachable: test fault controls move it (pause, isolate...).
    pub net: watch::Sender<NetState>,
    /// `net` as a plain atomic, read before every request (see `begin_request`).
    net_now: AtomicU8,
    /// Whether the listener is bound (it follows `net` with a delay: tests wait on it).
    pub listening: watch::Sender<bool>,
    /// Hands out `ClientInfo::paused_ticket`s.
    pub pause_tickets: AtomicU64,
    /// Woken when a connection has run its paused backlog (or gone away).
    pub pause_turn: Notify,
    /// Clients blocked in BLPOP/BRPOP and the keys ready to serve them.
    pub blocking: super::blocking::Blocking,
    /// Channel and pattern subscriptions.
    pub pubsub: super::pubsub::PubSub,
    /// Script cache, Lua VM and the running script.
    pub scripts: crate::scripting::Scripts,
    /// The data directory (`--dir`), locked while the node runs; `None`: memory only.
    pub node_dir: Option<Arc<crate::durable::NodeDir>>,
    /// The fencing-token high-water mark (FENCING.GRANT / FENCING.COMMIT).
    pub tokens: crate::tokens::TokenMark,
    /// How the node last booted (restored a snapshot, or raised the fence).
    pub last_boot: Mutex<crate::restart::BootKind>,
    /// Cleared by SHUTDOWN NOSAVE: the next boot then raises the fence.
    pub save_on_shutdown: AtomicBool,
    /// The keyspace gate: taken only through `commands::atomic`.
    pub gate: super::atomic::Gate,
}

/// A node's reachability, for fault injection (see `testing`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetState {
    /// Accepting and answering.
    Up,
    /// Like SIGSTOP or a long GC pause: connections stay open, nothing is answered,
    /// new connections are accepted but, like a stopped process's backlog, only
    /// buffered until the node resumes.
    Paused,
    /// Off the network: the listener is closed (connections refused) and every
    /// connection is dropped.
    Down,
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
            Some(path) => Some(Arc::new(crate::durable::NodeDir::open(path)?)),
            None => None,
        };
        let shared = Shared::build(config, node_dir);
        crate::restart::boot(&shared, true);
        Ok(shared)
    }

    fn build(config: Config, node_dir: Option<Arc<crate::durable::NodeDir>>) -> Shared {
        let clock = config.clock.clone().unwrap_or_else(Clock::real);
        let now = clock.now_ms();
        let fence = Fence::new(
            now,
            config.effective_restart_delay().as_millis() as u64,
            config.max_ttl.as_millis() as u64,
            config.require_ttl,
        );
        if !config.fence_at_boot {
            fence.lift();
        }
        let seed = config.seed.unwrap_or_else(rand::random);
        let run_id = {
            use rand::{Rng, SeedableRng};
            let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
            (0..40)
                .map(|_| char::from(b"0123456789abcdef"[rng.random_range(0..16)]))
                .collect()
        };
        Shared {
            keyspace: Keyspace::new(config.databases, seed),
            fence,
            clients: DashMap::new(),
            stats: Stats::new(table::COMMANDS.len()),
            next_client_id: AtomicU64::new(1),
            maxclients: AtomicUsize::new(config.maxclients),
            started_ms: AtomicU64::new(now),
            run_id,
            active_expire: AtomicBool::new(true),
            shutdown: Notify::new(),
            shutting_down: AtomicBool::new(false),
            net: watch::Sender::new(NetState::Up),
            net_now: AtomicU8::new(NetState::Up as u8),
            listening: watch::Sender::new(true),
            pause_tickets: AtomicU64::new(0),
            pause_turn: Notify::new(),
            blocking: super::blocking::Blocking::new(),
            pubsub: super::pubsub::PubSub::new(),
            scripts: crate::scripting::Scripts::new(
                config.busy_script_time.as_millis() as u64,
                config.seed,
            ),
            tokens: crate::tokens::TokenMark::new(node_dir.clone()),
            node_dir,
            last_boot: Mutex::new(crate::restart::BootKind::Fresh),
            save_on_shutdown: AtomicBool::new(true),
            gate: super::atomic::Gate::new(),
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

    /// What a crash and restart would do: every key forgotten, every client
    /// disconnected, and the restart fence started again on the same clock.
    pub fn crash_restart(&self) {
        self.boot();
        self.kill_clients_except(None);
    }

    /// What a fresh process starts with: an empty keyspace and the restart fence, or
    /// the keys of a clean-shutdown snapshot if one was just written (`restart`).
    pub fn boot(&self) -> crate::restart::BootKind {
        crate::restart::boot(self, false)
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

    /// Moves the node to `state`; going `Down` drops every connection. Once this
    /// returns, a node that is not `Up` executes nothing: a request that began before
    /// has finished (bounded wait), and every later one sees the new state first.
    pub fn set_net(&self, state: NetState) {
        self.net_now.store(state as u8, Ordering::SeqCst);
        self.net.send_replace(state);
        if state == NetState::Down {
            self.kill_clients();
        }
        if state != NetState::Up {
            self.wait_for_requests_in_progress();
        }
    }

    /// Marks `client` as executing a request, if the node is up; the guard clears the
    /// mark. Paired with `set_net` (both sides store, then load, all SeqCst): either
    /// the request sees the new state and does not run, or `set_net` sees the mark and
    /// waits for the request to finish.
    pub fn begin_request<'c>(&self, client: &'c ClientInfo) -> Result<Executing<'c>, NetState> {
        client.executing.store(true, Ordering::SeqCst);
        let state = match self.net_now.load(Ordering::SeqCst) {
            // A connection the node dropped (going down, killed) never runs more, even
            // if the node is back up before its task noticed.
            _ if client.killed.load(Ordering::SeqCst) => NetState::Down,
            s if s == NetState::Up as u8 => return Ok(Executing(client)),
            s if s == NetState::Paused as u8 => NetState::Paused,
            _ => NetState::Down,
        };
        client.executing.store(false, Ordering::SeqCst);
        Err(state)
    }

    /// Waits (up to a second: a script may run long) until no connection is inside a
    /// request. Requests run synchronously on a worker, so this waits microseconds.
    fn wait_for_requests_in_progress(&self) {
        let deadline = Instant::now() + std::time::Duration::from_secs(1);
        while self
            .clients
            .iter()
            .any(|c| c.executing.load(Ordering::SeqCst))
            && Instant::now() < deadline
        {
            std::thread::yield_now();
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

use super::stats::Stats;
use super::table;

/// What other connections may see of a client (CLIENT LIST, INFO clients) and the
/// handle to disconnect it.
pub struct ClientInfo {
    pub id: u64,
    pub addr: SocketAddr,
    pub laddr: SocketAddr,
    pub created_ms: u64,
    pub last_active_ms: AtomicU64,
    pub name: Mutex<Option<Bytes>>,
    pub lib_name: Mutex<Option<Bytes>>,
    pub lib_ver: Mutex<Option<Bytes>>,
    /// The last command run, as its `Spec::index` + 1 (0: none yet). An atomic rather
    /// than a lock: it is written by every command and read only by CLIENT LIST.
    last_cmd: AtomicUsize,
    pub db: AtomicUsize,
    pub resp: AtomicU8,
    /// Set to disconnect the client (CLIENT KILL, crash-restart, output limit).
    pub killed: AtomicBool,
    pub kill: Notify,
    /// Input read but not yet executed (lets a test wait for a resumed node to catch up).
    pub has_input: AtomicBool,
    /// When input first arrived while the node was paused (a ticket from
    /// `Shared::pause_tickets`; 0: none). On resume, connections run their backlog in
    /// ticket order, so a paused node replays requests in the order they arrived.
    pub paused_ticket: AtomicU64,
    /// Inside a request (see `Shared::begin_request`).
    executing: AtomicBool,
}

/// A request in progress on a connection (see `Shared::begin_request`).
pub struct Executing<'c>(&'c ClientInfo);

impl Drop for Executing<'_> {
    fn drop(&mut self) {
        self.0.executing.store(false, Ordering::SeqCst);
    }
}

impl ClientInfo {
    pub fn new(id: u64, addr: SocketAddr, laddr: SocketAddr, now_ms: u64) -> ClientInfo {
        ClientInfo {
            id,
            addr,
            laddr,
            created_ms: now_ms,
            last_active_ms: AtomicU64::new(now_ms),
            name: Mutex::new(None),
            lib_name: Mutex::new(None),
            lib_ver: Mutex::new(None),
            last_cmd: AtomicUsize::new(0),
            db: AtomicUsize::new(0),
            resp: AtomicU8::new(2),
            killed: AtomicBool::new(false),
            kill: Notify::new(),
            has_input: AtomicBool::new(false),
            paused_ticket: AtomicU64::new(0),
            executing: AtomicBool::new(false),
        }
    }

    /// Records `spec` as the client's last command, run at `now_ms`.
    pub fn touch(&self, spec: &table::Spec, now_ms: u64) {
        self.last_cmd.store(spec.index + 1, Ordering::Relaxed);
        self.last_active_ms.store(now_ms, Ordering::Relaxed);
    }

    /// The name of the last command run ("NULL" before the first), for CLIENT LIST.
    pub fn last_cmd(&self) -> &'static str {
        match self.last_cmd.load(Ordering::Relaxed) {
            0 => "NULL",
            i => table::COMMANDS.get(i - 1).map_or("NULL", |s| s.name),
        }
    }

    /// Disconnects the client at its next chance.
    pub fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        self.kill.notify_one();
    }
}

/// A connection's own state, owned by its task.
pub struct ClientState {
    pub info: Arc<ClientInfo>,
    pub db: usize,
    /// 2 or 3, set by HELLO.
    pub proto: u8,
    pub authed: bool,
    /// Close the connection after this reply is written (QUIT, protocol errors).
    pub close_after_reply: bool,
    /// Set by BLPOP/BRPOP when they must wait: the connection awaits it before
    /// reading further requests, and sends the reply itself.
    pub blocked: Option<super::blocking::Blocked>,
    /// The channels and patterns this client subscribes to; RESP2 clients with any are
    /// in subscribed mode.
    pub pubsub: super::pubsub::ClientSubs,
    /// The transaction being queued, between MULTI and EXEC / DISCARD.
    pub multi: Option<super::multi::Transaction>,
    /// The keys WATCHed and the flag writes to them set.
    pub watch: super::multi::Watching,
}

impl ClientState {
    pub fn new(info: Arc<ClientInfo>, authed: bool) -> ClientState {
        ClientState {
            info,
            db: 0,
            proto: 2,
            authed,
            close_after_reply: false,
            blocked: None,
            pubsub: Default::default(),
            multi: None,
            watch: Default::default(),
        }
    }

    pub fn id(&self) -> u64 {
        self.info.id
    }

    pub fn resp2_subscribed(&self) -> bool {
        self.proto == 2 && self.subscriptions() > 0
    }

    /// Subscribed channels plus patterns.
    pub fn subscriptions(&self) -> usize {
        self.pubsub.channels.len() + self.pubsub.patterns.len()
    }

    pub fn set_proto(&mut self, proto: u8) {
        self.proto = proto;
        self.info.resp.store(proto, Ordering::Relaxed);
    }

    pub fn select(&mut self, db: usize) {
        self.db = db;
        self.info.db.store(db, Ordering::Relaxed);
    }
}

/// One command's view: the server, the caller, and the time the command started
/// (a script sees one time for its whole run, as in Redis).
pub struct Ctx<'a> {
    pub shared: &'a Shared,
    pub client: &'a mut ClientState,
    pub now_ms: u64,
    pub in_script: bool,
    /// Running a transaction's queue (EXEC): commands never block.
    pub in_exec: bool,
    /// The real-clock reading `now_ms` was taken from: the start of the command's
    /// duration (INFO commandstats), so a command reads the system clock once to start.
    started: Instant,
}

impl<'a> Ctx<'a> {
    pub fn new(shared: &'a Shared, client: &'a mut ClientState) -> Ctx<'a> {
        let started = Instant::now();
        Ctx {
            shared,
            client,
            now_ms: shared.clock.now_ms_at(started),
            in_script: false,
            in_exec: false,
            started,
        }
    }

    /// Reads the clock again: for a command that waited (for the keyspace gate) after
    /// its context was made, so neither its time nor its duration includes the wait.
    pub fn restart_clock(&mut self) {
        self.started = Instant::now();
        self.now_ms = self.shared.clock.now_ms_at(self.started);
    }

    /// When the command started on the real clock (see `started`).
    pub(crate) fn started(&self) -> Instant {
        self.started
    }

    /// Whether a command may block the client (BLPOP): not inside a script or EXEC,
    /// where it answers as if its timeout had passed.
    pub fn may_block(&self) -> bool {
        !self.in_script && !self.in_exec
    }

    /// The caller's selected database.
    pub fn db(&self) -> &'a Db {
        self.shared.keyspace.db(self.client.db)
    }

    /// The monotonic deadline for a TTL of `ttl_ms` from now, after the max-ttl check.
    pub fn deadline_after(&self, ttl_ms: i64) -> Result<u64, Reply> {
        if let Err(e) = self.shared.fence.check_ttl(ttl_ms) {
            self.shared
                .stats
                .locks
                .above_max_ttl
                .fetch_add(1, Ordering::Relaxed);
            return Err(e);
        }
        Ok((self.now_ms as i64).saturating_add(ttl_ms).max(0) as u64)
    }

    /// The monotonic deadline for a Unix-ms instant, after the max-ttl check. An
    /// instant in the past gives a deadline in the past (the key expires at once).
    pub fn deadline_at_wall(&self, unix_ms: i64) -> Result<u64, Reply> {
        let ttl = unix_ms.saturating_sub(self.shared.clock.wall_ms());
        self.deadline_after(ttl.max(-(self.now_ms as i64)))
    }
}
