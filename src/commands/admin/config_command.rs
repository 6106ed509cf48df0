//! CONFIG GET / SET / RESETSTAT / REWRITE / HELP: the settings Redis clients read, the
//! ones that can change at run time, and the refusal of the rest.

use crate::commands::{CmdResult, Ctx};
use crate::config::{AuthClients, Config, TlsConfig};
use crate::glob;
use crate::protocol::{errors, Reply};
use bytes::Bytes;
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;

/// CONFIG GET pattern... | CONFIG SET (refused) | CONFIG RESETSTAT
pub fn config(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    match sub.as_str() {
        "get" => {
            if args.len() < 3 {
                return Err(errors::wrong_arity("config|get"));
            }
            let c = &ctx.shared.config;
            let stats = &ctx.shared.stats;
            let settings: Vec<(&str, String)> = vec![
                ("bind", c.bind.to_string()),
                ("port", if c.plain { c.port } else { 0 }.to_string()),
                ("tls-port", c.tls.as_ref().map_or(0, |t| t.port).to_string()),
                ("tls-cert-file", tls_path(c, |t| Some(&t.cert_file))),
                ("tls-key-file", tls_path(c, |t| Some(&t.key_file))),
                ("tls-ca-cert-file", tls_path(c, |t| t.ca_cert_file.as_ref())),
                (
                    "tls-auth-clients",
                    match c.tls.as_ref().map_or(AuthClients::Yes, |t| t.auth_clients) {
                        AuthClients::Yes => "yes",
                        AuthClients::Optional => "optional",
                        AuthClients::No => "no",
                    }
                    .to_string(),
                ),
                ("databases", c.databases.to_string()),
                ("maxclients", ctx.shared.maxclients().to_string()),
                (
                    "slowlog-log-slower-than",
                    stats.slowlog.slower_than_us.load(Relaxed).to_string(),
                ),
                (
                    "slowlog-max-len",
                    stats.slowlog.max_len.load(Relaxed).to_string(),
                ),
                (
                    "latency-monitor-threshold",
                    stats.latency.threshold_ms.load(Relaxed).to_string(),
                ),
                ("latency-tracking", "yes".to_string()),
                ("proto-max-bulk-len", c.proto_max_bulk_len.to_string()),
                (
                    "busy-reply-threshold",
                    ctx.shared.scripts.busy_ms().to_string(),
                ),
                ("lua-time-limit", ctx.shared.scripts.busy_ms().to_string()),
                ("requirepass", c.requirepass.clone().unwrap_or_default()),
                (
                    "protected-mode",
                    if ctx.shared.acl.protected_mode() {
                        "yes"
                    } else {
                        "no"
                    }
                    .to_string(),
                ),
                (
                    "aclfile",
                    c.aclfile
                        .as_ref()
                        .map_or(String::new(), |p| p.display().to_string()),
                ),
                ("max-ttl", c.max_ttl.as_millis().to_string()),
                (
                    "restart-delay",
                    c.effective_restart_delay().as_millis().to_string(),
                ),
                (
                    "require-ttl",
                    if c.require_ttl { "yes" } else { "no" }.to_string(),
                ),
                (
                    "lock-delay",
                    ctx.shared.keyspace.lock_delay().ms().to_string(),
                ),
                ("lock-delay-prefix", lock_delay_prefixes(ctx)),
                ("appendonly", "no".to_string()),
                ("save", String::new()),
                ("maxmemory", ctx.shared.maxmemory().to_string()),
                ("maxmemory-policy", "noeviction".to_string()),
                ("timeout", "0".to_string()),
                ("notify-keyspace-events", String::new()),
                ("cluster-enabled", "no".to_string()),
                (
                    "stream-node-max-entries",
                    ctx.shared.streams.limits().max_entries.to_string(),
                ),
                (
                    "stream-node-max-bytes",
                    ctx.shared.streams.limits().max_bytes.to_string(),
                ),
                (
                    "hll-sparse-max-bytes",
                    ctx.shared.hll_sparse_max_bytes.load(Relaxed).to_string(),
                ),
            ];
            let mut pairs = Vec::new();
            for (name, value) in settings {
                if args[2..]
                    .iter()
                    .any(|p| glob::matches(&p.to_ascii_lowercase(), name.as_bytes()))
                {
                    pairs.push((Reply::bulk_str(name), Reply::bulk_str(&value)));
                }
            }
            Ok(Reply::Map(pairs))
        }
        "set" => config_set(ctx, &args[2..]),
        "resetstat" if args.len() == 2 => {
            ctx.shared.stats.reset();
            Ok(Reply::Ok)
        }
        _ => Err(errors::unknown_subcommand("config", &args[1])),
    }
}

/// The lock-delay's prefixes as CONFIG GET shows them: a comma list.
fn lock_delay_prefixes(ctx: &Ctx) -> String {
    let prefixes = ctx.shared.keyspace.lock_delay().prefixes();
    let names: Vec<_> = prefixes
        .iter()
        .map(|p| String::from_utf8_lossy(p))
        .collect();
    names.join(",")
}

/// A TLS file setting as CONFIG GET shows it (empty when unset, as in Redis).
fn tls_path(c: &Config, path: impl Fn(&TlsConfig) -> Option<&PathBuf>) -> String {
    c.tls
        .as_ref()
        .and_then(path)
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

/// The settings CONFIG SET can change while the server runs, with Redis's bounds.
const LIVE: &[(&str, i64, i64)] = &[
    ("maxclients", 1, u32::MAX as i64),
    ("slowlog-log-slower-than", -1, i64::MAX),
    ("slowlog-max-len", 0, i64::MAX),
    ("latency-monitor-threshold", 0, i64::MAX),
    ("busy-reply-threshold", 0, i64::MAX),
    ("lua-time-limit", 0, i64::MAX),
    ("stream-node-max-entries", 0, i64::MAX),
    ("stream-node-max-bytes", 0, i64::MAX),
    ("hll-sparse-max-bytes", 0, i64::MAX),
];

/// Settings CONFIG GET shows that are fixed at start (flags, or not applicable).
const IMMUTABLE: &[&str] = &[
    "bind",
    "port",
    "tls-port",
    "tls-cert-file",
    "tls-key-file",
    "tls-ca-cert-file",
    "tls-auth-clients",
    "databases",
    "proto-max-bulk-len",
    "requirepass",
    "aclfile",
    "max-ttl",
    "restart-delay",
    "require-ttl",
    "appendonly",
    "save",
    "timeout",
    "notify-keyspace-events",
    "cluster-enabled",
    "latency-tracking",
];

/// The memory settings CONFIG SET takes, by their canonical names.
fn memory_setting(name: &str) -> Option<&'static str> {
    ["maxmemory", "maxmemory-policy"]
        .into_iter()
        .find(|n| *n == name)
}

/// A memory setting's new value: maxmemory in Redis's units; the policy can only be
/// noeviction, since a lock server must never drop a lock to make room.
fn memory_value(name: &str, value: &str) -> Result<i64, &'static str> {
    if name == "maxmemory" {
        return crate::config::parse_memory(value)
            .ok()
            .and_then(|v| i64::try_from(v).ok())
            .ok_or("argument must be a memory value");
    }
    const REDIS_POLICIES: &[&str] = &[
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
        "allkeys-lru",
        "allkeys-lfu",
        "allkeys-random",
    ];
    match value.to_ascii_lowercase().as_str() {
        "noeviction" => Ok(0),
        v if REDIS_POLICIES.contains(&v) => {
            Err("redlockd never evicts a lock: noeviction is the only policy")
        }
        _ => Err("argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction"),
    }
}

/// `CONFIG SET name value [name value ...]`: all or nothing, as in Redis 7.
fn config_set(ctx: &mut Ctx, pairs: &[Bytes]) -> CmdResult {
    if pairs.len() < 2 {
        return Err(errors::wrong_arity("config|set"));
    }
    if !pairs.len().is_multiple_of(2) {
        return Err(errors::syntax());
    }
    let failed = |name: &str, why: &str| {
        Reply::error(format!(
            "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
        ))
    };
    let mut changes: Vec<(&str, i64)> = Vec::new();
    let mut prefixes: Option<Vec<Bytes>> = None;
    for pair in pairs.chunks(2) {
        let name = String::from_utf8_lossy(&pair[0]).to_ascii_lowercase();
        if name == "lock-delay-prefix" {
            if prefixes.is_some() {
                return Err(failed(&name, "duplicate parameter"));
            }
            let list = (pair[1].split(|&b| b == b','))
                .filter(|p| !p.is_empty())
                .map(Bytes::copy_from_slice);
            prefixes = Some(list.collect());
            continue;
        }
        if name == "lock-delay" {
            if changes.iter().any(|(n, _)| *n == "lock-delay") {
                return Err(failed(&name, "duplicate parameter"));
            }
            let text = String::from_utf8_lossy(&pair[1]);
            let ms = crate::config::parse_duration(&text)
                .map_err(|_| failed(&name, "argument must be a duration (1500, 1500ms, 5s, 2m)"))?
                .as_millis();
            let max = ctx.shared.fence.max_ttl_ms();
            if ms > max as u128 {
                return Err(failed(
                    &name,
                    &format!("argument must be at most max-ttl ({max} ms)"),
                ));
            }
            changes.push(("lock-delay", ms as i64));
            continue;
        }
        if name == "protected-mode" {
            if changes.iter().any(|(n, _)| *n == "protected-mode") {
                return Err(failed("protected-mode", "duplicate parameter"));
            }
            let on = match pair[1].to_ascii_lowercase().as_slice() {
                b"yes" => 1,
                b"no" => 0,
                _ => return Err(failed("protected-mode", "argument must be 'yes' or 'no'")),
            };
            changes.push(("protected-mode", on));
            continue;
        }
        if let Some(known) = memory_setting(&name) {
            if changes.iter().any(|(n, _)| *n == known) {
                return Err(failed(known, "duplicate parameter"));
            }
            let value = String::from_utf8_lossy(&pair[1]);
            changes.push((
                known,
                memory_value(known, &value).map_err(|e| failed(known, e))?,
            ));
            continue;
        }
        let Some(&(known, min, max)) = LIVE.iter().find(|(n, _, _)| *n == name) else {
            if IMMUTABLE.contains(&name.as_str()) {
                return Err(failed(&name, "can't set immutable config"));
            }
            return Err(Reply::error(format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{}'",
                errors::printable(&pair[0])
            )));
        };
        if changes.iter().any(|(n, _)| *n == known) {
            return Err(failed(known, "duplicate parameter"));
        }
        let value = crate::commands::parse_i64(&pair[1])
            .ok_or_else(|| failed(known, "argument couldn't be parsed into an integer"))?;
        if value < min || value > max {
            return Err(failed(
                known,
                &format!("argument must be between {min} and {max} inclusive"),
            ));
        }
        changes.push((known, value));
    }
    let stats = &ctx.shared.stats;
    if let Some(p) = prefixes {
        ctx.shared.keyspace.lock_delay().set_prefixes(p);
    }
    for (name, value) in changes {
        match name {
            "lock-delay" => ctx.shared.keyspace.lock_delay().set_ms(value as u64),
            "maxclients" => ctx.shared.set_maxclients(value as usize),
            "maxmemory" => ctx.shared.set_maxmemory(value as u64),
            "maxmemory-policy" => {}
            "protected-mode" => ctx.shared.acl.set_protected_mode(value == 1),
            "slowlog-log-slower-than" => stats.slowlog.slower_than_us.store(value, Relaxed),
            "slowlog-max-len" => stats.slowlog.set_max_len(value as usize),
            "hll-sparse-max-bytes" => ctx.shared.hll_sparse_max_bytes.store(value as u64, Relaxed),
            "busy-reply-threshold" | "lua-time-limit" => {
                ctx.shared.scripts.set_busy_ms(value as u64)
            }
            "stream-node-max-entries" => ctx.shared.streams.set_max_entries(value as u64),
            "stream-node-max-bytes" => ctx.shared.streams.set_max_bytes(value as u64),
            _ => stats.latency.threshold_ms.store(value as u64, Relaxed),
        }
    }
    Ok(Reply::Ok)
}
