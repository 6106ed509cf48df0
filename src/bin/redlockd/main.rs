//! The redlockd binary: parse flags, start logging, run one node or a local group of nodes.

mod conffile;
mod harness;
mod lock;
mod nodes;
mod slots;
mod status;

use clap::{Args, Parser, Subcommand, ValueEnum};
use nodes::{run_nodes, ShutdownSignal};
use redlockd::config::{parse_duration, parse_memory, AuthClients, Config, ConfigError, TlsConfig};
use redlockd::{Clock, Server};
use std::ffi::OsString;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// A Redis-compatible lock server. TTLs run on a monotonic clock, and for max-ttl after
/// boot (the restart fence) writes are refused with TRYAGAIN, so that N independent
/// redlockd nodes form a safe Redlock group.
#[derive(Parser, Debug)]
#[command(
    name = "redlockd",
    version,
    args_conflicts_with_subcommands = true,
    args_override_self = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Plain TCP port (0 picks a free one; with --tls-port, 0 turns plain TCP off, as
    /// in Redis).
    #[arg(long, default_value_t = 6379, env = "REDLOCKD_PORT")]
    port: u16,
    #[command(flatten)]
    server: ServerArgs,
}

// Parsed once at start: the size of the largest variant (the node flags) costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Command {
    /// Run N independent nodes (own keyspace and fence each) on consecutive ports in
    /// one process: a local Redlock group. With --clock manual the nodes share one
    /// clock (DEBUG CLOCK ADVANCE on any node moves all; wall jumps stay per node).
    /// (`cluster`, its old name, still works.)
    #[command(alias = "cluster")]
    Group(Box<GroupArgs>),
    /// The test mode, for tests in any language: N nodes on ephemeral ports and one
    /// manual clock, no fence at first start, a temporary data directory; prints one
    /// JSON ready line, then answers JSON requests on stdin (advance the clock, kill,
    /// restart, pause, isolate nodes) and stops when stdin ends. docs/testing.md.
    Harness(harness::HarnessArgs),
    /// Run a command while holding a Redlock lock: a distributed flock(1). Exits with
    /// the command's status, 75 if the lock is held elsewhere past --wait, 69 if too
    /// few nodes are reachable, 74 if the lock was lost while the command ran (its
    /// process group got SIGTERM, then SIGKILL when the lock's validity ended or after
    /// --grace), 64 on bad usage or a --ttl the nodes refuse.
    Lock(lock::LockArgs),
    /// Declare a brand-new node: make its data directory with a record that it never
    /// granted anything, so its first start serves at once instead of waiting out the
    /// restart fence. Refused if the directory already holds a node. With --adopt,
    /// accept a node.state that was copied or restored instead (operations guide).
    Init(InitArgs),
    /// One screen for a Redlock deployment: per node up, fence and its rule, cluster
    /// map version, locks held, grants, refusals, expired-while-held, overruns and clock
    /// offset; then the locks and their holders (LOCKS LIST). Refreshes like top;
    /// --once prints one screen, --json one JSON document.
    Status(status::StatusArgs),
    /// Operator actions on a running cluster's hash slots (cluster mode map):
    /// `slots move --slots 0-100 --to HOST:PORT` moves slots with their keys in the
    /// safe order. docs/cluster.md.
    Slots {
        #[command(subcommand)]
        action: slots::SlotsCommand,
    },
}

#[derive(Args, Debug)]
struct InitArgs {
    /// The new node's data directory (created 0700 if missing).
    #[arg(long, env = "REDLOCKD_DIR")]
    dir: PathBuf,
    /// Accept a node.state copied or restored from elsewhere: identity kept, token mark
    /// raised past anything the node can have handed out, snapshot removed, the next
    /// start fenced for max-ttl.
    #[arg(long)]
    adopt: bool,
}

#[derive(Args, Debug)]
struct GroupArgs {
    /// How many nodes. (No environment variable: REDLOCKD_NODES is `lock`'s node list.)
    #[arg(long, default_value_t = 5)]
    nodes: u16,
    /// Instead of independent nodes: this many Redis Clusters (cluster mode `map`),
    /// each of --nodes-per-cluster nodes splitting the 16384 slots; each cluster is one
    /// Redlock vote. docs/cluster.md.
    #[arg(long, conflicts_with = "nodes")]
    clusters: Option<u16>,
    /// Nodes in each of --clusters.
    #[arg(long, default_value_t = 3, requires = "clusters")]
    nodes_per_cluster: u16,
    /// Port of the first node; the others follow. 0: every node on a port the system
    /// picks.
    #[arg(long, default_value_t = 7001, env = "REDLOCKD_BASE_PORT")]
    base_port: u16,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
enum ClockArg {
    /// The monotonic clock (production).
    Real,
    /// A clock that moves only with DEBUG CLOCK ADVANCE (tests over the wire; needs
    /// --enable-debug-command).
    Manual,
}

/// `--cluster-mode`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
enum ClusterModeArg {
    Off,
    Emulated,
    Map,
}

/// Redis's `tls-auth-clients`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
enum AuthClientsArg {
    /// Clients must present a certificate signed by --tls-ca-cert-file.
    Yes,
    /// A certificate is not required, but one presented must be valid.
    Optional,
    /// Client certificates are not asked for.
    No,
}

/// Flags for one node (every node of a group gets the same).
#[derive(Args, Debug, Clone)]
struct ServerArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1", env = "REDLOCKD_BIND")]
    bind: IpAddr,
    /// Longest TTL a client may set; longer ones are refused. Also the restart fence of
    /// a node whose data directory has no record of what it granted. Durations: 1500,
    /// 1500ms, 30s, 2m.
    #[arg(long, default_value = "5m", value_parser = parse_duration, env = "REDLOCKD_MAX_TTL")]
    max_ttl: Duration,
    /// How long after boot writes are refused with TRYAGAIN when the data directory has
    /// no record of what the node granted [default: max-ttl + 1s]; with a record, the
    /// fence lasts as long as the recorded locks. 0 disables the fence (safe only when
    /// no client can hold a lock from before).
    #[arg(long, value_parser = parse_duration, env = "REDLOCKD_RESTART_DELAY")]
    restart_delay: Option<Duration>,
    /// Refuse writes that would leave a key without a TTL.
    #[arg(long, env = "REDLOCKD_REQUIRE_TTL")]
    require_ttl: bool,
    /// How long a lock whose TTL ran out (instead of being released) is refused to new
    /// holders, as Chubby's lock-delay; at most max-ttl. 0 (the default) is off. A lock
    /// is a key written with a TTL by SET NX / SET IFEQ / FENCING.GRANT or by a script.
    #[arg(long, default_value = "0", value_parser = parse_duration, env = "REDLOCKD_LOCK_DELAY")]
    lock_delay: Duration,
    /// Only locks whose key starts with one of these prefixes get the lock-delay
    /// (repeatable, or a comma list); none: every lock.
    #[arg(long, value_delimiter = ',', env = "REDLOCKD_LOCK_DELAY_PREFIX")]
    lock_delay_prefix: Vec<String>,
    /// Redis's appendonly: log every change to a durable key (no TTL, or one above
    /// --memory-only-ttl) to the append-only log in --dir, fsynced before the reply, and
    /// replay it at boot. no: every key is memory-only (a crash forgets it).
    #[arg(long, default_value = "yes", value_parser = parse_yes_no, action = clap::ArgAction::Set, env = "REDLOCKD_APPENDONLY")]
    appendonly: bool,
    /// Redis's appendfsync. Only `always` (the default): every reply waits for the
    /// fsync of what it depends on, with one fsync per batch of writes (group commit).
    #[arg(long, default_value = "always", value_parser = parse_appendfsync, env = "REDLOCKD_APPENDFSYNC")]
    appendfsync: String,
    /// Redis's appenddirname: the log's directory inside --dir.
    #[arg(long, default_value = "appendonlydir", env = "REDLOCKD_APPENDDIRNAME")]
    appenddirname: String,
    /// Redis's appendfilename: the prefix of the log's files.
    #[arg(
        long,
        default_value = "appendonly.aof",
        env = "REDLOCKD_APPENDFILENAME"
    )]
    appendfilename: String,
    /// Redis's aof-load-truncated: yes cuts a torn last command off the log at boot;
    /// no refuses to start.
    #[arg(long, default_value = "yes", value_parser = parse_yes_no, action = clap::ArgAction::Set, env = "REDLOCKD_AOF_LOAD_TRUNCATED")]
    aof_load_truncated: bool,
    /// Redis's auto-aof-rewrite-percentage: rewrite the log once it has grown this many
    /// percent over its size after the last rewrite; 0: only BGREWRITEAOF.
    #[arg(
        long,
        default_value = "100",
        env = "REDLOCKD_AUTO_AOF_REWRITE_PERCENTAGE"
    )]
    auto_aof_rewrite_percentage: u64,
    /// Redis's auto-aof-rewrite-min-size: no automatic rewrite below this size.
    #[arg(long, default_value = "64mb", value_parser = parse_memory, env = "REDLOCKD_AUTO_AOF_REWRITE_MIN_SIZE")]
    auto_aof_rewrite_min_size: u64,
    /// A key whose TTL is at most this at the end of the command that wrote it is
    /// memory-only: never logged, forgotten by a crash, covered by the restart fence
    /// (which then lasts at most this + lock-delay + 1 s). Longer-lived keys are durable.
    #[arg(long, default_value = "60s", value_parser = parse_duration, env = "REDLOCKD_MEMORY_ONLY_TTL")]
    memory_only_ttl: Duration,
    /// Password for the default user (AUTH / HELLO AUTH).
    #[arg(long, env = "REDLOCKD_REQUIREPASS", hide_env_values = true)]
    requirepass: Option<String>,
    /// Redis's protected mode: while the default user has no password, clients from
    /// anywhere but 127.0.0.1 / ::1 get -DENIED and are disconnected.
    #[arg(long, default_value = "yes", value_parser = parse_yes_no, action = clap::ArgAction::Set, env = "REDLOCKD_PROTECTED_MODE")]
    protected_mode: bool,
    /// Users, passwords and permissions from a file in Redis's ACL syntax (`user alice
    /// on >pass ~lock:* +@read +@write`), read at start: a bad line stops the start.
    #[arg(long, env = "REDLOCKD_ACLFILE")]
    aclfile: Option<PathBuf>,
    /// Most clients connected at once.
    #[arg(long, default_value_t = 10_000, env = "REDLOCKD_MAXCLIENTS")]
    maxclients: usize,
    /// Largest bulk string a client may send, in bytes.
    #[arg(long, default_value_t = 512 * 1024 * 1024, env = "REDLOCKD_PROTO_MAX_BULK_LEN")]
    proto_max_bulk_len: usize,
    /// Past this, a running script makes other clients get BUSY and SCRIPT KILL works.
    #[arg(long, default_value = "5s", value_parser = parse_duration, env = "REDLOCKD_BUSY_SCRIPT_TIME")]
    busy_script_time: Duration,
    /// Which clock drives TTLs and the fence.
    #[arg(long, value_enum, default_value = "real", env = "REDLOCKD_CLOCK")]
    clock: ClockArg,
    /// Enable DEBUG (clock controls, crash-restart, sleep). Off by default.
    #[arg(long, env = "REDLOCKD_ENABLE_DEBUG_COMMAND")]
    enable_debug_command: bool,
    /// Seed for the server's randomness (SCAN order, Lua math.random); random if unset.
    #[arg(long, env = "REDLOCKD_SEED")]
    seed: Option<u64>,
    /// Serve Prometheus metrics at http://ADDR/metrics: IP:PORT, or a bare PORT for
    /// 127.0.0.1:PORT. Off by default. A group serves node i's on ADDR's port + i.
    #[arg(long, value_parser = parse_metrics_addr, env = "REDLOCKD_METRICS_ADDR")]
    metrics_addr: Option<std::net::SocketAddr>,
    /// USER:PASSWORD a scrape of the metrics must send (HTTP basic auth).
    #[arg(
        long,
        env = "REDLOCKD_METRICS_AUTH",
        hide_env_values = true,
        conflicts_with = "metrics_auth_file"
    )]
    metrics_auth: Option<String>,
    /// A file whose first line is the metrics' USER:PASSWORD (kept off the command line).
    #[arg(long, env = "REDLOCKD_METRICS_AUTH_FILE")]
    metrics_auth_file: Option<PathBuf>,
    /// Data directory: the fencing-token reservation and the clean-shutdown snapshot.
    /// Created if missing, locked while the node runs. `redlockd group` gives each
    /// node its own subdirectory, node-PORT (node-INDEX with --base-port 0).
    #[arg(long, default_value = ".", env = "REDLOCKD_DIR")]
    dir: PathBuf,
    /// TLS port (0: no TLS). A group serves node i's on this port + i.
    #[arg(long, default_value_t = 0, env = "REDLOCKD_TLS_PORT")]
    tls_port: u16,
    /// The server's certificate chain (PEM, leaf first), read at start.
    #[arg(long, env = "REDLOCKD_TLS_CERT_FILE")]
    tls_cert_file: Option<PathBuf>,
    /// The certificate's private key (PEM), read at start.
    #[arg(long, env = "REDLOCKD_TLS_KEY_FILE")]
    tls_key_file: Option<PathBuf>,
    /// CA certificates (PEM) that sign client certificates (mutual TLS).
    #[arg(long, env = "REDLOCKD_TLS_CA_CERT_FILE")]
    tls_ca_cert_file: Option<PathBuf>,
    /// Whether TLS clients must present a certificate signed by --tls-ca-cert-file.
    #[arg(
        long,
        value_enum,
        default_value = "yes",
        env = "REDLOCKD_TLS_AUTH_CLIENTS"
    )]
    tls_auth_clients: AuthClientsArg,
    /// Above this much used memory, writes that may grow memory get -OOM; nothing is
    /// ever evicted. Bytes or 100mb, 1gb (Redis's units); 0: no limit.
    #[arg(long, default_value = "0", value_parser = parse_memory, env = "REDLOCKD_MAXMEMORY")]
    maxmemory: u64,
    /// Keyspace notifications, as Redis's notify-keyspace-events: class characters
    /// (K E g $ l s h z x e t m d n A; `KEA` for all); empty: off.
    #[arg(long, default_value = "", value_parser = parse_notify, env = "REDLOCKD_NOTIFY_KEYSPACE_EVENTS")]
    notify_keyspace_events: String,
    /// Lock introspection: LOCKS LIST / INFO show who holds each lock, and INFO counts
    /// releases, extensions, expiries and overruns (yes/no; off by default: it costs
    /// ~130 bytes per lock and about a third of the CPU of a pipelined SET NX PX).
    #[arg(long, default_value = "no", value_parser = parse_yes_no, action = clap::ArgAction::Set, env = "REDLOCKD_LOCK_INTROSPECTION")]
    lock_introspection: bool,
    /// Log filter (tracing env-filter syntax): error, warn, info, debug, trace.
    #[arg(long, default_value = "info", env = "REDLOCKD_LOG")]
    log: String,
    /// Redis Cluster's protocol: off (a plain node), emulated (this node serves all
    /// 16384 hash slots, for cluster clients against one node), map (a configured
    /// slot map over several nodes: --cluster-map, CLUSTER SETMAP). docs/cluster.md.
    #[arg(long, value_enum, default_value = "off", env = "REDLOCKD_CLUSTER_MODE")]
    cluster_mode: ClusterModeArg,
    /// The slot map to serve from start (JSON, docs/cluster.md); a newer map persisted
    /// in --dir wins.
    #[arg(long, env = "REDLOCKD_CLUSTER_MAP")]
    cluster_map: Option<PathBuf>,
    /// This node's id in the map (40 hex digits) [default: derived from the data
    /// directory's node id; CLUSTER MYID shows it].
    #[arg(long, env = "REDLOCKD_CLUSTER_NODE_ID")]
    cluster_node_id: Option<String>,
    /// The host this node gives for itself where no map names it (emulated mode)
    /// [default: the bind address; empty when bound to all addresses].
    #[arg(long, env = "REDLOCKD_CLUSTER_ANNOUNCE_IP")]
    cluster_announce_ip: Option<String>,
    /// USER:PASSWORD this node sends (AUTH) on its calls to the other nodes of its
    /// slot map (map confirmation, slot moves) [default: no AUTH]. docs/cluster.md.
    #[arg(long, env = "REDLOCKD_CLUSTER_AUTH", value_parser = parse_user_pass)]
    cluster_auth: Option<(String, String)>,
    /// Milliseconds a node of a slot map may go without reaching a majority of the
    /// map's nodes before it stops serving slots (Redis's cluster-node-timeout); a
    /// takeover fences for the old owner's max-ttl plus this [default: 5000].
    /// docs/cluster.md.
    #[arg(long, env = "REDLOCKD_CLUSTER_NODE_TIMEOUT", value_parser = clap::value_parser!(u64).range(100..=3_600_000))]
    cluster_node_timeout: Option<u64>,
    /// Worker threads that serve requests. Default: one per core beyond the first, at
    /// least one (docs/operations.md, "Threads").
    #[arg(long, env = "REDLOCKD_THREADS", value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: Option<u16>,
}

impl ServerArgs {
    /// The config of node `i` (0 for a single node) listening on `port`. Several nodes
    /// in one process (`own_subdir`) get their own data directory under --dir,
    /// node-PORT (node-INDEX on ephemeral ports). Port 0 with a TLS port turns plain
    /// TCP off. `clock`: the manual clock to link this node's to (one per process).
    fn config(
        &self,
        i: u16,
        port: u16,
        own_subdir: bool,
        clock: &Clock,
    ) -> Result<Config, ConfigError> {
        let tls = self.tls(i)?;
        let plain = port != 0 || tls.is_none();
        let metrics_addr = self.metrics_addr.map(|mut a| {
            if a.port() != 0 {
                a.set_port(a.port().saturating_add(i));
            }
            a
        });
        let dir = if own_subdir && port == 0 {
            self.dir.join(format!("node-{i}"))
        } else if own_subdir {
            self.dir.join(format!("node-{port}"))
        } else {
            self.dir.clone()
        };
        let metrics_auth = match (&self.metrics_auth, &self.metrics_auth_file) {
            (Some(a), _) => Some(a.clone()),
            (None, Some(path)) => Some(
                std::fs::read_to_string(path)
                    .map_err(|e| {
                        ConfigError::Metrics(format!("cannot read {}: {e}", path.display()))
                    })?
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .to_string(),
            ),
            (None, None) => None,
        };
        Ok(Config {
            metrics_addr,
            metrics_auth,
            dir: Some(dir),
            bind: self.bind,
            port,
            plain,
            tls,
            max_ttl: self.max_ttl,
            restart_delay: self.restart_delay,
            require_ttl: self.require_ttl,
            lock_delay: self.lock_delay,
            lock_delay_prefixes: self.lock_delay_prefix.clone(),
            requirepass: self.requirepass.clone(),
            protected_mode: self.protected_mode,
            aclfile: self.aclfile.clone(),
            maxclients: self.maxclients,
            proto_max_bulk_len: self.proto_max_bulk_len,
            busy_script_time: self.busy_script_time,
            clock: (self.clock == ClockArg::Manual).then(|| clock.linked()),
            enable_debug_command: self.enable_debug_command,
            seed: self.seed,
            maxmemory: self.maxmemory,
            notify_keyspace_events: self.notify_keyspace_events.clone(),
            lock_introspection: self.lock_introspection,
            aof: redlockd::config::AofConfig {
                appendonly: self.appendonly,
                dirname: self.appenddirname.clone(),
                filename: self.appendfilename.clone(),
                load_truncated: self.aof_load_truncated,
                rewrite_percentage: self.auto_aof_rewrite_percentage,
                rewrite_min_size: self.auto_aof_rewrite_min_size,
                memory_only_ttl: self.memory_only_ttl,
            },
            cluster: redlockd::config::ClusterConfig {
                mode: match self.cluster_mode {
                    ClusterModeArg::Off => redlockd::config::ClusterMode::Off,
                    ClusterModeArg::Emulated => redlockd::config::ClusterMode::Emulated,
                    ClusterModeArg::Map => redlockd::config::ClusterMode::Map,
                },
                node_id: self.cluster_node_id.clone(),
                announce_host: self.cluster_announce_ip.clone(),
                map_file: self.cluster_map.clone(),
                peer_auth: self.cluster_auth.clone(),
                node_timeout: self.cluster_node_timeout.map(Duration::from_millis),
            },
            ..Config::default()
        })
    }

    /// Node `i`'s TLS settings: `None` without --tls-port.
    fn tls(&self, i: u16) -> Result<Option<TlsConfig>, ConfigError> {
        if self.tls_port == 0 {
            if self.tls_cert_file.is_some() || self.tls_key_file.is_some() {
                return Err(ConfigError::Tls(
                    "tls-cert-file / tls-key-file given without a tls-port".into(),
                ));
            }
            return Ok(None);
        }
        let port = self
            .tls_port
            .checked_add(i)
            .ok_or_else(|| ConfigError::Tls("tls-port + the node's index passes 65535".into()))?;
        let (Some(cert), Some(key)) = (&self.tls_cert_file, &self.tls_key_file) else {
            return Err(ConfigError::Tls(
                "tls-port needs tls-cert-file and tls-key-file".into(),
            ));
        };
        let mut tls = TlsConfig::new(port, cert, key, self.tls_ca_cert_file.as_deref());
        tls.auth_clients = match self.tls_auth_clients {
            AuthClientsArg::Yes => AuthClients::Yes,
            AuthClientsArg::Optional => AuthClients::Optional,
            AuthClientsArg::No => AuthClients::No,
        };
        Ok(Some(tls))
    }
}

/// `IP:PORT`, or a bare `PORT` on the loopback address.
fn parse_metrics_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok((std::net::Ipv4Addr::LOCALHOST, port).into());
    }
    s.parse()
        .map_err(|_| format!("{s:?} is neither IP:PORT nor PORT"))
}

/// `yes` or `no`, as Redis's boolean settings.
/// `appendfsync`: only `always` (replies wait for the fsync; see --appendonly).
fn parse_appendfsync(s: &str) -> Result<String, String> {
    match s.to_ascii_lowercase().as_str() {
        "always" => Ok("always".into()),
        other => Err(format!(
            "appendfsync {other} is not offered: redlockd fsyncs before every reply that depends on a write (always), with group commit"
        )),
    }
}

fn parse_yes_no(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err("expected yes or no".into()),
    }
}

fn init_logging(filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, not for log files and pipes.
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

fn main() -> ExitCode {
    let args = match with_config_file(std::env::args_os().collect()) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("redlockd: {e}");
            return ExitCode::from(redlockd::redlock::flock::EXIT_USAGE as u8);
        }
    };
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version print and succeed; any other parse error is bad
            // usage: EX_USAGE (64), the code `redlockd lock` documents for it.
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(redlockd::redlock::flock::EXIT_USAGE as u8)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    if args_named_old_group(&cli) {
        eprintln!(
            "redlockd: `cluster` is the old name of `group` (N independent nodes); it still works"
        );
    }
    let log = match &cli.command {
        Some(Command::Group(c)) => c.server.log.clone(),
        Some(Command::Harness(h)) => h.log.clone(),
        // The lock command speaks on stderr only when something goes wrong.
        Some(Command::Lock(_))
        | Some(Command::Init(_))
        | Some(Command::Status(_))
        | Some(Command::Slots { .. }) => "warn".to_string(),
        None => cli.server.log.clone(),
    };
    init_logging(&log);
    let threads = match &cli.command {
        Some(Command::Group(c)) => c.server.threads,
        Some(Command::Harness(h)) => h.threads,
        Some(Command::Lock(_))
        | Some(Command::Init(_))
        | Some(Command::Status(_))
        | Some(Command::Slots { .. }) => None,
        None => cli.server.threads,
    };
    if let Some(Command::Slots { action }) = &cli.command {
        return match slots::run(action.clone()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("redlockd slots: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if let Some(Command::Init(args)) = &cli.command {
        return match redlockd::NodeDir::init(&args.dir, args.adopt) {
            Ok(done) => {
                println!("{done}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("redlockd init: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let workers = threads.map_or_else(default_workers, usize::from);
    let runtime = match Server::runtime(workers) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("redlockd: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let group = match cli.command {
        Some(Command::Status(args)) => return ExitCode::from(status::run(args)),
        Some(Command::Lock(args)) => {
            let code = runtime.block_on(redlockd::redlock::flock::run_lock_command(args.into()));
            return ExitCode::from(code.clamp(0, 255) as u8);
        }
        Some(Command::Harness(args)) => {
            // The signal handlers are installed inside the runtime, as they must be.
            let result = runtime
                .block_on(async { harness::run(args, ShutdownSignal::install().recv()).await });
            runtime.shutdown_timeout(Duration::from_millis(100));
            return match result {
                Ok(()) => ExitCode::SUCCESS,
                Err(harness::HarnessError::Config(e)) => {
                    eprintln!("redlockd: {e}");
                    ExitCode::from(redlockd::redlock::flock::EXIT_USAGE as u8)
                }
                Err(harness::HarnessError::Other(e)) => {
                    eprintln!("redlockd: {e}");
                    ExitCode::FAILURE
                }
            };
        }
        Some(Command::Group(c)) => Some(c),
        Some(Command::Init(_)) | Some(Command::Slots { .. }) => unreachable!("handled above"),
        None => None,
    };
    let result = runtime.block_on(async {
        match group {
            None => run_nodes(&cli.server, &[cli.port], None).await,
            Some(c) => {
                let (nodes, groups) = match c.clusters {
                    Some(k) => (
                        k.saturating_mul(c.nodes_per_cluster),
                        Some((k, c.nodes_per_cluster)),
                    ),
                    None => (c.nodes, None),
                };
                if groups.is_some_and(|(k, m)| k == 0 || m == 0) {
                    return Err(StartError::Config(
                        "--clusters and --nodes-per-cluster must be at least 1".into(),
                    ));
                }
                // Base port 0: every node on a port of the system's choosing (not 0,
                // 1, 2...).
                let ports: Vec<u16> = (0..nodes)
                    .map(|i| {
                        if c.base_port == 0 {
                            Some(0)
                        } else {
                            c.base_port.checked_add(i)
                        }
                    })
                    .collect::<Option<_>>()
                    .ok_or_else(|| {
                        StartError::Config("--base-port + --nodes passes 65535".into())
                    })?;
                if ports.is_empty() {
                    return Err(StartError::Config("--nodes must be at least 1".into()));
                }
                let mut server = c.server.clone();
                if groups.is_some() {
                    server.cluster_mode = ClusterModeArg::Map;
                }
                run_nodes(&server, &ports, groups).await
            }
        }
    });
    // Dropping the runtime would wait for a worker still inside a script forever.
    runtime.shutdown_timeout(Duration::from_millis(100));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(StartError::Config(e)) => {
            // A setting that cannot work (a TLS file that does not load, restart-delay
            // below max-ttl): bad usage, like a bad flag or config file line.
            eprintln!("redlockd: {e}");
            ExitCode::from(redlockd::redlock::flock::EXIT_USAGE as u8)
        }
        Err(StartError::Other(e)) => {
            eprintln!("redlockd: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Whether the group was started by its old name, `redlockd cluster` ("cluster" is
/// kept for Redis Cluster: --cluster-mode, --clusters).
fn args_named_old_group(cli: &Cli) -> bool {
    matches!(cli.command, Some(Command::Group(_)))
        && std::env::args_os().nth(1).is_some_and(|a| a == "cluster")
}

/// `redlockd FILE [flags]`: FILE's settings become flags placed before the command
/// line's, so a flag given on the command line wins (as in Redis).
fn with_config_file(mut args: Vec<OsString>) -> Result<Vec<OsString>, String> {
    let Some(first) = args.get(1).and_then(|a| a.to_str()) else {
        return Ok(args);
    };
    if first.starts_with('-')
        || [
            "group", "cluster", "lock", "harness", "init", "status", "slots", "help",
        ]
        .contains(&first)
    {
        return Ok(args);
    }
    let text = std::fs::read_to_string(first)
        .map_err(|e| format!("cannot read the config file {first:?}: {e}"))?;
    let flags = conffile::to_flags(&text).map_err(|e| format!("{first}: {e}"))?;
    args.splice(1..2, flags.into_iter().map(OsString::from));
    Ok(args)
}

/// Why the nodes could not run: a setting (exit 64) or anything else (exit 1).
enum StartError {
    Config(String),
    Other(String),
}

/// Worker threads when `--threads` is not given: one per core beyond the first, at
/// least one. Small requests are served best by one thread per busy core: on 2 cores,
/// with the clients on the same machine, a second worker cost 7-13% more CPU per
/// EVALSHA, 10-20% fewer requests/s and a 15-50% higher p99 (tokio wakes the parked
/// sibling whenever a batch of readiness events queues more than one task, and the
/// three threads then share two cores), and gained nothing at P=16, where the load
/// generator is the limit. The core left over serves the kernel's network work and
/// local clients, as Redis's advice for io-threads leaves one.
fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1).max(1))
}

/// notify-keyspace-events: only Redis's class characters.
fn parse_notify(s: &str) -> Result<String, String> {
    match s.chars().all(|c| "Ag$lshzxeKEtmdn".contains(c)) {
        true => Ok(s.to_string()),
        false => Err("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into()),
    }
}

/// `USER:PASSWORD` (the password may hold ':').
fn parse_user_pass(s: &str) -> Result<(String, String), String> {
    s.split_once(':')
        .map(|(u, p)| (u.to_string(), p.to_string()))
        .filter(|(u, _)| !u.is_empty())
        .ok_or_else(|| "expected USER:PASSWORD".to_string())
}
