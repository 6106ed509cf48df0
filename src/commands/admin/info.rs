//! INFO: the sections Redis clients, exporters and operators read, with redlockd's own
//! (fence, fencing).

use crate::commands::command_table::COMMANDS;
use crate::commands::{CmdResult, Ctx};
use crate::protocol::Reply;
use bytes::Bytes;
use std::fmt::Write;
use std::sync::atomic::Ordering;

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
        "cluster",
        "keyspace",
    ];
    let include =
        |s: &str| all || (default && DEFAULT.contains(&s)) || wanted.iter().any(|w| w == s);
    let mut out = String::new();
    let sections: [(&str, InfoSection); 12] = [
        ("server", info_server),
        ("clients", info_clients),
        ("memory", info_memory),
        ("persistence", info_persistence),
        ("stats", info_stats),
        ("replication", info_replication),
        ("fence", info_fence),
        ("fencing", info_fencing),
        ("locks", |ctx, out| {
            crate::commands::families::locks::info_section(ctx.shared, out)
        }),
        ("commandstats", info_commandstats),
        ("cluster", super::cluster::info_section),
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
        "redis_version:{}\r\nredlockd_version:{}\r\nredis_mode:{}\r\nos:{} {}\r\narch_bits:64\r\nmultiplexing_api:tokio\r\nprocess_id:{}\r\nrun_id:{}\r\ntcp_port:{}\r\ntls_port:{}\r\nuptime_in_seconds:{}\r\nuptime_in_days:{}\r\nclock:{}\r\n",
        crate::commands::admin::session::REDIS_VERSION,
        env!("CARGO_PKG_VERSION"),
        if ctx.shared.cluster.enabled() { "cluster" } else { "standalone" },
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
    let (tracking_clients, _) = super::tracking::info_counts(ctx.shared);
    let _ = write!(
        out,
        "connected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:{}\r\ntracking_clients:{tracking_clients}\r\n",
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

fn info_persistence(ctx: &Ctx, out: &mut String) {
    ctx.shared.aof.info(out);
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
    let (keys, items) = ctx.shared.keyspace.tracked().counts();
    let (_, prefixes) = super::tracking::info_counts(ctx.shared);
    let _ = write!(
        out,
        "tracking_total_keys:{keys}\r\ntracking_total_items:{items}\r\ntracking_total_prefixes:{prefixes}\r\n",
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
    let (rule, length) = fence.chosen();
    let delay = ctx.shared.keyspace.lock_delay();
    let prefixes: Vec<String> = delay
        .prefixes()
        .iter()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    let delayed: usize = ctx
        .shared
        .keyspace
        .dbs()
        .iter()
        .map(|db| db.count_delayed(now))
        .sum();
    let _ = write!(
        out,
        "lock_delay_ms:{}\r\nlock_delay_prefixes:{}\r\nlock_delay_active:{delayed}\r\nlock_delayed_refusals:{}\r\n",
        delay.ms(),
        prefixes.join(","),
        ctx.shared.stats.locks.lock_delayed.load(std::sync::atomic::Ordering::Relaxed),
    );
    let _ = write!(
        out,
        "fence_active:{}\r\nfence_remaining_ms:{left}\r\nfence_until_unix_ms:{until_unix}\r\nfence_rule:{}\r\nfence_length_ms:{length}\r\nmax_ttl_ms:{}\r\nrestart_delay_ms:{}\r\nrequire_ttl:{}\r\n",
        (left > 0) as u8,
        rule.name(),
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
        "fencing_token_mark:{}\r\nfencing_token_reserved:{}\r\nfencing_token_block:{}\r\nfencing_reservation_fsyncs:{}\r\ngrant_reach_fsyncs:{}\r\ngrant_reach_ttl_ms:{}\r\ndir:{dir}\r\nlast_boot:{}\r\n",
        s.tokens.get(),
        s.tokens.reserved(),
        crate::durability::tokens::BLOCK,
        s.tokens.fsyncs(),
        s.reach.fsyncs(),
        s.reach.ttl_ms(),
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
