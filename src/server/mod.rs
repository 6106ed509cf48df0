//! The network side: the listener, one task per connection, the expiry sweeper, and
//! shutdown. `Server::start` is the library's entry point.

mod connection;
mod metrics;

use crate::commands::{NetState, Shared};
use crate::config::Config;
use crate::Clock;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;
use std::task::Poll;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::JoinSet;

/// How often the real-clock sweeper reclaims expired keys. With a manual clock the
/// sweep runs inside every `advance` instead.
const SWEEP_INTERVAL: Duration = Duration::from_millis(250);

pub struct Server;

impl Server {
    /// Binds, starts serving in the background on the current tokio runtime, and
    /// returns a handle with the bound address (port 0 picks a free port).
    pub async fn start(config: Config) -> io::Result<ServerHandle> {
        config
            .validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let listener = listen((config.bind, config.port).into())?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::open(config)?);
        log_fence(&shared, addr);
        announce_fence_end(&shared);
        install_manual_sweep(&shared);
        let metrics_addr = match shared.config.metrics_addr {
            Some(at) => {
                let metrics = TcpListener::bind(at).await?;
                let bound = metrics.local_addr()?;
                tracing::info!(addr = %bound, "metrics at http://{bound}/metrics");
                tokio::spawn(metrics::serve(metrics, shared.clone()));
                Some(bound)
            }
            None => None,
        };
        let accept = tokio::spawn(accept_loop(listener, shared.clone()));
        let sweeper = tokio::spawn(sweep_loop(Arc::downgrade(&shared)));
        Ok(ServerHandle {
            addr,
            metrics_addr,
            shared,
            accept: Some(accept),
            sweeper,
        })
    }
}

fn log_fence(shared: &Shared, addr: SocketAddr) {
    let fence = &shared.fence;
    let now = shared.clock.now_ms();
    let left = fence.remaining_ms(now);
    if left == 0 && *shared.last_boot.lock() == crate::restart::BootKind::Snapshot {
        tracing::info!(%addr, max_ttl_ms = fence.max_ttl_ms(), "listening; clean restart: no restart fence");
    } else if left == 0 {
        tracing::info!(
            %addr,
            max_ttl_ms = fence.max_ttl_ms(),
            "listening; restart fence disabled (--restart-delay 0)"
        );
    } else {
        tracing::info!(
            %addr,
            max_ttl_ms = fence.max_ttl_ms(),
            fence_ms = left,
            fence_until_unix_ms = shared.clock.mono_to_wall(fence.until_ms()),
            "listening; restart fence up: writes get TRYAGAIN for the next {left} ms"
        );
    }
}

/// Logs when the restart fence lifts, so whoever started the node knows when locks
/// can be taken.
fn announce_fence_end(shared: &Arc<Shared>) {
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
            tracing::info!("restart fence lifted: accepting locks");
        }
    });
}

/// With a manual clock, expired keys are reclaimed inside every `advance`, so a test
/// sees them gone (DBSIZE, INFO keyspace) as soon as `advance` returns.
fn install_manual_sweep(shared: &Arc<Shared>) {
    if !shared.clock.is_manual() {
        return;
    }
    let weak = Arc::downgrade(shared);
    shared.clock.on_advance(move || {
        if let Some(shared) = weak.upgrade() {
            sweep(&shared);
        }
    });
}

fn sweep(shared: &Shared) {
    if !shared.active_expire.load(Ordering::Relaxed) {
        return;
    }
    // A script holds the gate exclusively and sees time frozen at its start: keys must
    // not vanish under it, so the sweep waits for the next pass.
    let Some(_gate) = crate::commands::atomic::try_shared(shared) else {
        return;
    };
    let n = shared.keyspace.sweep(shared.clock.now_ms());
    shared
        .stats
        .expired_keys
        .fetch_add(n as u64, Ordering::Relaxed);
}

async fn sweep_loop(shared: Weak<Shared>) {
    let mut tick = tokio::time::interval(SWEEP_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        if shared.shutting_down.load(Ordering::SeqCst) {
            return;
        }
        if !shared.clock.is_manual() {
            sweep(&shared);
        }
    }
}

/// The listen backlog: Redis's `tcp-backlog` default. The kernel caps it at
/// net.core.somaxconn (4096 on current Linux, 128 on old ones).
///
/// Why it matters: the kernel completes TCP handshakes on its own and queues them
/// until the process accepts. A client that connects in a loop (and a loaded machine
/// that does not schedule the server for a few milliseconds) fills a queue of 128 in
/// a burst; Linux then drops the next SYN and the client waits out its 1 s SYN
/// retransmit. That was the stall every ~129 connects.
const LISTEN_BACKLOG: u32 = 511;

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

/// Accepts connections while the node is up or paused. Fault controls
/// (`Shared::set_net`) close the listener (Down: connections refused), and a move back
/// to Up binds the same address again.
///
/// While paused, a new connection is still accepted, but its task only buffers what it
/// reads (as the kernel's backlog would for a stopped process) and takes a turn in the
/// paused queue: so `TestServer::resume`, which waits for that queue, also sees the
/// requests of clients that dialled during the pause, and runs them in arrival order.
async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let addr = listener.local_addr().ok();
    let mut listener = Some(listener);
    let mut net = shared.net.subscribe();
    let mut connections = JoinSet::new();
    loop {
        let stop = shared.shutdown.notified();
        tokio::pin!(stop);
        stop.as_mut().enable();
        if shared.shutting_down.load(Ordering::SeqCst) {
            break;
        }
        let state = *net.borrow_and_update();
        if state == NetState::Down {
            listener = None;
            shared.listening.send_replace(false);
        } else if listener.is_none() {
            let Some(addr) = addr else { break };
            match listen(addr) {
                Ok(l) => {
                    listener = Some(l);
                    shared.listening.send_replace(true);
                }
                Err(e) => {
                    tracing::warn!(%addr, "cannot bind again: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            }
        }
        let accepting = state != NetState::Down;
        tokio::select! {
            accepted = async { listener.as_ref().expect("bound while up").accept().await }, if accepting && listener.is_some() => match accepted {
                Ok((stream, peer)) => {
                    spawn_plain(&mut connections, &shared, stream, peer);
                    // Drain what else the kernel queued before going round the loop
                    // again (Redis takes up to 1000 per wakeup too).
                    let l = listener.as_ref().expect("bound while up");
                    for _ in 0..MAX_ACCEPTS_PER_WAKEUP {
                        let more = std::future::poll_fn(|cx| Poll::Ready(l.poll_accept(cx))).await;
                        let Poll::Ready(Ok((stream, peer))) = more else { break };
                        spawn_plain(&mut connections, &shared, stream, peer);
                    }
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!("accept failed: {e}");
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
    drop(listener);
    shared.listening.send_replace(false);
    shared.kill_clients();
    // Connections end at their next await once killed; bound the wait anyway (one
    // stuck in a long C call inside a script cannot be stopped).
    let drained = tokio::time::timeout(Duration::from_millis(300), async {
        while connections.join_next().await.is_some() {}
    })
    .await
    .is_ok();
    connections.abort_all();
    save_snapshot(&shared, drained);
    if let Some(dir) = &shared.node_dir {
        dir.unlock();
    }
    tracing::info!("server stopped");
}

/// Starts serving an accepted plain TCP connection.
fn spawn_plain(
    connections: &mut JoinSet<()>,
    shared: &Arc<Shared>,
    stream: TcpStream,
    peer: SocketAddr,
) {
    shared.stats.total_connections.fetch_add(1, Ordering::Relaxed);
    let _ = stream.set_nodelay(true);
    let laddr = stream.local_addr().unwrap_or(peer);
    connections.spawn(connection::serve(shared.clone(), stream, peer, laddr));
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
    if let Err(e) = crate::restart::save(shared) {
        tracing::error!(
            "cannot write the shutdown snapshot: {e}; the next boot raises the restart fence"
        );
    }
}

/// A running server.
pub struct ServerHandle {
    addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    shared: Arc<Shared>,
    accept: Option<tokio::task::JoinHandle<()>>,
    sweeper: tokio::task::JoinHandle<()>,
}

impl ServerHandle {
    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
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
        self.sweeper.abort();
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        // A handle dropped without `shutdown` (a failed test) still frees its port.
        self.shared.request_shutdown();
        self.sweeper.abort();
    }
}
