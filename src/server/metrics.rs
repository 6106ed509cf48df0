//! `--metrics-addr`: a Prometheus text endpoint (`GET /metrics`) with what an operator
//! of a lock service asks first. A tiny HTTP/1.0-style responder: one request per
//! connection, bounded in size and time, so a scraper can never hold resources.

use crate::node::stats::CommandTotals;
use crate::commands::command_table;
use crate::node::Shared;
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

/// Writes the exposition text: a family header, then its samples.
struct Exposition(String);

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) -> &mut Self {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
        self
    }

    /// One sample; `labels` is `key="value",...` or empty.
    fn sample(&mut self, name: &str, labels: &str, value: impl std::fmt::Display) -> &mut Self {
        if labels.is_empty() {
            let _ = writeln!(self.0, "{name} {value}");
        } else {
            let _ = writeln!(self.0, "{name}{{{labels}}} {value}");
        }
        self
    }

    /// A family with a single unlabelled sample.
    fn single(&mut self, name: &str, kind: &str, help: &str, value: impl std::fmt::Display) {
        self.family(name, kind, help).sample(name, "", value);
    }
}

/// The exposition text.
pub(crate) fn render(shared: &Shared) -> String {
    let mut out = Exposition(String::with_capacity(16 * 1024));
    let stats = &shared.stats;
    let locks = &stats.locks;
    let commands = || command_table::COMMANDS.iter().map(|s| (s, stats.command(s.index)));

    out.single(
        "redlockd_lock_grants_total",
        "counter",
        "SET NX that took a free key.",
        locks.grants.load(Relaxed),
    );
    let refusals = "redlockd_lock_refusals_total";
    out.family(
        refusals,
        "counter",
        "Lock requests refused, by reason: held (SET NX on a taken key), fence (restart fence), max_ttl (TTL above --max-ttl), oom (used memory above --maxmemory), noperm (the user's ACL rules).",
    )
    .sample(refusals, "reason=\"held\"", locks.held.load(Relaxed))
    .sample(refusals, "reason=\"fence\"", locks.fenced.load(Relaxed))
    .sample(refusals, "reason=\"max_ttl\"", locks.above_max_ttl.load(Relaxed))
    .sample(refusals, "reason=\"oom\"", locks.oom.load(Relaxed))
    .sample(refusals, "reason=\"noperm\"", locks.noperm.load(Relaxed));
    out.family(
        "redlockd_keys",
        "gauge",
        "Keys (locks and others) per database, expired ones not yet reclaimed included.",
    );
    for (i, db) in shared.keyspace.dbs().iter().enumerate() {
        let n = db.len();
        if n > 0 || i == 0 {
            out.sample("redlockd_keys", &format!("db=\"{i}\""), n);
        }
    }
    out.single(
        "redlockd_expired_keys_total",
        "counter",
        "Keys reclaimed by active expiry.",
        stats.expired_keys.load(Relaxed),
    );
    let remaining = shared.fence.remaining_ms(shared.clock.now_ms());
    out.single(
        "redlockd_fence_active",
        "gauge",
        "1 while the restart fence refuses writes.",
        u8::from(remaining > 0),
    );
    out.single(
        "redlockd_fence_remaining_seconds",
        "gauge",
        "Time until the restart fence lifts.",
        remaining as f64 / 1000.0,
    );
    out.single(
        "redlockd_used_memory_bytes",
        "gauge",
        "Bytes allocated (INFO used_memory).",
        crate::alloc::used_memory(),
    );
    out.single(
        "redlockd_maxmemory_bytes",
        "gauge",
        "--maxmemory (0: no limit); above it writes that may grow memory get OOM.",
        shared.maxmemory(),
    );
    out.single(
        "redlockd_connected_clients",
        "gauge",
        "Open client connections.",
        shared.clients.len(),
    );
    out.single(
        "redlockd_blocked_clients",
        "gauge",
        "Clients waiting in a blocking command.",
        shared.blocking.blocked_clients(),
    );
    out.single(
        "redlockd_connections_received_total",
        "counter",
        "Connections accepted.",
        stats.total_connections.load(Relaxed),
    );
    out.single(
        "redlockd_rejected_connections_total",
        "counter",
        "Connections refused at maxclients.",
        stats.rejected_connections.load(Relaxed),
    );
    let script_us: u64 = commands()
        .filter(|(s, _)| s.name.starts_with("eval") || s.name.starts_with("fcall"))
        .map(|(_, c)| c.usec)
        .sum();
    out.single(
        "redlockd_script_seconds_total",
        "counter",
        "Time spent running scripts (EVAL, EVALSHA, FCALL and their _RO forms).",
        script_us as f64 / 1e6,
    );

    let per_command = |out: &mut Exposition, name, help, value: &dyn Fn(&CommandTotals) -> u64| {
        out.family(name, "counter", help);
        for (s, c) in commands() {
            let v = value(&c);
            if v > 0 {
                out.sample(name, &format!("cmd=\"{}\"", s.name), v);
            }
        }
    };
    per_command(
        &mut out,
        "redlockd_commands_total",
        "Commands run, by command.",
        &|c| c.calls(),
    );
    per_command(
        &mut out,
        "redlockd_command_errors_total",
        "Commands that replied with an error, by command.",
        &|c| c.failed,
    );
    let duration = "redlockd_command_duration_seconds";
    out.family(
        duration,
        "histogram",
        "Command run time on the server (not network), by command.",
    );
    for (s, c) in commands() {
        let histogram = c.histogram;
        // From the buckets alone (calls is a separate counter, updated a moment apart).
        let count: u64 = histogram.iter().sum();
        if count == 0 {
            continue;
        }
        let mut cumulative = 0;
        for (i, n) in histogram.iter().enumerate().take(histogram.len() - 1) {
            cumulative += n;
            let le = (1u64 << i) as f64 / 1e6;
            let labels = format!("cmd=\"{}\",le=\"{le}\"", s.name);
            out.sample(&format!("{duration}_bucket"), &labels, cumulative);
        }
        let cmd = format!("cmd=\"{}\"", s.name);
        out.sample(
            &format!("{duration}_bucket"),
            &format!("{cmd},le=\"+Inf\""),
            count,
        )
        .sample(
            &format!("{duration}_sum"),
            &cmd,
            c.usec as f64 / 1e6,
        )
        .sample(&format!("{duration}_count"), &cmd, count);
    }
    out.0
}
