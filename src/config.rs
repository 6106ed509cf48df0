//! Server configuration: defaults, validation, and the durations syntax the CLI accepts.

use crate::clock::Clock;
/// The Redis Cluster settings ([`Config::cluster`]); the protocol itself is crate-private.
pub use crate::cluster::{ClusterConfig, Mode as ClusterMode};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Default bound on every TTL: 5 minutes. It lets clients work with their own defaults:
/// Symfony Lock's RedisStore (initial TTL 300 s), Django's cache (300 s), rate limiters
/// with 60-120 s windows, Redisson's 30 s lease. A node pays it only as the restart
/// fence when it has no record of what it granted; otherwise the fence lasts as long as
/// the locks it really granted (`durability::reach`).
pub const DEFAULT_MAX_TTL: Duration = Duration::from_secs(300);

/// The max-ttl of test configs (`Config::for_tests`, `TestServer::config`): short, so
/// that a fence without a record is quick to advance past on the manual clock.
pub const TEST_MAX_TTL: Duration = Duration::from_secs(30);

/// Added to max-ttl for the default restart delay: covers clock-rate drift between
/// nodes and the client's own timing slack.
pub const RESTART_MARGIN: Duration = Duration::from_secs(1);

/// A node's settings: the CLI's flags and config file, or a test's struct literal
/// (`Config { port: 0, ..Config::for_tests() }`). [`Config::validate`] refuses what
/// cannot work; [`Server::start`](crate::Server::start) calls it.
#[derive(Clone, Debug)]
pub struct Config {
    /// The address to listen on (plain TCP and TLS).
    pub bind: IpAddr,
    /// The plain TCP port; 0 picks a free port (see `ServerHandle::addr`).
    pub port: u16,
    /// Whether to serve plain TCP on `port`. Off: TLS only (the CLI's `--port 0` with
    /// `--tls-port`, as in Redis).
    pub plain: bool,
    /// TLS on its own port (`--tls-port`); `None`: no TLS.
    pub tls: Option<TlsConfig>,
    /// Every TTL must be at most this.
    pub max_ttl: Duration,
    /// The restart fence when the data directory has no usable record of what the node
    /// granted; `None` means max_ttl + lock_delay + RESTART_MARGIN, zero disables the
    /// fence.
    pub restart_delay: Option<Duration>,
    /// Whether the fence may be up at first boot. Off declares the node new, as
    /// `redlockd init` does: only where no client can hold a lock from before this
    /// process existed (a fresh test cluster). A crash-restart or `start` after `stop`
    /// always raises the fence its record calls for.
    pub fence_at_boot: bool,
    /// Refuse writes that would leave a key without a TTL.
    pub require_ttl: bool,
    /// How long a lock that expired (instead of being released) is refused to new
    /// holders (`store/lock.rs`); zero is off. At most max_ttl.
    pub lock_delay: Duration,
    /// The key prefixes the lock-delay applies to; empty: every lock.
    pub lock_delay_prefixes: Vec<String>,
    /// Redis's `requirepass`: the default user's password; `None`: no password.
    pub requirepass: Option<String>,
    /// Redis's `protected-mode`: while the default user has no password, clients
    /// from anywhere but the loopback address get `-DENIED` and are disconnected.
    /// CONFIG SET protected-mode changes it live.
    pub protected_mode: bool,
    /// Users from a file in Redis's ACL syntax (`--aclfile`), read at start; ACL LOAD
    /// reads it again, ACL SAVE writes it.
    pub aclfile: Option<PathBuf>,
    /// Redis's `maxclients`: more connections are refused with an error.
    pub maxclients: usize,
    /// Redis's `databases`: how many numbered databases SELECT reaches.
    pub databases: usize,
    /// Redis's `proto-max-bulk-len`: the largest bulk string a request may carry.
    pub proto_max_bulk_len: usize,
    /// Past this, other clients get BUSY while a script runs and SCRIPT KILL works.
    pub busy_script_time: Duration,
    /// The clock; `None` means the real one.
    pub clock: Option<Clock>,
    /// Enables DEBUG (clock controls, crash-restart, sleep).
    pub enable_debug_command: bool,
    /// Seeds the server's randomness (SCAN order, Lua math.random); random when `None`.
    pub seed: Option<u64>,
    /// A subscriber whose unsent output passes this many bytes is disconnected.
    pub pubsub_output_limit: usize,
    /// Redis's `notify-keyspace-events` classes at start (`KEA`...; empty: off), as
    /// CONFIG SET takes them.
    pub notify_keyspace_events: String,
    /// Lock introspection (LOCKS, the lock counters' side table): on by default.
    pub lock_introspection: bool,
    /// Where to serve Prometheus metrics (`GET /metrics`); off when `None`.
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// `user:password` a scrape must send (HTTP basic auth); `None`: no auth.
    pub metrics_auth: Option<String>,
    /// The data directory (`--dir`): the fencing-token reservation and the
    /// clean-shutdown snapshot. `None` keeps both in memory only, so a restarted
    /// process forgets its token mark: the library default for embedding (the binary
    /// defaults to the working directory, as Redis does).
    pub dir: Option<PathBuf>,
    /// Above this many bytes of used memory, commands that may grow memory get
    /// `-OOM` (Redis's `maxmemory` with `noeviction`: a lock server never evicts a
    /// lock). 0: no limit. CONFIG SET maxmemory changes it live.
    pub maxmemory: u64,
    /// Redis Cluster's protocol (`--cluster-mode`): off, emulated or a slot map.
    pub cluster: ClusterConfig,
    /// The append-only log of durable keys (`durability::aof`, docs/operations.md).
    pub aof: AofConfig,
}

/// The append-only log's settings, Redis's names. The log is on when `appendonly` is
/// set and the node has a data directory (`Config::dir`).
#[derive(Clone, Debug)]
pub struct AofConfig {
    /// `appendonly`: log every change to a durable key (default yes).
    pub appendonly: bool,
    /// `appenddirname`: the log's directory inside the data directory.
    pub dirname: String,
    /// `appendfilename`: the prefix of the log's files.
    pub filename: String,
    /// `aof-load-truncated`: a torn last command of the last file is cut off at boot
    /// (yes) or refuses the start (no).
    pub load_truncated: bool,
    /// `auto-aof-rewrite-percentage`: rewrite once the log has grown this many percent
    /// over its size after the last rewrite (0: never automatically).
    pub rewrite_percentage: u64,
    /// `auto-aof-rewrite-min-size`: no automatic rewrite below this many bytes.
    pub rewrite_min_size: u64,
    /// `--memory-only-ttl`: a key whose TTL is at most this at the end of the command
    /// that wrote it is memory-only (never logged, covered by the restart fence).
    pub memory_only_ttl: Duration,
}

/// The default `--memory-only-ttl`: every lock key of the client libraries tested.
pub const DEFAULT_MEMORY_ONLY_TTL: Duration = Duration::from_secs(60);

impl Default for AofConfig {
    fn default() -> Self {
        AofConfig {
            appendonly: true,
            dirname: "appendonlydir".into(),
            filename: "appendonly.aof".into(),
            load_truncated: true,
            rewrite_percentage: 100,
            rewrite_min_size: 64 * 1024 * 1024,
            memory_only_ttl: DEFAULT_MEMORY_ONLY_TTL,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: IpAddr::from([127, 0, 0, 1]),
            port: 6379,
            plain: true,
            tls: None,
            max_ttl: DEFAULT_MAX_TTL,
            restart_delay: None,
            fence_at_boot: true,
            require_ttl: false,
            lock_delay: Duration::ZERO,
            lock_delay_prefixes: Vec::new(),
            requirepass: None,
            protected_mode: true,
            aclfile: None,
            maxclients: 10_000,
            databases: 16,
            proto_max_bulk_len: 512 * 1024 * 1024,
            busy_script_time: Duration::from_secs(5),
            clock: None,
            enable_debug_command: false,
            seed: None,
            pubsub_output_limit: 32 * 1024 * 1024,
            notify_keyspace_events: String::new(),
            lock_introspection: false,
            metrics_addr: None,
            metrics_auth: None,
            dir: None,
            maxmemory: 0,
            cluster: ClusterConfig::default(),
            aof: AofConfig::default(),
        }
    }
}

impl Config {
    /// A config for tests: port 0, a manual clock, no fence, DEBUG enabled, and
    /// max-ttl [`TEST_MAX_TTL`].
    pub fn for_tests() -> Config {
        Config {
            port: 0,
            max_ttl: TEST_MAX_TTL,
            restart_delay: Some(Duration::ZERO),
            clock: Some(Clock::manual()),
            enable_debug_command: true,
            seed: Some(1),
            // The existing tests crash nodes to show what a crash forgets; the log's
            // tests turn it on.
            aof: AofConfig {
                appendonly: false,
                ..AofConfig::default()
            },
            // The cluster lease runs on real time: off, so that a run on the manual
            // clock repeats (`cluster::lease`); a test of the lease sets a timeout.
            cluster: ClusterConfig {
                node_timeout: Some(Duration::ZERO),
                ..ClusterConfig::default()
            },
            ..Config::default()
        }
    }

    /// Whether the append-only log is on: `appendonly` and a data directory.
    pub fn aof_enabled(&self) -> bool {
        self.aof.appendonly && self.dir.is_some()
    }

    /// The longest TTL a crash may forget: max-ttl, or with the log on the lower of
    /// max-ttl and `--memory-only-ttl` (longer-lived keys are in the log).
    pub fn forget_ttl(&self) -> Duration {
        if self.aof_enabled() {
            self.max_ttl.min(self.aof.memory_only_ttl)
        } else {
            self.max_ttl
        }
    }

    /// The restart delay in effect.
    pub fn effective_restart_delay(&self) -> Duration {
        (self.restart_delay).unwrap_or(self.forget_ttl() + self.lock_delay + RESTART_MARGIN)
    }

    /// Checks the settings that can be wrong.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_ttl.is_zero() {
            return Err(ConfigError::MaxTtlZero);
        }
        if let Some(d) = self.restart_delay {
            if !d.is_zero() && d < self.forget_ttl() {
                return Err(ConfigError::RestartDelayShorterThanMaxTtl {
                    restart_delay: d,
                    max_ttl: self.forget_ttl(),
                });
            }
        }
        if self.lock_delay > self.max_ttl {
            return Err(ConfigError::LockDelayAboveMaxTtl {
                lock_delay: self.lock_delay,
                max_ttl: self.max_ttl,
            });
        }
        if self.databases == 0 {
            return Err(ConfigError::NoDatabases);
        }
        if self.maxclients == 0 {
            return Err(ConfigError::NoClients);
        }
        if !self.plain && self.tls.is_none() {
            return Err(ConfigError::NoListener);
        }
        if let Some(tls) = &self.tls {
            tls.validate()?;
        }
        self.cluster.validate().map_err(ConfigError::Cluster)?;
        if self.metrics_auth.as_ref().is_some_and(|a| !a.contains(':')) {
            return Err(ConfigError::Metrics(
                "metrics-auth must be USER:PASSWORD".into(),
            ));
        }
        Ok(())
    }
}

/// TLS settings, Redis's `tls-*` names. The files are read once, when the server
/// starts: a missing or unreadable one stops the start with [`ConfigError::Tls`].
#[derive(Clone, Debug)]
pub struct TlsConfig {
    /// The TLS port; 0 picks a free port (see `ServerHandle::tls_addr`).
    pub port: u16,
    /// The server's certificate chain (PEM), leaf first.
    pub cert_file: PathBuf,
    /// The certificate's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key_file: PathBuf,
    /// CA certificates (PEM) that sign client certificates; required unless
    /// `auth_clients` is `No`.
    pub ca_cert_file: Option<PathBuf>,
    /// Whether clients must present a certificate the CA signed.
    pub auth_clients: AuthClients,
}

impl TlsConfig {
    /// TLS on `port` with this certificate and key; clients need a certificate signed
    /// by `ca_cert_file` (Redis's default, `tls-auth-clients yes`).
    pub fn new(
        port: u16,
        cert_file: impl AsRef<Path>,
        key_file: impl AsRef<Path>,
        ca_cert_file: Option<&Path>,
    ) -> TlsConfig {
        TlsConfig {
            port,
            cert_file: cert_file.as_ref().to_path_buf(),
            key_file: key_file.as_ref().to_path_buf(),
            ca_cert_file: ca_cert_file.map(Path::to_path_buf),
            auth_clients: AuthClients::Yes,
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let empty = |p: &Path| p.as_os_str().is_empty();
        if empty(&self.cert_file) || empty(&self.key_file) {
            return Err(ConfigError::Tls(
                "TLS needs both tls-cert-file and tls-key-file".into(),
            ));
        }
        if self.auth_clients != AuthClients::No && self.ca_cert_file.is_none() {
            return Err(ConfigError::Tls(
                "tls-auth-clients yes or optional needs tls-ca-cert-file (the CA that signs client certificates); or set tls-auth-clients no".into(),
            ));
        }
        Ok(())
    }
}

/// Redis's `tls-auth-clients`: mutual TLS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AuthClients {
    /// A client without a certificate signed by the CA is refused (Redis's default).
    #[default]
    Yes,
    /// Any client may connect; a certificate it presents must be valid.
    Optional,
    /// Certificates are not asked for.
    No,
}
/// A setting that cannot work (`Config::validate`; `Server::start` refuses it).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// max-ttl is 0: no lock could be granted.
    MaxTtlZero,
    /// A restarted node could grant a lock another node still holds.
    RestartDelayShorterThanMaxTtl {
        /// The restart delay configured.
        restart_delay: Duration,
        /// The max-ttl it must cover.
        max_ttl: Duration,
    },
    /// A lock-delay longer than max-ttl (it would outlast any lock's TTL).
    LockDelayAboveMaxTtl {
        /// The lock-delay configured.
        lock_delay: Duration,
        /// The max-ttl it may not exceed.
        max_ttl: Duration,
    },
    /// `databases` is 0.
    NoDatabases,
    /// `maxclients` is 0.
    NoClients,
    /// Plain TCP is off and there is no TLS port: the node would listen nowhere.
    NoListener,
    /// A TLS setting or file that cannot work (the message names the file and why).
    Tls(String),
    /// An ACL file that cannot be read or has a bad line (the message names it).
    Acl(String),
    /// A metrics setting that cannot work: an auth file that cannot be read, an auth
    /// without `user:password`.
    Metrics(String),
    /// A cluster setting that cannot work (a node id that is not 40 hex digits, a map
    /// file without map mode).
    Cluster(String),
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::MaxTtlZero => f.write_str("max-ttl must be positive"),
            ConfigError::RestartDelayShorterThanMaxTtl {
                restart_delay,
                max_ttl,
            } => write!(
                f,
                "restart-delay ({} ms) is shorter than max-ttl ({} ms): a restarted node could grant a lock another node still holds; use at least max-ttl, or 0 to disable the fence",
                restart_delay.as_millis(),
                max_ttl.as_millis()
            ),
            ConfigError::LockDelayAboveMaxTtl {
                lock_delay,
                max_ttl,
            } => write!(
                f,
                "lock-delay ({} ms) is longer than max-ttl ({} ms)",
                lock_delay.as_millis(),
                max_ttl.as_millis()
            ),
            ConfigError::NoDatabases => f.write_str("databases must be at least 1"),
            ConfigError::NoClients => f.write_str("maxclients must be at least 1"),
            ConfigError::NoListener => f.write_str(
                "no port to listen on: port 0 turns plain TCP off, so give a tls-port",
            ),
            ConfigError::Tls(e)
            | ConfigError::Acl(e)
            | ConfigError::Metrics(e)
            | ConfigError::Cluster(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for ConfigError {}

/// A duration flag that does not parse (see [`parse_duration`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurationError {
    input: String,
    reason: String,
}

impl std::fmt::Display for DurationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid duration {:?}: {}", self.input, self.reason)
    }
}

impl std::error::Error for DurationError {}

/// Parses a duration: plain milliseconds (`1500`) or a number with a unit suffix
/// (`1500ms`, `30s`, `2m`, `1h`). Integers only: lock timings do not need fractions and
/// integers cannot be misread.
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let err = |reason: &str| DurationError {
        input: s.to_string(),
        reason: reason.to_string(),
    };
    let t = s.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits_end);
    if num.is_empty() {
        return Err(err("expected a number with an optional unit (ms, s, m, h)"));
    }
    let n: u64 = num.parse().map_err(|_| err("number too large"))?;
    let ms_per_unit: u64 = match unit.trim() {
        "" | "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        other => return Err(err(&format!("unknown unit {other:?} (use ms, s, m or h)"))),
    };
    n.checked_mul(ms_per_unit)
        .map(Duration::from_millis)
        .ok_or_else(|| err("too large"))
}

/// A memory size that does not parse (see [`parse_memory`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeError {
    input: String,
}

impl std::fmt::Display for SizeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "invalid memory size {:?}: expected bytes with an optional unit (b, k, kb, m, mb, g, gb)",
            self.input
        )
    }
}

impl std::error::Error for SizeError {}

/// Parses a memory size as Redis reads `maxmemory`: bytes, or a whole number with a
/// unit, case-insensitive: `k`/`m`/`g` are powers of 1000, `kb`/`mb`/`gb` of 1024.
pub fn parse_memory(s: &str) -> Result<u64, SizeError> {
    let err = || SizeError {
        input: s.to_string(),
    };
    let digits_end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(digits_end);
    let multiplier: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" => 1_000,
        "kb" => 1 << 10,
        "m" => 1_000_000,
        "mb" => 1 << 20,
        "g" => 1_000_000_000,
        "gb" => 1 << 30,
        _ => return Err(err()),
    };
    let n: u64 = num.parse().map_err(|_| err())?;
    n.checked_mul(multiplier).ok_or_else(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sizes_read_as_redis_reads_maxmemory() {
        assert_eq!(parse_memory("5"), Ok(5));
        assert_eq!(parse_memory("10k"), Ok(10_000));
        assert_eq!(parse_memory("100mb"), Ok(100 << 20));
        assert_eq!(parse_memory("100m"), Ok(100_000_000));
        assert_eq!(parse_memory("1GB"), Ok(1 << 30));
        assert_eq!(parse_memory("0"), Ok(0));
        for bad in [
            "",
            "mb",
            "1.5mb",
            "-1",
            "abc",
            "1tb",
            " 1",
            "99999999999999999999",
        ] {
            assert!(parse_memory(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_accept_plain_ms_and_suffixes() {
        assert_eq!(parse_duration("1500"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("1.5s").is_err());
        assert!(parse_duration("10d").is_err());
        assert!(parse_duration("-1").is_err());
        assert!(parse_duration("99999999999999999999").is_err());
    }

    #[test]
    fn restart_delay_shorter_than_max_ttl_is_refused() {
        let c = Config {
            max_ttl: Duration::from_secs(10),
            restart_delay: Some(Duration::from_secs(5)),
            ..Config::default()
        };
        assert!(c.validate().is_err());
    }
}
