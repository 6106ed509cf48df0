//! The network side: the listener, one task per connection, and
//! shutdown. `Server::start` is the library's entry point.

mod connection;
mod metrics;
mod tls_accept;

use crate::config::{Config, ConfigError};
use crate::node::{NetState, Shared};
use crate::Clock;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::JoinSet;

/// Starts nodes: [`Server::start`] binds the listeners and returns a [`ServerHandle`].
pub struct Server;

/// Why [`Server::start`] did not start a node.
#[derive(Debug)]
pub enum StartError {
    /// A setting that cannot work: a flag, a certificate or the ACL file. Fix the
    /// configuration.
    Config(ConfigError),
    /// Anything else: the port is taken, the data directory is in use or unreadable...
    Io(io::Error),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Config(e) => e.fmt(f),
            StartError::Io(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartError::Config(e) => Some(e),
            StartError::Io(e) => Some(e),
        }
    }
}

impl From<ConfigError> for StartError {
    fn from(e: ConfigError) -> StartError {
        StartError::Config(e)
    }
}

impl From<io::Error> for StartError {
    fn from(e: io::Error) -> StartError {
        StartError::Io(e)
    }
}

impl Server {
    /// The runtime a node is served on: tokio's multi-threaded scheduler with `workers`
    /// worker threads (at least one), I/O and timers, serving connections first come,
    /// first served.
    ///
    /// tokio runs a task woken by the running one (and, while the worker polls for I/O,
    /// the last connection of a batch of readiness events) next, ahead of the tasks
    /// already queued: its LIFO slot. A node then grants a contended lock to the client
    /// whose request arrived last in the batch, and the nodes of a Redlock, each with
    /// its own batches, split their votes. With the LIFO slot off, the tasks a batch
    /// wakes run in the order the kernel reported them: the order their requests
    /// arrived, as Redis serves them. Turning it off takes tokio's unstable API (the
    /// build sets `--cfg tokio_unstable`, .cargo/config.toml); a build without it still
    /// serves, in tokio's default order.
    pub fn runtime(workers: usize) -> io::Result<tokio::runtime::Runtime> {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.worker_threads(workers.max(1)).enable_all();
        #[cfg(tokio_unstable)]
        builder.disable_lifo_slot();
        builder.build()
    }

    /// Binds, starts serving in the background on the current tokio runtime, and
    /// returns a handle with the bound address (port 0 picks a free port).
    pub async fn start(mut config: Config) -> Result<ServerHandle, StartError> {
        config.validate()?;
        // The certificates are read before anything listens: a bad file stops the start.
        let tls = config.tls.as_ref().map(tls_accept::load).transpose()?;
        // So are the ACL users: a bad line stops the start, naming the line.
        let acl_users = match &config.aclfile {
            Some(path) => Some(
                crate::acl::read_file(path)
                    .and_then(|users| crate::acl::check_file_with_requirepass(&config, users))
                    .map_err(ConfigError::Acl)?,
            ),
            None => None,
        };
        let mut listeners = Vec::new();
        if config.plain {
            listeners.push(Listener::bind((config.bind, config.port).into(), None)?);
            config.port = listeners[0].addr.port();
        }
        if let (Some(tls_config), Some(tls)) = (config.tls.as_mut(), tls) {
            let l = Listener::bind((config.bind, tls_config.port).into(), Some(tls))?;
            tls_config.port = l.addr.port();
            listeners.push(l);
        }
        // The plain address, or the TLS one on a TLS-only node.
        let addr = listeners[0].addr;
        let tls_addr = listeners.iter().find(|l| l.tls.is_some()).map(|l| l.addr);
        let shared = Arc::new(Shared::open(config)?);
        crate::cluster::confirm::spawn(&shared);
        if let Some(users) = acl_users {
            tracing::info!(users = users.len(), "ACL users loaded");
            shared.acl.load(users);
        }
        shared.acl.set_protected_mode(shared.config.protected_mode);
        warn_if_exposed(&shared);
        crate::alloc::mark_startup();
        log_fence(&shared, addr);
        if let Some(at) = tls_addr {
            tracing::info!(addr = %at, "listening for TLS");
        }
        announce_fence_end(&shared, addr);
        crate::node::sweeper::install_manual_sweep(&shared);
        let metrics_addr = match shared.config.metrics_addr {
            Some(at) => {
                let metrics = TcpListener::bind(at).await?;
                let bound = metrics.local_addr()?;
                tracing::info!(addr = %bound, "metrics at http://{bound}/metrics");
                if !bound.ip().is_loopback() && shared.config.metrics_auth.is_none() {
                    tracing::warn!(
                        addr = %bound,
                        "metrics are served beyond the loopback address without --metrics-auth: anyone who reaches it can read them"
                    );
                }
                tokio::spawn(metrics::serve(metrics, shared.clone()));
                Some(bound)
            }
            None => None,
        };
        let accept = tokio::spawn(accept_loop(listeners, shared.clone()));
        crate::node::sweeper::spawn_sweeper(&shared)?;
        crate::scripting::spawn_long_run_watch(&shared)?;
        Ok(ServerHandle {
            addr,
            tls_addr,
            metrics_addr,
            shared,
            accept: Some(accept),
        })
    }
}

/// A node bound beyond the loopback address whose default user has no password: with
/// protected mode off, anyone who reaches the port can take and release every lock.
fn warn_if_exposed(shared: &Shared) {
    let bind = shared.config.bind;
    if bind.is_loopback() || !shared.acl.default_user().nopass() {
        return;
    }
    if shared.acl.protected_mode() {
        tracing::info!(
            %bind,
            "protected mode: the default user has no password, so only clients on the loopback address are served (set a password, or --protected-mode no)"
        );
    } else {
        tracing::warn!(
            %bind,
            "protected mode is off and the default user has no password: anyone who can reach this address can run every command (set --requirepass or ACL users)"
        );
    }
}

fn log_fence(shared: &Shared, addr: SocketAddr) {
    let fence = &shared.fence;
    let now = shared.clock.now_ms();
    let left = fence.remaining_ms(now);
    if left == 0 && *shared.last_boot.lock() == crate::durability::restart::BootKind::Snapshot {
        tracing::info!(%addr, max_ttl_ms = fence.max_ttl_ms(), "listening; clean restart: no restart fence");
    } else if left == 0 {
        tracing::info!(
            %addr,
            max_ttl_ms = fence.max_ttl_ms(),
            fence_rule = fence.chosen().0.name(),
            "listening; no restart fence"
        );
    } else {
        tracing::info!(
            %addr,
            max_ttl_ms = fence.max_ttl_ms(),
            fence_ms = left,
            fence_rule = fence.chosen().0.name(),
            fence_until_unix_ms = shared.clock.mono_to_wall(fence.until_ms()),
            "listening; restart fence up: writes get TRYAGAIN for the next {left} ms"
        );
    }
}

/// Logs when the restart fence lifts, so whoever started the node knows when locks
/// can be taken.
fn announce_fence_end(shared: &Arc<Shared>, addr: SocketAddr) {
    let until = shared.fence.until_ms();
    if shared.fence.remaining_ms(shared.clock.now_ms()) == 0 {
        return;
    }
    let weak = Arc::downgrade(shared);
    let clock = shared.clock.clone();
    tokio::spawn(async move {
        clock.sleep_until(until).await;
        if weak
            .upgrade()
            .is_some_and(|s| !s.shutting_down.load(Ordering::SeqCst))
        {
            tracing::info!(%addr, "restart fence lifted: accepting locks");
        }
    });
}

/// The listen backlog. The kernel caps it at net.core.somaxconn (4096 on current
/// Linux, 128 on old ones).
///
/// Why it matters: the kernel completes TCP handshakes on its own and queues them
/// until the process accepts. A client that connects in a loop (and a loaded machine
/// that does not schedule the server for a few milliseconds) fills a queue of 128 in
/// a burst; Linux then drops the next SYN and the client waits out its 1 s SYN
/// retransmit. That was the stall every ~129 connects. Redis's `tcp-backlog` default,
/// 511, still overflowed with both cores busy (2 dropped SYNs in 500 connects while
/// the server went unscheduled: tests/hostile.rs in a soak run); the queue costs
/// nothing until used, so this asks for the kernel's usual maximum.
const LISTEN_BACKLOG: u32 = 4096;

/// Connections accepted per wakeup of the accept loop before it looks at anything else.
const MAX_ACCEPTS_PER_WAKEUP: usize = 1000;

/// Binds `addr` with Redis's backlog (tokio's `TcpListener::bind` listens with 128).
fn listen(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// One listening port: plain TCP, or TLS.
struct Listener {
    addr: SocketAddr,
    /// `None` while a fault control has the node off the network.
    socket: Option<TcpListener>,
    tls: Option<tls_accept::Tls>,
}

impl Listener {
    fn bind(addr: SocketAddr, tls: Option<tls_accept::Tls>) -> io::Result<Listener> {
        let socket = listen(addr)?;
        Ok(Listener {
            addr: socket.local_addr()?,
            socket: Some(socket),
            tls,
        })
    }

    /// Starts serving an accepted connection (TLS: its handshake first, in its task).
    fn spawn(
        &self,
        connections: &mut JoinSet<()>,
        shared: &Arc<Shared>,
        stream: TcpStream,
        peer: SocketAddr,
    ) {
        shared
            .stats
            .total_connections
            .fetch_add(1, Ordering::Relaxed);
        let _ = stream.set_nodelay(true);
        let laddr = stream.local_addr().unwrap_or(peer);
        match &self.tls {
            None => connections.spawn(connection::serve(shared.clone(), stream, peer, laddr)),
            Some(tls) => connections.spawn(tls_accept::serve(
                shared.clone(),
                tls.clone(),
                stream,
                peer,
                laddr,
            )),
        };
    }
}

/// The next connection on any of the listeners, trying them in turn from `first` so
/// that a flood on one port does not starve the other.
async fn accept_any(
    listeners: &[Listener],
    first: usize,
) -> (usize, io::Result<(TcpStream, SocketAddr)>) {
    std::future::poll_fn(|cx| {
        for k in 0..listeners.len() {
            let i = (first + k) % listeners.len();
            if let Some(socket) = &listeners[i].socket {
                if let Poll::Ready(r) = socket.poll_accept(cx) {
                    return Poll::Ready((i, r));
                }
            }
        }
        Poll::Pending
    })
    .await
}

/// Accepts connections while the node is up or paused. Fault controls
/// (`Shared::set_net`) close the listeners (Down: connections refused), and a move back
/// to Up binds the same addresses again.
///
/// While paused, a new connection is still accepted, but its task only buffers what it
/// reads (as the kernel's backlog would for a stopped process) and takes a turn in the
/// paused queue: so `TestServer::resume`, which waits for that queue, also sees the
/// requests of clients that dialled during the pause, and runs them in arrival order.
async fn accept_loop(mut listeners: Vec<Listener>, shared: Arc<Shared>) {
    let mut net = shared.faults.net.subscribe();
    let mut connections = JoinSet::new();
    let mut first = 0;
    let accept_log = crate::node::stats::LogLimit::default();
    'serve: loop {
        let stop = shared.shutdown.notified();
        tokio::pin!(stop);
        stop.as_mut().enable();
        if shared.shutting_down.load(Ordering::SeqCst) {
            break;
        }
        let state = *net.borrow_and_update();
        if state == NetState::Down {
            for l in listeners.iter_mut() {
                l.socket = None;
            }
            shared.faults.listening.send_replace(false);
        } else if listeners.iter().any(|l| l.socket.is_none()) {
            for l in listeners.iter_mut().filter(|l| l.socket.is_none()) {
                match listen(l.addr) {
                    Ok(socket) => l.socket = Some(socket),
                    Err(e) => {
                        tracing::warn!(addr = %l.addr, "cannot bind again: {e}");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue 'serve;
                    }
                }
            }
            shared.faults.listening.send_replace(true);
        }
        let accepting = state != NetState::Down;
        tokio::select! {
            (i, accepted) = accept_any(&listeners, first), if accepting => match accepted {
                Ok((stream, peer)) => {
                    first = (i + 1) % listeners.len();
                    let l = &listeners[i];
                    l.spawn(&mut connections, &shared, stream, peer);
                    // Drain what else the kernel queued before going round the loop
                    // again (Redis takes up to 1000 per wakeup too).
                    let socket = l.socket.as_ref().expect("bound while up");
                    for _ in 0..MAX_ACCEPTS_PER_WAKEUP {
                        let more = std::future::poll_fn(|cx| Poll::Ready(socket.poll_accept(cx))).await;
                        let Poll::Ready(Ok((stream, peer))) = more else { break };
                        l.spawn(&mut connections, &shared, stream, peer);
                    }
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning,
                    // and say so at most once a second.
                    if let Some(n) = accept_log.event(crate::clock::mono_ns() / 1_000_000) {
                        tracing::warn!(failures = n, "accept failed: {e}");
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {
                while connections.try_join_next().is_some() {}
            }
            _ = net.changed() => {}
            _ = &mut stop => break,
        }
    }
    drop(listeners);
    shared.faults.listening.send_replace(false);
    shared.kill_clients();
    // Connections end at their next await once killed; bound the wait anyway (one
    // stuck in a long C call inside a script cannot be stopped).
    let drained = tokio::time::timeout(Duration::from_millis(300), async {
        while connections.join_next().await.is_some() {}
    })
    .await
    .is_ok();
    connections.abort_all();
    if drained {
        // No command runs any more: the other nodes of a slot map may take this
        // node's slots without waiting out its lease (`cluster::lease`).
        crate::cluster::blocking(|| shared.cluster.announce_leaving());
    }
    save_snapshot(&shared, drained);
    if let Some(dir) = &shared.node_dir {
        dir.unlock();
    }
    tracing::info!("server stopped");
}

/// The clean-shutdown snapshot, only once every connection has ended: a command run
/// after it would be forgotten by the next boot, which skips the fence.
fn save_snapshot(shared: &Shared, drained: bool) {
    if shared.node_dir.is_none() || !shared.save_on_shutdown.load(Ordering::SeqCst) {
        return;
    }
    if !drained {
        tracing::warn!(
            "connections did not end in time: no snapshot; the next boot raises the restart fence"
        );
        return;
    }
    if let Err(e) = crate::durability::restart::save(shared) {
        tracing::error!(
            "cannot write the shutdown snapshot: {e}; the next boot raises the restart fence"
        );
    }
}

/// A running server.
pub struct ServerHandle {
    addr: SocketAddr,
    tls_addr: Option<SocketAddr>,
    metrics_addr: Option<SocketAddr>,
    shared: Arc<Shared>,
    accept: Option<tokio::task::JoinHandle<()>>,
}

impl ServerHandle {
    /// This node's id in a cluster map (CLUSTER MYID).
    pub fn cluster_id(&self) -> String {
        self.shared.cluster.my_id().to_string()
    }

    /// Installs a slot map (JSON), as `CLUSTER SETMAP` does: returns the number of
    /// slots fenced, or why the map was refused.
    pub fn set_cluster_map(&self, json: &str, force: bool) -> Result<usize, String> {
        let s = &self.shared;
        s.cluster
            .set_map_text(
                json.as_bytes(),
                force,
                s.node_dir.as_ref().map(|d| d.path()),
                s.clock.now_ms(),
                &s.tokens,
            )
            .map(|(_, fenced)| fenced)
    }

    /// The slot map this node serves, as JSON (`None` without one).
    pub fn cluster_map_json(&self) -> Option<String> {
        let view = self.shared.cluster.view();
        (!view.map.nodes.is_empty()).then(|| view.map.to_json())
    }

    /// The version of the slot map this node serves (0: none).
    pub fn cluster_map_version(&self) -> u64 {
        self.shared.cluster.view().map.version
    }

    /// Whether this node serves its slot map: false while a map saved before a
    /// restart waits to be confirmed by the map's other nodes.
    pub fn cluster_map_confirmed(&self) -> bool {
        self.shared.cluster.confirmed()
    }

    /// Test hook: the fence on slots this node takes over, off (or on again).
    #[doc(hidden)]
    pub fn set_cluster_move_fence(&self, on: bool) {
        self.shared.cluster.set_move_fence(on);
    }

    /// Test hook: slots this node gives away move without their keys (or with them).
    #[doc(hidden)]
    pub fn set_cluster_move_keys(&self, on: bool) {
        self.shared.cluster.set_move_keys(on);
    }

    /// The plain TCP address the server listens on; on a TLS-only node
    /// (`Config::plain` off), the TLS address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The TLS address (`Config::tls`, port 0 resolved).
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls_addr
    }

    /// The server's clock (manual in tests: advance it to move TTLs and the fence).
    pub fn clock(&self) -> &Clock {
        &self.shared.clock
    }

    /// Where the metrics endpoint listens (`Config::metrics_addr`, port 0 resolved).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// How long the restart fence still refuses writes (zero once it has lifted).
    pub fn fence_remaining(&self) -> Duration {
        Duration::from_millis(self.shared.fence.remaining_ms(self.shared.clock.now_ms()))
    }

    /// Whether a script is running right now (tests wait for one to start).
    pub fn script_running(&self) -> bool {
        self.shared.scripts.is_running()
    }

    /// Clients blocked in BLPOP and the like (INFO's `blocked_clients`).
    pub fn blocked_clients(&self) -> usize {
        self.shared.blocking.blocked_clients()
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Waits until the server stops (SHUTDOWN, or `shutdown` from elsewhere).
    /// Cancel-safe: a wait that is dropped (a `select!` that another branch won) keeps
    /// the task's handle, so a later `shutdown` still waits for the accept loop to end
    /// (and for the clean-shutdown snapshot it writes).
    pub async fn stopped(&mut self) {
        if let Some(accept) = self.accept.as_mut() {
            let _ = accept.await;
            self.accept = None;
        }
    }

    /// Stops accepting, disconnects every client, and waits for the server to end.
    pub async fn shutdown(mut self) {
        self.shared.request_shutdown();
        self.stopped().await;
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        // A handle dropped without `shutdown` (a failed test) still frees its port.
        self.shared.request_shutdown();
    }
}

#[cfg(test)]
mod tests;
