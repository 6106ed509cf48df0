//! `--metrics-addr`: a Prometheus text endpoint (`GET /metrics`) with what an operator
//! of a lock service asks first. A tiny HTTP/1.0-style responder: one request per
//! connection, bounded in size and time, so a scraper can never hold resources.

use crate::commands::{table, Shared};
use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Largest request head read; a scrape is a few hundred bytes.
const MAX_REQUEST: usize = 8 * 1024;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves until the server shuts down.
pub(super) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let stop = shared.shutdown.notified();
        tokio::pin!(stop);
        stop.as_mut().enable();
        if shared
            .shutting_down
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            return;
        }
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let shared = shared.clone();
                    tokio::spawn(async move {
                        let _ = tokio::time::timeout(REQUEST_TIMEOUT, answer(stream, &shared)).await;
                    });
                }
                Err(e) => {
                    tracing::warn!("metrics accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            _ = &mut stop => return,
        }
    }
}

async fn answer(mut stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
        if head.len() > MAX_REQUEST {
            return respond(&mut stream, "431 Request Header Fields Too Large", "").await;
        }
    }
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (method, path) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    match (method, path) {
        (b"GET", b"/metrics") => respond(&mut stream, "200 OK", &render(shared)).await,
        (b"GET", _) => respond(&mut stream, "404 Not Found", "try /metrics\n").await,
        _ => respond(&mut stream, "405 Method Not Allowed", "").await,
    }
}

async fn respond(stream: &mut TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

/// One metric family's header.
fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// The exposition text.
pub(crate) fn render(shared: &Shared) -> String {
    let mut out = String::with_capacity(16 * 1024);
    let stats = &shared.stats;
    let locks = &stats.locks;
    let now = shared.clock.now_ms();

    family(
        &mut out,
        "redlockd_lock_grants_total",
        "counter",
        "SET NX that took a free key.",
    );
    let _ = writeln!(
        out,
        "redlockd_lock_grants_total {}",
        locks.grants.load(Relaxed)
    );
    family(
        &mut out,
        "redlockd_lock_refusals_total",
        "counter",
        "Lock requests refused, by reason: held (SET NX on a taken key), fence (restart fence), max_ttl (TTL above --max-ttl).",
    );
    let fenced: u64 = table::COMMANDS
        .iter()
        .map(|s| stats.command(s.index).rejected.load(Relaxed))
        .sum();
    let _ = writeln!(
        out,
        "redlockd_lock_refusals_total{{reason=\"held\"}} {}",
        locks.held.load(Relaxed)
    );
    let _ = writeln!(
        out,
        "redlockd_lock_refusals_total{{reason=\"fence\"}} {fenced}"
    );
    let _ = writeln!(
        out,
        "redlockd_lock_refusals_total{{reason=\"max_ttl\"}} {}",
        locks.above_max_ttl.load(Relaxed)
    );
    family(
        &mut out,
        "redlockd_keys",
        "gauge",
        "Keys (locks and others) per database, expired ones not yet reclaimed included.",
    );
    for (i, db) in shared.keyspace.dbs().iter().enumerate() {
        let n = db.len();
        if n > 0 || i == 0 {
            let _ = writeln!(out, "redlockd_keys{{db=\"{i}\"}} {n}");
        }
    }
    family(
        &mut out,
        "redlockd_expired_keys_total",
        "counter",
        "Keys reclaimed by active expiry.",
    );
    let _ = writeln!(
        out,
        "redlockd_expired_keys_total {}",
        stats.expired_keys.load(Relaxed)
    );
    family(
        &mut out,
        "redlockd_fence_active",
        "gauge",
        "1 while the restart fence refuses writes.",
    );
    let remaining = shared.fence.remaining_ms(now);
    let _ = writeln!(out, "redlockd_fence_active {}", u8::from(remaining > 0));
    family(
        &mut out,
        "redlockd_fence_remaining_seconds",
        "gauge",
        "Time until the restart fence lifts.",
    );
    let _ = writeln!(
        out,
        "redlockd_fence_remaining_seconds {}",
        remaining as f64 / 1000.0
    );
    family(
        &mut out,
        "redlockd_connected_clients",
        "gauge",
        "Open client connections.",
    );
    let _ = writeln!(out, "redlockd_connected_clients {}", shared.clients.len());
    family(
        &mut out,
        "redlockd_blocked_clients",
        "gauge",
        "Clients waiting in a blocking command.",
    );
    let _ = writeln!(
        out,
        "redlockd_blocked_clients {}",
        shared.blocking.blocked_clients()
    );
    family(
        &mut out,
        "redlockd_connections_received_total",
        "counter",
        "Connections accepted.",
    );
    let _ = writeln!(
        out,
        "redlockd_connections_received_total {}",
        stats.total_connections.load(Relaxed)
    );
    family(
        &mut out,
        "redlockd_rejected_connections_total",
        "counter",
        "Connections refused at maxclients.",
    );
    let _ = writeln!(
        out,
        "redlockd_rejected_connections_total {}",
        stats.rejected_connections.load(Relaxed)
    );
    family(
        &mut out,
        "redlockd_script_seconds_total",
        "counter",
        "Time spent running scripts (EVAL, EVALSHA and their _RO forms).",
    );
    let script_us: u64 = table::COMMANDS
        .iter()
        .filter(|s| s.name.starts_with("eval"))
        .map(|s| stats.command(s.index).usec.load(Relaxed))
        .sum();
    let _ = writeln!(
        out,
        "redlockd_script_seconds_total {}",
        script_us as f64 / 1e6
    );

    family(
        &mut out,
        "redlockd_commands_total",
        "counter",
        "Commands run, by command.",
    );
    for s in table::COMMANDS.iter() {
        let c = stats.command(s.index);
        let calls = c.calls.load(Relaxed);
        if calls > 0 {
            let _ = writeln!(out, "redlockd_commands_total{{cmd=\"{}\"}} {calls}", s.name);
        }
    }
    family(
        &mut out,
        "redlockd_command_errors_total",
        "counter",
        "Commands that replied with an error, by command.",
    );
    for s in table::COMMANDS.iter() {
        let failed = stats.command(s.index).failed.load(Relaxed);
        if failed > 0 {
            let _ = writeln!(
                out,
                "redlockd_command_errors_total{{cmd=\"{}\"}} {failed}",
                s.name
            );
        }
    }
    family(
        &mut out,
        "redlockd_command_duration_seconds",
        "histogram",
        "Command run time on the server (not network), by command.",
    );
    for s in table::COMMANDS.iter() {
        let c = stats.command(s.index);
        let calls = c.calls.load(Relaxed);
        if calls == 0 {
            continue;
        }
        let mut cumulative = 0;
        let histogram = c.histogram();
        let last = histogram.len() - 1;
        // From the buckets alone (calls is a separate counter, updated a moment apart).
        let count: u64 = histogram.iter().sum();
        for (i, n) in histogram.into_iter().enumerate().take(last) {
            cumulative += n;
            let le = (1u64 << i) as f64 / 1e6;
            let _ = writeln!(
                out,
                "redlockd_command_duration_seconds_bucket{{cmd=\"{}\",le=\"{le}\"}} {cumulative}",
                s.name
            );
        }
        let _ = writeln!(
            out,
            "redlockd_command_duration_seconds_bucket{{cmd=\"{}\",le=\"+Inf\"}} {count}",
            s.name
        );
        let _ = writeln!(
            out,
            "redlockd_command_duration_seconds_sum{{cmd=\"{}\"}} {}",
            s.name,
            c.usec.load(Relaxed) as f64 / 1e6
        );
        let _ = writeln!(
            out,
            "redlockd_command_duration_seconds_count{{cmd=\"{}\"}} {count}",
            s.name
        );
    }
    out
}
