//! Running nodes in this process: start them, give a local cluster its slot maps,
//! print where they are, and stop them all on a signal; SHUTDOWN stops the node it is
//! sent to, and the process ends with its last node.

use redlockd::{Clock, Server, ServerHandle};
use std::net::IpAddr;
use std::time::Duration;

use crate::{ServerArgs, StartError};

/// Starts one node per port and runs until a signal stops them all or SHUTDOWN has
/// stopped each. `groups`:
/// (K, M), the nodes form K clusters of M nodes, each given its slot map.
pub(crate) async fn run_nodes(
    args: &ServerArgs,
    ports: &[u16],
    groups: Option<(u16, u16)>,
) -> Result<(), StartError> {
    // Registered before any node listens: a SIGTERM that arrives as soon as a node
    // answers must be a clean shutdown (snapshot), not the default handler's death.
    let signals = ShutdownSignal::install();
    // With --clock manual, the nodes' clocks are linked: one advance moves them all.
    let clock = Clock::manual();
    let mut handles: Vec<ServerHandle> = Vec::new();
    for (i, &port) in (0u16..).zip(ports) {
        let config = args
            .config(i, port, ports.len() > 1, &clock)
            .map_err(|e| StartError::Config(e.to_string()))?;
        // `group` makes its nodes' directories: one it makes is a new node.
        if let Some(dir) = config
            .dir
            .as_ref()
            .filter(|d| ports.len() > 1 && !d.exists())
        {
            redlockd::NodeDir::init(dir, false).map_err(|e| StartError::Other(e.to_string()))?;
        }
        let handle = Server::start(config).await.map_err(|e| {
            let msg = format!("cannot start a node on {}:{port}: {e}", args.bind);
            match e {
                redlockd::StartError::Config(_) => StartError::Config(msg),
                redlockd::StartError::Io(_) => StartError::Other(msg),
            }
        })?;
        handles.push(handle);
    }
    if let Some((_, m)) = groups {
        for group in handles.chunks(usize::from(m)) {
            give_map(args.bind, group).map_err(StartError::Other)?;
        }
    }
    print_ready_line(&handles, groups.map(|(_, m)| m));
    if ports.len() > 1 {
        print_cluster_summary(&handles, groups.map(|(_, m)| m));
    }
    // SHUTDOWN stops the node it is sent to, as it stops one redis-server; the others
    // keep serving, and the process ends with its last node (or on a signal).
    let mut all_stopped = Box::pin(async {
        futures_join_all(handles.iter_mut().map(|h| Box::pin(h.stopped()))).await;
    });
    tokio::select! {
        _ = signals.recv() => tracing::info!("signal received, shutting down"),
        _ = &mut all_stopped => {}
    }
    drop(all_stopped);
    // Bounded: a client stuck in a script that ignores the kill (a long C call such as
    // a backtracking string.find) must not keep the process alive.
    let all = futures_join_all(handles.into_iter().map(|h| Box::pin(h.shutdown())));
    if tokio::time::timeout(SHUTDOWN_GRACE, all).await.is_err() {
        tracing::warn!("clients still busy after {SHUTDOWN_GRACE:?}; exiting anyway");
    }
    Ok(())
}

/// Gives the nodes of one cluster their slot map: the slots split evenly in node
/// order. A node that already serves the same nodes and slots (a restart with the same
/// ports) keeps its map; otherwise the map gets the next version (a node's slots do not
/// move, so nothing is fenced).
fn give_map(bind: IpAddr, group: &[ServerHandle]) -> Result<(), String> {
    let host = if bind.is_unspecified() {
        "127.0.0.1".to_string()
    } else {
        bind.to_string()
    };
    let n = group.len();
    let nodes: Vec<serde_json::Value> = group
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let first = 16384 * i / n;
            let last = 16384 * (i + 1) / n - 1;
            serde_json::json!({
                "id": h.cluster_id(),
                "host": host,
                "port": h.addr().port(),
                "slots": [[first, last]],
            })
        })
        .collect();
    let version = group
        .iter()
        .map(|h| h.cluster_map_version())
        .max()
        .unwrap_or(0);
    let same = |h: &ServerHandle| {
        h.cluster_map_json().is_some_and(|current| {
            serde_json::from_str::<serde_json::Value>(&current)
                .is_ok_and(|v| v["nodes"] == serde_json::Value::Array(nodes.clone()))
        })
    };
    if version > 0 && group.iter().all(same) {
        return Ok(());
    }
    let map = serde_json::json!({ "version": version + 1, "nodes": nodes }).to_string();
    for h in group {
        h.set_cluster_map(&map, false)
            .map_err(|e| format!("cannot give {} its cluster map: {e}", h.addr()))?;
    }
    Ok(())
}

/// One JSON line on stdout once every node listens, so that a port the system picked
/// (`--port 0`, `--base-port 0`) can be read by a program: the same shape as `redlockd
/// harness`'s ready line (docs/testing.md). With clusters of `per_cluster` nodes, each
/// node names its cluster.
fn print_ready_line(handles: &[ServerHandle], per_cluster: Option<u16>) {
    let pid = std::process::id();
    let nodes: Vec<serde_json::Value> = (0..)
        .zip(handles)
        .map(|(i, h): (usize, &ServerHandle)| {
            let addr = h.addr();
            serde_json::json!({
                "index": i,
                "host": addr.ip().to_string(),
                "port": addr.port(),
                "addr": addr.to_string(),
                "url": format!("redis://{addr}"),
                "tls_addr": h.tls_addr().map(|a| a.to_string()),
                "pid": pid,
                "cluster": per_cluster.map(|m| i / usize::from(m)),
            })
        })
        .collect();
    let line = serde_json::json!({
        "ready": true,
        "version": env!("CARGO_PKG_VERSION"),
        "pid": pid,
        "nodes": nodes,
    });
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    // Nobody reading stdout (closed) is no reason not to serve.
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

/// The cluster's addresses for a person, after the ready line. A stdout nobody reads
/// (closed) is no reason to stop serving: write errors are ignored.
fn print_cluster_summary(handles: &[ServerHandle], per_cluster: Option<u16>) {
    use std::fmt::Write as _;
    let mut text = String::new();
    if let Some(m) = per_cluster {
        let groups: Vec<&[ServerHandle]> = handles.chunks(usize::from(m)).collect();
        let _ = writeln!(
            text,
            "redlockd group: {} clusters of {m} nodes (Redis Cluster protocol; each cluster is one Redlock vote)",
            groups.len()
        );
        for (c, group) in groups.iter().enumerate() {
            let seeds: Vec<String> = group.iter().map(|h| h.addr().to_string()).collect();
            let _ = writeln!(text, "  cluster {c} (seed addresses): {}", seeds.join(","));
        }
        let _ = writeln!(
            text,
            "Ctrl-C stops all nodes; SHUTDOWN stops the node it is sent to."
        );
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
        return;
    }
    let addrs: Vec<String> = handles.iter().map(|h| h.addr().to_string()).collect();
    let fence = handles[0].fence_remaining().as_millis();
    let _ = writeln!(text, "redlockd group: {} nodes", handles.len());
    for h in handles {
        let _ = match h.tls_addr() {
            Some(tls) => writeln!(text, "  redis://{}  rediss://{tls}", h.addr()),
            None => writeln!(text, "  redis://{}", h.addr()),
        };
    }
    let _ = writeln!(text, "nodes for clients: {}", addrs.join(","));
    let tls: Vec<String> = handles
        .iter()
        .filter_map(|h| h.tls_addr().map(|a| format!("rediss://{a}")))
        .collect();
    if !tls.is_empty() {
        let _ = writeln!(text, "TLS nodes for clients: {}", tls.join(","));
    }
    if fence > 0 {
        let _ = writeln!(
            text,
            "restart fence: writes get TRYAGAIN for the first {fence} ms (what these nodes may have granted before; INFO fence says why)"
        );
    }
    let _ = writeln!(
        text,
        "Ctrl-C stops all nodes; SHUTDOWN stops the node it is sent to."
    );
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

/// How long SIGTERM / SHUTDOWN waits for clients and scripts before the process exits.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

/// Waits for all of several futures.
async fn futures_join_all<F: std::future::Future<Output = ()> + Unpin>(
    futs: impl Iterator<Item = F>,
) {
    let mut futs: Vec<Option<F>> = futs.map(Some).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for slot in futs.iter_mut() {
            if let Some(f) = slot {
                if std::pin::Pin::new(f).poll(cx).is_ready() {
                    *slot = None;
                } else {
                    pending = true;
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
}

/// SIGTERM and Ctrl-C, registered up front.
pub(crate) struct ShutdownSignal {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
}

impl ShutdownSignal {
    pub(crate) fn install() -> ShutdownSignal {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            ShutdownSignal {
                term: signal(SignalKind::terminate()).ok(),
                int: signal(SignalKind::interrupt()).ok(),
            }
        }
        #[cfg(not(unix))]
        ShutdownSignal {}
    }

    pub(crate) async fn recv(mut self) {
        #[cfg(unix)]
        {
            let term = async {
                match &mut self.term {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending().await,
                }
            };
            let int = async {
                match &mut self.int {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => {
                        let _ = tokio::signal::ctrl_c().await;
                    }
                }
            };
            tokio::select! {
                _ = term => {}
                _ = int => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
