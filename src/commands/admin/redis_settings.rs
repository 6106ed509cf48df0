//! Redis 7.0's settings, one row each, taken from Redis 7.0.15's `config.c` (names,
//! aliases, types, bounds, whether CONFIG SET may change them) and from a default
//! redis-server's `CONFIG GET *` (the defaults, in CONFIG GET's form). CONFIG GET and
//! CONFIG SET (`config_command`) read this table: a setting redlockd applies is read
//! from and written to the node itself there; every other one is validated as Redis
//! validates it, stored per node and reported, and changes nothing here
//! (docs/compatibility.md names them).

use parking_lot::Mutex;
use std::collections::HashMap;

/// One of Redis's settings.
pub struct Setting {
    pub name: &'static str,
    /// The old name Redis 7.0 still takes (`list-max-ziplist-size`...).
    pub alias: Option<&'static str>,
    pub access: Access,
    /// Left out of a CONFIG GET pattern; an exact name still finds it.
    pub hidden: bool,
    pub kind: Kind,
    /// Redis's extra rule on a value (`isValid...` in config.c).
    pub check: Option<Check>,
    /// What a default redis-server's CONFIG GET shows.
    pub default: &'static str,
}

/// Whether CONFIG SET may change a setting.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Modifiable,
    /// "can't set immutable config".
    Immutable,
    /// "can't set protected config" (`enable-protected-configs` is `no`, immutable).
    Protected,
}

/// A setting's type, as config.c declares it.
#[derive(Clone, Copy)]
pub enum Kind {
    /// yes / no.
    Bool,
    /// Any string.
    Str,
    /// One of the names (several, space-separated, OR-ed together when multi).
    Enum(&'static [(&'static str, u32)], bool),
    /// An integer within [min, max]; unsigned types compare as C's unsigned long
    /// long, so a negative number is a huge one.
    Num(i128, i128, Form, bool),
    /// A setting with a parser of its own.
    Special(Special),
}

/// How a number is written.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Integer,
    /// Bytes, with Redis's units (1k, 1kb, 1m, 1mb, 1g, 1gb).
    Memory,
    /// Bytes, or a percentage (`10%`, kept as -10).
    MemoryOrPercent,
    Octal,
}

/// The settings config.c parses with functions of their own.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Special {
    Dir,
    Save,
    ClientOutputBufferLimit,
    OomScoreAdjValues,
    NotifyKeyspaceEvents,
    Bind,
    ReplicaOf,
    Percentiles,
}

/// Redis's extra rules on a value.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// `activedefrag yes` needs Redis's jemalloc (Debian's redis-server refuses it too).
    ActiveDefrag,
    /// `shutdown-on-sig*`: not both save and nosave.
    SaveAndNosave,
    /// `cluster-announce-hostname`: letters, digits, '-' and '.'; under 256 bytes.
    Hostname,
    /// `proc-title-template`: known `{variables}`, not empty once expanded.
    ProcTitle,
    /// Taken, then brought within [min, max] by Redis's apply function (`hz`: 1 to
    /// 500; `repl-backlog-size`: at least 16 KB).
    Clamp(i64, i64),
}

use Access::{Immutable, Modifiable, Protected};
use Form::{Integer, Memory, MemoryOrPercent, Octal};
use Kind::{Bool, Enum, Num, Str};

const I32_MIN: i128 = i32::MIN as i128;
const I32_MAX: i128 = i32::MAX as i128;
const U32_MAX: i128 = u32::MAX as i128;
const I64_MAX: i128 = i64::MAX as i128;
const U64_MAX: i128 = u64::MAX as i128;

const MAXMEMORY_POLICY: &[(&str, u32)] = &[
    ("volatile-lru", 1),
    ("volatile-lfu", 2),
    ("volatile-random", 3),
    ("volatile-ttl", 4),
    ("allkeys-lru", 5),
    ("allkeys-lfu", 6),
    ("allkeys-random", 7),
    ("noeviction", 8),
];
const SYSLOG_FACILITY: &[(&str, u32)] = &[
    ("user", 8),
    ("local0", 128),
    ("local1", 136),
    ("local2", 144),
    ("local3", 152),
    ("local4", 160),
    ("local5", 168),
    ("local6", 176),
    ("local7", 184),
];
const LOGLEVEL: &[(&str, u32)] = &[("debug", 0), ("verbose", 1), ("notice", 2), ("warning", 3)];
const SUPERVISED: &[(&str, u32)] = &[("upstart", 1), ("systemd", 2), ("auto", 3), ("no", 0)];
const AOF_FSYNC: &[(&str, u32)] = &[("everysec", 2), ("always", 1), ("no", 0)];
const SHUTDOWN_ON_SIG: &[(&str, u32)] = &[
    ("default", 0),
    ("save", 1),
    ("nosave", 2),
    ("now", 4),
    ("force", 8),
];
const REPL_DISKLESS_LOAD: &[(&str, u32)] = &[("disabled", 0), ("on-empty-db", 1), ("swapdb", 2)];
const TLS_AUTH_CLIENTS: &[(&str, u32)] = &[("no", 0), ("yes", 1), ("optional", 2)];
const OOM_SCORE_ADJ: &[(&str, u32)] = &[("no", 0), ("yes", 1), ("relative", 1), ("absolute", 2)];
const ACL_PUBSUB_DEFAULT: &[(&str, u32)] = &[("allchannels", 1), ("resetchannels", 0)];
const SANITIZE_DUMP_PAYLOAD: &[(&str, u32)] = &[("no", 0), ("yes", 1), ("clients", 2)];
const PROTECTED_ACTION: &[(&str, u32)] = &[("no", 0), ("yes", 1), ("local", 2)];
const ENDPOINT_TYPE: &[(&str, u32)] = &[("ip", 0), ("hostname", 1), ("unknown-endpoint", 2)];
const PROPAGATION_ERROR: &[(&str, u32)] = &[("ignore", 0), ("panic", 1), ("panic-on-replicas", 2)];

#[allow(clippy::too_many_arguments)]
const fn row(
    name: &'static str,
    alias: Option<&'static str>,
    access: Access,
    hidden: bool,
    kind: Kind,
    check: Option<Check>,
    default: &'static str,
) -> Setting {
    Setting {
        name,
        alias,
        access,
        hidden,
        kind,
        check,
        default,
    }
}

/// Every setting of Redis 7.0.15 (built with TLS, as Debian's is), in config.c's order.
#[rustfmt::skip]
pub static SETTINGS: &[Setting] = &[
    row("rdbchecksum", None, Immutable, false, Bool, None, "yes"),
    row("daemonize", None, Immutable, false, Bool, None, "no"),
    row("io-threads-do-reads", None, Immutable, false, Bool, None, "no"),
    row("always-show-logo", None, Immutable, false, Bool, None, "no"),
    row("protected-mode", None, Modifiable, false, Bool, None, "yes"),
    row("rdbcompression", None, Modifiable, false, Bool, None, "yes"),
    row("rdb-del-sync-files", None, Modifiable, false, Bool, None, "no"),
    row("activerehashing", None, Modifiable, false, Bool, None, "yes"),
    row("stop-writes-on-bgsave-error", None, Modifiable, false, Bool, None, "yes"),
    row("set-proc-title", None, Immutable, false, Bool, None, "yes"),
    row("dynamic-hz", None, Modifiable, false, Bool, None, "yes"),
    row("lazyfree-lazy-eviction", None, Modifiable, false, Bool, None, "no"),
    row("lazyfree-lazy-expire", None, Modifiable, false, Bool, None, "no"),
    row("lazyfree-lazy-server-del", None, Modifiable, false, Bool, None, "no"),
    row("lazyfree-lazy-user-del", None, Modifiable, false, Bool, None, "no"),
    row("lazyfree-lazy-user-flush", None, Modifiable, false, Bool, None, "no"),
    row("repl-disable-tcp-nodelay", None, Modifiable, false, Bool, None, "no"),
    row("repl-diskless-sync", None, Modifiable, false, Bool, None, "yes"),
    row("aof-rewrite-incremental-fsync", None, Modifiable, false, Bool, None, "yes"),
    row("no-appendfsync-on-rewrite", None, Modifiable, false, Bool, None, "no"),
    row("cluster-require-full-coverage", None, Modifiable, false, Bool, None, "yes"),
    row("rdb-save-incremental-fsync", None, Modifiable, false, Bool, None, "yes"),
    row("aof-load-truncated", None, Modifiable, false, Bool, None, "yes"),
    row("aof-use-rdb-preamble", None, Modifiable, false, Bool, None, "yes"),
    row("aof-timestamp-enabled", None, Modifiable, false, Bool, None, "no"),
    row("cluster-replica-no-failover", Some("cluster-slave-no-failover"), Modifiable, false, Bool, None, "no"),
    row("replica-lazy-flush", Some("slave-lazy-flush"), Modifiable, false, Bool, None, "no"),
    row("replica-serve-stale-data", Some("slave-serve-stale-data"), Modifiable, false, Bool, None, "yes"),
    row("replica-read-only", Some("slave-read-only"), Modifiable, false, Bool, None, "yes"),
    row("replica-ignore-maxmemory", Some("slave-ignore-maxmemory"), Modifiable, false, Bool, None, "yes"),
    row("jemalloc-bg-thread", None, Modifiable, false, Bool, None, "yes"),
    row("activedefrag", None, Modifiable, false, Bool, Some(Check::ActiveDefrag), "no"),
    row("syslog-enabled", None, Immutable, false, Bool, None, "no"),
    row("cluster-enabled", None, Immutable, false, Bool, None, "no"),
    row("appendonly", None, Modifiable, false, Bool, None, "no"),
    row("cluster-allow-reads-when-down", None, Modifiable, false, Bool, None, "no"),
    row("cluster-allow-pubsubshard-when-down", None, Modifiable, false, Bool, None, "yes"),
    row("crash-log-enabled", None, Modifiable, false, Bool, None, "yes"),
    row("crash-memcheck-enabled", None, Modifiable, false, Bool, None, "yes"),
    row("use-exit-on-panic", None, Modifiable, true, Bool, None, "no"),
    row("disable-thp", None, Immutable, false, Bool, None, "yes"),
    row("cluster-allow-replica-migration", None, Modifiable, false, Bool, None, "yes"),
    row("replica-announced", None, Modifiable, false, Bool, None, "yes"),
    row("latency-tracking", None, Modifiable, false, Bool, None, "yes"),
    row("aof-disable-auto-gc", None, Modifiable, false, Bool, None, "no"),
    row("replica-ignore-disk-write-errors", None, Modifiable, false, Bool, None, "no"),
    row("aclfile", None, Immutable, false, Str, None, ""),
    row("unixsocket", None, Immutable, false, Str, None, ""),
    row("pidfile", None, Immutable, false, Str, None, ""),
    row("replica-announce-ip", Some("slave-announce-ip"), Modifiable, false, Str, None, ""),
    row("masteruser", None, Modifiable, false, Str, None, ""),
    row("cluster-announce-ip", None, Modifiable, false, Str, None, ""),
    row("cluster-config-file", None, Immutable, false, Str, None, "nodes.conf"),
    row("cluster-announce-hostname", None, Modifiable, false, Str, Some(Check::Hostname), ""),
    row("syslog-ident", None, Immutable, false, Str, None, "redis"),
    row("dbfilename", None, Protected, false, Str, None, "dump.rdb"),
    row("appendfilename", None, Immutable, false, Str, None, "appendonly.aof"),
    row("appenddirname", None, Immutable, false, Str, None, "appendonlydir"),
    row("server_cpulist", None, Immutable, false, Str, None, ""),
    row("bio_cpulist", None, Immutable, false, Str, None, ""),
    row("aof_rewrite_cpulist", None, Immutable, false, Str, None, ""),
    row("bgsave_cpulist", None, Immutable, false, Str, None, ""),
    row("ignore-warnings", None, Modifiable, false, Str, None, ""),
    row("proc-title-template", None, Modifiable, false, Str, Some(Check::ProcTitle), "{title} {listen-addr} {server-mode}"),
    row("bind-source-addr", None, Modifiable, false, Str, None, ""),
    row("logfile", None, Immutable, false, Str, None, ""),
    row("masterauth", None, Modifiable, false, Str, None, ""),
    row("requirepass", None, Modifiable, false, Str, None, ""),
    row("supervised", None, Immutable, false, Enum(SUPERVISED, false), None, "no"),
    row("syslog-facility", None, Immutable, false, Enum(SYSLOG_FACILITY, false), None, "local0"),
    row("repl-diskless-load", None, Modifiable, false, Enum(REPL_DISKLESS_LOAD, false), None, "disabled"),
    row("loglevel", None, Modifiable, false, Enum(LOGLEVEL, false), None, "notice"),
    row("maxmemory-policy", None, Modifiable, false, Enum(MAXMEMORY_POLICY, false), None, "noeviction"),
    row("appendfsync", None, Modifiable, false, Enum(AOF_FSYNC, false), None, "everysec"),
    row("oom-score-adj", None, Modifiable, false, Enum(OOM_SCORE_ADJ, false), None, "no"),
    row("acl-pubsub-default", None, Modifiable, false, Enum(ACL_PUBSUB_DEFAULT, false), None, "resetchannels"),
    row("sanitize-dump-payload", None, Modifiable, false, Enum(SANITIZE_DUMP_PAYLOAD, false), None, "no"),
    row("enable-protected-configs", None, Immutable, false, Enum(PROTECTED_ACTION, false), None, "no"),
    row("enable-debug-command", None, Immutable, false, Enum(PROTECTED_ACTION, false), None, "no"),
    row("enable-module-command", None, Immutable, false, Enum(PROTECTED_ACTION, false), None, "no"),
    row("cluster-preferred-endpoint-type", None, Modifiable, false, Enum(ENDPOINT_TYPE, false), None, "ip"),
    row("propagation-error-behavior", None, Modifiable, false, Enum(PROPAGATION_ERROR, false), None, "ignore"),
    row("shutdown-on-sigint", None, Modifiable, false, Enum(SHUTDOWN_ON_SIG, true), Some(Check::SaveAndNosave), "default"),
    row("shutdown-on-sigterm", None, Modifiable, false, Enum(SHUTDOWN_ON_SIG, true), Some(Check::SaveAndNosave), "default"),
    row("databases", None, Immutable, false, Num(1, I32_MAX, Integer, false), None, "16"),
    row("port", None, Modifiable, false, Num(0, 65535, Integer, false), None, "6379"),
    row("io-threads", None, Immutable, false, Num(1, 128, Integer, false), None, "1"),
    row("auto-aof-rewrite-percentage", None, Modifiable, false, Num(0, I32_MAX, Integer, false), None, "100"),
    row("cluster-replica-validity-factor", Some("cluster-slave-validity-factor"), Modifiable, false, Num(0, I32_MAX, Integer, false), None, "10"),
    row("list-max-listpack-size", Some("list-max-ziplist-size"), Modifiable, false, Num(I32_MIN, I32_MAX, Integer, false), None, "-2"),
    row("tcp-keepalive", None, Modifiable, false, Num(0, I32_MAX, Integer, false), None, "300"),
    row("cluster-migration-barrier", None, Modifiable, false, Num(0, I32_MAX, Integer, false), None, "1"),
    row("active-defrag-cycle-min", None, Modifiable, false, Num(1, 99, Integer, false), None, "1"),
    row("active-defrag-cycle-max", None, Modifiable, false, Num(1, 99, Integer, false), None, "25"),
    row("active-defrag-threshold-lower", None, Modifiable, false, Num(0, 1000, Integer, false), None, "10"),
    row("active-defrag-threshold-upper", None, Modifiable, false, Num(0, 1000, Integer, false), None, "100"),
    row("lfu-log-factor", None, Modifiable, false, Num(0, I32_MAX, Integer, false), None, "10"),
    row("lfu-decay-time", None, Modifiable, false, Num(0, I32_MAX, Integer, false), None, "1"),
    row("replica-priority", Some("slave-priority"), Modifiable, false, Num(0, I32_MAX, Integer, false), None, "100"),
    row("repl-diskless-sync-delay", None, Modifiable, false, Num(0, I32_MAX, Integer, false), None, "5"),
    row("maxmemory-samples", None, Modifiable, false, Num(1, I32_MAX, Integer, false), None, "5"),
    row("maxmemory-eviction-tenacity", None, Modifiable, false, Num(0, 100, Integer, false), None, "10"),
    row("timeout", None, Modifiable, false, Num(0, I32_MAX, Integer, false), None, "0"),
    row("replica-announce-port", Some("slave-announce-port"), Modifiable, false, Num(0, 65535, Integer, false), None, "0"),
    row("tcp-backlog", None, Immutable, false, Num(0, I32_MAX, Integer, false), None, "511"),
    row("cluster-port", None, Immutable, false, Num(0, 65535, Integer, false), None, "0"),
    row("cluster-announce-bus-port", None, Modifiable, false, Num(0, 65535, Integer, false), None, "0"),
    row("cluster-announce-port", None, Modifiable, false, Num(0, 65535, Integer, false), None, "0"),
    row("cluster-announce-tls-port", None, Modifiable, false, Num(0, 65535, Integer, false), None, "0"),
    row("repl-timeout", None, Modifiable, false, Num(1, I32_MAX, Integer, false), None, "60"),
    row("repl-ping-replica-period", Some("repl-ping-slave-period"), Modifiable, false, Num(1, I32_MAX, Integer, false), None, "10"),
    row("list-compress-depth", None, Modifiable, false, Num(0, I32_MAX, Integer, false), None, "0"),
    row("rdb-key-save-delay", None, Modifiable, true, Num(I32_MIN, I32_MAX, Integer, false), None, "0"),
    row("key-load-delay", None, Modifiable, true, Num(I32_MIN, I32_MAX, Integer, false), None, "0"),
    row("active-expire-effort", None, Modifiable, false, Num(1, 10, Integer, false), None, "1"),
    row("hz", None, Modifiable, false, Num(0, I32_MAX, Integer, false), Some(Check::Clamp(1, 500)), "10"),
    row("min-replicas-to-write", Some("min-slaves-to-write"), Modifiable, false, Num(0, I32_MAX, Integer, false), None, "0"),
    row("min-replicas-max-lag", Some("min-slaves-max-lag"), Modifiable, false, Num(0, I32_MAX, Integer, false), None, "10"),
    row("watchdog-period", None, Modifiable, true, Num(0, I32_MAX, Integer, false), None, "0"),
    row("shutdown-timeout", None, Modifiable, false, Num(0, I32_MAX, Integer, false), None, "10"),
    row("repl-diskless-sync-max-replicas", None, Modifiable, false, Num(0, I32_MAX, Integer, false), None, "0"),
    row("maxclients", None, Modifiable, false, Num(1, U32_MAX, Integer, true), None, "10000"),
    row("unixsocketperm", None, Immutable, false, Num(0, 0o777, Octal, true), None, "0"),
    row("socket-mark-id", None, Immutable, false, Num(0, U32_MAX, Integer, true), None, "0"),
    row("active-defrag-max-scan-fields", None, Modifiable, false, Num(1, I64_MAX, Integer, false), None, "1000"),
    row("slowlog-max-len", None, Modifiable, false, Num(0, I64_MAX, Integer, false), None, "128"),
    row("acllog-max-len", None, Modifiable, false, Num(0, I64_MAX, Integer, false), None, "128"),
    row("busy-reply-threshold", Some("lua-time-limit"), Modifiable, false, Num(0, I64_MAX, Integer, false), None, "5000"),
    row("cluster-node-timeout", None, Modifiable, false, Num(0, I64_MAX, Integer, false), None, "15000"),
    row("slowlog-log-slower-than", None, Modifiable, false, Num(-1, I64_MAX, Integer, false), None, "10000"),
    row("latency-monitor-threshold", None, Modifiable, false, Num(0, I64_MAX, Integer, false), None, "0"),
    row("proto-max-bulk-len", None, Modifiable, false, Num(1 << 20, I64_MAX, Memory, false), None, "536870912"),
    row("stream-node-max-entries", None, Modifiable, false, Num(0, I64_MAX, Integer, false), None, "100"),
    row("repl-backlog-size", None, Modifiable, false, Num(1, I64_MAX, Memory, false), Some(Check::Clamp(16 * 1024, i64::MAX)), "1048576"),
    row("maxmemory", None, Modifiable, false, Num(0, U64_MAX, Memory, true), None, "0"),
    row("cluster-link-sendbuf-limit", None, Modifiable, false, Num(0, U64_MAX, Memory, true), None, "0"),
    row("hash-max-listpack-entries", Some("hash-max-ziplist-entries"), Modifiable, false, Num(0, I64_MAX, Integer, true), None, "512"),
    row("set-max-intset-entries", None, Modifiable, false, Num(0, I64_MAX, Integer, true), None, "512"),
    row("zset-max-listpack-entries", Some("zset-max-ziplist-entries"), Modifiable, false, Num(0, I64_MAX, Integer, true), None, "128"),
    row("active-defrag-ignore-bytes", None, Modifiable, false, Num(1, I64_MAX, Memory, true), None, "104857600"),
    row("hash-max-listpack-value", Some("hash-max-ziplist-value"), Modifiable, false, Num(0, I64_MAX, Memory, true), None, "64"),
    row("stream-node-max-bytes", None, Modifiable, false, Num(0, I64_MAX, Memory, true), None, "4096"),
    row("zset-max-listpack-value", Some("zset-max-ziplist-value"), Modifiable, false, Num(0, I64_MAX, Memory, true), None, "64"),
    row("hll-sparse-max-bytes", None, Modifiable, false, Num(0, I64_MAX, Memory, true), None, "3000"),
    row("tracking-table-max-keys", None, Modifiable, false, Num(0, I64_MAX, Integer, true), None, "1000000"),
    row("client-query-buffer-limit", None, Modifiable, false, Num(1 << 20, I64_MAX, Memory, true), None, "1073741824"),
    row("maxmemory-clients", None, Modifiable, false, Num(-100, I64_MAX, MemoryOrPercent, false), None, "0"),
    row("repl-backlog-ttl", None, Modifiable, false, Num(0, I64_MAX, Integer, false), None, "3600"),
    row("auto-aof-rewrite-min-size", None, Modifiable, false, Num(0, I64_MAX, Memory, false), None, "67108864"),
    row("loading-process-events-interval-bytes", None, Modifiable, true, Num(1024, I32_MAX, Integer, false), None, "2097152"),
    row("tls-port", None, Modifiable, false, Num(0, 65535, Integer, false), None, "0"),
    row("tls-session-cache-size", None, Modifiable, false, Num(0, I32_MAX, Integer, false), None, "20480"),
    row("tls-session-cache-timeout", None, Modifiable, false, Num(0, I32_MAX, Integer, false), None, "300"),
    row("tls-cluster", None, Modifiable, false, Bool, None, "no"),
    row("tls-replication", None, Modifiable, false, Bool, None, "no"),
    row("tls-auth-clients", None, Modifiable, false, Enum(TLS_AUTH_CLIENTS, false), None, "yes"),
    row("tls-prefer-server-ciphers", None, Modifiable, false, Bool, None, "no"),
    row("tls-session-caching", None, Modifiable, false, Bool, None, "yes"),
    row("tls-cert-file", None, Modifiable, false, Str, None, ""),
    row("tls-key-file", None, Modifiable, false, Str, None, ""),
    row("tls-key-file-pass", None, Modifiable, false, Str, None, ""),
    row("tls-client-cert-file", None, Modifiable, false, Str, None, ""),
    row("tls-client-key-file", None, Modifiable, false, Str, None, ""),
    row("tls-client-key-file-pass", None, Modifiable, false, Str, None, ""),
    row("tls-dh-params-file", None, Modifiable, false, Str, None, ""),
    row("tls-ca-cert-file", None, Modifiable, false, Str, None, ""),
    row("tls-ca-cert-dir", None, Modifiable, false, Str, None, ""),
    row("tls-protocols", None, Modifiable, false, Str, None, ""),
    row("tls-ciphers", None, Modifiable, false, Str, None, ""),
    row("tls-ciphersuites", None, Modifiable, false, Str, None, ""),
    row("dir", None, Protected, false, Kind::Special(Special::Dir), None, ""),
    row("save", None, Modifiable, false, Kind::Special(Special::Save), None, "3600 1 300 100 60 10000"),
    row("client-output-buffer-limit", None, Modifiable, false, Kind::Special(Special::ClientOutputBufferLimit), None, "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"),
    row("oom-score-adj-values", None, Modifiable, false, Kind::Special(Special::OomScoreAdjValues), None, "0 200 800"),
    row("notify-keyspace-events", None, Modifiable, false, Kind::Special(Special::NotifyKeyspaceEvents), None, ""),
    row("bind", None, Modifiable, false, Kind::Special(Special::Bind), None, "* -::*"),
    row("replicaof", Some("slaveof"), Immutable, false, Kind::Special(Special::ReplicaOf), None, ""),
    row("latency-tracking-info-percentiles", None, Modifiable, false, Kind::Special(Special::Percentiles), None, "50 99 99.9"),
];

/// A setting found by name or alias (case-insensitive, as Redis's config dict is).
#[derive(Clone, Copy)]
pub struct Found {
    pub setting: &'static Setting,
    /// The name it was found by (the alias, when it was the alias).
    pub name: &'static str,
}

impl Found {
    /// Same entry of Redis's config dict: a name and its alias are two entries.
    pub fn same(&self, other: &Found) -> bool {
        std::ptr::eq(self.setting, other.setting) && self.name == other.name
    }
}

/// Looks a name or alias up.
pub fn lookup(name: &[u8]) -> Option<Found> {
    SETTINGS.iter().find_map(|s| {
        let by = |n: &'static str| n.as_bytes().eq_ignore_ascii_case(name).then_some(n);
        by(s.name)
            .or_else(|| s.alias.and_then(by))
            .map(|name| Found { setting: s, name })
    })
}

/// Every name and alias CONFIG GET's pattern may match (hidden ones left out).
pub fn visible_names() -> impl Iterator<Item = (&'static str, &'static Setting)> {
    SETTINGS
        .iter()
        .filter(|s| !s.hidden)
        .flat_map(|s| std::iter::once((s.name, s)).chain(s.alias.map(|a| (a, s))))
}

/// The values CONFIG SET gave the settings this node stores without applying, by
/// canonical name, in CONFIG GET's form.
#[derive(Default)]
pub struct Stored(Mutex<HashMap<&'static str, Vec<u8>>>);

impl Stored {
    /// The value CONFIG GET shows: the last one set, else `default` (redlockd's own,
    /// when it differs) or Redis's.
    pub fn get(&self, s: &'static Setting, default: Option<&str>) -> Vec<u8> {
        self.0
            .lock()
            .get(s.name)
            .cloned()
            .unwrap_or_else(|| default.unwrap_or(s.default).as_bytes().to_vec())
    }

    pub fn set(&self, s: &'static Setting, value: Vec<u8>) {
        self.0.lock().insert(s.name, value);
    }
}

/// Parses a CONFIG SET value as Redis 7.0 does; `current` is what CONFIG GET shows
/// now (a partial client-output-buffer-limit changes only the classes it names).
/// Returns the value as CONFIG GET will show it, or Redis's reason for refusing it.
pub fn parse(s: &Setting, value: &[u8], current: &[u8]) -> Result<Vec<u8>, String> {
    let text = String::from_utf8_lossy(value);
    let parsed = match s.kind {
        Bool => match () {
            _ if value.eq_ignore_ascii_case(b"yes") => "yes".to_string(),
            _ if value.eq_ignore_ascii_case(b"no") => "no".to_string(),
            _ => return Err("argument must be 'yes' or 'no'".into()),
        },
        Str => return check(s, &text).map(|()| value.to_vec()),
        Enum(names, multi) => {
            let args = if multi { split(&text) } else { vec![&*text] };
            enum_value(names, &args, multi)
                .map(|v| enum_name(names, v, multi))
                .ok_or_else(|| {
                    let all: Vec<&str> = names.iter().map(|(n, _)| *n).collect();
                    format!(
                        "argument(s) must be one of the following: {}",
                        all.join(", ")
                    )
                })?
        }
        Num(min, max, form, unsigned) => number(&text, min, max, form, unsigned)?,
        Kind::Special(special) => parse_special(special, &text, current)?,
    };
    check(s, &parsed).map(|()| adjust(s, parsed).into_bytes())
}

/// A value as Redis's apply function leaves it (`Check::Clamp`).
fn adjust(s: &Setting, value: String) -> String {
    match (s.check, value.parse::<i64>()) {
        (Some(Check::Clamp(min, max)), Ok(v)) => v.clamp(min, max).to_string(),
        _ => value,
    }
}

/// A setting's `isValid...` rule, on the parsed value.
fn check(s: &Setting, value: &str) -> Result<(), String> {
    match s.check {
        None | Some(Check::Clamp(..)) => Ok(()),
        Some(Check::ActiveDefrag) if value == "yes" => Err("Active defragmentation cannot be enabled: it requires a Redis server compiled with a modified Jemalloc like the one shipped by default with the Redis source distribution".into()),
        Some(Check::ActiveDefrag) => Ok(()),
        Some(Check::SaveAndNosave) => {
            let words = split(value);
            if words.contains(&"save") && words.contains(&"nosave") {
                Err("shutdown options SAVE and NOSAVE can't be used simultaneously".into())
            } else {
                Ok(())
            }
        }
        Some(Check::Hostname) if value.len() >= 256 => {
            Err("Hostnames must be less than 256 characters".into())
        }
        Some(Check::Hostname) => {
            if value
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'.')
            {
                Ok(())
            } else {
                Err("Hostnames may only contain alphanumeric characters, hyphens or dots".into())
            }
        }
        Some(Check::ProcTitle) => match expand_title(value) {
            Some(t) if !t.trim_matches(' ').is_empty() => Ok(()),
            _ => Err("template format is invalid or contains unknown variables".into()),
        },
    }
}

/// `proc-title-template` expanded as Redis's sdstemplate does for its check (an empty
/// title, a listen address, no server mode); `None` on an unknown variable or a
/// template cut short.
fn expand_title(template: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        if after.is_empty() {
            return None;
        }
        if let Some(quoted) = after.strip_prefix('{') {
            out.push('{');
            rest = quoted;
            continue;
        }
        let close = after.find('}')?;
        out.push_str(match &after[..close] {
            "title" | "server-mode" | "unixsocket" => "",
            "listen-addr" => "*:6379",
            "config-file" => "-",
            "port" => "6379",
            "tls-port" => "0",
            _ => return None,
        });
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Some(out)
}

/// A multi-argument value split as Redis's sdssplitlen(" ") splits it: on each space,
/// so two spaces make an empty word; an empty value has no words.
fn split(value: &str) -> Vec<&str> {
    if value.is_empty() {
        Vec::new()
    } else {
        value.split(' ').collect()
    }
}

/// configEnumGetValue: each word one of the names (case-insensitive); several only for
/// a multi setting, their values OR-ed.
fn enum_value(names: &[(&str, u32)], args: &[&str], multi: bool) -> Option<u32> {
    if args.is_empty() || (!multi && args.len() != 1) {
        return None;
    }
    let mut v = 0;
    for a in args {
        let mut matched = false;
        for (n, bits) in names {
            if n.eq_ignore_ascii_case(a) {
                v |= bits;
                matched = true;
            }
        }
        if !matched {
            return None;
        }
    }
    Some(v)
}

/// configEnumGetName: the first name with exactly this value, else (multi) the names
/// whose bits make it up, in the table's order.
fn enum_name(names: &[(&str, u32)], v: u32, multi: bool) -> String {
    if let Some((n, _)) = names.iter().find(|(_, bits)| *bits == v) {
        return n.to_string();
    }
    let mut left = v;
    let mut out = Vec::new();
    for (n, bits) in names {
        if multi && *bits != 0 && bits & left == *bits {
            out.push(*n);
            left &= !bits;
        }
    }
    if out.is_empty() || left != 0 {
        return "unknown".into();
    }
    out.join(" ")
}

/// A number parsed and bounded as numericConfigSet does, in CONFIG GET's form.
fn number(text: &str, min: i128, max: i128, form: Form, unsigned: bool) -> Result<String, String> {
    let mut parsed: Option<i64> = None;
    if matches!(form, Memory | MemoryOrPercent) {
        parsed = memtoull(text).map(|v| v as i64);
    }
    if parsed.is_none() && form == MemoryOrPercent && text.len() > 1 {
        if let Some(p) = text.strip_suffix('%') {
            parsed = crate::commands::parse_i64(p.as_bytes())
                .filter(|v| *v >= 0)
                .map(|v| -v);
        }
    }
    if parsed.is_none() && form == Octal {
        parsed = strtoll(text, 8);
    }
    if parsed.is_none() && form == Integer {
        parsed = crate::commands::parse_i64(text.as_bytes());
    }
    let v = parsed.ok_or(match form {
        MemoryOrPercent => "argument must be a memory or percent value",
        Memory => "argument must be a memory value",
        Octal => "argument couldn't be parsed as an octal number",
        Integer => "argument couldn't be parsed into an integer",
    })?;
    if unsigned {
        let u = v as u64 as i128;
        if u < min || u > max {
            return Err(if form == Octal {
                format!("argument must be between {min:o} and {max:o} inclusive")
            } else {
                format!("argument must be between {min} and {max} inclusive")
            });
        }
    } else if form == MemoryOrPercent && v < 0 {
        if i128::from(v) < min {
            return Err(format!(
                "percentage argument must be less or equal to {}",
                -min
            ));
        }
    } else if i128::from(v) < min || i128::from(v) > max {
        return Err(format!(
            "argument must be between {min} and {max} inclusive"
        ));
    }
    Ok(match form {
        MemoryOrPercent if v < 0 => format!("{}%", -i128::from(v)),
        Memory | MemoryOrPercent => (v as u64).to_string(),
        Octal => format!("{v:o}"),
        Integer => v.to_string(),
    })
}

/// Redis's memtoull: digits with an optional unit (b, k, kb, m, mb, g, gb; any case);
/// no sign.
pub fn memtoull(text: &str) -> Option<u64> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (num, unit) = text.split_at(digits);
    let mul: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    if digits >= 128 {
        return None;
    }
    // strtoull of the digits: none is 0, too many saturate.
    let val = if num.is_empty() {
        0
    } else {
        num.parse::<u64>().unwrap_or(u64::MAX)
    };
    val.checked_mul(mul)
}

/// C's strtoll in `radix` where the whole text must be consumed: leading white space
/// and a sign allowed, overflow saturating; an empty number is 0.
fn strtoll(text: &str, radix: u32) -> Option<i64> {
    let t = text.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty() {
        // No digits: strtoll stops at the start, so the end is the end only for "".
        return text.is_empty().then_some(0);
    }
    if !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let v = i128::from_str_radix(digits, radix).unwrap_or(i128::MAX);
    let v = if neg { -v } else { v };
    Some(v.clamp(i64::MIN.into(), i64::MAX.into()) as i64)
}

/// The settings with parsers of their own (config.c's setConfig...Option).
fn parse_special(special: Special, text: &str, current: &[u8]) -> Result<String, String> {
    let args = split(text);
    match special {
        Special::Save => {
            let args: &[&str] = if args == [""] { &[] } else { &args };
            let bad = || "Invalid save parameters".to_string();
            if !args.len().is_multiple_of(2) {
                return Err(bad());
            }
            let mut out = Vec::new();
            for pair in args.chunks(2) {
                let seconds = strtoll(pair[0], 10).filter(|s| *s >= 1).ok_or_else(bad)?;
                let changes = strtoll(pair[1], 10).filter(|c| *c >= 0).ok_or_else(bad)?;
                out.push(format!("{seconds} {}", changes as i32));
            }
            Ok(out.join(" "))
        }
        Special::ClientOutputBufferLimit => {
            if !args.len().is_multiple_of(4) {
                return Err("Wrong number of arguments in buffer limit configuration.".into());
            }
            let now = String::from_utf8_lossy(current);
            let mut classes: Vec<[String; 4]> = now
                .split(' ')
                .collect::<Vec<_>>()
                .chunks(4)
                .filter(|c| c.len() == 4)
                .map(|c| [c[0].into(), c[1].into(), c[2].into(), c[3].into()])
                .collect();
            for limit in args.chunks(4) {
                let class = match limit[0].to_ascii_lowercase().as_str() {
                    "normal" => "normal",
                    "slave" | "replica" => "slave",
                    "pubsub" => "pubsub",
                    _ => {
                        return Err(
                            "Invalid client class specified in buffer limit configuration.".into(),
                        )
                    }
                };
                let bad = || {
                    "Error in hard, soft or soft_seconds setting in buffer limit configuration."
                        .to_string()
                };
                let hard = memtoull(limit[1]).ok_or_else(bad)?;
                let soft = memtoull(limit[2]).ok_or_else(bad)?;
                let seconds = strtoll(limit[3], 10)
                    .map(|s| s as i32)
                    .filter(|s| *s >= 0)
                    .ok_or_else(bad)?;
                if let Some(c) = classes.iter_mut().find(|c| c[0] == class) {
                    *c = [
                        class.into(),
                        hard.to_string(),
                        soft.to_string(),
                        seconds.to_string(),
                    ];
                }
            }
            Ok(classes
                .iter()
                .map(|c| c.join(" "))
                .collect::<Vec<_>>()
                .join(" "))
        }
        Special::OomScoreAdjValues => {
            if args.len() != 3 {
                return Err("wrong number of arguments".into());
            }
            let values = args
                .iter()
                .map(|a| {
                    strtoll(a, 10)
                        .filter(|v| (-2000..=2000).contains(v))
                        .map(|v| v.to_string())
                        .ok_or_else(|| {
                            "Invalid oom-score-adj-values, elements must be between -2000 and 2000."
                                .to_string()
                        })
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(values.join(" "))
        }
        // Kept as given: Redis prints `KEAn` as `AKE`, but applies the `n`
        // (CONFIG GET reads the node's classes, `commands::notify::text`).
        Special::NotifyKeyspaceEvents => crate::commands::notify::parse(text)
            .map(|_| text.to_string())
            .ok_or_else(|| "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into()),
        Special::Bind => {
            if args.len() > 16 {
                return Err("Too many bind addresses specified.".into());
            }
            Ok(text.to_string())
        }
        Special::ReplicaOf | Special::Dir => Ok(text.to_string()),
        Special::Percentiles => {
            let args: &[&str] = if args == [""] { &[] } else { &args };
            let mut out = Vec::new();
            for a in args {
                let p: f64 = a
                    .parse()
                    .ok()
                    .filter(|p: &f64| !p.is_nan() && !a.starts_with(char::is_whitespace))
                    .ok_or("Invalid latency-tracking-info-percentiles parameters")?;
                if !(0.0..=100.0).contains(&p) {
                    return Err("latency-tracking-info-percentiles parameters should sit between [0.0,100.0]".into());
                }
                // "%f", then trailing zeros and a trailing '.' trimmed.
                let f = format!("{p:.6}");
                out.push(f.trim_end_matches('0').trim_end_matches('.').to_string());
            }
            Ok(out.join(" "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_aliases_are_unique_and_lowercase() {
        let mut all: Vec<&str> = SETTINGS
            .iter()
            .flat_map(|s| std::iter::once(s.name).chain(s.alias))
            .collect();
        assert_eq!(SETTINGS.len(), 178);
        assert_eq!(all.len(), 197, "178 names and 19 aliases");
        assert!(all.iter().all(|n| *n == n.to_ascii_lowercase()));
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 197);
        assert_eq!(visible_names().count(), 192, "what CONFIG GET * lists");
    }

    /// Each row's default is a value of its own type, shown as CONFIG GET shows it.
    #[test]
    fn every_default_parses_back_to_itself() {
        for s in SETTINGS {
            if s.access != Access::Modifiable || matches!(s.kind, Kind::Special(Special::Dir)) {
                continue;
            }
            assert_eq!(
                parse(s, s.default.as_bytes(), s.default.as_bytes()).as_deref(),
                Ok(s.default.as_bytes()),
                "{}",
                s.name
            );
        }
    }

    #[test]
    fn values_are_shown_in_redis_forms() {
        let get = |name: &str, v: &str| {
            let s = lookup(name.as_bytes()).unwrap().setting;
            parse(s, v.as_bytes(), s.default.as_bytes()).map(|v| String::from_utf8(v).unwrap())
        };
        assert_eq!(get("maxmemory", "1gb").unwrap(), "1073741824");
        assert_eq!(get("maxmemory-clients", "10%").unwrap(), "10%");
        // Checked, kept as given (the node prints its classes: `notify::text`).
        assert_eq!(get("notify-keyspace-events", "EKgAn").unwrap(), "EKgAn");
        assert!(get("notify-keyspace-events", "Kq").is_err());
        assert_eq!(get("oom-score-adj", "RELATIVE").unwrap(), "yes");
        assert_eq!(get("shutdown-on-sigint", "now save").unwrap(), "save now");
        assert_eq!(get("hz", "100000").unwrap(), "500");
        assert_eq!(
            get("client-output-buffer-limit", "replica 1kb 2 3").unwrap(),
            "normal 0 0 0 slave 1024 2 3 pubsub 33554432 8388608 60"
        );
        assert_eq!(
            get("set-max-intset-entries", "-1").unwrap_err(),
            "argument must be between 0 and 9223372036854775807 inclusive"
        );
        assert_eq!(
            get("maxmemory", "18446744073709551615").unwrap(),
            "18446744073709551615"
        );
    }
}
