//! A deterministic test backend: in-process servers on a manual clock, with the faults
//! a Redlock deployment meets (crash-restart, stop/start, pause, partition, wall-clock
//! jumps), and groups of them sharing one clock.
//!
//! ```no_run
//! # async fn demo() {
//! use redlockd::testing::TestGroup;
//! use std::time::Duration;
//! let group = TestGroup::start(5).await;
//! let urls = group.urls(); // hand these to any Redis client
//! group.node(0).crash_restart(); // node 0 forgets its keys; its fence goes up
//! group.advance(Duration::from_secs(31)); // TTLs and fences move; no sleeping
//! # }
//! ```

#[doc(hidden)]
pub mod harness;

pub use crate::node::faults::scoped::{
    Action, ClientRef, DelayClock, Exchange, FaultError, FaultSpec, FaultStatus, Firing, Outcome,
    Scope, LOADING, TRYAGAIN,
};
/// The replies a history records.
pub use crate::protocol::Reply;

use crate::config::Config;
use crate::durability::restart::BootKind;
use crate::node::{NetState, Shared};
use crate::server::{Server, ServerHandle, StartError};
use crate::Clock;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// One in-process node on 127.0.0.1 with a manual clock.
pub struct TestServer {
    handle: ServerHandle,
    /// The node's data directory when the test did not give one: removed on drop.
    _dir: Option<TempDir>,
}

/// A directory under the system's temp dir, removed with everything in it on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        let path = std::env::temp_dir().join(format!(
            "redlockd-test-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl TestServer {
    /// A node with its own manual clock. The restart fence is down at first boot (no
    /// client can hold a lock from before) and goes up on every restart.
    pub async fn start() -> TestServer {
        TestServer::start_with(TestServer::config(Clock::manual())).await
    }

    /// The config `start` uses, on `clock`: port 0, max-ttl 30 s, fence of max-ttl +
    /// 1 s on restarts only, DEBUG enabled, seed 1, the log and the cluster lease off.
    pub fn config(clock: Clock) -> Config {
        Config {
            port: 0,
            max_ttl: crate::config::TEST_MAX_TTL,
            clock: Some(clock),
            fence_at_boot: false,
            enable_debug_command: true,
            seed: Some(1),
            // A crash forgets every key, as the test backend has always done; a test
            // of the append-only log turns it on.
            aof: crate::config::AofConfig {
                appendonly: false,
                ..Default::default()
            },
            // The cluster lease runs on real time: off, so that a run on the manual
            // clock repeats (`cluster::lease`); a test of the lease sets a timeout.
            cluster: crate::config::ClusterConfig {
                node_timeout: Some(Duration::ZERO),
                ..Default::default()
            },
            ..Config::default()
        }
    }

    /// A node with any config. A config without a clock gets a manual one; one
    /// without a data directory gets a temporary one, removed when the node is dropped.
    pub async fn start_with(config: Config) -> TestServer {
        TestServer::try_start_with(config)
            .await
            .expect("a test server binds 127.0.0.1:0 and opens its directory")
    }

    /// `start_with`, returning why the node could not start (a bad config, a
    /// directory it cannot open) instead of panicking.
    pub async fn try_start_with(mut config: Config) -> Result<TestServer, StartError> {
        if config.clock.is_none() {
            config.clock = Some(Clock::manual());
        }
        let temp = config.dir.is_none().then(TempDir::new);
        if let Some(t) = &temp {
            config.dir = Some(t.0.clone());
        }
        let handle = Server::start(config).await?;
        Ok(TestServer { handle, _dir: temp })
    }

    /// The node's data directory (the fencing-token reservation, snapshots).
    pub fn dir(&self) -> Option<&Path> {
        self.shared().node_dir.as_ref().map(|d| d.path())
    }

    /// The node's plain TCP address (127.0.0.1 and the port it got).
    pub fn addr(&self) -> SocketAddr {
        self.handle.addr()
    }

    /// `redis://127.0.0.1:PORT/`, for any client.
    pub fn url(&self) -> String {
        format!("redis://{}/", self.addr())
    }

    /// The node's clock (manual).
    pub fn clock(&self) -> &Clock {
        self.handle.clock()
    }

    /// The running server underneath.
    pub fn handle(&self) -> &ServerHandle {
        &self.handle
    }

    /// How long the restart fence still refuses writes (zero once it has lifted).
    pub fn fence_remaining(&self) -> Duration {
        self.handle.fence_remaining()
    }

    /// Whether a script is running right now (tests wait for one to start).
    pub fn script_running(&self) -> bool {
        self.handle.script_running()
    }

    /// Clients blocked in BLPOP and the like.
    pub fn blocked_clients(&self) -> usize {
        self.handle.blocked_clients()
    }

    /// Where `--metrics-addr` serves, if configured.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.handle.metrics_addr()
    }

    /// The server's state, for the fault controls below (tests assert over the wire:
    /// `INFO`, `FENCING.MARK`, `DEBUG`).
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        self.handle.shared()
    }

    /// Moves this node's clock (and every node of its group). Expired keys are gone,
    /// and timers on the clock have been woken, when this returns.
    pub fn advance(&self, d: Duration) {
        self.clock().advance(d);
    }

    /// Steps this node's wall time only: TTLs and the fence do not move; TIME and
    /// EXPIRETIME do. Other nodes of its group keep theirs.
    pub fn jump_wall(&self, delta_ms: i64) {
        self.clock().jump_wall(delta_ms);
    }

    /// Sets this node's wall time only (Unix ms).
    pub fn set_wall(&self, unix_ms: i64) {
        self.clock().set_wall(unix_ms);
    }

    /// A crash and immediate restart: every key lost, every connection dropped, and
    /// the restart fence up again (on the same clock). The data directory survives, as
    /// a disk does: the fencing-token mark resumes at its durable reservation.
    pub fn crash_restart(&self) {
        self.shared().crash_restart();
        self.shared().set_net(NetState::Up);
    }

    /// Raises the restart fence for its full delay and keeps the keyspace. A real node
    /// is fenced only with an empty keyspace (crash, or a snapshot saved during a
    /// fence); tests use this to send every write to a fenced node that holds keys, so
    /// a write that copies, moves or re-times an existing key is refused for the fence
    /// and not just for finding nothing to act on.
    pub fn raise_fence(&self) {
        let shared = self.shared();
        let full = shared.fence.delay_ms();
        shared.fence.raise(
            shared.clock.now_ms(),
            full,
            crate::durability::fence::FenceRule::NoHistory,
        );
    }

    /// A crash, a reboot of the machine and a restart: the data directory survives,
    /// but the monotonic clock of the boot that recorded the locks' deadlines does not
    /// (a test hook: the node's clock epoch changes, as a new kernel boot id would).
    /// The fence then lasts the longest TTL granted before, + margin.
    pub fn crash_restart_after_reboot(&self) {
        self.shared().reach.pretend_reboot();
        self.crash_restart();
    }

    /// The next fsync of the append-only log fails (EIO): the replies waiting for it
    /// are never sent and the node refuses writes with `-MISCONF` until restarted.
    pub fn fail_next_log_fsync(&self) {
        self.shared().aof.fail_next_fsync();
    }

    /// The append-only log's next rewrite stops its walk of the keyspace before its
    /// `shards`-th shard (64 a database, database 0's first), until
    /// `resume_log_rewrite`: writes meanwhile race a rewrite half done.
    pub fn pause_log_rewrite(&self, shards: usize) {
        self.shared().keyspace.hold_snapshot_walk(Some(shards));
    }

    /// Whether a rewrite's walk waits at `pause_log_rewrite`'s point.
    pub fn log_rewrite_paused(&self) -> bool {
        self.shared().keyspace.snapshot_walk_held()
    }

    /// Lets a rewrite paused by `pause_log_rewrite` go on.
    pub fn resume_log_rewrite(&self) {
        self.shared().keyspace.hold_snapshot_walk(None);
    }

    /// Every fsync of the append-only log takes `ms` longer, as on a slow disk.
    pub fn delay_log_fsyncs(&self, ms: u64) {
        self.shared().aof.delay_fsyncs(ms);
    }

    /// A power cut and a restart: what the append-only log wrote but had not fsynced is
    /// lost (its incr file is cut at the last fsync), then `crash_restart`.
    pub fn crash_restart_power_cut(&self) {
        let shared = self.shared();
        // Nothing runs while the node "is down" (a real crash stops every command).
        let down = crate::commands::exec::gate::hold_exclusive_for_test_control(shared);
        shared.aof.power_cut();
        shared.crash_restart();
        drop(down);
        shared.set_net(NetState::Up);
    }

    /// A crash and a restart whose first durable write (the record of the new start)
    /// fails, as a failed fsync would: the node must not trust anything it could not
    /// record; it stays fenced for max-ttl and refuses every grant until restarted.
    pub fn crash_restart_failing_fsync(&self) {
        if let Some(dir) = &self.shared().node_dir {
            dir.fail_next_write();
        }
        self.crash_restart();
    }

    /// A restart as a new process with another `--max-ttl` (the no-record fence
    /// follows it, unless the fence is off): after a clean shutdown when `clean`, else
    /// after a crash. Returns whether a snapshot was restored.
    pub fn restart_with_max_ttl(&self, max_ttl: Duration, clean: bool) -> bool {
        let shared = self.shared();
        let _exclusive = crate::commands::exec::gate::hold_exclusive_for_test_control(shared);
        shared.kill_clients();
        if clean {
            if let Err(e) = crate::durability::restart::save(shared) {
                tracing::error!("test restart_with_max_ttl: cannot save: {e}");
            }
        }
        let max_ms = max_ttl.as_millis() as u64;
        let delay = if shared.fence.delay_ms() == 0 {
            0
        } else {
            max_ms + crate::config::RESTART_MARGIN.as_millis() as u64
        };
        shared.fence.reconfigure(max_ms, delay);
        let kind = shared.boot();
        shared.set_net(NetState::Up);
        kind == BootKind::Snapshot
    }

    /// A crash that also loses the data directory (a replaced disk): the node comes
    /// back as new, its token mark at 0. Fencing tokens cannot survive this on a node
    /// of the quorum that saw a commit; tests use it to show so.
    pub fn crash_restart_losing_dir(&self) {
        if let Some(dir) = &self.shared().node_dir {
            dir.wipe().expect("the test's data directory can be wiped");
        }
        self.crash_restart();
    }

    /// A clean restart (SIGTERM, then a new process on the same directory): the live
    /// keys, their remaining TTLs and the token mark are saved to the directory and
    /// restored, so the fence stays down. Connections are dropped, as by a restart.
    /// Returns whether the snapshot was restored (false: refused, and the fence is up).
    pub fn restart_clean(&self) -> bool {
        let shared = self.shared();
        // Nothing may run between the save and the restore: it would be forgotten.
        let _exclusive = crate::commands::exec::gate::hold_exclusive_for_test_control(shared);
        shared.kill_clients();
        if let Err(e) = crate::durability::restart::save(shared) {
            tracing::error!("test restart_clean: cannot save: {e}");
        }
        let kind = shared.boot();
        shared.set_net(NetState::Up);
        kind == BootKind::Snapshot
    }

    /// The process dies: connections dropped, the port refuses connections (by the
    /// time this returns).
    pub async fn stop(&self) {
        self.set_reachable(false).await;
    }

    /// The process boots again on the same port: empty keyspace, fence up. The port
    /// accepts connections when this returns.
    pub async fn start_again(&self) {
        self.shared().boot();
        self.set_reachable(true).await;
    }

    /// The process boots again on the same port as a new map-mode process does:
    /// empty keyspace, restart fence up, and the slot map saved in its data directory
    /// (with its fenced slots) loaded again. With `confirm_map` it serves no slot until
    /// the other nodes of the map confirm that map or hand it a newer one (what
    /// `Server::start` does); without, it serves the saved map at once and its lease
    /// learns no newer map, as a node did before maps were confirmed (a test hook: the
    /// checkers show what that costs).
    /// The port accepts connections when this returns.
    pub async fn start_again_with_saved_map(&self, confirm_map: bool) {
        let shared = self.shared();
        shared.boot();
        shared.cluster.set_map_confirmation(confirm_map);
        let dir = shared.node_dir.as_ref().map(|d| d.path());
        let now = shared.clock.now_ms();
        if confirm_map {
            let loaded =
                crate::cluster::blocking(|| shared.cluster.load(dir, None, now, &shared.tokens));
            if let Err(e) = loaded {
                tracing::error!("test start_again_with_saved_map: {e}");
            }
        } else if let Some(dir) = dir {
            match std::fs::read(dir.join(crate::cluster::MAP_FILE)) {
                Ok(bytes) => match crate::cluster::parse_persisted(&bytes) {
                    Ok((map, fenced)) => shared.cluster.restore(map, &fenced, now),
                    Err(e) => tracing::error!("test start_again_with_saved_map: {e}"),
                },
                Err(e) => tracing::error!("test start_again_with_saved_map: {e}"),
            }
        }
        self.set_reachable(true).await;
    }

    /// Holds the node's keyspace gate exclusively until the guard is dropped, as a
    /// script, a transaction or a live slot move (CLUSTER SETMAP) does: commands that
    /// arrive meanwhile pass their checks and wait for the gate.
    pub fn hold_gate(&self) -> impl Drop + '_ {
        crate::commands::exec::gate::hold_exclusive_for_test_control(self.shared())
    }

    /// Puts the node on or off the network and waits (bounded) until its listener is
    /// bound or closed accordingly.
    async fn set_reachable(&self, up: bool) {
        let state = if up { NetState::Up } else { NetState::Down };
        self.shared().set_net(state);
        let mut listening = self.shared().faults.listening.subscribe();
        let _ =
            tokio::time::timeout(Duration::from_secs(5), listening.wait_for(|&l| l == up)).await;
    }

    /// Like SIGSTOP or a long GC pause: connections stay open, nothing is answered.
    pub fn pause(&self) {
        self.shared().set_net(NetState::Paused);
    }

    /// Ends a pause. Returns once the node has executed what arrived while it was
    /// paused (bounded to one second), so what follows sees a caught-up node and the
    /// test stays deterministic.
    pub async fn resume(&self) {
        self.shared().set_net(NetState::Up);
        let deadline = std::time::Instant::now() + Duration::from_secs(1);
        while self.shared().any_input_pending() && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// A network partition around this node: connections dropped and refused, but the
    /// node keeps its memory and keeps running.
    pub async fn isolate(&self) {
        self.set_reachable(false).await;
    }

    /// Ends a partition; the port accepts connections when this returns.
    pub async fn heal(&self) {
        self.set_reachable(true).await;
    }

    /// Adds a fault scoped to a command, key or client (`FaultSpec`). It is in force
    /// when this returns: every request read afterwards, on any connection, is checked
    /// against it. Faults stay through restarts, until removed. Returns its id.
    /// Refused (nothing added) when [`FaultSpec::validate`] refuses it.
    pub fn add_fault(&self, spec: FaultSpec) -> Result<u64, FaultError> {
        spec.validate()?;
        Ok(self.shared().faults.scoped.add(spec))
    }

    /// One fault, with how often it fired and its firings.
    pub fn fault(&self, id: u64) -> Option<FaultStatus> {
        self.shared().faults.scoped.get(id)
    }

    /// Every fault set on this node, oldest first.
    pub fn faults(&self) -> Vec<FaultStatus> {
        self.shared().faults.scoped.list()
    }

    /// Removes one fault (no request sees it once this returns); returns it as it was.
    pub fn remove_fault(&self, id: u64) -> Option<FaultStatus> {
        self.shared().faults.scoped.remove(id)
    }

    /// Removes every fault; returns them as they were.
    pub fn clear_faults(&self) -> Vec<FaultStatus> {
        self.shared().faults.scoped.clear()
    }

    /// Records every request and reply of every client from now on, keeping the last
    /// `capacity` (0: stops recording and forgets the history).
    pub fn record(&self, capacity: usize) {
        self.shared().faults.scoped.record(capacity);
    }

    /// What was recorded, oldest first.
    pub fn history(&self) -> Vec<Exchange> {
        self.shared().faults.scoped.history(false)
    }

    /// What was recorded, oldest first, emptying the record (recording goes on).
    pub fn take_history(&self) -> Vec<Exchange> {
        self.shared().faults.scoped.history(true)
    }

    /// Waits until the server stops (SHUTDOWN over the wire).
    pub async fn stopped(&mut self) {
        self.handle.stopped().await;
    }

    /// Stops the server and waits for it.
    pub async fn shutdown(self) {
        self.handle.shutdown().await;
    }
}

/// N independent nodes (own keyspace and fence each) sharing one manual clock: one
/// `advance` moves them all; each node's wall time can be stepped on its own.
pub struct TestGroup {
    nodes: Vec<TestServer>,
    clock: Clock,
}

impl TestGroup {
    /// `n` nodes, fence down at first boot and up on restarts.
    pub async fn start(n: usize) -> TestGroup {
        TestGroup::start_with(n, |c| c).await
    }

    /// `n` nodes, each with `TestServer::config(shared clock)` passed through `adjust`
    /// (e.g. `|c| Config { restart_delay: Some(Duration::ZERO), ..c }` turns the
    /// fence off).
    pub async fn start_with(n: usize, adjust: impl Fn(Config) -> Config) -> TestGroup {
        TestGroup::try_start_with(n, |_, c| adjust(c))
            .await
            .expect("test nodes bind 127.0.0.1:0 and open their directories")
    }

    /// `start_with` where `adjust` also gets the node's index, returning why a node
    /// could not start instead of panicking.
    pub async fn try_start_with(
        n: usize,
        adjust: impl Fn(usize, Config) -> Config,
    ) -> Result<TestGroup, StartError> {
        let clock = Clock::manual();
        let mut nodes = Vec::with_capacity(n);
        for i in 0..n {
            // Linked: the one reading, advanced once for all; each node's own wall time.
            let node_clock = clock.linked();
            let config = adjust(i, TestServer::config(node_clock.clone()));
            let config = Config {
                clock: Some(node_clock),
                ..config
            };
            nodes.push(TestServer::try_start_with(config).await?);
        }
        Ok(TestGroup { nodes, clock })
    }

    /// Node `i`, in start order.
    pub fn node(&self, i: usize) -> &TestServer {
        &self.nodes[i]
    }

    /// All the nodes, in start order.
    pub fn nodes(&self) -> &[TestServer] {
        &self.nodes
    }

    /// How many nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether there are no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Every node's address, in start order.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.nodes.iter().map(TestServer::addr).collect()
    }

    /// Every node's `redis://` URL, in start order.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(TestServer::url).collect()
    }

    /// The clock every node shares.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Moves the shared clock: every node's TTLs, fences and wall time.
    pub fn advance(&self, d: Duration) {
        self.clock.advance(d);
    }

    /// Steps every node's wall time (TTLs do not move).
    pub fn jump_wall(&self, delta_ms: i64) {
        for node in &self.nodes {
            node.jump_wall(delta_ms);
        }
    }

    /// Node `i`'s process ends and a new process starts in its place: same port, data
    /// directory and clock, its config passed through `change` (another
    /// `--cluster-mode`, another max-ttl): an operator's restart with other flags.
    /// `clean`: a clean shutdown, whose snapshot the new process restores; else as after
    /// SHUTDOWN NOSAVE. The new process boots as a real one does (`fence_at_boot`: the
    /// restart fence its record calls for); test hooks set on the old one are not
    /// carried. Panics if the new process cannot start (its port still taken after 5 s).
    pub async fn restart_node_with(
        &mut self,
        i: usize,
        clean: bool,
        change: impl FnOnce(Config) -> Config,
    ) {
        let TestServer { handle, _dir } = self.nodes.remove(i);
        let mut config = handle.shared().config.clone();
        config.port = handle.addr().port();
        config.fence_at_boot = true;
        if !clean {
            (handle.shared().save_on_shutdown).store(false, std::sync::atomic::Ordering::SeqCst);
        }
        handle.shutdown().await;
        let config = change(config);
        // The port is free from the moment the old process stops listening; another
        // socket of this process (a test's connection) may hold it a moment: retried,
        // as a node put back on the network does.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let handle = loop {
            match Server::start(config.clone()).await {
                Err(StartError::Io(e))
                    if e.kind() == std::io::ErrorKind::AddrInUse
                        && std::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                started => {
                    break started.expect(
                        "a restarted test node binds its port again and opens its directory",
                    )
                }
            }
        };
        self.nodes.insert(i, TestServer { handle, _dir });
    }

    /// Shuts every node down, one after the other.
    pub async fn shutdown(self) {
        for node in self.nodes {
            node.shutdown().await;
        }
    }
}
