//! Server commands: INFO, DBSIZE, FLUSHDB, FLUSHALL, TIME, COMMAND, CONFIG, SHUTDOWN.

use crate::commands::command_table::{flags, COMMANDS};
use crate::commands::{eq_ignore_case, CmdResult, Ctx, Spec};
use crate::config::{AuthClients, Config, TlsConfig};
use crate::glob;
use crate::protocol::{errors, Reply};
use bytes::Bytes;
use std::fmt::Write;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::atomic::Ordering::Relaxed;

pub fn dbsize(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    Ok(Reply::Integer(ctx.db().len() as i64))
}

fn check_flush_args(args: &[Bytes]) -> Result<(), Reply> {
    match args.len() {
        1 => Ok(()),
        2 if eq_ignore_case(&args[1], "sync") || eq_ignore_case(&args[1], "async") => Ok(()),
        _ => Err(errors::syntax()),
    }
}

pub fn flushdb(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    check_flush_args(args)?;
    ctx.db().clear();
    Ok(Reply::Ok)
}

pub fn flushall(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    check_flush_args(args)?;
    ctx.shared.keyspace.flush_all();
    Ok(Reply::Ok)
}

/// TIME: wall-clock seconds and microseconds (the manual clock's wall time in tests).
pub fn time(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let us = ctx.shared.clock.wall_us();
    Ok(Reply::Array(vec![
        Reply::Bulk(Bytes::from(us.div_euclid(1_000_000).to_string())),
        Reply::Bulk(Bytes::from(us.rem_euclid(1_000_000).to_string())),
    ]))
}

pub fn shutdown(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    for a in &args[1..] {
        if !["nosave", "save", "now", "force", "abort"]
            .iter()
            .any(|w| eq_ignore_case(a, w))
        {
            return Err(errors::syntax());
        }
        if eq_ignore_case(a, "abort") {
            return Err(Reply::error("ERR No shutdown in progress."));
        }
    }
    // NOSAVE: no snapshot, so the next boot raises the restart fence.
    let nosave = args[1..].iter().any(|a| eq_ignore_case(a, "nosave"));
    ctx.shared.save_on_shutdown.store(!nosave, Ordering::SeqCst);
    tracing::info!("SHUTDOWN requested by client {}", ctx.client.id());
    ctx.shared.request_shutdown();
    ctx.client.close_after_reply = true;
    Ok(Reply::Ok)
}

/// Writes one INFO section's lines.
type InfoSection = fn(&Ctx, &mut String);

/// INFO [section...]
pub fn info(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let wanted: Vec<String> = args[1..]
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    let all = wanted.iter().any(|w| w == "all" || w == "everything");
    let default = wanted.is_empty() || wanted.iter().any(|w| w == "default");
    const DEFAULT: &[&str] = &[
        "server",
        "clients",
        "memory",
        "persistence",
        "stats",
        "replication",
        "fence",
        "fencing",
        "keyspace",
    ];
    let include =
        |s: &str| all || (default && DEFAULT.contains(&s)) || wanted.iter().any(|w| w == s);
    let mut out = String::new();
    let sections: [(&str, InfoSection); 10] = [
        ("server", info_server),
        ("clients", info_clients),
        ("memory", info_memory),
        ("persistence", info_persistence),
        ("stats", info_stats),
        ("replication", info_replication),
        ("fence", info_fence),
        ("fencing", info_fencing),
        ("commandstats", info_commandstats),
        ("keyspace", info_keyspace),
    ];
    for (name, write) in sections {
        if include(name) {
            if !out.is_empty() {
                out.push_str("\r\n");
            }
            let mut title = name.to_string();
            title[..1].make_ascii_uppercase();
            let _ = write!(out, "# {title}\r\n");
            write(ctx, &mut out);
        }
    }
    Ok(Reply::Verbatim("txt", Bytes::from(out)))
}

fn info_server(ctx: &Ctx, out: &mut String) {
    let uptime_ms = ctx
        .shared
        .clock
        .now_ms()
        .saturating_sub(ctx.shared.started_ms.load(Ordering::Relaxed));
    let c = &ctx.shared.config;
    let tls_port = c.tls.as_ref().map_or(0, |t| t.port);
    // Redis shows the TLS port as tcp_port on a TLS-only node; tls_port is redlockd's.
    let tcp_port = if c.plain { c.port } else { tls_port };
    let _ = write!(
        out,
        "redis_version:{}\r\nredlockd_version:{}\r\nredis_mode:standalone\r\nos:{} {}\r\narch_bits:64\r\nmultiplexing_api:tokio\r\nprocess_id:{}\r\nrun_id:{}\r\ntcp_port:{}\r\ntls_port:{}\r\nuptime_in_seconds:{}\r\nuptime_in_days:{}\r\nclock:{}\r\n",
        crate::commands::admin::session::REDIS_VERSION,
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
        std::env::consts::ARCH,
        std::process::id(),
        ctx.shared.run_id,
        tcp_port,
        tls_port,
        uptime_ms / 1000,
        uptime_ms / 86_400_000,
        if ctx.shared.clock.is_manual() { "manual" } else { "monotonic" },
    );
}

fn info_clients(ctx: &Ctx, out: &mut String) {
    let _ = write!(
        out,
        "connected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:{}\r\n",
        ctx.shared.clients.len(),
        ctx.shared.maxclients(),
        ctx.shared.blocking.blocked_clients(),
    );
}

fn info_memory(ctx: &Ctx, out: &mut String) {
    use crate::alloc::{human, peak_memory, rss_bytes, used_memory, ALLOCATOR_NAME};
    let used = used_memory();
    let peak = peak_memory();
    let rss = rss_bytes();
    let system = total_system_memory();
    let (scripts, _) = ctx.shared.scripts.counts();
    let max = ctx.shared.maxmemory();
    let _ = write!(
        out,
        "used_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\nused_memory_rss_human:{}\r\n\
         used_memory_peak:{peak}\r\nused_memory_peak_human:{}\r\nused_memory_peak_perc:{:.2}%\r\n\
         total_system_memory:{system}\r\ntotal_system_memory_human:{}\r\n\
         number_of_cached_scripts:{scripts}\r\nmaxmemory:{max}\r\nmaxmemory_human:{}\r\n\
         maxmemory_policy:noeviction\r\n\
         mem_fragmentation_ratio:{:.2}\r\nmem_fragmentation_bytes:{}\r\nmem_allocator:{ALLOCATOR_NAME}\r\n",
        human(used),
        human(rss),
        human(peak),
        used as f64 * 100.0 / peak.max(1) as f64,
        human(system),
        human(max as usize),
        rss as f64 / used.max(1) as f64,
        rss as i64 - used as i64,
    );
}

/// MemTotal from /proc/meminfo, in bytes (0 where there is none).
fn total_system_memory() -> usize {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
            line.split_whitespace().nth(1)?.parse::<usize>().ok()
        })
        .map_or(0, |kb| kb * 1024)
}

fn info_persistence(_ctx: &Ctx, out: &mut String) {
    out.push_str("loading:0\r\nasync_loading:0\r\nrdb_changes_since_last_save:0\r\nrdb_bgsave_in_progress:0\r\naof_enabled:0\r\naof_rewrite_in_progress:0\r\n");
}

fn info_stats(ctx: &Ctx, out: &mut String) {
    let s = &ctx.shared.stats;
    let _ = write!(
        out,
        "total_connections_received:{}\r\ntotal_commands_processed:{}\r\nrejected_connections:{}\r\nexpired_keys:{}\r\nevicted_keys:0\r\n",
        s.total_connections.load(Ordering::Relaxed),
        s.total_commands(),
        s.rejected_connections.load(Ordering::Relaxed),
        s.expired_keys.load(Ordering::Relaxed),
    );
    let (_, evicted_scripts) = ctx.shared.scripts.counts();
    let _ = write!(
        out,
        "evicted_scripts:{evicted_scripts}\r\nacl_access_denied_auth:{}\r\nacl_access_denied_cmd:{}\r\nacl_access_denied_key:{}\r\nacl_access_denied_channel:{}\r\n",
        s.auth_failures.load(Ordering::Relaxed),
        s.acl_denied_cmd.load(Ordering::Relaxed),
        s.acl_denied_key.load(Ordering::Relaxed),
        s.acl_denied_channel.load(Ordering::Relaxed),
    );

    let _ = write!(
        out,
        "pubsub_channels:{}\r\npubsub_patterns:{}\r\n",
        ctx.shared.pubsub.channel_count(),
        ctx.shared.pubsub.pattern_count(),
    );
}

fn info_replication(_ctx: &Ctx, out: &mut String) {
    out.push_str("role:master\r\nconnected_slaves:0\r\n");
}

/// The restart fence: whether it is up, how long it has left, and its settings.
fn info_fence(ctx: &Ctx, out: &mut String) {
    let fence = &ctx.shared.fence;
    let now = ctx.shared.clock.now_ms();
    let left = fence.remaining_ms(now);
    let until_unix = if fence.until_ms() == 0 {
        0
    } else {
        ctx.shared.clock.mono_to_wall(fence.until_ms())
    };
    let _ = write!(
        out,
        "fence_active:{}\r\nfence_remaining_ms:{left}\r\nfence_until_unix_ms:{until_unix}\r\nmax_ttl_ms:{}\r\nrestart_delay_ms:{}\r\nrequire_ttl:{}\r\n",
        (left > 0) as u8,
        fence.max_ttl_ms(),
        fence.delay_ms(),
        fence.require_ttl() as u8,
    );
}

/// Fencing tokens and the data directory: the mark, its durable reservation, how many
/// reservation fsyncs this process made, and how the node last booted.
fn info_fencing(ctx: &Ctx, out: &mut String) {
    let s = ctx.shared;
    let dir = s
        .node_dir
        .as_ref()
        .map_or(String::new(), |d| d.path().display().to_string());
    let _ = write!(
        out,
        "fencing_token_mark:{}\r\nfencing_token_reserved:{}\r\nfencing_token_block:{}\r\nfencing_reservation_fsyncs:{}\r\ndir:{dir}\r\nlast_boot:{}\r\n",
        s.tokens.get(),
        s.tokens.reserved(),
        crate::durability::tokens::BLOCK,
        s.tokens.fsyncs(),
        s.last_boot.lock().name(),
    );
}

fn info_commandstats(ctx: &Ctx, out: &mut String) {
    for spec in COMMANDS.iter() {
        let s = ctx.shared.stats.command(spec.index);
        let calls = s.calls();
        let rejected = s.rejected;
        if calls == 0 && rejected == 0 {
            continue;
        }
        let usec = s.usec;
        let _ = write!(
            out,
            "cmdstat_{}:calls={calls},usec={usec},usec_per_call={:.2},rejected_calls={rejected},failed_calls={}\r\n",
            spec.name,
            if calls > 0 { usec as f64 / calls as f64 } else { 0.0 },
            s.failed,
        );
    }
}

fn info_keyspace(ctx: &Ctx, out: &mut String) {
    for (i, db) in ctx.shared.keyspace.dbs().iter().enumerate() {
        let keys = db.len();
        if keys > 0 {
            let _ = write!(
                out,
                "db{i}:keys={keys},expires={},avg_ttl=0\r\n",
                db.count_expiring()
            );
        }
    }
}

/// COMMAND INFO's 10-element entry for a command.
fn command_entry(spec: &Spec) -> Reply {
    // A container command (CONFIG, OBJECT...) has no flags or keys of its own in Redis
    // 7: its subcommands do. Ours keep them on the container for our own checks.
    let container = !spec.subcommands.is_empty();
    let flags = if container { Vec::new() } else { spec.flag_names() };
    let (first, last, step) = if container {
        (0, 0, 0)
    } else {
        (spec.first_key, spec.last_key, spec.step)
    };
    Reply::Array(vec![
        Reply::bulk_str(spec.name),
        Reply::Integer(spec.arity as i64),
        Reply::Set(
            flags
                .into_iter()
                .map(|f| Reply::Status(Bytes::from_static(f.as_bytes())))
                .collect(),
        ),
        Reply::Integer(first as i64),
        Reply::Integer(last as i64),
        Reply::Integer(step as i64),
        Reply::Set(
            crate::commands::command_table::cats::names(spec.cats)
                .map(|c| Reply::Status(Bytes::from(format!("@{c}"))))
                .collect(),
        ),
        Reply::Set(vec![]),
        Reply::Array(vec![]),
        Reply::Array(vec![]),
    ])
}

/// COMMAND [COUNT | INFO name... | DOCS [name...] | LIST]
pub fn command(_ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let Some(sub) = args.get(1) else {
        return Ok(Reply::Array(COMMANDS.iter().map(command_entry).collect()));
    };
    let sub_lower = String::from_utf8_lossy(sub).to_ascii_lowercase();
    match sub_lower.as_str() {
        "count" if args.len() == 2 => Ok(Reply::Integer(COMMANDS.len() as i64)),
        "list" => Ok(Reply::Array(
            COMMANDS.iter().map(|s| Reply::bulk_str(s.name)).collect(),
        )),
        "info" => {
            if args.len() == 2 {
                return Ok(Reply::Array(COMMANDS.iter().map(command_entry).collect()));
            }
            Ok(Reply::Array(
                args[2..]
                    .iter()
                    .map(|n| crate::commands::lookup(n).map_or(Reply::NullArray, command_entry))
                    .collect(),
            ))
        }
        "docs" => {
            let specs: Vec<&Spec> = if args.len() == 2 {
                COMMANDS.iter().collect()
            } else {
                args[2..].iter().filter_map(|n| crate::commands::lookup(n)).collect()
            };
            Ok(Reply::Map(
                specs
                    .into_iter()
                    .map(|s| {
                        (
                            Reply::bulk_str(s.name),
                            Reply::Map(vec![
                                (
                                    Reply::bulk_str("summary"),
                                    Reply::bulk_str(&format!(
                                        "The {} command.",
                                        s.name.to_ascii_uppercase()
                                    )),
                                ),
                                (Reply::bulk_str("since"), Reply::bulk_str("1.0.0")),
                                (Reply::bulk_str("group"), Reply::bulk_str("generic")),
                            ]),
                        )
                    })
                    .collect(),
            ))
        }
        "getkeys" if args.len() >= 4 => {
            let cmd = &args[2..];
            let spec = crate::commands::lookup(&cmd[0])
                .ok_or_else(|| Reply::error("ERR Invalid command specified"))?;
            if crate::commands::check_arity(spec, cmd).is_some() {
                return Err(Reply::error(
                    "ERR Invalid number of arguments specified for command",
                ));
            }
            let keys: Vec<Reply> = spec.keys(cmd).map(|k| Reply::Bulk(k.clone())).collect();
            if !keys.is_empty() || spec.flags & flags::NO_MANDATORY_KEYS != 0 {
                return Ok(Reply::Array(keys));
            }
            // No keys from a numkeys command: its numkeys is refused (ZUNION 0 a); GET
            // can have none only by arity.
            if spec.flags & (flags::NUMKEYS_AT_1 | flags::NUMKEYS_AT_2) != 0 {
                return Err(Reply::error("ERR Invalid arguments specified for command"));
            }
            Err(Reply::error("ERR The command has no key arguments"))
        }
        "count" => Err(errors::wrong_arity("command|count")),
        "getkeys" => Err(errors::wrong_arity("command|getkeys")),
        _ => Err(errors::unknown_subcommand("command", sub)),
    }
}

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
                ("appendonly", "no".to_string()),
                ("save", String::new()),
                ("maxmemory", ctx.shared.maxmemory().to_string()),
                ("maxmemory-policy", "noeviction".to_string()),
                ("timeout", "0".to_string()),
                ("notify-keyspace-events", String::new()),
                ("cluster-enabled", "no".to_string()),
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
    for pair in pairs.chunks(2) {
        let name = String::from_utf8_lossy(&pair[0]).to_ascii_lowercase();
        if let Some(known) = memory_setting(&name) {
            if changes.iter().any(|(n, _)| *n == known) {
                return Err(failed(known, "duplicate parameter"));
            }
            let value = String::from_utf8_lossy(&pair[1]);
            changes.push((known, memory_value(known, &value).map_err(|e| failed(known, e))?));
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
    for (name, value) in changes {
        match name {
            "maxclients" => ctx.shared.set_maxclients(value as usize),
            "maxmemory" => ctx.shared.set_maxmemory(value as u64),
            "maxmemory-policy" => {}
            "slowlog-log-slower-than" => stats.slowlog.slower_than_us.store(value, Relaxed),
            "slowlog-max-len" => stats.slowlog.set_max_len(value as usize),
            "busy-reply-threshold" | "lua-time-limit" => {
                ctx.shared.scripts.set_busy_ms(value as u64)
            }
            _ => stats.latency.threshold_ms.store(value as u64, Relaxed),
        }
    }
    Ok(Reply::Ok)
}
