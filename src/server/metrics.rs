//! `--metrics-addr`: a Prometheus text endpoint (`GET /metrics`) with what an operator
//! of a lock service asks first. A tiny HTTP/1.0-style responder: one request per
//! connection, bounded in size and time, so a scraper can never hold resources.
//!
//! The endpoint has a budget of its own, apart from the client connections: at most
//! `MAX_CONNECTIONS` open at once (more are answered 503 and closed at once), a
//! request head must arrive within `HEAD_TIMEOUT`, and failures are logged at most
//! once a second. Idle or flooding connections to it can neither hold the node's file
//! descriptors nor starve the lock port. Optional HTTP basic auth
//! (`Config::metrics_auth`).

use crate::commands::command_table;
use crate::node::stats::{CommandTotals, LogLimit};
use crate::node::Shared;
use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Largest request head read; a scrape is a few hundred bytes.
const MAX_REQUEST: usize = 8 * 1024;
/// A scrape sends its request at once: a connection that has not sent a whole head by
/// then is dropped.
const HEAD_TIMEOUT: Duration = Duration::from_secs(1);
/// Bound on the whole exchange (a slow reader of the answer).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Metrics connections open at once; a Prometheus server scrapes one at a time.
pub(super) const MAX_CONNECTIONS: usize = 16;

/// What the refused get: no request is read.
const BUSY: &[u8] =
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

/// Serves until the server shuts down.
pub(super) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let open = Arc::new(AtomicUsize::new(0));
    let accept_log = LogLimit::default();
    let busy_log = LogLimit::default();
    let auth = shared.config.metrics_auth.as_deref().map(basic_credentials);
    let auth: Option<Arc<str>> = auth.map(Arc::from);
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
                Ok((stream, _)) if open.load(Ordering::Relaxed) >= MAX_CONNECTIONS => {
                    // Refused without waiting for anything: the descriptor goes back now.
                    let _ = stream.try_write(BUSY);
                    drop(stream);
                    if let Some(n) = busy_log.event(now_ms()) {
                        tracing::warn!(
                            refused = n,
                            "metrics: {MAX_CONNECTIONS} connections already open, refused {n} more since the last line"
                        );
                    }
                }
                Ok((stream, _)) => {
                    let shared = shared.clone();
                    let open = open.clone();
                    let auth = auth.clone();
                    open.fetch_add(1, Ordering::Relaxed);
                    tokio::spawn(async move {
                        let _ = tokio::time::timeout(
                            REQUEST_TIMEOUT,
                            answer(stream, &shared, auth.as_deref()),
                        )
                        .await;
                        open.fetch_sub(1, Ordering::Relaxed);
                    });
                }
                Err(e) => {
                    if let Some(n) = accept_log.event(now_ms()) {
                        tracing::warn!(failures = n, "metrics accept failed: {e}");
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            _ = &mut stop => return,
        }
    }
}

fn now_ms() -> u64 {
    crate::clock::mono_ns() / 1_000_000
}

/// The `Authorization` header value that `user:pass` sends: `Basic <base64>`.
fn basic_credentials(user_pass: &str) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::from("Basic ");
    for chunk in user_pass.as_bytes().chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The value of header `name` (case-insensitive) in a request head.
fn header<'a>(head: &'a [u8], name: &str) -> Option<&'a [u8]> {
    head.split(|&b| b == b'\n').skip(1).find_map(|line| {
        let colon = line.iter().position(|&b| b == b':')?;
        line[..colon]
            .eq_ignore_ascii_case(name.as_bytes())
            .then(|| line[colon + 1..].trim_ascii())
    })
}

async fn answer(mut stream: TcpStream, shared: &Shared, auth: Option<&str>) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    let read_head = async {
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n]);
            if head.len() > MAX_REQUEST {
                return Ok(false);
            }
        }
        Ok::<bool, std::io::Error>(true)
    };
    match tokio::time::timeout(HEAD_TIMEOUT, read_head).await {
        Err(_) => return Ok(()),
        Ok(Err(e)) => return Err(e),
        Ok(Ok(false)) => {
            return respond(&mut stream, "431 Request Header Fields Too Large", "", "").await
        }
        Ok(Ok(true)) => {}
    }
    if let Some(expected) = auth {
        let given = header(&head, "authorization").unwrap_or_default();
        if !crate::acl::same_secret(given, expected.as_bytes()) {
            return respond(
                &mut stream,
                "401 Unauthorized",
                "WWW-Authenticate: Basic realm=\"redlockd metrics\"\r\n",
                "",
            )
            .await;
        }
    }
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (method, path) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    match (method, path) {
        (b"GET", b"/metrics") => respond(&mut stream, "200 OK", "", &render(shared)).await,
        (b"GET", _) => respond(&mut stream, "404 Not Found", "", "try /metrics\n").await,
        _ => respond(&mut stream, "405 Method Not Allowed", "", "").await,
    }
}

/// Writes a response; `extra` is more header lines, each ending in CRLF.
async fn respond(
    stream: &mut TcpStream,
    status: &str,
    extra: &str,
    body: &str,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n",
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
    let commands = || {
        command_table::COMMANDS
            .iter()
            .map(|s| (s, stats.command(s.index)))
    };

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
        "Lock requests refused, by reason: held (SET NX on a taken key), fence (restart fence), max_ttl (TTL above --max-ttl), oom (used memory above --maxmemory), noperm (the user's ACL rules), lock_delay (the key is a lock that expired less than --lock-delay ago).",
    )
    .sample(refusals, "reason=\"held\"", locks.held.load(Relaxed))
    .sample(refusals, "reason=\"fence\"", locks.fenced.load(Relaxed))
    .sample(refusals, "reason=\"max_ttl\"", locks.above_max_ttl.load(Relaxed))
    .sample(refusals, "reason=\"oom\"", locks.oom.load(Relaxed))
    .sample(refusals, "reason=\"noperm\"", locks.noperm.load(Relaxed))
    .sample(refusals, "reason=\"lock_delay\"", locks.lock_delayed.load(Relaxed));
    // Lock introspection (`commands::families::locks`).
    let held = &shared.locks;
    out.single(
        "redlockd_locks_held",
        "gauge",
        "Locks held now, as lock introspection records them (0 while it is off).",
        held.held(),
    );
    for (name, help, value) in [
        ("redlockd_lock_releases_total", "Locks released by a command (DEL, UNLINK, DELIFEQ, DELEX, a release script).", &held.released),
        ("redlockd_lock_extensions_total", "Lock TTLs set again by their holder (SET IFEQ ... PX, a script's PEXPIRE).", &held.extensions),
        ("redlockd_lock_expired_held_total", "Locks that reached their TTL without being released.", &held.expired_held),
        ("redlockd_lock_overruns_total", "Releases carrying the token of a lock that had already expired: the holder overran its TTL.", &held.overruns),
    ] {
        out.single(name, "counter", help, value.load(Relaxed));
    }
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
    if shared.cluster.enabled() {
        let cluster = &shared.cluster;
        let refused = "redlockd_cluster_redirections_total";
        out.family(
            refused,
            "counter",
            "Cluster mode: keyed requests refused by the routing check, by reply: moved (the slot is another node's), crossslot (keys of several slots), clusterdown (a slot no node serves).",
        )
        .sample(refused, "reply=\"moved\"", cluster.moved.load(Relaxed))
        .sample(refused, "reply=\"crossslot\"", cluster.crossslot.load(Relaxed))
        .sample(refused, "reply=\"clusterdown\"", cluster.clusterdown.load(Relaxed));
    }
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
        .sample(&format!("{duration}_sum"), &cmd, c.usec as f64 / 1e6)
        .sample(&format!("{duration}_count"), &cmd, count);
    }
    out.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_encode_as_base64() {
        assert_eq!(
            basic_credentials("Aladdin:open sesame"),
            "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
        assert_eq!(basic_credentials("a:b"), "Basic YTpi");
        assert_eq!(basic_credentials("ab:c"), "Basic YWI6Yw==");
        let head = b"GET /metrics HTTP/1.1\r\nHost: x\r\nauthorization:  Basic YTpi \r\n\r\n";
        assert_eq!(header(head, "Authorization"), Some(&b"Basic YTpi"[..]));
        assert_eq!(header(head, "cookie"), None);
    }
}
